"""What every route module shares: the API's errors (:class:`ApiError`, :func:`json_error`), who
may call a route (:data:`READ`, :data:`PUBLISH`, :data:`OPERATE`, :data:`ADMIN`, :data:`SIGNED_IN`:
the bearer token to a principal, its role checked; edge_server.auth), the app's store and stream
manager as a request sees them, and how starting or ending a stream answers (:func:`start_errors`,
:func:`stop_stream`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from edge_server.auth.authenticator import Authenticator, Principal
from edge_server.auth.roles import Access, allowed, who_may
from edge_server.schemas import ErrorOut, StopOut
from edge_server.store import Store
from edge_server.streams import CapacityError, OfferError, PipelineUnavailable, StreamManager

# Path parameters are bounded before they reach the database: a session id is a short plain token
# (a violation id: edge_server.routes.violations).
SessionId = Annotated[
    str, PathParam(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$", description="session id")
]

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="a user's sign-in token (POST /api/v1/auth/login), a machine token, or the server's "
    "API token (AIRPATROL_API_TOKEN: an admin machine token)",
)


class ApiError(HTTPException):
    """An HTTP error with a machine-readable code; rendered as ``{"error": code, "detail": msg}``."""

    def __init__(self, status: int, code: str, detail: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(status_code=status, detail=detail, headers=headers)
        self.code = code


UNAUTHORIZED_DETAIL = (
    "missing, wrong, expired or revoked bearer token (sign in: POST /api/v1/auth/login; or send "
    "'Authorization: Bearer <token>')"
)


def auth_of(app: Any) -> Authenticator:
    return app.state.auth


async def principal_from(request: Request, token: str | None) -> Principal:
    """The principal of ``token``, or 401."""
    principal = await auth_of(request.app).principal(token)
    if principal is None:
        raise ApiError(401, "unauthorized", UNAUTHORIZED_DETAIL, headers={"WWW-Authenticate": "Bearer"})
    request.state.principal = principal
    return principal


def _requirement(access: Access | None) -> Any:
    async def check(
        request: Request, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)] = None
    ) -> Principal:
        token = creds.credentials if creds is not None else None
        if token is None and request.url.path in ("/docs", "/openapi.json"):
            token = request.query_params.get("token")  # browsers cannot send headers to the docs page
        principal = await principal_from(request, token)
        if access is not None and not allowed(principal.role, access):
            raise ApiError(
                403,
                "forbidden",
                f"this needs the {who_may(access)} role; this token acts as {principal.role.value}",
            )
        return principal

    check.__name__ = f"require_{access.value if access else 'token'}"
    return Depends(check)


# A route's dependencies: who may call it (edge_server.auth.roles); the principal lands in
# request.state.principal.
SIGNED_IN = [_requirement(None)]  # any valid token
READ = [_requirement(Access.READ)]
PUBLISH = [_requirement(Access.PUBLISH)]
OPERATE = [_requirement(Access.OPERATE)]
ADMIN = [_requirement(Access.ADMIN)]


def store_of(request: Request) -> Store:
    return request.app.state.store


def manager_of(request: Request) -> StreamManager:
    return request.app.state.manager


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "missing, wrong, expired or revoked bearer token"},
    403: {"model": ErrorOut, "description": "the token's role may not do this (error: forbidden)"},
}


def address_of(request: Request) -> str:
    return request.client.host if request.client else "?"


def actor_of(request: Request) -> str:
    """Who acts, for the audit trail: the request's principal (a user, a machine token or the
    server's API token, with its role) and the client's address."""
    principal = getattr(request.state, "principal", None)
    if principal is None:
        return f"anonymous@{address_of(request)}"
    return principal.actor(address_of(request))


async def audit(
    request: Request,
    action: str,
    target_type: str,
    target_id: str | int,
    before: dict | None = None,
    after: dict | None = None,
    detail: str = "",
) -> None:
    """An entry in the audit trail for what this request did (edge_server.evidence.audit)."""
    auditor = getattr(request.app.state, "auditor", None)
    if auditor is not None:
        await asyncio.to_thread(
            auditor.record, actor_of(request), action, target_type, target_id, before, after, detail
        )


def remote_of(request: Request) -> str | None:
    host = request.client.host if request.client else None
    agent = request.headers.get("user-agent")
    text = " ".join(x for x in (host, agent and f"({agent[:120]})") if x)
    return text or None


@contextlib.contextmanager
def start_errors() -> Iterator[None]:
    """A stream that cannot start: the API's answer (400 bad offer, 503 full or no pipeline)."""
    try:
        yield
    except OfferError as exc:
        raise ApiError(400, "invalid_sdp", str(exc)) from exc
    except CapacityError as exc:
        raise ApiError(503, "at_capacity", str(exc), headers={"Retry-After": "10"}) from exc
    except PipelineUnavailable as exc:
        raise ApiError(503, "pipeline_unavailable", str(exc)) from exc


# what ending a stream answers (every DELETE of a live stream)
STOP_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "stopped, flushed and stored"},
    202: {"model": StopOut, "description": "stopped; still being stored (session.ended follows)"},
    404: {"model": ErrorOut},
}


async def stop_stream(
    request: Request, session_id: str, reason: str, what: str, kind: str | None = None
) -> JSONResponse:
    """200 once the stream is flushed and stored; 202 while it is still flushing (its
    ``session.ended`` event and the session row follow when it is done); 404 when unknown (or,
    with ``kind``, a live stream of another kind)."""
    live = manager_of(request).get(session_id)
    if kind is not None and (live is None or live.kind != kind):
        raise ApiError(404, "not_found", f"no active {what} {session_id}")
    outcome = await manager_of(request).close(session_id, reason)
    if outcome is None:
        raise ApiError(404, "not_found", f"no active {what} {session_id}")
    await audit(
        request, "session.stopped", "session", session_id, None, {"reason": reason, "outcome": outcome}
    )
    if outcome == "ended":
        return JSONResponse(StopOut(session_id=session_id, status="ended").model_dump(exclude_none=True))
    detail = "the stream is stopped and still being stored; session.ended follows when it is done"
    body = StopOut(session_id=session_id, status="closing", detail=detail)
    return JSONResponse(body.model_dump(), status_code=202)


def json_error(status: int, code: str, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)
