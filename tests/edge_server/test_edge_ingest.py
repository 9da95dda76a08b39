"""Bad offers, capacity, an unusable pipeline and server shutdown: clear answers, nothing left behind."""

from __future__ import annotations

import asyncio
import os
import re
import threading

import httpx
import pytest
from aiortc import RTCConfiguration, RTCPeerConnection
from aiortc.mediastreams import AudioStreamTrack
from edge_helpers import TOKEN, assert_documented, speeding_in_view, wait_for

from edge_client.publish import publish
from edge_client.synthetic import BrightBlobDetector
from edge_client.tracks import PlaybackTrack, iter_frames
from pipelines.builder import build_pipeline
from pipelines.config import PipelineConfig
from pipelines.errors import WeightsError

pytestmark = pytest.mark.timeout(90)

AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def _offer(video: bool = True, audio: bool = False) -> tuple[RTCPeerConnection, str]:
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    if video:
        pc.addTransceiver(PlaybackTrack(lambda: iter_frames("synthetic")), direction="sendonly")
    if audio:
        pc.addTransceiver(AudioStreamTrack(), direction="sendonly")
    await pc.setLocalDescription(await pc.createOffer())
    return pc, pc.localDescription.sdp


async def test_bad_offers_get_clear_4xx(server) -> None:
    good_pc, good_sdp = await _offer()
    audio_pc, audio_only = await _offer(video=False, audio=True)
    no_fingerprint = "\r\n".join(ln for ln in good_sdp.split("\r\n") if not ln.startswith("a=fingerprint"))
    bad_setup = good_sdp.replace("a=setup:actpass", "a=setup:bogus")
    no_codec = re.sub(r"a=rtpmap:(\d+) \w+/", r"a=rtpmap:\1 FOO/", good_sdp)
    async with httpx.AsyncClient(base_url=server.url, headers=AUTH, timeout=30) as c:
        cases = [
            ("whip", "text/plain", good_sdp, 415, "application/sdp"),
            ("whip", "application/json", '{"sdp": "v=0"}', 415, "application/sdp"),
            ("whip", None, good_sdp, 415, "application/sdp"),
            ("whip", "application/sdp", "", 400, "empty"),
            ("whip", "application/sdp", "hello world", 400, "v=0"),
            ("whip", "application/sdp", "v=0\r\nthis is not sdp\r\n", 400, "not '<letter>=<value>'"),
            ("whip", "application/sdp", audio_only, 400, "no video"),
            ("whip", "application/sdp", no_fingerprint, 400, "fingerprint"),
            ("whip", "application/sdp", bad_setup, 400, "SDP offer rejected"),
            ("whip", "application/sdp", no_codec, 400, "codec in common"),
            ("whip", "application/sdp; charset=utf-8", b"v=0\r\n\xff\xfe", 400, "UTF-8"),
            ("phone", None, {"sdp": "garbage"}, 400, "v=0"),
            ("phone", None, {"sdp": audio_only}, 400, "no video"),
            ("phone", None, {"type": "offer"}, 422, "sdp"),
            ("phone", None, {"sdp": good_sdp, "type": "answer"}, 422, "type"),
        ]
        for kind, ctype, body, status, needle in cases:
            if kind == "whip":
                headers = {"Content-Type": ctype} if ctype else {}
                content = body.encode() if isinstance(body, str) else body
                r = await c.post("/whip", content=content, headers=headers)
            else:
                r = await c.post("/api/v1/webrtc/offer", json=body)
            assert r.status_code == status, (kind, ctype, needle, r.status_code, r.text)
            payload = r.json()
            assert needle in payload["detail"], (needle, payload)
            assert "Traceback" not in r.text
        r = await c.patch("/whip/unknown")
        assert r.status_code == 405
        assert (await c.delete("/whip/unknown")).status_code == 404
        assert (await c.delete("/api/v1/webrtc/unknown")).status_code == 404
        options = await c.options("/whip")
        assert options.status_code == 204 and options.headers["accept-post"] == "application/sdp"
        assert (await c.get("/api/v1/sessions")).json()["items"] == []  # nothing half-created
    assert server.manager.active_count == 0
    await good_pc.close()
    await audio_pc.close()


class RecordingPipelineFactory:
    """The real pipeline (synthetic-scene detector), recording each one built and each one closed."""

    def __init__(self) -> None:
        self.built: list = []
        self.closed: list = []

    def __call__(self):
        pipeline = build_pipeline(PipelineConfig(), detector=BrightBlobDetector())
        pipeline.close = lambda: self.closed.append(pipeline)  # the server calls close() when it has one
        self.built.append(pipeline)
        return pipeline


