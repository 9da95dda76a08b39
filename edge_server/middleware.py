"""ASGI middleware around the API: what every request passes before any route sees it.

:class:`RequestGuardMiddleware` refuses a request that carries a body before that body is read:
without a valid bearer token (401; a sign-in, which has no token yet, only to its small body limit), or larger than ``max_request_body_bytes`` (413, from its
``Content-Length`` or, for a chunked body, as soon as the bytes received pass the limit).
FastAPI reads a route's body before it runs the route's dependencies, so the token check in
``routes.common.require_token`` alone would let anyone make the server buffer a body of any size.

:class:`InternalErrorMiddleware` turns an unhandled error into a logged JSON 500 that keeps the
connection usable.

:class:`LiveReadPacingMiddleware` keeps API reads from taking the CPU a live stream needs: while a
stream runs, authenticated reads are handled one at a time and paced by a :class:`ReadPacer` so
that handling them takes at most a set share of the time (requests wait; none is dropped until
too many are waiting).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from edge_server.auth.authenticator import Authenticator
from edge_server.routes.common import UNAUTHORIZED_DETAIL, json_error
from edge_server.schemas import API_PREFIX

log = logging.getLogger(__name__)

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# bodies taken without a token, and their limit: a sign-in is a user name and a password
OPEN_BODY_PATHS = {f"{API_PREFIX}/auth/login": 4096}


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

    def __init__(self, app: ASGIApp, auth: Authenticator, max_body_bytes: int) -> None:
        self.app = app
        self.auth = auth
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        limit = OPEN_BODY_PATHS.get(scope.get("path", ""))
        if limit is None:
            limit = self.max_body_bytes
            if await self.auth.principal(_bearer_token(scope)) is None:
                response = json_error(
                    401, "unauthorized", UNAUTHORIZED_DETAIL, {"WWW-Authenticate": "Bearer"}
                )
                await response(scope, receive, send)
                return
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._too_large(scope, receive, send, limit)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _BodyTooLarge
            return message

        tracked = _StartTracking(send)
        try:
            await self.app(scope, limited_receive, tracked)
        except _BodyTooLarge:
            if tracked.started:
                raise
            await self._too_large(scope, receive, send, limit)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        log.info("refused a %s %s body over %d bytes", scope.get("method"), scope.get("path"), limit)
        response = json_error(
            413, "too_large", f"request body larger than {limit} bytes", {"Connection": "close"}
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


class ReadPacer:
    """A token bucket counted in seconds of handling time.

    It refills at ``share`` seconds per second of wall time and holds at most ``burst_s``; a read
    may start when the bucket is not in debt, and is charged the time it took. Over any window the
    reads are then busy at most ``share`` of it (plus ``burst_s``), whatever each one costs: cheap
    reads go quickly one after the other, a heavy one makes the next wait longer.
    """

    def __init__(self, share: float, burst_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share}")
        self.share = share
        self.burst_s = max(0.0, burst_s)
        self._clock = clock
        self._level = self.burst_s
        self._stamp = clock()

    def _advance(self, spent_s: float = 0.0) -> None:
        """Refill for the time since the last call, less ``spent_s``; capped only after the
        subtraction, so the refill while a read ran counts in full."""
        now = self._clock()
        self._level = min(self.burst_s, self._level + (now - self._stamp) * self.share - spent_s)
        self._stamp = now

    def wait_s(self) -> float:
        """Seconds until the next read may start (0: now)."""
        self._advance()
        return 0.0 if self._level >= 0 else -self._level / self.share

    def charge(self, busy_s: float) -> None:
        """Charge a read that took ``busy_s`` (just ended)."""
        self._advance(max(0.0, busy_s))


UNPACED_PATHS = frozenset({"/healthz"})  # liveness checks (publish's watchdog) never queue
READ_METHODS = frozenset({"GET", "HEAD"})


class LiveReadPacingMiddleware:
    """While ``live()`` (a stream is running), authenticated reads are paced (see the module doc).

    One read is handled at a time; it counts as busy from when it starts until its response starts
    (the route's database work and serialisation; a file's bytes are then sent without holding
    the others up). Reads wait in line for their turn; beyond ``queue_max`` waiting, a read gets 503
    ``busy`` with Retry-After. /healthz, writes, WebSockets and requests without a valid token
    (answered 401 at once by the routes) are never paced.
    """

    def __init__(
        self,
        app: ASGIApp,
        auth: Authenticator,
        live: Callable[[], bool],
        share: float,
        burst_s: float,
        queue_max: int,
        on_paced: Callable[[float], None] | None = None,
        on_refused: Callable[[], None] | None = None,
    ) -> None:
        self.app = app
        self.auth = auth
        self.live = live
        self.pacer = ReadPacer(share, burst_s) if share < 1 else None
        self.queue_max = queue_max
        self.on_paced = on_paced
        self.on_refused = on_refused
        self.waiting = 0
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    def _turn(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:  # an app served by a new loop (tests)
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def _paced(self, scope: Scope) -> bool:
        return (
            self.pacer is not None
            and scope["type"] == "http"
            and scope.get("method") in READ_METHODS
            and scope.get("path") not in UNPACED_PATHS
            and self.live()
            and await self.auth.principal(_bearer_token(scope)) is not None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not await self._paced(scope):
            await self.app(scope, receive, send)
            return
        assert self.pacer is not None
        pacer = self.pacer
        if self.waiting >= self.queue_max:
            if self.on_refused:
                self.on_refused()
            detail = f"the server is busy: {self.waiting} API reads are waiting while streams run; retry"
            await json_error(503, "busy", detail, {"Retry-After": "1"})(scope, receive, send)
            return
        queued = time.monotonic()
        turn = self._turn()
        self.waiting += 1
        try:
            await turn.acquire()
        finally:
            self.waiting -= 1
        started = time.monotonic()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                pacer.charge(time.monotonic() - started)
                turn.release()

        async def paced_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                release()
            await send(message)

        try:
            while (wait := pacer.wait_s()) > 0 and self.live():
                await asyncio.sleep(min(wait, 0.25))
            started = time.monotonic()
            if self.on_paced:
                self.on_paced(started - queued)
            await self.app(scope, receive, paced_send)
        finally:
            release()


__all__ = ["InternalErrorMiddleware", "LiveReadPacingMiddleware", "ReadPacer", "RequestGuardMiddleware"]
