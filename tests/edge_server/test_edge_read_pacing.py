"""API reads are paced while a stream is live, so a burst of them cannot take the stream's CPU.

The pacer's arithmetic on a fake clock; the middleware around a small ASGI app (one read at a
time and the share of time respected while live, untouched otherwise, 503 busy when too many
wait); and a real server with a real stream, where every read is paced while the stream runs and
none after it ends.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from edge_helpers import TOKEN, wait_for

from edge_client.publish import publish
from edge_server.auth.authenticator import Authenticator
from edge_server.middleware import LiveReadPacingMiddleware, ReadPacer

AUTH = {"Authorization": f"Bearer {TOKEN}"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("share", "burst_s", "steps", "expected_waits"),
    [
        # (seconds passed before the read, its busy seconds) -> wait before it may start
        (0.1, 0.0, [(0.0, 0.01), (0.0, 0.01)], [0.0, 0.09]),  # 10 ms busy -> 90 ms before the next
        (0.1, 0.0, [(0.0, 0.01), (0.09, 0.01)], [0.0, 0.0]),  # the next came after its wait
        (0.5, 0.0, [(0.0, 0.2), (0.0, 0.0)], [0.0, 0.2]),  # 0.2 s busy at half share -> 0.2 s
        (0.1, 0.05, [(0.0, 0.02), (0.0, 0.02), (0.0, 0.02), (0.0, 0.0)], [0.0, 0.0, 0.0, 0.04]),  # burst
        (0.25, 1.0, [(1000.0, 0.0), (0.0, 1.5)], [0.0, 0.0]),  # a long idle refills to the cap only
        (0.25, 1.0, [(1000.0, 1.5), (0.0, 0.0)], [0.0, 0.5]),  # 1.5 s from a 1 s burst: in debt
    ],
)
def test_pacer_keeps_reads_to_their_share(share, burst_s, steps, expected_waits) -> None:
    clock = FakeClock()
    pacer = ReadPacer(share, burst_s, clock=clock)
    waits = []
    for passed, busy in steps:
        clock.now += passed
        wait = pacer.wait_s()
        waits.append(round(wait, 3))
        clock.now += wait + busy
        pacer.charge(busy)
    assert waits == pytest.approx(expected_waits, abs=2e-3)


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5])
def test_pacer_share_must_be_a_fraction(share) -> None:
    with pytest.raises(ValueError, match="share"):
        ReadPacer(share, 0.0)


class SlowReads:
    """An ASGI app whose every request takes ``busy_s`` before it answers; counts concurrency."""

    def __init__(self, busy_s: float) -> None:
        self.busy_s = busy_s
        self.inside = 0
        self.most_inside = 0

    async def __call__(self, scope, receive, send) -> None:
        self.inside += 1
        self.most_inside = max(self.most_inside, self.inside)
        try:
            await asyncio.sleep(self.busy_s)
        finally:
            self.inside -= 1
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})


def _paced_app(live: bool, share: float = 0.25, queue_max: int = 100):
    inner = SlowReads(busy_s=0.02)
    waits: list[float] = []
    refused: list[int] = []
    app = LiveReadPacingMiddleware(
        inner,
        auth=Authenticator(TOKEN),
        live=lambda: live,
        share=share,
        burst_s=0.0,
        queue_max=queue_max,
        on_paced=waits.append,
        on_refused=lambda: refused.append(1),
    )
    return app, inner, waits, refused


async def _get_all(app, requests: list[tuple[str, str, dict[str, str]]]) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://edge") as client:
        return await asyncio.gather(*(client.request(m, path, headers=h) for m, path, h in requests))


async def test_live_reads_go_one_at_a_time_within_their_share() -> None:
    app, inner, waits, refused = _paced_app(live=True, share=0.25)
    t0 = time.monotonic()
    answers = await _get_all(app, [("GET", "/api/v1/violations", AUTH)] * 10)
    elapsed = time.monotonic() - t0
    assert [a.status_code for a in answers] == [200] * 10
    assert inner.most_inside == 1
    assert len(waits) == 10 and not refused
    # 10 reads of >= 20 ms busy at a 25 % share (no burst): 60 ms between one read's end and the next
    assert elapsed >= 10 * 0.02 + 9 * 0.06 * 0.95


@pytest.mark.parametrize(
    ("live", "method", "path", "headers"),
    [
        (False, "GET", "/api/v1/violations", AUTH),  # no stream: reads run side by side
        (True, "GET", "/healthz", {}),  # liveness checks never queue
        (True, "GET", "/api/v1/violations", {}),  # no token: answered (401) at once by the routes
        (True, "GET", "/api/v1/violations", {"Authorization": "Bearer wrong"}),
        (True, "POST", "/api/v1/webrtc/offer", AUTH),  # writes are not reads
        (True, "DELETE", "/api/v1/webrtc/abc", AUTH),
    ],
)
async def test_what_is_not_paced(live, method, path, headers) -> None:
    app, inner, waits, _ = _paced_app(live=live)
    answers = await _get_all(app, [(method, path, headers)] * 8)
    assert [a.status_code for a in answers] == [200] * 8
    assert inner.most_inside == 8
    assert waits == []


async def test_pacing_off_at_full_share() -> None:
    app, inner, waits, _ = _paced_app(live=True, share=1.0)
    await _get_all(app, [("GET", "/api/v1/violations", AUTH)] * 8)
    assert inner.most_inside == 8 and waits == []


async def test_too_many_waiting_reads_get_503_busy() -> None:
    app, inner, waits, refused = _paced_app(live=True, queue_max=3)
    answers = await _get_all(app, [("GET", "/api/v1/violations", AUTH)] * 8)
    codes = sorted(a.status_code for a in answers)
    # one is handled, three wait in line, the other four are refused at once
    assert codes == [200] * 4 + [503] * 4
    busy = next(a for a in answers if a.status_code == 503)
    assert busy.headers["retry-after"] == "1"
    assert busy.json()["error"] == "busy"
    assert len(refused) == 4 and len(waits) == 4


def _paced_count(client: httpx.Client) -> float:
    text = client.get("/metrics").text
    line = next(x for x in text.splitlines() if x.startswith("airpatrol_api_read_wait_seconds_count"))
    return float(line.split()[-1])


async def test_reads_are_paced_while_a_real_stream_runs(server) -> None:
    """Real server, real WebRTC stream: every read during the stream is paced and answered; once
    the stream has ended, reads run freely again."""
    task = asyncio.create_task(publish("synthetic", server.url, TOKEN, max_seconds=6.0))
    try:
        await wait_for(lambda: any(s.stats.processed > 5 for s in server.manager.sessions.values()))
        async with httpx.AsyncClient(base_url=server.url, headers=AUTH, timeout=60) as client:
            answers = await asyncio.gather(
                *(client.get("/api/v1/violations", params={"limit": 5}) for _ in range(30)),
                client.get("/healthz"),
            )
        assert [a.status_code for a in answers] == [200] * 31
        with server.client() as sync_client:
            # the 30 reads, plus each /metrics read itself (also a read while live)
            assert _paced_count(sync_client) >= 30
    finally:
        result = await task
    assert result.frames_sent > 50
    await wait_for(lambda: server.manager.active_count == 0)
    with server.client() as sync_client:
        before = _paced_count(sync_client)
        for _ in range(5):
            assert sync_client.get("/api/v1/violations").status_code == 200
        assert _paced_count(sync_client) == before
