"""RTSP pull (DJI Dock, fixed cameras): the server reads a real RTSP server (GStreamer's
gst-rtsp-server, tests/edge_server/servers/rtsp_server.py) into a session like any other stream."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from edge_helpers import RunningServer, free_port, wait_until
from test_edge_rtmp import OPERATOR

from edge_client.synthetic import write_video

pytestmark = pytest.mark.timeout(120)

RTSP_PYTHON = os.environ.get("AIRPATROL_TEST_RTSP_PYTHON")
SERVER = Path(__file__).parent / "servers" / "rtsp_server.py"
needs_rtsp = pytest.mark.skipif(
    not RTSP_PYTHON,
    reason="AIRPATROL_TEST_RTSP_PYTHON is not set (.ci/gst-rtsp.sh installs GStreamer's RTSP server; CI fails without)",
)


@pytest.fixture
def clip_seconds() -> float:
    """How long the camera's clip is (a test that ends the stream itself needs one that outlasts
    the wait for its first frames: parametrize it)."""
    return 6.0


@pytest.fixture
def camera(tmp_path: Path, clip_seconds: float) -> Iterator[str]:
    """rtsp://127.0.0.1:PORT/flight: ``clip_seconds`` of the synthetic scene (H.264, 30 fps), from
    its start to every client."""
    video = write_video(tmp_path / "flight.mp4", seconds=clip_seconds)
    port = free_port()
    proc = subprocess.Popen(
        [RTSP_PYTHON, str(SERVER), str(port), str(video)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        yield f"rtsp://127.0.0.1:{port}/flight"
    finally:
        proc.kill()
        proc.wait(10)


@needs_rtsp
def test_rtsp_camera_runs_through_the_pipeline(server_factory, camera: str) -> None:
    srv: RunningServer = server_factory(warm_pipeline=True)
    wait_until(lambda: srv.manager.spare.ready, 60, "spare pipeline built")
    with srv.client() as c:
        r = c.post("/api/v1/rtsp", json={"url": camera, "operator": OPERATOR})
        assert r.status_code == 201, r.text
        sid = r.json()["session_id"]
        assert r.json()["kind"] == "rtsp"
        # the file ends: the camera closes the stream and the session ends by itself
        session = wait_until(
            lambda: (s := c.get(f"/api/v1/sessions/{sid}").json())["status"] != "active" and s, 60, "ended"
        )
        violations = c.get("/api/v1/violations", params={"session_id": sid}).json()["items"]
    assert session["status"] == "ended", session["end_reason"]
    assert session["frames_received"] >= 175  # 6 s at 30 fps, from the camera's start
    assert session["info"]["source"] == camera  # no credentials in it to hide
    assert session["info"]["codec"] == "h264"
    assert violations and {v["scale_source"] for v in violations} == {"operator"}


@needs_rtsp
@pytest.mark.parametrize("clip_seconds", [30.0])  # a 6 s clip ended by itself first on a slow CI box
def test_rtsp_stream_is_ended_by_the_client(server_factory, camera: str) -> None:
    srv: RunningServer = server_factory()
    with srv.client() as c:
        r = c.post("/api/v1/rtsp", json={"url": camera.replace("rtsp://", "rtsp://user:secret@")})
        assert r.status_code == 201, r.text
        sid = r.json()["session_id"]
        wait_until(lambda: c.get(f"/api/v1/sessions/{sid}").json()["frames_processed"] > 10, 30, "frames")
        assert c.delete(f"/api/v1/rtmp/streams/{sid}").status_code == 404  # not an RTMP stream
        r = c.delete(f"/api/v1/rtsp/{sid}")
        assert r.status_code == 200 and r.json()["status"] == "ended"
        session = c.get(f"/api/v1/sessions/{sid}").json()
    assert session["end_reason"] == "ended by client"
    assert "secret" not in str(session["info"]) and session["info"]["source"].startswith(
        "rtsp://***@127.0.0.1:"
    )


def test_an_unreachable_camera_is_a_clear_400(server: RunningServer) -> None:
    with server.client() as c:
        r = c.post("/api/v1/rtsp", json={"url": f"rtsp://127.0.0.1:{free_port()}/flight"})  # nothing listens
        assert r.status_code == 400
        assert r.json()["error"] == "stream_unavailable" and "cannot be opened" in r.json()["detail"]
        assert c.get("/api/v1/sessions").json()["items"] == []  # no session was made
        assert server.manager.active_count == 0
