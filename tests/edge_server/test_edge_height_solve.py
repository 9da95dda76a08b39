"""The server's side of a measured base and a session's height reference, without a server
(edge_server.height_reference): what the latest frame must have (a frame, an altitude reading, a
pitch the ground model can measure on), each line on the road mask, the reading and pitch the
solve gets (before any reference), and how the worker takes a change at its next frame."""

from __future__ import annotations

import numpy as np
import pytest

from edge_server.height_reference import (
    HeightReferenceError,
    LatestFrame,
    SessionHeight,
    measure_base,
    road_shares,
    site_reference,
)
from pipelines.calibrate import BaseLine
from pipelines.camera import get_profile, intrinsics_for
from pipelines.config import CameraConfig
from pipelines.geometry import GroundProjector
from pipelines.height import HeightReference, ScaleInfo
from pipelines.types import Frame, Telemetry

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

CAMERA = "DJI Mini 4 Pro"
W, H = 640, 360


def latest(telemetry: Telemetry | None, mask: np.ndarray | None = None, t: float = 12.5) -> LatestFrame:
    frame = Frame(index=300, timestamp_s=t, image=np.zeros((H, W, 3), np.uint8), telemetry=telemetry)
    scale = ScaleInfo("flight", 60.0, 5.0, -60.0, 1.0)
    return LatestFrame(frame, mask, scale)


def reading(altitude: float | None = 60.0, pitch: float | None = -60.0) -> Telemetry:
    return Telemetry(12.5, altitude_m=altitude, gimbal_pitch_deg=pitch, camera=CAMERA)


def line_of(length_at: float, p1=(200.0, 250.0), p2=(440.0, 250.0), height: float = 55.0) -> BaseLine:
    """A line whose typed length is its ground length seen from ``height`` m at -60 deg."""
    proj = GroundProjector.create(intrinsics_for(get_profile(CAMERA), W, H), height, -60.0)
    g = proj.to_ground(np.array([p1, p2]))
    return BaseLine(p1, p2, float(np.linalg.norm(g[1] - g[0])) if length_at is None else length_at)


def test_the_solve_gets_the_raw_reading_and_pitch() -> None:
    """A reference already in the configuration (a pitch bias, a take-off height) is not applied to
    the reading the new base is solved against: the drone's 60 m and -60 deg as reported."""
    camera = CameraConfig(
        height_reference={"takeoff_above_road_m": 3.0, "sigma_m": 0.5, "pitch_bias_deg": 2.0}
    )
    solution, reference, shown = measure_base(
        latest(reading()), camera, [line_of(None)], "officer 3", "2026-12-04T10:00:00+00:00"
    )
    assert (solution.altitude_reading_m, solution.pitch_reading_deg) == (60.0, -60.0)
    assert solution.height_m == pytest.approx(55.0, abs=0.01)
    assert reference.takeoff_above_road_m == pytest.approx(-5.0, abs=0.01)
    assert (reference.source, reference.at_time_s, reference.set_by) == ("measured_base", 12.5, "officer 3")
    assert shown["road_share"] is None and shown["frame_time_s"] == 12.5  # no road mask: not checked


@pytest.mark.parametrize(
    ("frame", "camera", "status", "code", "needle"),
    [
        (None, CameraConfig(), 409, "no_frame", "no frame of this stream processed yet"),
        (latest(None), CameraConfig(), 409, "no_altitude", "no altitude reading"),
        (latest(reading(altitude=None)), CameraConfig(), 409, "no_altitude", "no altitude reading"),
        (latest(reading(pitch=-5.0)), CameraConfig(), 409, "no_scale", "-5.0 deg too shallow"),
        (
            latest(Telemetry(1.0, altitude_m=60.0, gimbal_pitch_deg=-60.0)),
            CameraConfig(),
            409,
            "no_scale",
            "no camera profile",
        ),
        (latest(reading()), CameraConfig(), 400, "invalid_base", "out of range"),
    ],
)
def test_what_the_latest_frame_must_have(frame, camera, status, code, needle) -> None:
    length = 5000.0 if frame is not None and frame.frame.telemetry is not None else None
    with pytest.raises(HeightReferenceError) as caught:
        measure_base(frame, camera, [line_of(length)], "x", "")
    assert (caught.value.status, caught.value.code) == (status, code)
    assert needle in caught.value.message and "\n" not in caught.value.message


def test_a_configured_altitude_is_a_reading_without_telemetry() -> None:
    solution, _, _ = measure_base(
        latest(Telemetry(1.0, camera=CAMERA)),
        CameraConfig(altitude_m=60.0, pitch_deg=-60.0),
        [line_of(None)],
        "x",
        "",
    )
    assert solution.altitude_reading_m == 60.0 and solution.height_m == pytest.approx(55.0, abs=0.01)


