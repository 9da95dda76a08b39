"""RTMP ingest (DJI Pilot 2, DJI Fly): the server runs a real nginx with the RTMP module, and real
RTMP publishers (`airpatrol publish --rtmp`, FFmpeg through PyAV) push to it from other processes.

A publisher runs in a process of its own: PyAV holds the GIL while its RTMP output connects, so
in this process it would stall the very server that must admit it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import av
import httpx
import pytest
from edge_helpers import RunningServer, free_port, wait_until
from shared_material import REPO

from edge_client import synthetic
from edge_server.evidence.keys import KeyRing
from edge_server.evidence.verify import verify_pack
from edge_server.rtmp import RtmpUnavailable, find_nginx, render_config
from edge_server.streams import with_operator_values
from pipelines.types import Telemetry

pytestmark = pytest.mark.timeout(180)


def _nginx() -> str | None:
    try:
        return find_nginx(os.environ.get("AIRPATROL_TEST_NGINX")).path
    except RtmpUnavailable:
        return None


NGINX = _nginx()
needs_nginx = pytest.mark.skipif(
    NGINX is None,
    reason="nginx with the RTMP module is not installed (.ci/nginx-rtmp.sh installs it; CI fails without it)",
)
OPERATOR = {
    "altitude_m": synthetic.DEFAULT_ALTITUDE_M,
    "gimbal_pitch_deg": synthetic.DEFAULT_PITCH_DEG,
    "camera": synthetic.DEFAULT_CAMERA,
    "focal_length_35mm": synthetic.DEFAULT_FOCAL_35MM,
}

# An RTMP publisher that sends audio only (an app with the camera feed off).
AUDIO_ONLY = """
import sys, time, av, numpy as np
out = av.open(sys.argv[1], "w", format="flv", timeout=(10, 10))
s = out.add_stream("aac", rate=44100)
for i in range(40):
    f = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
    f.sample_rate, f.pts = 44100, i * 1024
    for p in s.encode(f):
        out.mux(p)
    time.sleep(0.023)
out.close()
"""


def publish(url: str, seconds: float) -> subprocess.Popen[str]:
    cmd = [
        sys.executable,
        "-m",
        "airpatrol.cli",
        "publish",
        "synthetic",
        "--rtmp",
        url,
        "--max-seconds",
        str(seconds),
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def summary(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, dict, str]:
    out, err = proc.communicate(timeout=timeout)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return proc.returncode, (lines[-1] if lines else {}), err


@pytest.fixture
def rtmp_server(server_factory) -> RunningServer:
    srv = server_factory(rtmp_port=free_port(), rtmp_host="127.0.0.1", warm_pipeline=True, nginx_path=NGINX)
    wait_until(lambda: srv.manager.spare.ready, 60, "spare pipeline built")
    return srv


def make_key(srv: RunningServer, **body) -> dict:
    with srv.client() as c:
        r = c.post("/api/v1/rtmp/keys", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def rejected(srv: RunningServer) -> dict[str, float]:
    with srv.client() as c:
        text = c.get("/metrics").text
    out = {}
    for line in text.splitlines():
        if line.startswith("airpatrol_ingest_rejected_total{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('reason="', 1)[1].split('"', 1)[0]] = float(value)
    return out


@needs_nginx
def test_rtmp_stream_runs_through_the_pipeline(rtmp_server: RunningServer) -> None:
    """A DJI Fly-like stream (no telemetry) with the operator's altitude, pitch and camera: every
    frame published reaches the worker, violations are found and say their scale is the operator's,
    and the publisher leaving ends the session cleanly."""
    srv = rtmp_server
    key = make_key(srv, name="pilot 7", operator=OPERATOR)
    assert key["url"].endswith(f"/live/{key['key']}") and key["url"].startswith("rtmp://127.0.0.1:")
    code, result, err = summary(publish(key["url"], 8.0))
    assert code == 0, err
    sent = result["frames_sent"]
    assert sent >= 230
    with srv.client() as c:
        session = wait_until(
            lambda: next(
                (s for s in c.get("/api/v1/sessions").json()["items"] if s["status"] != "active"), None
            ),
            30,
            "session ended",
        )
        detail = c.get(f"/api/v1/sessions/{session['id']}").json()
        violations = c.get("/api/v1/violations", params={"session_id": session["id"]}).json()["items"]
        keys = c.get("/api/v1/rtmp/keys").json()
    assert session["kind"] == "rtmp"
    assert session["status"] == "ended" and session["end_reason"] == "publisher disconnected"
    # the server's player waits at nginx before the publisher is admitted: no frame of the start is lost
    assert session["frames_received"] >= sent - 3
    # how many are processed depends on the CPU (a live stream drops what it cannot keep up with,
    # by design: 70 % with a CI run beside it); every received frame is accounted for, and at
    # least 5 fps were processed (the 8 s flight); frames skipped on purpose (settings.adapt) count too
    skipped = detail["info"]["effort"]["frames_skipped"]
    assert session["frames_processed"] + session["frames_dropped"] + skipped >= session["frames_received"] - 2
    assert session["frames_processed"] >= 40
    assert detail["info"]["rtmp_key"] == {"id": key["id"], "name": "pilot 7"}
    assert detail["info"]["operator_telemetry"]["altitude_m"] == OPERATOR["altitude_m"]
    assert detail["info"]["codec"] == "h264"
    assert violations, "the synthetic scene's fast lane speeds"
    assert {v["scale_source"] for v in violations} == {"operator"}
    assert all(v["altitude_m"] == OPERATOR["altitude_m"] for v in violations)
    assert keys[0]["id"] == key["id"] and keys[0]["last_used_at"] is not None
    assert "key" not in keys[0] and keys[0]["live_session_id"] is None
    _check_source_kept(srv, violations[0]["id"])


def _check_source_kept(srv: RunningServer, vid: int) -> None:
    """An RTMP violation's evidence pack holds the received video of its span, not re-encoded."""
    with srv.client() as c:
        evidence = wait_until(lambda: c.get(f"/api/v1/violations/{vid}").json()["evidence"], 30, "the pack")
        pack = srv.settings.resolved_media_dir / "got.evidence.zip"
        pack.write_bytes(c.get(evidence["url"]).content)
    assert verify_pack(pack, KeyRing.open(srv.settings.resolved_keys_dir, create=False).trusted()).ok
    with zipfile.ZipFile(pack) as zf:
        assert "source.mp4" in zf.namelist(), zf.namelist()
        (srv.settings.resolved_media_dir / "source.mp4").write_bytes(zf.read("source.mp4"))
    with av.open(str(srv.settings.resolved_media_dir / "source.mp4")) as container:
        stream = container.streams.video[0]
        packets = [p for p in container.demux(stream) if p.size]
    # 640x360 as published (the clip is re-encoded at clip_max_width; this is the stream itself)
    assert packets[0].is_keyframe and (stream.width, stream.height) == (640, 360)
    assert len(packets) >= 30  # pre-roll to post-roll at the publisher's 30 fps


