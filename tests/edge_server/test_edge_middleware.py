"""Requests with a body are refused before the body is read: no token -> 401, too large -> 413.

The client announces a large body, sends only its first bytes and waits for the answer: a server
that reads the body before checking (FastAPI reads it before the route's dependencies) would wait
for the rest and never answer in time.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest
from edge_helpers import TOKEN

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

LIMIT = 64 * 1024
ROUTES = [
    ("POST", "/api/v1/webrtc/offer", "application/json"),
    ("POST", "/whip", "application/sdp"),
    ("PUT", "/api/v1/violations/1/false_positive", "application/json"),
    ("PATCH", "/whip/abc", "application/trickle-ice-sdpfrag"),
]


def _answer(sock: socket.socket, timeout_s: float) -> tuple[int, bytes]:
    """Status code and body of the HTTP answer (``Connection: close`` or Content-Length framed)."""
    sock.settimeout(timeout_s)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split(b" ")[1]), body


def _open(url: str) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname, parts.port), timeout=5)


def _head(method: str, path: str, content_type: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Type: {content_type}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize(("method", "path", "content_type"), ROUTES)
@pytest.mark.parametrize(
    ("auth", "declared_bytes", "status", "error"),
    [
        (None, 300_000_000, 401, b"unauthorized"),  # no token: refused whatever the size
        ("Bearer wrong", 300_000_000, 401, b"unauthorized"),
        (f"Bearer {TOKEN}", 300_000_000, 413, b"too_large"),  # token, body over the limit
        (f"Bearer {TOKEN}", LIMIT + 1, 413, b"too_large"),
    ],
)
def test_refused_before_the_body_is_read(
    server_factory, method, path, content_type, auth, declared_bytes, status, error
) -> None:
    srv = server_factory(max_request_body_bytes=LIMIT)
    headers = {"Content-Length": str(declared_bytes)}
    if auth:
        headers["Authorization"] = auth
    with _open(srv.url) as sock:
        sock.sendall(_head(method, path, content_type, headers) + b"x" * 1024)  # 1 kB of the body
        code, body = _answer(sock, timeout_s=5.0)
    assert (code, error in body) == (status, True), body[:300]


def test_a_chunked_body_is_cut_off_at_the_limit(server_factory) -> None:
    """No Content-Length: the server counts what arrives and answers 413 once it passes the limit,
    without waiting for the end of the body (which never comes here)."""
    srv = server_factory(max_request_body_bytes=LIMIT)
    headers = {"Authorization": f"Bearer {TOKEN}", "Transfer-Encoding": "chunked"}
    chunk = b"%x\r\n%s\r\n" % (8192, b"v" * 8192)
    with _open(srv.url) as sock:
        sock.sendall(_head("POST", "/whip", "application/sdp", headers) + chunk * (2 * LIMIT // 8192))
        code, body = _answer(sock, timeout_s=5.0)
    assert code == 413 and b"too_large" in body


def test_bodies_within_the_limit_with_a_token_reach_the_routes(server_factory) -> None:
    srv = server_factory(max_request_body_bytes=LIMIT)
    with srv.client() as c:
        r = c.post("/whip", content=b"v=0\r\n", headers={"Content-Type": "application/sdp"})
        assert r.status_code == 400 and r.json()["error"] != "too_large"  # the route's own answer
        r = c.put("/api/v1/violations/424242/false_positive", json={"false_positive": True})
        assert r.status_code == 404
        assert c.get("/healthz").status_code == 200  # bodiless requests pass the guard untouched
