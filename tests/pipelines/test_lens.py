"""The lens and the shutter (pipelines.lens): distortion against OpenCV's own projection, DJI's
DewarpData, the configuration, the ground projector undoing the lens, a measured base drawn on a
distorted frame, and the speed fit taking each position at its row's time."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from pipelines.calibrate import BaseLine, solve_base
from pipelines.camera import get_profile, intrinsics_for, lens_note
from pipelines.config import CameraConfig, ConfigError, PipelineConfig, SpeedConfig
from pipelines.geometry import GroundProjector, apply_homography, ground_to_image_homography
from pipelines.ground import GroundModel
from pipelines.lens import (
    LensError,
    LensModel,
    distort_points,
    lens_from_dewarp_data,
    max_shift_px,
    row_time_offsets,
    undistort_points,
)
from pipelines.speed import SpeedEstimator
from pipelines.types import Frame, Telemetry

INTR = intrinsics_for(get_profile("dji_mavic_3"), 1920, 1080)
K = np.array([[INTR.fx, 0, INTR.cx], [0, INTR.fy, INTR.cy], [0, 0, 1.0]])
# a DJI still's XMP DewarpData (fx, fy, cx, cy offsets in the still's pixels, then k1, k2, p1, p2, k3)
DEWARP = "2022-06-08;3713.29,3713.29,7.02,-10.46,-0.112,0.0148,-0.00018,0.00017,-0.0166"


def _opencv_projection(pinhole: np.ndarray, lens: LensModel) -> np.ndarray:
    """Where OpenCV's camera model images the rays of these pinhole pixels (the independent check)."""
    rays = np.column_stack([(pinhole[:, 0] - INTR.cx) / INTR.fx, (pinhole[:, 1] - INTR.cy) / INTR.fy])
    rays = np.column_stack([rays, np.ones(len(rays))])
    out, _ = cv2.projectPoints(rays, np.zeros(3), np.zeros(3), K, lens.coeffs)
    return out.reshape(-1, 2)


@pytest.mark.parametrize(
    "lens",
    [
        LensModel(k1=-0.1),
        LensModel(k1=0.08, k2=-0.02),
        LensModel(-0.112, 0.0148, -0.00018, 0.00017, -0.0166),
        LensModel(k1=-0.25, k2=0.05, p1=0.002, p2=-0.001),
    ],
)
def test_distortion_is_opencv_s_model_and_undistortion_inverts_it(lens):
    pinhole = np.random.default_rng(0).uniform([0, 0], [1920, 1080], (500, 2))
    seen = distort_points(pinhole, INTR, lens)
    np.testing.assert_allclose(seen, _opencv_projection(pinhole, lens), atol=1e-6)
    np.testing.assert_allclose(undistort_points(seen, INTR, lens), pinhole, atol=1e-4)
    assert max_shift_px(INTR, lens) > 10  # every one of these moves the frame's edge by pixels


def test_no_lens_moves_nothing_and_nan_stays_nan():
    pts = np.array([[100.0, 200.0], [np.nan, 5.0], [1900.0, 1000.0]])
    np.testing.assert_array_equal(undistort_points(pts, INTR, None), pts)
    np.testing.assert_array_equal(distort_points(pts, INTR, LensModel()), pts)
    out = undistort_points(pts, INTR, LensModel(k1=-0.1))
    assert np.isnan(out[1]).all() and np.isfinite(out[[0, 2]]).all()
    assert max_shift_px(INTR, None) == 0.0


def test_row_times_centre_on_the_frame_s_timestamp():
    np.testing.assert_allclose(row_time_offsets([0, 540, 1080], 1080, 0.030), [-0.015, 0.0, 0.015])
    assert not row_time_offsets([0, 1079], 1080, 0.0).any()


def test_dewarp_data_gives_the_coefficients():
    lens = lens_from_dewarp_data(DEWARP)
    assert (lens.k1, lens.k2, lens.p1, lens.p2, lens.k3) == (-0.112, 0.0148, -0.00018, 0.00017, -0.0166)
    assert lens_from_dewarp_data(DEWARP.split(";")[1]).k1 == -0.112  # without the date


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2022-06-08;1,2,3", "3 numbers, expected 9"),
        ("2022-06-08;a,b,c,d,e,f,g,h,i", "not 'date;fx,fy,cx,cy,k1,k2,p1,p2,k3'"),
        ("1,1,0,0,99,0,0,0,0", "k1=99.0 is not a camera's"),
    ],
)
def test_bad_dewarp_data_says_what_is_wrong(text, message):
    with pytest.raises(LensError, match=message):
        lens_from_dewarp_data(text)


