"""Users and machine tokens, for admins (issue 41). Every change is in the audit trail."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam

from edge_server.auth.accounts import AccountError
from edge_server.auth.schemas import (
    USERNAME_PATTERN,
    RevokedOut,
    TokenCreated,
    TokenIn,
    TokenOut,
    UserIn,
    UserOut,
    UserPatch,
)
from edge_server.routes.auth import account_error, accounts_of
from edge_server.routes.common import ADMIN, ERRORS, actor_of
from edge_server.schemas import API_PREFIX, ErrorOut

protected = APIRouter(responses=ERRORS)

Username = Annotated[str, PathParam(pattern=USERNAME_PATTERN, description="user name")]
TokenId = Annotated[str, PathParam(pattern=r"^tok_[0-9a-f]{12}$", description="token id")]
NOT_FOUND = {404: {"model": ErrorOut}}


@protected.get(f"{API_PREFIX}/users", tags=["users"], summary="Every user account", dependencies=ADMIN)
async def list_users(request: Request) -> list[UserOut]:
    rows = await asyncio.to_thread(accounts_of(request).store.users)
    return [UserOut.from_row(r) for r in rows]


@protected.post(
    f"{API_PREFIX}/users",
    tags=["users"],
    summary="Add a user (admin, officer or viewer)",
    status_code=201,
    responses={409: {"model": ErrorOut, "description": "the name is taken"}},
    dependencies=ADMIN,
)
async def add_user(request: Request, body: UserIn) -> UserOut:
    accounts = accounts_of(request)
    try:
        row = await asyncio.to_thread(
            accounts.add_user, body.username, body.role, body.password, actor_of(request)
        )
    except AccountError as exc:
        raise account_error(exc) from exc
    return UserOut.from_row(row)


@protected.get(
    f"{API_PREFIX}/users/{{username}}",
    tags=["users"],
    summary="One user",
    responses=NOT_FOUND,
    dependencies=ADMIN,
)
async def get_user(request: Request, username: Username) -> UserOut:
    try:
        return UserOut.from_row(await asyncio.to_thread(accounts_of(request).user, username))
    except AccountError as exc:
        raise account_error(exc) from exc


@protected.patch(
    f"{API_PREFIX}/users/{{username}}",
    tags=["users"],
    summary="Change a user's role, disable or enable them, or set a new password",
    responses={**NOT_FOUND, 409: {"model": ErrorOut, "description": "an admin changing their own role"}},
    dependencies=ADMIN,
)
async def update_user(request: Request, username: Username, body: UserPatch) -> UserOut:
    accounts = accounts_of(request)
    try:
        row = await asyncio.to_thread(
            lambda: accounts.update_user(
                username,
                actor_of(request),
                role=body.role,
                disabled=body.disabled,
                password=body.password,
                acting=request.state.principal,
            )
        )
    except AccountError as exc:
        raise account_error(exc) from exc
    return UserOut.from_row(row)


@protected.get(
    f"{API_PREFIX}/tokens",
    tags=["users"],
    summary="Tokens: machine tokens and users' sign-ins, newest first (never the tokens themselves)",
    dependencies=ADMIN,
)
async def list_tokens(
    request: Request, include_revoked: Annotated[bool, Query(description="also revoked and expired")] = False
) -> list[TokenOut]:
    rows = await asyncio.to_thread(accounts_of(request).store.tokens, include_revoked)
    return [TokenOut.from_row(row, username, role) for row, username, role in rows]


@protected.post(
    f"{API_PREFIX}/tokens",
    tags=["users"],
    summary="Make a machine token (a publisher's phone or encoder, a scraper, a dispatch system)",
    status_code=201,
    dependencies=ADMIN,
)
async def add_token(request: Request, body: TokenIn) -> TokenCreated:
    accounts = accounts_of(request)
    try:
        issued = await asyncio.to_thread(
            accounts.add_machine_token, body.name, body.role, actor_of(request), body.expires_days
        )
    except AccountError as exc:
        raise account_error(exc) from exc
    return TokenCreated(token=issued.token, **TokenOut.from_row(issued.row, None).model_dump())


@protected.delete(
    f"{API_PREFIX}/tokens/{{token_id}}",
    tags=["users"],
    summary="Revoke a token (a machine's, or a user's sign-in): refused from the next request on",
    responses=NOT_FOUND,
    dependencies=ADMIN,
)
async def revoke_token(request: Request, token_id: TokenId) -> RevokedOut:
    try:
        await asyncio.to_thread(accounts_of(request).revoke_token, token_id, actor_of(request))
    except AccountError as exc:
        raise account_error(exc) from exc
    return RevokedOut(id=token_id)
