"""`airpatrol publish` in a separate process: a recorded flight with its SRT, over WHIP and the phone API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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

    from edge_client.publish import PassthroughTrack, PublishError

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
