"""One recorded flight three ways: offline `airpatrol process`, live over RTMP + DJI Cloud API OSD
(a simulated Pilot 2), and live over WebRTC + the telemetry data channel (the reference phone app).
Prints how many of the offline run's violations each live path matched (start within 0.5 s, same
zone, peak speed within 1 km/h), the server's receive -> result latency, and the RTMP path's transport
delay and clock-alignment error. A benchmark (issue 13's targets), not CI:

    .venv/bin/python eval/examples/dji_paths.py VIDEO --srt SRT --camera dji_mavic_3 [--out DIR]

e.g. the sparse simulated flight of eval/examples/throughput.sh (runs/throughput/v15.mp4 + v15.SRT).
Needs nginx-light + libnginx-mod-rtmp and mosquitto (the server starts them).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx

SN = "1581F5BKD225D00A"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    sys.stderr.write("$ " + " ".join(cmd) + "\n")
    return subprocess.run(cmd, text=True, capture_output=True, check=False, **kw)


def last_json(text: str) -> dict:
    lines = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    return lines[-1] if lines else {}


def match(offline: list[dict], live: list[dict]) -> tuple[int, list[float]]:
    """Offline violations found live: the same zone, a start within 0.5 s and the peak speed within
    1 km/h (the nearest such one, one to one). The violation's box is not compared: it is the box
    at the peak, a frame that differs between runs (keyframe detection live, every frame offline).
    Returns the count and every matched pair's speed difference."""
    used: set[int] = set()
    diffs: list[float] = []
    for v in sorted(offline, key=lambda v: v["start_time_s"]):
        best = None
        for i, w in enumerate(live):
            if i in used or w["zone"] != v["zone"] or abs(w["start_time_s"] - v["start_time_s"]) > 0.5:
                continue
            d = abs(w["peak_speed_kmh"] - v["peak_speed_kmh"])
            if d <= 1.0 and (best is None or d < best[1]):
                best = (i, d)
        if best is not None:
            used.add(best[0])
            diffs.append(best[1])
    return len(diffs), diffs


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("video", type=Path)
    ap.add_argument("--srt", type=Path, required=True)
    ap.add_argument("--camera", required=True)
    ap.add_argument("--out", type=Path, default=Path("runs/dji_paths"))
    ap.add_argument("--osd-hz", type=float, default=0.5)
    ap.add_argument(
        "--every-frame",
        action="store_true",
        help="live streams detect on every frame, as `process` does (default: keyframes, the live default)",
    )
    return ap.parse_args()


def run_offline(ap_cli: list[str], args: argparse.Namespace) -> list[dict] | None:
    """The offline run (`airpatrol process`): its violations, or None where it failed (the tail of
    its stderr shown)."""
    offline_dir = args.out / "offline"
    r = run(
        [
            *ap_cli,
            "process",
            str(args.video),
            "--srt",
            str(args.srt),
            "--camera",
            args.camera,
            "--out",
            str(offline_dir),
            "--no-video",
            "-q",
        ]
    )
    if r.returncode:
        sys.stderr.write(r.stderr[-2000:])
        return None
    return json.loads((offline_dir / "violations.json").read_text())