@pytest.mark.parametrize(
    ("camera", "message"),
    [
        ({"lens": {"k1": 9}}, "camera.lens.k1"),
        ({"lens": {"k1": -0.1, "dewarp_data": DEWARP}}, "not both"),
        ({"lens": {"dewarp_data": "x;1,2"}}, "expected 9"),
        ({"readout_ms": -3}, "camera.readout_ms"),
        ({"lens": {"k9": 1}}, "k9"),
    ],
)
def test_the_configuration_refuses_a_bad_lens_in_one_line(camera, message):
    with pytest.raises(ConfigError, match=message) as info:
        PipelineConfig.from_dict({"camera": camera})
    assert "\n" not in str(info.value)


def _frame(width=1920, height=1080, **tel) -> Frame:
    base = {"timestamp_s": 0.0, "altitude_m": 60.0, "gimbal_pitch_deg": -60.0, "camera": "dji_mavic_3"}
    return Frame(0, 0.0, np.zeros((height, width, 3), np.uint8), Telemetry(**(base | tel)))


@pytest.mark.parametrize(
    ("camera", "lens", "readout_ms"),
    [
        ({}, None, 0.0),  # DJI publishes neither: not corrected
        ({"lens": {"k1": -0.1, "source": "chart calibration"}, "readout_ms": 28}, "k1=-0.1 (chart", 28.0),
        ({"lens": {"dewarp_data": DEWARP}}, "k1=-0.112", 0.0),
        ({"name": "parrot_bebop_2"}, None, 0.0),  # de-warped in the drone: a pinhole
    ],
)
def test_the_ground_model_measures_with_the_configured_optics(camera, lens, readout_ms):
    model = GroundModel(CameraConfig(**camera))
    proj = model.projector(_frame())
    assert proj is not None and proj.readout_s == pytest.approx(readout_ms / 1e3)
    summary = model.optics_summary()
    assert summary["readout_ms"] == readout_ms
    if lens is None:
        assert proj.lens is None and summary["lens"] is None
    else:
        assert lens in summary["lens"] and proj.lens is not None
    assert summary["profile_note"] == lens_note(model._profile)


def test_profiles_say_where_their_lens_figures_come_from():
    assert "DewarpData" in lens_note(get_profile("dji_mavic_3"))
    assert "de-warped" in lens_note(get_profile("parrot_bebop_2"))


@pytest.mark.parametrize("pitch", [-90.0, -60.0, -35.0])
def test_the_projector_undoes_the_lens_before_the_ground(pitch):
    """Ground points seen through a k1 = -0.1 lens: back on the ground to a millimetre with the lens
    known; without it a point at the frame's edge lands metres off."""
    lens = LensModel(k1=-0.1, k2=0.01)
    h = ground_to_image_homography(INTR, 60.0, pitch)
    truth_px = np.array([[960.0, 540.0], [60.0, 540.0], [1860.0, 1000.0], [300.0, 200.0]])
    ground = apply_homography(np.linalg.inv(h), truth_px)
    seen = _opencv_projection(truth_px, lens)
    with_lens = GroundProjector.create(INTR, 60.0, pitch, lens).to_ground(seen)
    np.testing.assert_allclose(with_lens, ground, atol=1e-3)
    pinhole = GroundProjector.create(INTR, 60.0, pitch).to_ground(seen)
    assert np.linalg.norm(pinhole[1] - ground[1]) > 1.0
    assert np.linalg.norm(pinhole[0] - ground[0]) < 1e-6  # the centre does not move


def test_a_base_drawn_on_a_distorted_frame_solves_with_the_lens():
    lens = LensModel(k1=-0.1)
    h = ground_to_image_homography(INTR, 60.0, -90.0)
    segments = [((-20.0, 8.0), (20.0, 8.0))]  # 40 m across most of the frame's width
    lines = []
    for a, b in segments:
        pa, pb = _opencv_projection(apply_homography(h, np.array([a, b])), lens)
        lines.append(BaseLine(tuple(pa), tuple(pb), math.dist(a, b)))
    assert solve_base(lines, INTR, 68.0, -90.0, lens=lens).height_m == pytest.approx(60.0, rel=1e-3)
    assert solve_base(lines, INTR, 68.0, -90.0).height_m / 60.0 - 1 > 0.01  # barrel: 1.3 % too high


