"""A live stream's height above the road (GET/PUT/DELETE /api/v1/sessions/{id}/height-reference)
against a real server and a real WebRTC stream (`airpatrol publish synthetic`: the drone reads 50 m,
nadir, DJI Mini 4 Pro; a fast lane at ~73 km/h at that height), the road mask a site polygon over
both lanes.

A measured base drawn as the projection of known ground segments through a camera 45 m above the
road (the take-off point 5 m below it) solves to 45 m; the stream measures with it from its next
frame: its frames' scale and its violations' (``scale.source == "measured_base"``, the speeds 10 %
lower, who set it). Every bad request is refused with one line and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import numpy as np
import pytest
from edge_helpers import RunningServer, start_server, synthetic_stream, wait_until

from edge_client import synthetic
from pipelines.camera import get_profile, intrinsics_for, real_focal_from_35mm
from pipelines.geometry import apply_homography, ground_to_image_homography, image_to_ground_homography

pytestmark = pytest.mark.timeout(240)

STREAM_S = 150.0  # the one stream all tests of the module use
ROAD = "road:\n  polygon: [[0, 90], [640, 90], [640, 270], [0, 270]]\n  polygon_mode: override\n"
TRUE_HEIGHT_M = 45.0  # the camera above the road; the drone reads 50 m above its take-off point
OFFICER = "officer 12"


@dataclass
class Live:
    server: RunningServer
    session_id: str
    client: httpx.Client

    @property
    def path(self) -> str:
        return f"/api/v1/sessions/{self.session_id}/height-reference"

    def state(self) -> dict:
        r = self.client.get(self.path)
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    folder = tmp_path_factory.mktemp("height")
    (folder / "site.yaml").write_text(ROAD)
    srv = start_server(folder, pipeline_config=folder / "site.yaml")
    try:
        with synthetic_stream(srv, seconds=STREAM_S) as sid, srv.client() as c:
            live = Live(srv, sid, c)
            wait_until(lambda: c.get(live.path).json().get("scale"), 60, "a processed frame with a scale")
            yield live
    finally:
        srv.stop()


def base_lines(height_m: float = TRUE_HEIGHT_M) -> list[dict]:
    """Two 12 m stretches of road, one along the fast lane and one across both lanes, drawn where a
    nadir camera ``height_m`` above the road sees them (the synthetic stream's camera)."""
    profile = get_profile(synthetic.DEFAULT_CAMERA)
    intr = intrinsics_for(profile, 640, 360, real_focal_from_35mm(synthetic.DEFAULT_FOCAL_35MM, profile))
    to_image = ground_to_image_homography(intr, height_m, synthetic.DEFAULT_PITCH_DEG)
    to_ground = image_to_ground_homography(intr, height_m, synthetic.DEFAULT_PITCH_DEG)
    lines = []
    for start_px, step_m in (((60.0, 119.0), (12.0, 0.0)), ((400.0, 100.0), (0.0, -12.0))):
        start = apply_homography(to_ground, np.array([start_px]))[0]
        ends = apply_homography(to_image, np.array([start, start + np.array(step_m)]))
        lines.append({"p1": ends[0].tolist(), "p2": ends[1].tolist(), "length_m": float(np.hypot(*step_m))})
    return lines


def test_a_measured_base_sets_the_height_above_the_road(live: Live) -> None:
    c = live.client
    before = live.state()  # the drone's altitude over unknown ground
    assert (before["origin"], before["reference"], before["solution"]) == ("none", None, None)
    assert before["scale"]["source"] == "flight" and before["scale"]["height_above_road_m"] == 50.0
    assert before["frame"]["width"] == 640 and before["frame"]["altitude_m"] == 50.0

    lines = base_lines()
    r = c.put(live.path, json={"lines": lines, "set_by": OFFICER})
    assert r.status_code == 200, r.text
    state = r.json()
    solution, reference = state["solution"], state["reference"]
    assert state["origin"] == "session" and reference["source"] == "measured_base"
    assert solution["height_above_road_m"] == pytest.approx(TRUE_HEIGHT_M, abs=0.02)
    assert solution["takeoff_above_road_m"] == pytest.approx(-5.0, abs=0.02)
    assert reference["takeoff_above_road_m"] == solution["takeoff_above_road_m"]
    assert 0 < solution["height_sigma_m"] < 1.0 and solution["residuals_m"] == pytest.approx([0, 0], abs=0.01)
    assert solution["altitude_reading_m"] == 50.0 and solution["pitch_reading_deg"] == -90.0
    assert solution["road_share"] == [1.0, 1.0]
    assert solution["frame_time_s"] == pytest.approx(reference["at_time_s"], abs=1e-3)
    assert reference["set_by"] == OFFICER and reference["set_at"].endswith("+00:00")
    assert c.get(live.path).json()["reference"] == reference  # in effect from the next frame

    # the stream's frames, then its violations, measured with it
    scale = wait_until(
        lambda: (s := live.state()["scale"])["source"] == "measured_base" and s, 20, "the new scale"
    )
    assert scale["height_above_road_m"] == pytest.approx(TRUE_HEIGHT_M, abs=0.05)
    assert scale["reference"]["set_by"] == OFFICER

    def measured() -> list[dict]:
        items = c.get("/api/v1/violations", params={"session_id": live.session_id}).json()["items"]
        return [v for v in items if v["scale_source"] == "measured_base"]

    v = wait_until(measured, 60, "a violation measured with the base")[0]
    assert v["height_above_road_m"] == pytest.approx(TRUE_HEIGHT_M, abs=0.05)
    assert v["scale"]["source"] == "measured_base" and v["scale"]["reference"]["set_by"] == OFFICER
    assert 0 < v["height_sigma_m"] < 1.0 and v["scale_sigma_pct"] > 0
    assert 60 < v["ticket_speed_kmh"] < 70  # the fast lane's ~73 km/h at 50 m, times 45/50
    rows = c.get("/api/v1/violations.csv", params={"session_id": live.session_id}).text.splitlines()
    assert any(OFFICER in row and "measured_base" in row for row in rows[1:])

    info = c.get(f"/api/v1/sessions/{live.session_id}").json()["info"]
    assert info["height_reference"]["origin"] == "session"
    assert info["height_reference"]["solution"]["height_above_road_m"] == solution["height_above_road_m"]
    assert [e["action"] for e in info["height_reference_log"]] == ["set"]


def test_a_site_value_and_back_to_the_configuration(live: Live) -> None:
    c = live.client
    r = c.put(live.path, json={"takeoff_above_road_m": -8.0, "sigma_m": 1.5, "set_by": "officer 7"})
    assert r.status_code == 200, r.text
    reference = r.json()["reference"]
    assert (reference["source"], reference["takeoff_above_road_m"], reference["sigma_m"]) == (
        "site",
        -8.0,
        1.5,
    )
    assert r.json()["solution"] is None and reference["at_time_s"] is None  # from take-off
    scale = wait_until(lambda: (s := live.state()["scale"])["source"] == "site" and s, 20, "the site value")
    assert scale["height_above_road_m"] == pytest.approx(42.0, abs=0.01)  # 50 m read, 8 m below take-off
    # no sigma given: the configuration's (camera.takeoff_above_road_sigma_m)
    r = c.put(live.path, json={"takeoff_above_road_m": 2.5, "set_by": "officer 7"})
    assert r.status_code == 200 and r.json()["reference"]["sigma_m"] == 0.5, r.text

    r = c.delete(live.path)
    assert r.status_code == 200 and (r.json()["origin"], r.json()["reference"]) == ("none", None), r.text
    wait_until(lambda: live.state()["scale"]["source"] == "flight", 20, "the drone's altitude again")
    log = c.get(f"/api/v1/sessions/{live.session_id}").json()["info"]["height_reference_log"]
    assert [e["action"] for e in log][-3:] == ["set", "set", "cleared"]


ON_ROAD = {"p1": [60.0, 119.0], "p2": [178.2, 119.0], "length_m": 12.0}
OFF_ROAD = {"p1": [60.0, 20.0], "p2": [178.2, 20.0], "length_m": 12.0}


def _line(**changes) -> dict:
    return {**ON_ROAD, **changes}


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"lines": [], "set_by": OFFICER}, 400, "at least one line"),
        ({"lines": [_line(p2=[60.0, 119.0])], "set_by": OFFICER}, 400, "px long"),
        ({"lines": [_line(length_m=5000.0)], "set_by": OFFICER}, 400, "out of range"),
        ({"lines": [_line(length_m=0.1)], "set_by": OFFICER}, 400, "out of range"),
        ({"lines": [_line(p2=[700.0, 119.0])], "set_by": OFFICER}, 400, "outside the 640x360 frame"),
        ({"lines": [OFF_ROAD], "set_by": OFFICER}, 400, "line 1 is off the road"),
        ({"lines": [ON_ROAD, OFF_ROAD], "set_by": OFFICER}, 400, "line 2 is off the road"),
        ({"lines": [_line(length_m=100.0)], "set_by": OFFICER}, 400, "but the drone reads 50.0 m"),
        ({"lines": [_line(length_sigma_m=7.0)], "set_by": OFFICER}, 400, "length sigma"),
        ({"lines": [ON_ROAD] * 21, "set_by": OFFICER}, 422, "lines"),
        ({"lines": [ON_ROAD], "takeoff_above_road_m": 1.0, "set_by": OFFICER}, 422, "either"),
        ({"set_by": OFFICER}, 422, "either"),
        ({"lines": [ON_ROAD], "sigma_m": 0.5, "set_by": OFFICER}, 422, "sigma_m goes with"),
        ({"lines": [ON_ROAD]}, 422, "set_by"),
        ({"lines": [ON_ROAD], "set_by": ""}, 422, "set_by"),
        ({"lines": [ON_ROAD], "set_by": "   "}, 422, "set_by"),
        ({"lines": [ON_ROAD], "set_by": "x" * 81}, 422, "set_by"),
        ({"takeoff_above_road_m": 600.0, "set_by": OFFICER}, 422, "takeoff_above_road_m"),
        ({"takeoff_above_road_m": 1.0, "sigma_m": 0, "set_by": OFFICER}, 422, "sigma_m"),
        ({"lines": [_line(p1=[1.0, 2.0, 3.0])], "set_by": OFFICER}, 422, "p1"),
        ({"lines": [_line(length_m="12")], "set_by": OFFICER}, 422, "length_m"),  # a JSON number
        ({"lines": [_line(width=3)], "set_by": OFFICER}, 422, "width"),
        # an operator sets a site value or a measured base, never the engine's laser rangefinder one
        ({"takeoff_above_road_m": 1.0, "source": "lrf", "set_by": OFFICER}, 422, "source"),
    ],
)
def test_bad_input_changes_nothing(live: Live, body: dict, status: int, needle: str) -> None:
    before = live.state()
    r = live.client.put(live.path, json=body)
    assert r.status_code == status and needle in str(r.json()["detail"]), r.text
    if status == 400:
        assert "\n" not in r.json()["detail"] and r.json()["error"] in ("invalid_base", "off_the_road")
    after = live.state()
    assert (after["origin"], after["reference"], after["solution"]) == (
        before["origin"],
        before["reference"],
        before["solution"],
    )


