"""Run inside a built image (docker/build-offline.sh mounts it): `airpatrol serve` with its nginx-rtmp
and Mosquitto comes up, serves a guide and the console, takes a simulated DJI Pilot 2 (the demo's flight as RTMP video
with OSD telemetry over MQTT) through the pipeline, and stops cleanly on SIGTERM.

    python check_image.py FLIGHT_VIDEO      (AIRPATROL_PORT, AIRPATROL_RTMP_PORT, AIRPATROL_MQTT_PORT set)

Exit 0 when every step worked; the log says what each gave.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

log = logging.getLogger("check_image")
SN = "1581F5BKD22CHECK"


def wait_until(what: str, predicate, timeout_s: float, server: subprocess.Popen):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"airpatrol serve exited ({server.returncode}) while waiting for {what}")
        try:
            value = predicate()
        except httpx.HTTPError:
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


def check(video: Path, server: subprocess.Popen) -> None:
    data = Path(os.environ.get("AIRPATROL_DATA_DIR", "data"))
    base = f"http://127.0.0.1:{os.environ['AIRPATROL_PORT']}"
    health = wait_until("/healthz", lambda: httpx.get(f"{base}/healthz").json(), 120, server)
    log.info("/healthz: %s", health)
    if not health["rtmp"].startswith("running") or not health["mqtt"].startswith("connected"):
        raise SystemExit("RTMP or MQTT is not up")
    guide = httpx.get(f"{base}/guide/dji-apps")
    if guide.status_code != 200 or "<h1" not in guide.text:
        raise SystemExit(f"no guide: {guide.status_code}")
    log.info("/guide/dji-apps: %d bytes of HTML", len(guide.text))
    for page in ("/console/", "/console/assets/js/main.js", "/console/publish"):
        r = httpx.get(f"{base}{page}")
        if r.status_code != 200 or not r.text:
            raise SystemExit(f"the console's {page} is not served: {r.status_code}")
    log.info("console: /console/, its scripts and /console/publish served from the installed wheel")

    token = (data / "api_token").read_text().strip()
    password = (data / "mqtt_password").read_text().strip()
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as api:
        # the OSD names no camera model: the operator's value for this aircraft (the demo's camera)
        operator = {"camera": "dji_mavic_3"}
        key = api.post(
            "/api/v1/rtmp/keys", json={"name": "image check", "device_sn": SN, "operator": operator}
        )
        key.raise_for_status()
        mqtt_url = f"mqtt://airpatrol:{password}@127.0.0.1:{os.environ['AIRPATROL_MQTT_PORT']}"
        publish = subprocess.run(
            ["airpatrol", "publish", str(video), "--rtmp", key.json()["url"]]
            + ["--mqtt", mqtt_url, "--device-sn", SN, "--osd-hz", "2"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if publish.returncode != 0:
            raise SystemExit(f"publish failed: {publish.stderr[-2000:]}")
        log.info("published: %s", publish.stdout.strip().splitlines()[-1])

        def ended():
            items = api.get("/api/v1/sessions", params={"status": "ended"}).json()["items"]
            return items[0] if items else None

        session = wait_until("the session to end", ended, 60, server)
        violations = api.get("/api/v1/violations", params={"session_id": session["id"]}).json()["items"]
    log.info(
        "session %s: %d frames received, %d processed, %d telemetry, %d violations (%s)",
        session["id"],
        session["frames_received"],
        session["frames_processed"],
        session["telemetry_received"],
        len(violations),
        ", ".join(
            f"{v['peak_speed_kmh']:.1f} km/h at {v['altitude_m']} m ({v['scale_source']})" for v in violations
        ),
    )
    # live streams drop frames when the CPU falls behind (by design): every frame must arrive, a
    # part of them be processed, the telemetry too
    sent = json.loads(publish.stdout.strip().splitlines()[-1])["frames_sent"]
    if (
        session["frames_received"] < sent - 3
        or session["frames_processed"] < 20
        or session["telemetry_received"] < 2
    ):
        raise SystemExit("the stream did not arrive whole, or was not processed with its telemetry")
    if not violations or {v["scale_source"] for v in violations} != {"flight"}:
        raise SystemExit("no violation measured on the OSD's scale (the demo flight has 4 speeders)")


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    server = subprocess.Popen(["airpatrol", "serve"])
    try:
        check(Path(sys.argv[1]), server)
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(60)
        log.info("airpatrol serve stopped (exit %s: uvicorn re-raises the SIGTERM it handled)", code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