@pytest.mark.parametrize("direction", [+1, -1])  # down the image, up the image
@pytest.mark.parametrize("readout_s", [0.0, 0.030])
def test_the_speed_fit_takes_each_position_at_its_row_s_time(direction, readout_s):
    """A vehicle at 20 m/s down (or up) a nadir image whose rows are read over 30 ms: with each
    position at its row's time the speed is exact; at the frame's time it is off by readout x the
    share of the frame it crosses per second."""
    gsd, fps, v_mps = 0.04, 30.0, 20.0
    cfg = SpeedConfig(window_s=1.0, min_samples=5, min_track_age_s=0.3)
    timed, naive = SpeedEstimator(cfg), SpeedEstimator(cfg)
    row0 = 100.0 if direction > 0 else 980.0
    last_pos = last_t = None
    for k in range(30):
        t_frame = k / fps
        # solve the row where the vehicle is seen: row = row0 + dir * v * t_row / gsd
        t_row = t_frame
        for _ in range(5):
            row = row0 + direction * v_mps * t_row / gsd
            t_row = t_frame + float(row_time_offsets(row, 1080, readout_s))
        pos = np.array([0.0, direction * v_mps * t_row])
        disp = np.full(2, np.nan) if last_pos is None else pos - last_pos
        offset = np.array([t_row - t_frame])
        a = timed.update(t_frame, [1], disp[None], row_times_s=offset)
        b = naive.update(t_frame, [1], disp[None])
        last_pos, last_t = pos, t_row
    assert last_t is not None
    assert a[1].speed_kmh == pytest.approx(72.0, abs=1e-6)
    expected = 1.0 / (1.0 - direction * readout_s * v_mps / gsd / 1080)  # naive / true: down reads high
    assert b[1].speed_kmh / 72.0 == pytest.approx(expected, rel=1e-4)
    if readout_s:
        assert abs(b[1].speed_kmh / 72.0 - 1) > 0.01  # the error the row times take away


def _dji_still(path, xmp_fields: str) -> str:
    """A real JPEG with an XMP packet (APP1) as DJI writes one, ``xmp_fields`` inside its description."""
    ok, jpeg = cv2.imencode(".jpg", np.full((48, 64, 3), 90, np.uint8))
    assert ok
    xmp = (
        '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
        f'<rdf:Description xmlns:drone-dji="http://www.dji.com/drone-dji/1.0/" {xmp_fields}</rdf:Description>'
        "</rdf:RDF></x:xmpmeta>"
    ).encode()
    payload = b"http://ns.adobe.com/xap/1.0/\x00" + xmp
    app1 = b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload
    data = jpeg.tobytes()
    path.write_bytes(data[:2] + app1 + data[2:])
    return str(path)


@pytest.mark.parametrize(
    "fields",
    [
        f'drone-dji:GimbalPitchDegree="-90.0" drone-dji:DewarpData="{DEWARP}">',  # attribute
        f"><drone-dji:DewarpData>{DEWARP}</drone-dji:DewarpData>",  # element
    ],
)
def test_a_dji_still_gives_its_dewarp_data(tmp_path, fields):
    from pipelines.lens import dewarp_data_from_image

    still = _dji_still(tmp_path / "DJI_0001.JPG", fields)
    assert dewarp_data_from_image(still) == DEWARP
    # and through --lens, into the camera's configuration
    from pipelines.cli import lens_arg

    assert lens_arg(still) == {"dewarp_data": DEWARP, "source": "DewarpData of DJI_0001.JPG"}


def test_a_still_without_dewarp_data_is_refused_in_one_line(tmp_path):
    import argparse

    from pipelines.cli import lens_arg

    still = _dji_still(tmp_path / "phone.jpg", 'drone-dji:GimbalPitchDegree="-90.0">')
    with pytest.raises(argparse.ArgumentTypeError, match="has no drone-dji:DewarpData"):
        lens_arg(still)
    with pytest.raises(argparse.ArgumentTypeError, match="cannot read"):
        lens_arg(str(tmp_path / "missing.jpg"))
