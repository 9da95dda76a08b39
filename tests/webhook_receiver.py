"""A real webhook receiver on 127.0.0.1 for the tests and the benchmark: a threaded HTTP server that
checks each POST with edge_server.alerts.signing.WebhookReceiver (as a dispatch system would), acts
once per idempotency key, and can be taken down (its port closed: connection refused) and brought
back on the same port, or made to answer a status."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from edge_server.alerts.signing import WebhookReceiver, WebhookRefused

SECRET = "a-shared-webhook-secret-0123456789"


@dataclass
class Received:
    key: str
    event: dict
    at: float


@dataclass
class Receiver:
    port: int = 0
    status: int = 200  # what it answers to an authentic request
    acted: list[Received] = field(default_factory=list)  # once per idempotency key, in arrival order
    refused: list[str] = field(default_factory=list)  # why each refused request was refused
    requests: int = 0
    _server: ThreadingHTTPServer | None = None
    _check: WebhookReceiver = field(default_factory=lambda: WebhookReceiver(SECRET))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                code = receiver.take(dict(self.headers.items()), body)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        if not self.port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Down: the port is closed (connection refused) until :meth:`start` again."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def take(self, headers: dict[str, str], body: bytes) -> int:
        with self._lock:
            self.requests += 1
            if self.status >= 300:
                return self.status
            try:
                key = self._check.check(headers, body)
            except WebhookRefused as exc:
                self.refused.append(str(exc))
                return 200 if "already received" in str(exc) else 401  # a retry: taken, not acted on twice
            self.acted.append(Received(key, json.loads(body), time.time()))
            return 200
