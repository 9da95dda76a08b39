"""`airpatrol publish` in a separate process: a recorded flight with its SRT, over WHIP and the phone API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from edge_helpers import TOKEN, RunningServer, speeding_in_view

from edge_client.synthetic import write_srt, write_video

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def flight(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("flight")
    video = write_video(folder / "DJI_0001.MP4", seconds=6.5)
    srt = write_srt(folder / "DJI_0001.SRT", seconds=6.5)
    return video, srt


def _publish_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "airpatrol.cli", "publish", *args, "--ice-host", "127.0.0.1"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("AIRPATROL_API_TOKEN", None)
    return env


def test_passthrough_needs_h264_without_b_frames(tmp_path) -> None:
    from fractions import Fraction

    import av
    import numpy as np

    from edge_client.tracks import PassthroughTrack, PublishError

    path = tmp_path / "bframes.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        stream.options = {"bf": "3"}
        for i in range(10):
            frame = av.VideoFrame.from_ndarray(np.full((64, 64, 3), i * 20, np.uint8), format="bgr24")
            frame.pts, frame.time_base = i, Fraction(1, 30)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    with pytest.raises(PublishError, match="B-frames"):
        PassthroughTrack(path)


def test_publish_recorded_flight_over_whip(server: RunningServer, flight) -> None:
    video, srt = flight
    proc = subprocess.run(
        _publish_cmd(str(video), "--srt", str(srt), "--camera", "DJI Mini 4 Pro", "--server", server.url,
                     "--token", TOKEN, "--whip", "--passthrough"),  # relay the file's H.264 like a drone app
        capture_output=True, text=True, timeout=90, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    summary = lines[-1]
    assert summary["type"] == "summary" and summary["violations"] >= 1, summary
    assert summary["frames_sent"] >= 190 and summary["telemetry_sent"] >= 50
    violations = [e["violation"] for e in lines if e["type"] == "violation"]
    assert violations and all(65 < v["peak_speed_kmh"] < 85 for v in violations)

    with server.client() as c:
        s = c.get(f"/api/v1/sessions/{summary['session_id']}").json()
        assert s["kind"] == "whip" and s["status"] == "ended" and "WHIP DELETE" in s["end_reason"]
        assert s["telemetry_received"] >= 50 and s["camera"] == "DJI Mini 4 Pro"
        assert s["info"]["frames_without_telemetry"] <= 3
        stored = c.get("/api/v1/violations", params={"session_id": s["id"]}).json()["items"]
        assert {v["id"] for v in stored} == {v["id"] for v in violations}
        assert stored[0]["drone_latitude"] == pytest.approx(59.3293, abs=1e-3)  # GPS from the SRT


def test_publish_errors_are_one_line(server: RunningServer, flight, capsys) -> None:
    video, _ = flight
    proc = subprocess.run(
        _publish_cmd(str(video), "--server", server.url, "--token", "wrong"),
        capture_output=True, text=True, timeout=60, env=_env(),
    )  # fmt: skip
    assert proc.returncode == 2
    assert "HTTP 401" in proc.stderr and "Traceback" not in proc.stderr
    from airpatrol.cli import main  # the same entry point, in process: no second interpreter start

    code = main(["publish", "/nonexistent.mp4", "--server", server.url, "--token", TOKEN])
    err = capsys.readouterr().err
    assert code == 2 and "not found" in err and "Traceback" not in err


def test_killed_publisher_session_is_closed_and_kept(server: RunningServer, flight) -> None:
    """SIGKILL: no BYE, no DELETE. The idle timeout ends the stream; the open violation is stored."""
    video, srt = flight
    proc = subprocess.Popen(
        _publish_cmd(str(video), "--srt", str(srt), "--camera", "DJI Mini 4 Pro", "--server", server.url,
                     "--token", TOKEN, "--loop", "--no-return-video"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        sess = None
        while time.monotonic() < deadline:
            if speeding_in_view(server):
                sess = next(iter(server.manager.sessions.values()))
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        assert sess is not None, "stream did not start"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 30
        while server.manager.get(sess.id) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server.manager.get(sess.id) is None, "session still active after the peer died"
    finally:
        if proc.poll() is None:
            proc.kill()
    with server.client() as c:
        s = c.get(f"/api/v1/sessions/{sess.id}").json()
    assert s["status"] == "ended" and ("no video" in s["end_reason"] or "peer" in s["end_reason"]), s
    assert s["violations_count"] >= 1


def _truncated_mkv(path: Path, seconds: float = 5.0, keep: float = 0.6) -> Path:
    """A Matroska file (its duration in the header) cut at ``keep`` of its bytes: it opens, plays
    its first part, then fails."""
    from fractions import Fraction

    import av

    from edge_client.synthetic import SyntheticScene

    scene = SyntheticScene(640, 360)
    full = path.with_name("full.mkv")
    with av.open(str(full), "w", format="matroska") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 640, 360, "yuv420p"
        stream.options = {"preset": "veryfast", "bf": "0", "g": "30"}
        for i in range(int(seconds * 30)):
            frame = av.VideoFrame.from_ndarray(scene.render(i / 30), format="bgr24")
            frame.pts, frame.time_base = i, Fraction(1, 30)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    data = full.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


@pytest.mark.parametrize(
    ("make", "extra", "needle"),
    [
        (lambda d: d / "empty.mp4", [], "empty (0 bytes)"),
        (lambda d: d / "noise.mp4", [], "cannot stream"),
        (lambda d: d / "notes.mp4", [], "cannot stream"),
        (lambda d: d / "cut.mp4", [], "cannot stream"),  # an MP4 cut before its index
        (lambda d: "synthetic:0x0", [], "cannot be streamed"),
        (lambda d: "synthetic:100000x100000", [], "cannot be streamed"),  # would need ~23 GB
        (lambda d: "synthetic", ["--altitude", "nan"], "altitude_m=nan"),
        (lambda d: "synthetic", ["--pitch", "45"], "gimbal pitch 45.0"),
        (lambda d: "synthetic", ["--max-seconds", "-1"], "max seconds"),
    ],
    ids=["empty", "noise", "text", "cut-mp4", "0x0", "huge", "altitude-nan", "pitch-45", "max-seconds"],
)
def test_unusable_input_is_refused_up_front(tmp_path, flight, capsys, make, extra, needle) -> None:
    """Checked before any connection (the server here does not even exist): exit 2, one line."""
    (tmp_path / "empty.mp4").write_bytes(b"")
    (tmp_path / "noise.mp4").write_bytes(os.urandom(5000))
    (tmp_path / "notes.mp4").write_text("not a video\n")
    (tmp_path / "cut.mp4").write_bytes(flight[0].read_bytes()[:20000])
    from airpatrol.cli import main

    code = main(["publish", str(make(tmp_path)), *extra, "--server", "http://127.0.0.1:9", "--token", TOKEN])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err
    assert len([line for line in err.splitlines() if line.strip()]) == 1, err


def test_a_video_damaged_midway_ends_the_stream_with_an_error(
    server: RunningServer, tmp_path, capsys
) -> None:
    video = _truncated_mkv(tmp_path / "cut.mkv")
    from airpatrol.cli import main

    code = main(["publish", str(video), "--server", server.url, "--token", TOKEN, "--ice-host", "127.0.0.1"])
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert code == 1 and "could not be read after" in summary["error"], captured
    assert summary["frames_sent"] > 30 and "Traceback" not in captured.err
    with server.client() as c:  # the server was told: the session is closed with what it got
        session = c.get(f"/api/v1/sessions/{summary['session_id']}").json()
    assert session["status"] == "ended" and session["frames_processed"] > 0


async def test_a_killed_server_is_noticed_in_seconds(tmp_path) -> None:
    """kill -9 of the server mid-stream: the publisher stops within seconds and says so."""
    import argparse
    import asyncio

    from edge_client.bench import DEFAULT_DETECTOR
    from edge_client.bench_server import ServerProcess
    from edge_client.publish import publish

    args = argparse.Namespace(
        port=0, streams=[1], process_max_width=None, detector_factory=DEFAULT_DETECTOR, config=None
    )
    # more settings reach the server's environment (eval.live_tickets --speeds records its tracks so)
    server = ServerProcess(args, tmp_path / "server", TOKEN, settings={"AIRPATROL_RECORD_TRACKS": "true"})
    try:
        server.wait_ready()
        assert b"AIRPATROL_RECORD_TRACKS=true\0" in Path(f"/proc/{server.proc.pid}/environ").read_bytes()
        task = asyncio.create_task(publish("synthetic", server.url, TOKEN, max_seconds=60.0))
        # mid-stream: the server has received frames (a slow machine answers the offer late, and a
        # kill before the answer is a refused start, not a lost server)
        async with httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            deadline = time.monotonic() + 60.0
            while time.monotonic() < deadline and not task.done():
                items = (await c.get("/api/v1/sessions")).json()["items"]
                if any((s.get("frames_received") or 0) >= 30 for s in items):
                    break
                await asyncio.sleep(0.25)
        assert not task.done()
        server.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        result = await asyncio.wait_for(task, 30.0)
        noticed_s = time.monotonic() - killed
    finally:
        server.stop()
    assert result.error is not None and ("stopped answering" in result.error or "connection" in result.error)
    assert result.frames_sent > 30
    assert noticed_s < 10.0, noticed_s
