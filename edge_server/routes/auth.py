"""Signing in and out, who a token is, and a user's own password (issue 41). The sign-in route is
public (its body is limited to a few KiB before any token; edge_server.middleware); the others
take any valid token."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response

from edge_server.auth.accounts import AccountError, Accounts, LoginLocked, LoginRefused
from edge_server.auth.authenticator import Principal
from edge_server.auth.roles import Access, allowed
from edge_server.auth.schemas import LoginIn, LoginOut, PasswordIn, PrincipalOut
from edge_server.routes.common import ERRORS, SIGNED_IN, ApiError, actor_of, address_of
from edge_server.schemas import API_PREFIX, ErrorOut

public = APIRouter()
protected = APIRouter(responses=ERRORS)


def accounts_of(request: Request) -> Accounts:
    return request.app.state.accounts


def account_error(exc: AccountError) -> ApiError:
    status = {"not_found": 404, "conflict": 409}.get(exc.code, 422)
    return ApiError(status, exc.code, str(exc))


def principal_out(principal: Principal) -> dict:
    return {
        "kind": principal.kind,
        "name": principal.name,
        "role": principal.role.value,
        "token_id": principal.token_id,
        "expires_at": principal.expires_at,
        "access": [a.value for a in Access if allowed(principal.role, a)],
    }


@public.post(
    f"{API_PREFIX}/auth/login",
    tags=["auth"],
    summary="Sign in: a user name and password for a bearer token valid one shift (login_hours)",
    responses={
        401: {"model": ErrorOut, "description": "wrong user name or password, or a disabled user"},
        429: {"model": ErrorOut, "description": "too many failed sign-ins for the name or from the address"},
    },
)
async def login(request: Request, body: LoginIn) -> LoginOut:
    try:
        issued = await asyncio.to_thread(
            accounts_of(request).login, body.username, body.password, address_of(request)
        )
    except LoginLocked as exc:
        raise ApiError(
            429, "too_many_attempts", str(exc), headers={"Retry-After": str(int(exc.retry_after_s) + 1)}
        ) from exc
    except LoginRefused as exc:
        raise ApiError(401, "login_refused", str(exc)) from exc
    assert issued.principal is not None
    return LoginOut(token=issued.token, **principal_out(issued.principal))


@protected.get(
    f"{API_PREFIX}/auth/me",
    tags=["auth"],
    summary="Who this token is, and what it may do",
    dependencies=SIGNED_IN,
)
async def me(request: Request) -> PrincipalOut:
    return PrincipalOut(**principal_out(request.state.principal))


@protected.post(
    f"{API_PREFIX}/auth/logout",
    tags=["auth"],
    summary="Sign out: this token stops working (the server's API token cannot be revoked here)",
    status_code=204,
    responses={409: {"model": ErrorOut, "description": "the server's API token: change it in the settings"}},
    dependencies=SIGNED_IN,
)
async def logout(request: Request) -> Response:
    principal: Principal = request.state.principal
    if principal.token_id is None:
        raise ApiError(
            409, "not_revocable", "the server's API token is set in its settings, not revoked here"
        )
    await asyncio.to_thread(accounts_of(request).logout, principal, actor_of(request))
    return Response(status_code=204)


@protected.put(
    f"{API_PREFIX}/auth/password",
    tags=["auth"],
    summary="Change your own password (the current one first); your other sign-ins end",
    status_code=204,
    responses={422: {"model": ErrorOut, "description": "wrong current password, or a new one too weak"}},
    dependencies=SIGNED_IN,
)
async def change_password(request: Request, body: PasswordIn) -> Response:
    try:
        await asyncio.to_thread(
            accounts_of(request).change_password,
            request.state.principal,
            body.current_password,
            body.new_password,
            actor_of(request),
        )
    except AccountError as exc:
        raise account_error(exc) from exc
    return Response(status_code=204)
