"""ASGI middleware around the API: what every request passes before any route sees it.

:class:`RequestGuardMiddleware` refuses a request that carries a body before that body is read:
without a valid bearer token (401), or larger than ``max_request_body_bytes`` (413, from its
``Content-Length`` or, for a chunked body, as soon as the bytes received pass the limit).
FastAPI reads a route's body before it runs the route's dependencies, so the token check in
``api.require_token`` alone would let anyone make the server buffer a body of any size.

:class:`InternalErrorMiddleware` turns an unhandled error into a logged JSON 500 that keeps the
connection usable.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from edge_server.api import UNAUTHORIZED_DETAIL, json_error, token_ok

log = logging.getLogger(__name__)

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class _BodyTooLarge(Exception):
    pass


def _bearer_token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, credentials = value.decode("latin-1").partition(" ")
            return credentials.strip() if scheme.lower() == "bearer" else None
    return None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class _StartTracking:
    """A ``send`` that remembers whether the response has started (then no other answer can go out)."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        self.started = self.started or message["type"] == "http.response.start"
        await self.send(message)


class RequestGuardMiddleware:
    """Bearer token and body size checked before a request body is read (see the module doc)."""

    def __init__(self, app: ASGIApp, api_token: str, max_body_bytes: int) -> None:
        self.app = app
        self.api_token = api_token
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        if not token_ok(_bearer_token(scope), self.api_token):
            response = json_error(401, "unauthorized", UNAUTHORIZED_DETAIL, {"WWW-Authenticate": "Bearer"})
            await response(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._too_large(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _BodyTooLarge
            return message

        tracked = _StartTracking(send)
        try:
            await self.app(scope, limited_receive, tracked)
        except _BodyTooLarge:
            if tracked.started:
                raise
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        log.info(
            "refused a %s %s body over %d bytes", scope.get("method"), scope.get("path"), self.max_body_bytes
        )
        response = json_error(
            413, "too_large", f"request body larger than {self.max_body_bytes} bytes", {"Connection": "close"}
        )
        await response(scope, receive, send)


class InternalErrorMiddleware:
    """Unhandled errors -> a JSON 500, logged once, and the connection stays usable.

    An ``exception_handler(Exception)`` would run in Starlette's ServerErrorMiddleware, which sends
    the response and then re-raises; uvicorn then logs a second traceback and closes the
    connection, so a client's next request on that keep-alive connection fails with a read error.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        tracked = _StartTracking(send)
        try:
            await self.app(scope, receive, tracked)
        except Exception:
            if tracked.started:  # too late for a clean answer: let the server close the connection
                raise
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            response = json_error(500, "internal_error", "internal server error (logged on the server)")
            await response(scope, receive, send)


__all__ = ["InternalErrorMiddleware", "RequestGuardMiddleware"]