@needs_nginx
def test_rtmp_refusals_are_clear_and_counted_while_a_stream_runs(rtmp_server: RunningServer) -> None:
    """A wrong key, a second publisher on a key in use and a stream with no video are each refused
    and counted by reason; the stream already running is not disturbed. (It runs until it is
    ended by SIGTERM, the refusals checked: with a fixed length, on a loaded machine it once ended
    before the second publisher came, whose key was then free.)"""
    srv = rtmp_server
    key = make_key(srv, operator=OPERATOR)
    base = key["url"].rsplit("/", 1)[0]
    running = publish(key["url"], 300.0)
    with srv.client() as c:
        wait_until(lambda: c.get("/api/v1/rtmp/keys").json()[0]["live_session_id"], 30, "stream live")

    wrong, busy = publish(f"{base}/not-a-key", 2.0), publish(key["url"], 2.0)  # side by side
    for refused in (wrong, busy):
        code, result, _ = summary(refused)
        assert code == 1 and "refused" in result["error"]

    silent = make_key(srv)
    audio = subprocess.run(
        [sys.executable, "-c", AUDIO_ONLY, silent["url"]], capture_output=True, text=True, timeout=60
    )
    assert audio.returncode in (0, 1)  # the server may drop it before it finishes

    assert running.poll() is None, "the first stream ran throughout"
    running.terminate()  # SIGTERM: the publisher ends its stream as at its natural end
    code, result, err = summary(running)
    assert code == 0, err
    with srv.client() as c:
        sessions = wait_until(
            lambda: (
                (items := c.get("/api/v1/sessions").json()["items"])
                and all(s["status"] != "active" for s in items)
                and items
            ),
            30,
            "all sessions ended",
        )
    by_status = {s["status"]: s for s in sessions}
    assert len(sessions) == 2
    assert "no video" in by_status["failed"]["end_reason"]
    assert by_status["ended"]["frames_received"] >= result["frames_sent"] - 3
    assert rejected(srv) == {"wrong key": 1.0, "key busy": 1.0, "no video": 1.0}


