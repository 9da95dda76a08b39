"""What every route module shares: the API's errors (:class:`ApiError`, :func:`json_error`), the
bearer token check (:func:`require_token`), the app's store and stream manager as a request sees
them, and how starting or ending a stream answers (:func:`start_errors`, :func:`stop_stream`)."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from edge_server.schemas import ErrorOut, StopOut
from edge_server.store import Store
from edge_server.streams import CapacityError, OfferError, PipelineUnavailable, StreamManager

# Path parameters are bounded before they reach the database: a session id is a short plain token
# (a violation id: edge_server.routes.violations).
SessionId = Annotated[
    str, PathParam(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$", description="session id")
]

bearer = HTTPBearer(
    auto_error=False, scheme_name="bearer", description="the server's API token (AIRPATROL_API_TOKEN)"
)


class ApiError(HTTPException):
    """An HTTP error with a machine-readable code; rendered as ``{"error": code, "detail": msg}``."""

    def __init__(self, status: int, code: str, detail: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(status_code=status, detail=detail, headers=headers)
        self.code = code


UNAUTHORIZED_DETAIL = "missing or wrong bearer token (send 'Authorization: Bearer <AIRPATROL_API_TOKEN>')"


def token_ok(request_token: str | None, expected: str) -> bool:
    return bool(request_token) and hmac.compare_digest(request_token.encode(), expected.encode())


def require_token(
    request: Request, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)] = None
) -> None:
    token = creds.credentials if creds is not None else None
    if token is None and request.url.path in ("/docs", "/openapi.json"):
        token = request.query_params.get("token")  # browsers cannot send headers to the docs page
    if not token_ok(token, request.app.state.api_token):
        raise ApiError(401, "unauthorized", UNAUTHORIZED_DETAIL, headers={"WWW-Authenticate": "Bearer"})


def store_of(request: Request) -> Store:
    return request.app.state.store


def manager_of(request: Request) -> StreamManager:
    return request.app.state.manager


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "missing or wrong bearer token"},
}


def actor_of(request: Request) -> str:
    """Who acts, for the audit trail: the server's API token (today every client shares it: an
    administrator's) and the client's address."""
    return f"api-token@{request.client.host if request.client else '?'}"


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