async def test_bad_offers_build_no_pipeline_and_failures_release_it(server_factory) -> None:
    """aiortc checks the offer before the (costly) pipeline is built; a later failure closes it."""
    factory = RecordingPipelineFactory()
    srv = server_factory(app_kwargs={"pipeline_factory": factory})
    good_pc, good_sdp = await _offer()
    recv_pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    recv_pc.addTransceiver("video", direction="recvonly")
    await recv_pc.setLocalDescription(await recv_pc.createOffer())
    whip = {"Content-Type": "application/sdp"}
    async with httpx.AsyncClient(base_url=srv.url, headers=AUTH, timeout=30) as c:
        for sdp, needle in [
            (good_sdp.replace("a=setup:actpass", "a=setup:bogus"), "SDP offer rejected"),
            (re.sub(r"a=rtpmap:(\d+) \w+/", r"a=rtpmap:\1 FOO/", good_sdp), "codec in common"),
            (recv_pc.localDescription.sdp, "no video track the server can receive"),
        ]:
            r = await c.post("/whip", content=sdp, headers=whip)
            assert r.status_code == 400 and needle in r.json()["detail"], r.text
        assert factory.built == []

        # the database fails after the pipeline was built: it is closed, the peer too, no session
        with srv.store.engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE sessions RENAME TO sessions_gone")
        r = await c.post("/whip", content=good_sdp, headers=whip)
        assert r.status_code == 500 and r.json()["error"] == "internal_error"
        assert len(factory.built) == 1 and factory.closed == factory.built
        assert srv.manager.active_count == 0 and srv.manager._pending == 0
        with srv.store.engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE sessions_gone RENAME TO sessions")
        # A 500 keeps the keep-alive connection usable: the next request below goes over it. (A
        # re-raised error made uvicorn close it right after the response; the pause lets that land.)
        await asyncio.sleep(0.3)

        ok_pc, ok_sdp = await _offer()
        r = await c.post("/whip", content=ok_sdp, headers=whip)
        assert r.status_code == 201 and len(factory.built) == 2 and len(factory.closed) == 1
        assert (await c.delete(r.headers["location"])).status_code == 200
        assert factory.closed == factory.built  # the worker closes its pipeline when the stream ends
    for pc in (good_pc, recv_pc, ok_pc):
        await pc.close()


async def test_capacity_and_unusable_pipeline(server_factory) -> None:
    srv = server_factory(max_streams=1)
    pc1, sdp1 = await _offer()
    pc2, sdp2 = await _offer()
    async with httpx.AsyncClient(base_url=srv.url, headers=AUTH, timeout=30) as c:
        first = await c.post("/whip", content=sdp1, headers={"Content-Type": "application/sdp"})
        assert first.status_code == 201
        second = await c.post("/whip", content=sdp2, headers={"Content-Type": "application/sdp"})
        assert second.status_code == 503 and second.json()["error"] == "at_capacity"
        assert second.headers["retry-after"] == "10"
        assert (await c.delete(first.headers["location"])).status_code == 200
    for pc in (pc1, pc2):
        await pc.close()

    def no_weights():
        raise WeightsError("no vehicle detector weights: put the model under weights/")

    broken = server_factory(app_kwargs={"pipeline_factory": no_weights})
    pc3, sdp3 = await _offer()
    async with httpx.AsyncClient(base_url=broken.url, headers=AUTH, timeout=30) as c:
        r = await c.post("/whip", content=sdp3, headers={"Content-Type": "application/sdp"})
        assert r.status_code == 503 and r.json()["error"] == "pipeline_unavailable"
        assert "weights" in r.json()["detail"]
        assert (await c.get("/healthz")).json()["active_streams"] == 0
    await pc3.close()


async def test_shutdown_closes_peers_and_flushes(server_factory) -> None:
    srv = server_factory()
    stop = asyncio.Event()
    task = asyncio.create_task(publish("synthetic", srv.url, TOKEN, stop=stop, return_video=False))
    # wait until the first fast car has a speed, then stop the server under the stream
    await wait_for(lambda: speeding_in_view(srv))
    sid = next(iter(srv.manager.sessions))
    await asyncio.to_thread(srv.stop)
    result = await asyncio.wait_for(task, 30)
    assert result.session_id == sid
    assert any(e["type"] == "session.ended" for e in result.events)  # told before the peer closed
    row = srv.store.get_session(sid)
    assert row.status == "ended" and row.end_reason == "server shutdown"
    assert srv.store.count_violations(sid) >= 1  # the open violation, closed by finish()
    assert row.frames_processed > 15


async def test_a_finished_stream_lets_go_of_its_models_without_the_garbage_collector(server_factory) -> None:
    """Every stream builds a pipeline (detector, road segmenter with its own infer request). When the
    stream ends they are released at once, by reference counting: nothing of a finished session (its
    callbacks, its worker) keeps them alive until a garbage collection happens to run."""
    import gc
    import threading
    import weakref

    released: list[tuple[weakref.ref, weakref.ref]] = []

    def factory():
        pipeline = build_pipeline(PipelineConfig(), detector=BrightBlobDetector())
        assert pipeline.road.segmenter is not None  # the shipped road U-Net
        released.append((weakref.ref(pipeline.detector), weakref.ref(pipeline.road.segmenter)))
        return pipeline

    srv = server_factory(app_kwargs={"pipeline_factory": factory})
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            result = await publish("synthetic", srv.url, TOKEN, max_seconds=1.5)
            assert result.frames_sent > 10
            await wait_for(lambda: srv.manager.active_count == 0)
            detector, segmenter = released[-1]
            await wait_for(lambda d=detector, s=segmenter: d() is None and s() is None, timeout=10)
            # the stream's own thread is gone (the pools shared by all streams may grow to their caps)
            assert not [t.name for t in threading.enumerate() if t.name.startswith("stream-")]
        assert len(released) == 3 and all(d() is None and s() is None for d, s in released)
    finally:
        gc.enable()


