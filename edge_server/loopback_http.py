"""A plain-HTTP listener on 127.0.0.1 for nginx's RTMP callbacks when the server itself speaks HTTPS.

nginx-rtmp's ``on_publish`` / ``on_publish_done`` are plain HTTP GETs (the module has no TLS), so a
server that listens with TLS takes them here: each request line is handed to the same FastAPI app
in-process (``httpx.ASGITransport``, on the server's own event loop), and its status and body go
back. Only GET, only 127.0.0.1, one request per connection: what nginx sends, nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from http import HTTPStatus
from typing import Any

import httpx

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8192
READ_TIMEOUT_S = 5.0
CALL_TIMEOUT_S = 60.0  # on_publish waits while the stream is set up (nginx's netcall_timeout: 20 s)


class LoopbackCallbacks:
    """``start()`` inside the app's event loop; ``port`` is where nginx should call."""

    def __init__(self, app: Any) -> None:
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, client=("127.0.0.1", 0)),
            base_url="http://127.0.0.1",
            timeout=CALL_TIMEOUT_S,
        )
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("RTMP callbacks (plain HTTP, loopback) on 127.0.0.1:%d", self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        await self.client.aclose()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return
            if len(head) > MAX_HEAD_BYTES:
                await _reply(writer, 431, b"")
                return
            method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
            target = rest.rsplit(" ", 1)[0]
            if method != "GET" or not target.startswith("/"):
                await _reply(writer, 405, b"")
                return
            response = await self.client.get(target)
            await _reply(writer, response.status_code, response.content)
        except Exception:  # noqa: BLE001 - one bad callback must not take the listener down
            log.exception("RTMP callback failed")
            with contextlib.suppress(Exception):
                await _reply(writer, 500, b"")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _reply(writer: asyncio.StreamWriter, status: int, body: bytes) -> None:
    phrase = HTTPStatus(status).phrase
    writer.write(
        f"HTTP/1.1 {status} {phrase}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