def test_numbers_that_are_not_numbers_are_refused(live: Live) -> None:
    for raw in (
        b'{"lines": [{"p1": [1, 2], "p2": [30, 2], "length_m": NaN}], "set_by": "x"}',
        b'{"lines": [{"p1": [1, Infinity], "p2": [30, 2], "length_m": 3}], "set_by": "x"}',
        b'{"takeoff_above_road_m": NaN, "set_by": "x"}',
    ):
        r = live.client.put(live.path, content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 422, r.text


def test_only_a_live_stream_has_one(live: Live) -> None:
    store = live.server.store
    store.create_session("gone", "webrtc")
    store.end_session("gone", "ended", "ended by client")
    body = {"takeoff_above_road_m": 1.0, "set_by": OFFICER}
    c = live.client
    for method in ("GET", "PUT", "DELETE"):
        unknown = c.request(method, "/api/v1/sessions/nope/height-reference", json=body)
        assert unknown.status_code == 404 and unknown.json()["detail"] == "no active stream nope"
        ended = c.request(method, "/api/v1/sessions/gone/height-reference", json=body)
        assert ended.status_code == 404 and "session gone has ended" in ended.json()["detail"], ended.text
        anonymous = httpx.request(method, f"{live.server.url}{live.path}", json=body)
        assert anonymous.status_code == 401


def test_a_base_drawn_on_a_frozen_frame_is_solved_on_that_frame(live: Live) -> None:
    """The console freezes the stream's latest frame (POST .../frames), shows its image, and the
    officer's lines are solved on that very frame (PUT with its frame_index), however many frames
    the stream has processed since: its time and altitude reading, not the latest's."""
    import cv2

    c = live.client
    r = c.post(f"{live.path}/frames")
    assert r.status_code == 201, r.text
    still = r.json()
    assert (still["width"], still["height"], still["altitude_m"]) == (640, 360, 50.0)
    assert still["image"] == f"{live.path}/frames/{still['frame_index']}"
    image = c.get(still["image"])
    assert image.status_code == 200 and image.headers["content-type"] == "image/jpeg"
    pixels = cv2.imdecode(np.frombuffer(image.content, np.uint8), cv2.IMREAD_COLOR)
    assert pixels.shape == (360, 640, 3)
    wait_until(lambda: live.state()["frame"]["time_s"] > still["time_s"] + 1.0, 20, "a later frame")
    r = c.put(live.path, json={"lines": base_lines(), "frame_index": still["frame_index"], "set_by": OFFICER})
    assert r.status_code == 200, r.text
    solution, reference = r.json()["solution"], r.json()["reference"]
    assert (solution["frame_index"], solution["frame_time_s"]) == (still["frame_index"], still["time_s"])
    assert reference["at_time_s"] == pytest.approx(still["time_s"], abs=1e-3)
    assert solution["height_above_road_m"] == pytest.approx(TRUE_HEIGHT_M, abs=0.02)
    # a frame not kept, or a frame without lines: refused, nothing changed
    before = live.state()
    gone = c.put(live.path, json={"lines": base_lines(), "frame_index": 10**12, "set_by": OFFICER})
    assert gone.status_code == 409 and gone.json()["error"] == "frame_gone", gone.text
    assert "freeze the video again" in gone.json()["detail"]
    alone = c.put(live.path, json={"takeoff_above_road_m": 1.0, "frame_index": 3, "set_by": OFFICER})
    assert alone.status_code == 422 and "frame_index goes with lines" in alone.text
    assert c.get(f"{live.path}/frames/{10**12}").status_code == 409
    assert live.state()["reference"] == before["reference"]