async def test_a_stop_that_cannot_flush_in_time_says_so_and_the_session_ends_later(server_factory) -> None:
    """DELETE answers 202 'closing' while the stream is still being stored (not 200 as if it were
    done); the row reaches 'ended' with its counters once the worker finishes."""
    import time

    def slow_to_finish():
        pipeline = build_pipeline(PipelineConfig(), detector=BrightBlobDetector())
        finish = pipeline.finish

        def finish_slowly():
            time.sleep(3.0)  # e.g. many violations' clips and rows to write
            return finish()

        pipeline.finish = finish_slowly
        return pipeline

    srv = server_factory(app_kwargs={"pipeline_factory": slow_to_finish}, shutdown_timeout_s=0.5)
    pc, sdp = await _offer()
    async with httpx.AsyncClient(base_url=srv.url, headers=AUTH, timeout=30) as c:
        r = await c.post("/whip", content=sdp, headers={"Content-Type": "application/sdp"})
        assert r.status_code == 201, r.text
        from aiortc import RTCSessionDescription

        await pc.setRemoteDescription(RTCSessionDescription(sdp=r.text, type="answer"))
        session_id = r.headers["x-session-id"]
        await wait_for(lambda: (s := srv.manager.get(session_id)) is not None and s.stats.processed > 5)
        r = await c.delete(f"/whip/{session_id}")
        assert r.status_code == 202 and r.json()["status"] == "closing", r.text
        assert_documented(srv, r, "DELETE", "/whip/{session_id}")
        assert (await c.delete(f"/whip/{session_id}")).status_code == 404  # no longer a live stream
        row = await wait_for(
            lambda: (s := srv.store.get_session(session_id)).status == "ended" and s, timeout=15
        )
        assert row.frames_processed > 5 and row.end_reason == "ended by client (WHIP DELETE)"
    await pc.close()


async def test_live_counters_and_finished_tracks_reach_the_store_while_the_stream_runs(
    server_factory,
) -> None:
    """A crash loses at most seconds of a stream's counters and track summaries; a finished
    track's summary leaves the worker's memory for the store."""
    srv = server_factory(session_persist_interval_s=0.5, track_summary_idle_s=1.0)
    task = asyncio.create_task(publish("synthetic", srv.url, TOKEN, max_seconds=9.0))
    try:
        row = await wait_for(
            lambda: next(
                (
                    r
                    for r in srv.store.list_sessions(limit=5).items
                    if r.status == "active" and r.frames_processed > 10
                ),
                None,
            ),
            timeout=30,
        )
        assert row.frames_received >= row.frames_processed  # a crash now would keep these
        stored = await wait_for(
            lambda: srv.manager.get(row.id) is not None and srv.store.session_tracks(row.id), timeout=30
        )
        assert all(t.frames > 0 and t.last_time_s >= t.first_time_s for t in stored)
        worker = srv.manager.get(row.id).worker  # still streaming
        stored_ids = {t.track_id for t in stored}
        # the stored ones are let go of (right after they are saved)
        await wait_for(
            lambda: not {r["track_id"] for r in worker.outputs.tracks.rows()} & stored_ids, timeout=5
        )
    finally:
        result = await task
    final = {t.track_id for t in srv.store.session_tracks(result.session_id)}
    assert stored_ids <= final  # the end adds the rest and keeps the earlier ones


def test_half_written_clips_of_a_killed_server_are_removed_at_start(tmp_path) -> None:
    from edge_helpers import start_server

    media = tmp_path / "data" / "media" / "sess-x"
    media.mkdir(parents=True)
    (media / "t1_global_10.part.mp4").write_bytes(b"\x00" * 100)  # the encoder died mid-clip
    (media / "t2_global_40.mp4").write_bytes(b"\x00" * 100)
    (media / "t2_global_40.jpg").write_bytes(b"\xff\xd8")
    srv = start_server(tmp_path)
    try:
        assert sorted(p.name for p in media.iterdir()) == ["t2_global_40.jpg", "t2_global_40.mp4"]
    finally:
        srv.stop()


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="per-thread nice values are a Linux feature")
@pytest.mark.parametrize("nice", [0, 5, 10])
def test_clip_threads_run_nicer_than_the_streams(nice: int) -> None:
    """The clip writers' initializer lowers their own thread's priority, not the process's."""
    from concurrent.futures import ThreadPoolExecutor

    from edge_server.priority import lower_thread_priority

    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    with ThreadPoolExecutor(1, initializer=lower_thread_priority, initargs=(nice,)) as pool:
        theirs = pool.submit(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result()
    assert theirs == min(19, own + nice)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own  # this thread unchanged