@pytest.mark.parametrize(
    ("rows", "shares", "refused"),
    [
        ((200, 300), [1.0, 1.0], None),
        ((0, 50), None, "line 1 is off the road: 0% of it on the road mask"),
        ((240, 300), None, "line 2 is off the road"),  # the first at row 250 is on it
    ],
)
def test_each_line_on_the_road_mask(rows: tuple[int, int], shares, refused) -> None:
    """The mask may be another size than the frame (scaled); a line outside the frame is the solve's."""
    mask = np.zeros((H // 2, W // 2), bool)
    mask[rows[0] // 2 : rows[1] // 2, :] = True
    lines = [BaseLine((10.0, 250.0), (300.0, 250.0), 10.0), BaseLine((10.0, 220.0), (300.0, 220.0), 10.0)]
    if refused is None:
        assert road_shares(latest(reading(), mask), lines) == shares
        outside = [BaseLine((10.0, 250.0), (900.0, 250.0), 10.0)]
        assert road_shares(latest(reading(), mask), outside) == [0.0]
        return
    with pytest.raises(HeightReferenceError, match=refused) as caught:
        road_shares(latest(reading(), mask), lines)
    assert (caught.value.status, caught.value.code) == (400, "off_the_road")


def test_a_site_value_and_its_sigma() -> None:
    ref = site_reference(-8.0, None, "officer 12", CameraConfig(takeoff_above_road_sigma_m=0.8), "T")
    assert (ref.source, ref.takeoff_above_road_m, ref.sigma_m, ref.set_at) == ("site", -8.0, 0.8, "T")
    assert "-8.00 +- 0.80 m" in ref.detail
    with pytest.raises(HeightReferenceError, match="within"):
        site_reference(900.0, 1.0, "x", CameraConfig(), "T")


def test_the_worker_takes_a_change_once_and_the_state_says_where_it_comes_from() -> None:
    configured = CameraConfig(takeoff_above_road_m=1.5)
    height = SessionHeight("s1", configured)
    assert height.take_pending() == (False, None)
    assert height.state()["origin"] == "configuration" and height.state()["frame"] is None
    own = HeightReference("site", -3.0, 0.5, set_by="a", set_at="2026-12-04T10:00:00+00:00")
    height.set(own)
    assert height.state()["reference"] == own.to_dict() and height.state()["origin"] == "session"
    assert height.take_pending() == (True, own) and height.take_pending() == (False, None)
    height.set(None)  # back to the configuration's: the worker is told None
    assert height.take_pending() == (True, None)
    assert height.reference.takeoff_above_road_m == 1.5 and height.state()["origin"] == "configuration"
    info = height.info()
    assert [e["action"] for e in info["height_reference_log"]] == ["set", "cleared"]
    assert info["height_reference"]["origin"] == "configuration"
    assert SessionHeight("s2", CameraConfig()).state()["origin"] == "none"
    height.latest = latest(reading())
    state = height.state()
    assert state["frame"] == {
        "time_s": 12.5,
        "width": W,
        "height": H,
        "altitude_m": 60.0,
        "gimbal_pitch_deg": -60.0,
    }
    assert state["scale"]["source"] == "flight"


def _at(index: int, t: float, altitude: float) -> LatestFrame:
    frame = Frame(
        index=index, timestamp_s=t, image=np.zeros((H, W, 3), np.uint8), telemetry=reading(altitude)
    )
    return LatestFrame(frame, None, ScaleInfo("flight", altitude, 5.0, -60.0, 1.0))


def test_a_base_is_solved_on_the_frame_drawn_on_however_the_drone_moved_since() -> None:
    """The officer freezes frame 300 (the drone reads 60 m), draws for half a minute while the drone
    climbs to 70 m: the base is solved on frame 300's reading and time, not on the latest frame's
    (which would take the take-off point for 15 m below the road instead of 5: at 70 m every speed
    15 % low)."""
    height = SessionHeight("s1", CameraConfig())
    with pytest.raises(HeightReferenceError) as nothing:
        height.freeze()
    assert (nothing.value.status, nothing.value.code) == (409, "no_frame")
    height.latest = _at(300, 10.0, 60.0)
    still = height.freeze()
    assert still.to_dict()["frame_index"] == 300 and still.to_dict()["altitude_m"] == 60.0
    assert height.freeze() is still  # the same frame frozen again
    height.latest = _at(1200, 40.0, 70.0)  # the drone climbed while the lines were drawn
    lines = [line_of(None)]  # drawn on frame 300: its length as seen from 55 m above the road
    solution, reference, shown = measure_base(height.frame_for(300), height.camera, lines, "a", "T")
    assert (solution.altitude_reading_m, reference.at_time_s, shown["frame_index"]) == (60.0, 10.0, 300)
    assert solution.height_m == pytest.approx(55.0, abs=0.01)
    assert reference.takeoff_above_road_m == pytest.approx(-5.0, abs=0.01)
    wrong, wrong_reference, shown = measure_base(height.frame_for(None), height.camera, lines, "a", "T")
    assert (wrong.altitude_reading_m, shown["frame_index"]) == (70.0, 1200)  # as before: the latest
    assert wrong_reference.takeoff_above_road_m == pytest.approx(-15.0, abs=0.01)


def test_a_stream_keeps_its_last_frozen_frames_and_lets_them_go_at_its_end() -> None:
    height = SessionHeight("s1", CameraConfig())
    for index in range(4):
        height.latest = _at(index * 30, index, 60.0)
        height.freeze()
    with pytest.raises(HeightReferenceError) as gone:
        height.frame_for(0)  # the oldest of four: not kept
    assert (gone.value.status, gone.value.code) == (409, "frame_gone")
    assert "keeps the last 3 frames frozen: 30, 60, 90" in gone.value.message
    assert height.frame_for(30).frame.index == 30
    height.release()  # the stream ended: its images and masks let go
    assert height.latest is None
    with pytest.raises(HeightReferenceError, match="frozen: none"):
        height.still(90)
