"""Watching a live stream's annotated video (POST/DELETE /api/v1/sessions/{id}/viewers): a real
aiortc peer in this process receives the frames the pipeline annotates while a real publisher
(`airpatrol publish synthetic`, WebRTC) streams; viewers are counted against max_viewers, leave
cleanly, and bad requests get clear errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from aiortc import RTCPeerConnection, RTCSessionDescription
from edge_helpers import RunningServer, synthetic_stream

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def live(server_factory) -> Iterator[tuple[RunningServer, str]]:
    srv = server_factory(max_viewers=1)
    with synthetic_stream(srv) as session_id:
        yield srv, session_id


async def watch(srv: RunningServer, session_id: str, frames: int) -> tuple[str, list[tuple[int, int]], int]:
    """A receive-only peer: (viewer id, sizes of the first ``frames`` frames, the DELETE's status)."""
    pc = RTCPeerConnection()
    pc.addTransceiver("video", direction="recvonly")
    got: asyncio.Future = asyncio.get_running_loop().create_future()
    sizes: list[tuple[int, int]] = []

    @pc.on("track")
    def on_track(track) -> None:
        async def read() -> None:
            try:
                while len(sizes) < frames:
                    frame = await track.recv()
                    sizes.append((frame.width, frame.height))
                got.set_result(True)
            except Exception as exc:  # noqa: BLE001
                got.set_exception(exc)

        asyncio.ensure_future(read())

    await pc.setLocalDescription(await pc.createOffer())
    async with httpx.AsyncClient(base_url=srv.url, headers=srv.headers, timeout=30) as c:
        r = await c.post(
            f"/api/v1/sessions/{session_id}/viewers", json={"sdp": pc.localDescription.sdp, "type": "offer"}
        )
        assert r.status_code == 201, r.text
        body = r.json()
        await pc.setRemoteDescription(RTCSessionDescription(sdp=body["sdp"], type="answer"))
        try:
            await asyncio.wait_for(got, 60)
        finally:
            gone = await c.delete(f"/api/v1/sessions/{session_id}/viewers/{body['viewer_id']}")
            await pc.close()
    return body["viewer_id"], sizes, gone.status_code


def test_a_viewer_receives_the_annotated_video(live) -> None:
    srv, sid = live
    viewer_id, sizes, deleted = asyncio.run(watch(srv, sid, 10))
    assert len(sizes) == 10
    # the annotated frames at the return video's width (320 in the tests), the stream's aspect ratio
    assert set(sizes) == {(320, 180)}, sizes
    assert deleted == 204
    assert srv.manager.get(sid).viewers == {}
    with srv.client() as c:
        again = c.delete(f"/api/v1/sessions/{sid}/viewers/{viewer_id}")
        assert again.status_code == 404 and again.json()["error"] == "not_found"
    # the stream went on
    assert srv.manager.get(sid) is not None


def test_viewers_are_limited_and_leave_with_the_stream(live) -> None:
    srv, sid = live

    async def two() -> tuple[int, str, int]:
        first = RTCPeerConnection()
        first.addTransceiver("video", direction="recvonly")
        await first.setLocalDescription(await first.createOffer())
        second = RTCPeerConnection()
        second.addTransceiver("video", direction="recvonly")
        await second.setLocalDescription(await second.createOffer())
        async with httpx.AsyncClient(base_url=srv.url, headers=srv.headers, timeout=30) as c:
            one = await c.post(f"/api/v1/sessions/{sid}/viewers", json={"sdp": first.localDescription.sdp})
            more = await c.post(f"/api/v1/sessions/{sid}/viewers", json={"sdp": second.localDescription.sdp})
            stopped = await c.delete(f"/api/v1/webrtc/{sid}")
        await first.close()
        await second.close()
        return one.status_code, more.json()["error"], stopped.status_code

    assert asyncio.run(two()) == (201, "at_capacity", 200)  # max_viewers=1
    assert srv.manager.get(sid) is None  # ended, and its viewer with it


@pytest.mark.parametrize(
    ("session", "sdp", "status", "needle"),
    [
        ("nope", "v=0\r\n", 404, "no active stream nope"),
        (None, "not sdp", 400, "first line must be 'v=0'"),
        (
            None,
            "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n",
            400,
            "no video section",
        ),
    ],
)
def test_bad_viewer_requests(live, session, sdp: str, status: int, needle: str) -> None:
    srv, sid = live
    with srv.client() as c:
        r = c.post(f"/api/v1/sessions/{session or sid}/viewers", json={"sdp": sdp, "type": "offer"})
        assert r.status_code == status and needle in r.json()["detail"], r.text
        assert c.delete(f"/api/v1/sessions/{sid}/viewers/none").status_code == 404
    assert srv.manager.get(sid).viewers == {}
