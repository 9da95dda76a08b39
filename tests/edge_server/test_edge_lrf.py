"""The laser rangefinder end to end: a simulated enterprise drone (video over RTMP to the server's
nginx, OSD with measure_target_distance over MQTT to the server's Mosquitto) that took off below
the road; the server measures its speeds with the laser's height above the road, not the altitude
above the take-off point."""

from __future__ import annotations

import subprocess
import sys

import pytest
from edge_helpers import wait_until
from test_edge_dji_cloud import PASSWORD, SN, needs_brokers, start_dji_server
from test_edge_rtmp import make_key, summary

from edge_client.synthetic import BrightBlobDetector, SceneRoadSegmenter

pytestmark = pytest.mark.timeout(180)

BELOW_ROAD_M = 8.0  # the pilot took off 8 m below the road; the synthetic flight is 50 m above it


@needs_brokers
def test_the_laser_measures_above_the_road_when_the_take_off_was_below_it(server_factory) -> None:
    srv, port = start_dji_server(
        server_factory, {"detector_factory": BrightBlobDetector, "segmenter_factory": SceneRoadSegmenter}
    )
    key = make_key(srv, device_sn=SN, operator={"camera": "DJI Mini 4 Pro"})
    cmd = [
        *(sys.executable, "-m", "airpatrol.cli", "publish", "synthetic", "--rtmp", key["url"]),
        *("--mqtt", f"mqtt://airpatrol:{PASSWORD}@127.0.0.1:{port}", "--device-sn", SN),
        *("--max-seconds", "10", "--osd-hz", "2", "--lrf", "--takeoff-below-road", str(BELOW_ROAD_M)),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with srv.client() as c:
        sid = wait_until(lambda: c.get("/api/v1/rtmp/keys").json()[0]["live_session_id"], 30, "stream live")
    code, result, err = summary(proc)
    assert code == 0, err
    with srv.client() as c:
        wait_until(lambda: c.get(f"/api/v1/sessions/{sid}").json()["status"] == "ended", 30, "session ended")
        violations = c.get("/api/v1/violations", params={"session_id": sid}).json()["items"]
        info = c.get(f"/api/v1/sessions/{sid}").json()["info"]
    readings = info["rangefinder"]
    assert result["osd_sent"] >= 18
    # a Mini 4 Pro: no lens or readout published, none configured: nothing corrected, and it says why
    assert info["optics"]["lens"] is None and info["optics"]["readout_ms"] == 0.0
    assert "not published" in info["optics"]["profile_note"]
    # the session says what the laser gave: readings used, the others refused with the reason
    assert readings["used"] >= 3 and readings["status"].startswith("laser rangefinder:"), readings
    assert set(readings["refused"]) <= {"a vehicle is under the laser's point"}, readings
    lrf = [v for v in violations if v["scale_source"] == "lrf"]
    assert lrf, [(v["scale_source"], v["altitude_m"]) for v in violations]
    for v in lrf:
        scale = v["scale"]
        assert scale["height_above_road_m"] == pytest.approx(50.0, abs=0.3)
        assert scale["reference"]["source"] == "lrf" and "laser rangefinder" in scale["reference"]["detail"]
        assert scale["reference"]["takeoff_above_road_m"] == pytest.approx(-BELOW_ROAD_M, abs=0.3)
    # a car whose measuring base began before the third reading (the altitude over unknown ground)
    # and ended after it is not enforceable: its scale changed; every later one is
    assert any(v["status"] == "enforceable" for v in lrf)
    # and none for its scale's uncertainty: a laser-measured car that is not enforceable either
    # began on the other scale (or the laser's provisional one, before its third reading), was measured
    # on the provisional one, or was still short of a measuring base when the stream ended
    for v in violations:
        if v["status"] != "enforceable":
            changed = v["status_reason"] == "the height reference changed during the measuring base"
            provisional = v["status_reason"].startswith("a provisional laser reference")
            cut_short = v["status_reason"].startswith("measuring base too short")
            assert changed or provisional or cut_short or v["scale_source"] == "flight", (
                v["status_reason"],
                v["scale"],
            )