@needs_nginx
def test_operator_ends_a_stream_and_revokes_its_key(rtmp_server: RunningServer) -> None:
    srv = rtmp_server
    key = make_key(srv)
    proc = publish(key["url"], 30.0)
    with srv.client() as c:
        sid = wait_until(lambda: c.get("/api/v1/rtmp/keys").json()[0]["live_session_id"], 30, "stream live")
        wait_until(lambda: c.get(f"/api/v1/sessions/{sid}").json()["frames_processed"] > 60, 30, "frames")
        # no operator values yet: the stream has no scale; the operator gives it one while it runs
        r = c.put(f"/api/v1/sessions/{sid}/operator-telemetry", json=OPERATOR)
        assert r.status_code == 200, r.text
        assert srv.manager.get(sid).operator.altitude_m == OPERATOR["altitude_m"]
        assert c.delete(f"/api/v1/rtsp/{sid}").status_code == 404  # not an RTSP stream
        r = c.delete(f"/api/v1/rtmp/streams/{sid}")
        assert r.status_code == 200 and r.json()["status"] == "ended"
        code, result, _ = summary(proc)
        assert code == 1 and "closed the stream after" in result["error"]  # nginx dropped the publisher
        row = c.get(f"/api/v1/sessions/{sid}").json()
        assert row["end_reason"] == "ended by operator"
        assert row["info"]["operator_telemetry"]["camera"] == OPERATOR["camera"]
        assert c.delete(f"/api/v1/rtmp/keys/{key['id']}").status_code == 204
        assert c.get("/api/v1/rtmp/keys").json() == []
        assert c.delete(f"/api/v1/rtmp/keys/{key['id']}").status_code == 404
    code, result, _ = summary(publish(key["url"], 2.0))
    assert code == 1 and "refused" in result["error"]
    # nginx gone (killed): /healthz says so instead of "running"
    os.kill(srv.manager.rtmp.server.pid, signal.SIGKILL)
    wait_until(
        lambda: httpx.get(f"{srv.url}/healthz").json()["rtmp"].startswith("unavailable: nginx exited"), 10, ""
    )


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        ({"operator": {**OPERATOR, "altitude_m": -5.0}}, 422, "invalid_request"),
        ({"operator": {**OPERATOR, "altitude_m": "50"}}, 422, "invalid_request"),
        ({"operator": {**OPERATOR, "gimbal_pitch_deg": 30.0}}, 422, "invalid_request"),
        ({"operator": {**OPERATOR, "camera": "Hubble"}}, 400, "invalid_operator_telemetry"),
        ({"operator": {}}, 422, "invalid_request"),
        ({"device_sn": "1581F/../x"}, 422, "invalid_request"),
        ({"name": "a\x00b"}, 422, "invalid_request"),
        ({"stream_key": "mine"}, 422, "invalid_request"),
    ],
)
def test_rtmp_key_requests_are_checked(server: RunningServer, body: dict, status: int, error: str) -> None:
    with server.client() as c:
        r = c.post("/api/v1/rtmp/keys", json=body)
        assert (r.status_code, r.json()["error"]) == (status, error), r.text
        assert c.get("/api/v1/rtmp/keys").json() == []  # nothing stored


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("PUT", "/api/v1/sessions/nosuch/operator-telemetry", OPERATOR, 404),
        ("PUT", "/api/v1/sessions/nosuch/operator-telemetry", {"altitude_m": 0}, 422),
        ("DELETE", "/api/v1/rtmp/streams/nosuch", None, 404),
        ("DELETE", "/api/v1/rtmp/keys/abc123", None, 404),
        ("DELETE", "/api/v1/rtmp/keys/NOT-HEX", None, 422),
        ("POST", "/api/v1/rtsp", {"url": "http://camera/stream"}, 422),
        ("POST", "/api/v1/rtsp", {"url": "rtsp://cam/x", "operator": {**OPERATOR, "camera": "x"}}, 400),
        ("GET", "/internal/rtmp/guess/publish?app=live&name=k", None, 404),
    ],
)
def test_ingest_routes_refuse_bad_requests(
    server: RunningServer, method: str, path: str, body, status: int
) -> None:
    with server.client() as c:
        r = c.request(method, path, json=body)
    assert r.status_code == status, r.text
    assert "error" in r.json()