def start_server(
    ap_cli: list[str],
    args: argparse.Namespace,
    token: str,
    mqtt_password: str,
    ports: tuple[int, int, int],
) -> tuple[subprocess.Popen, IO[str]]:
    """`airpatrol serve` with RTMP and MQTT on 127.0.0.1 (``ports``: HTTP, RTMP, MQTT); the process
    and its log file (closed by the caller)."""
    port, rtmp_port, mqtt_port = ports
    env = {
        **os.environ,
        "AIRPATROL_API_TOKEN": token,
        "AIRPATROL_RTMP_PORT": str(rtmp_port),
        "AIRPATROL_RTMP_HOST": "127.0.0.1",
        "AIRPATROL_MQTT_PORT": str(mqtt_port),
        "AIRPATROL_MQTT_HOST": "127.0.0.1",
        "AIRPATROL_MQTT_PASSWORD": mqtt_password,
        "AIRPATROL_STREAM_IDLE_TIMEOUT_S": "15",
        "AIRPATROL_KEYFRAMES": "false" if args.every_frame else "true",
    }
    data = args.out / "server"
    log = open(args.out / "server.log", "w")  # noqa: SIM115 - closed by the caller
    server = subprocess.Popen(
        [*ap_cli, "serve", "--port", str(port), "--data-dir", str(data), "--ice-host", "127.0.0.1"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return server, log


def wait_for_server(url: str) -> None:
    """Until the server is up with its MQTT broker connected, then its spare pipeline's build time."""
    for _ in range(300):
        try:
            health = httpx.get(f"{url}/healthz", timeout=2).json()
            if health["mqtt"].startswith("connected"):
                break
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        time.sleep(0.3)
    sys.stderr.write(f"server: {health}\n")
    time.sleep(15)  # the spare pipeline (warm_pipeline) is built in the background


def publish_live(
    ap_cli: list[str], args: argparse.Namespace, url: str, token: str, rtmp_url: str, mqtt_url: str
) -> dict[str, dict]:
    """The flight published live twice, one path after the other: RTMP + DJI Cloud API OSD over MQTT,
    then WebRTC + the telemetry data channel. ``{path: {"publisher": its last JSON line}}``."""
    results: dict[str, dict] = {}
    r = run(
        [
            *ap_cli,
            "publish",
            str(args.video),
            "--rtmp",
            rtmp_url,
            "--srt",
            str(args.srt),
            "--mqtt",
            mqtt_url,
            "--device-sn",
            SN,
            "--osd-hz",
            str(args.osd_hz),
            "--passthrough",
        ]
    )
    results["rtmp+mqtt"] = {"publisher": last_json(r.stdout)}
    time.sleep(15)  # the next spare pipeline
    r = run(
        [
            *ap_cli,
            "publish",
            str(args.video),
            "--srt",
            str(args.srt),
            "--camera",
            args.camera,
            "--server",
            url,
            "--token",
            token,
            "--no-return-video",
            "--ice-host",
            "127.0.0.1",
            "--passthrough",
        ]
    )
    results["webrtc+datachannel"] = {"publisher": last_json(r.stdout)}
    return results


def score_sessions(c: httpx.Client, results: dict[str, dict], offline: list[dict]) -> None:
    """Each path's session (in the order they started): the server's numbers and how many offline
    violations it found, into ``results``."""
    sessions = sorted(c.get("/api/v1/sessions").json()["items"], key=lambda s: s["started_at"])
    for name, sess in zip(results, sessions, strict=True):
        detail = c.get(f"/api/v1/sessions/{sess['id']}").json()
        live = c.get("/api/v1/violations", params={"session_id": sess["id"], "limit": 500}).json()["items"]
        matched, diffs = match(offline, live)
        results[name].update(
            session=sess["id"],
            kind=sess["kind"],
            frames_received=sess["frames_received"],
            frames_processed=sess["frames_processed"],
            frames_dropped=sess["frames_dropped"],
            telemetry_received=sess["telemetry_received"],
            latency_p50_ms=sess["latency_p50_ms"],
            latency_p95_ms=sess["latency_p95_ms"],
            violations=len(live),
            matched=matched,
            matched_share=round(matched / len(offline), 3) if offline else None,
            speed_diff_max_kmh=round(max(diffs), 3) if diffs else None,
            clock_sync=detail["info"].get("clock_sync"),
        )


def add_transport_delays(rtmp: dict) -> None:
    """The RTMP path's video and OSD transport delays and their alignment error, from its clock sync."""
    sync, first = rtmp.get("clock_sync") or {}, rtmp["publisher"].get("first_frame_wall")
    if sync.get("video_offset_s") and first:
        # least (receive - media time) = first frame's send time + least send -> receive delay
        rtmp["video_transport_delay_s"] = round(sync["video_offset_s"] - first, 3)
        rtmp["osd_transport_delay_s"] = round(sync["telemetry_offset_s"], 3)
        rtmp["alignment_error_s"] = round(sync["video_offset_s"] - first - sync["telemetry_offset_s"], 3)


def main() -> int:
    args = parse_args()
    ap_cli = [sys.executable, "-m", "airpatrol.cli"]
    args.out.mkdir(parents=True, exist_ok=True)
    offline = run_offline(ap_cli, args)
    if offline is None:
        return 1

    token, mqtt_password = secrets.token_urlsafe(16), secrets.token_urlsafe(12)
    port, rtmp_port, mqtt_port = free_port(), free_port(), free_port()
    server, log = start_server(ap_cli, args, token, mqtt_password, (port, rtmp_port, mqtt_port))
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"}
    try:
        wait_for_server(url)
        c = httpx.Client(base_url=url, headers=headers, timeout=30)
        key = c.post("/api/v1/rtmp/keys", json={"device_sn": SN, "operator": {"camera": args.camera}}).json()
        mqtt_url = f"mqtt://airpatrol:{mqtt_password}@127.0.0.1:{mqtt_port}"
        results = publish_live(ap_cli, args, url, token, key["url"], mqtt_url)
        time.sleep(3)
        score_sessions(c, results, offline)
        add_transport_delays(results["rtmp+mqtt"])
    finally:
        server.terminate()
        server.wait(60)
        log.close()
    report = {
        "video": str(args.video),
        "live_detection": "every frame" if args.every_frame else "keyframes",
        "publishers": "H.264 relayed as is (--passthrough)",
        "offline_violations": len(offline),
        "paths": results,
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    sys.stdout.write(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