def test_server_runs_on_without_nginx(server_factory) -> None:
    """No nginx (a wheel install without Debian's packages): RTMP is off and says why; the rest works."""
    srv = server_factory(rtmp_port=free_port(), nginx_path="/nonexistent/nginx")
    health = httpx.get(f"{srv.url}/healthz").json()
    assert health["status"] == "ok"
    assert health["rtmp"].startswith("unavailable: RTMP ingest needs nginx")
    assert "apt-get install nginx-light libnginx-mod-rtmp" in health["rtmp"]


def test_nginx_config_admits_publishers_through_the_server(tmp_path: Path) -> None:
    text = render_config(
        workdir=tmp_path,
        module="/usr/lib/nginx/modules/ngx_rtmp_module.so",
        listen="0.0.0.0:1935",
        control_port=9999,
        publish_url="http://127.0.0.1:8080/internal/rtmp/S/publish",
        publish_done_url="http://127.0.0.1:8080/internal/rtmp/S/publish_done",
        idle_timeout_s=10,
    )
    for line in (
        "load_module /usr/lib/nginx/modules/ngx_rtmp_module.so;",
        "on_publish http://127.0.0.1:8080/internal/rtmp/S/publish;",
        "allow play 127.0.0.1;",
        "deny play all;",
        "listen 127.0.0.1:9999;",
        "drop_idle_publisher 10s;",
    ):
        assert line in text


UNPRIVILEGED_NGINX = """
import sys
from pathlib import Path
from edge_server.rtmp import RtmpServer
rtmp = RtmpServer(Path(sys.argv[1]), host="127.0.0.1", port=int(sys.argv[2]),
                  callback_base="http://127.0.0.1:9/internal/rtmp/S", nginx=sys.argv[3])
rtmp.start()
print("listening", flush=True)
rtmp.stop()
"""


@needs_nginx
def test_nginx_starts_as_an_unprivileged_user() -> None:
    """The container runs the server as its own user: nginx must open no root-only default path
    (the RTMP module's access log defaulted to /var/log/nginx/access.log, found by running the image)."""
    workdir = Path(tempfile.mkdtemp(prefix="airpatrol-rtmp-"))
    try:
        workdir.chmod(0o777)
        argv = [sys.executable, "-c", UNPRIVILEGED_NGINX, str(workdir / "rtmp"), str(free_port()), NGINX]
        if os.geteuid() == 0:  # as root: run it as nobody, as the image runs it as airpatrol
            argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO)
        assert run.returncode == 0 and "listening" in run.stdout, run.stderr[-2000:]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


T = Telemetry(timestamp_s=1.0, altitude_m=80.0, gimbal_pitch_deg=-60.0, latitude=48.1)
OP = Telemetry(
    timestamp_s=0.0, altitude_m=50.0, gimbal_pitch_deg=-90.0, camera="DJI Mini 4 Pro", source="operator"
)


@pytest.mark.parametrize(
    ("flight", "operator", "expected"),
    [
        (T, None, T),
        (None, None, None),
        (None, OP, Telemetry(5.0, 50.0, -90.0, camera="DJI Mini 4 Pro", source="operator")),
        (T, OP, Telemetry(1.0, 80.0, -60.0, latitude=48.1, camera="DJI Mini 4 Pro")),  # flight's scale kept
        (
            Telemetry(1.0, gimbal_pitch_deg=-45.0),
            OP,
            Telemetry(1.0, 50.0, -45.0, camera="DJI Mini 4 Pro", source="operator"),
        ),
    ],
)
def test_operator_values_fill_what_the_flight_lacks(flight, operator, expected) -> None:
    assert with_operator_values(flight, operator, 5.0) == expected


@pytest.mark.parametrize(
    ("env", "argv", "expected"),
    [
        ({}, [], (1935, 1883)),
        ({"AIRPATROL_RTMP_PORT": "null", "AIRPATROL_MQTT_PORT": "1884"}, [], (None, 1884)),
        ({"AIRPATROL_RTMP_PORT": "1936"}, ["--rtmp-port", "off", "--mqtt-port", "off"], (None, None)),
        ({}, ["--rtmp-port", "19350"], (19350, 1883)),
    ],
)
def test_rtmp_and_mqtt_ports_from_env_and_flags(monkeypatch, env: dict, argv: list, expected: tuple) -> None:
    """``airpatrol serve --rtmp-port off`` and ``AIRPATROL_RTMP_PORT=null`` turn the ingest off."""
    import argparse

    from edge_server import cli

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen = {}
    monkeypatch.setattr("edge_server.app.serve", lambda settings, **_: seen.setdefault("s", settings))
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["serve", *argv])
    assert args.func(args) == 0
    assert (seen["s"].rtmp_port, seen["s"].mqtt_port) == expected
