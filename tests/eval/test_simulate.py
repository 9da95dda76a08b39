"""The flight simulator: outputs, exact ground truth, determinism, spec validation."""

from __future__ import annotations

import csv
import json

import av
import cv2
import numpy as np
import pytest
from shared_material import shared_path

from eval.groundtruth import load_camera_truth
from eval.simulate import (
    SIM_CLASS_IDS,
    FlightSpec,
    Scene,
    SimulationError,
    kinematics,
    load_sprite_crops,
    simulate_flight,
)
from pipelines.geometry import apply_homography
from pipelines.telemetry import load_telemetry


def _tiny(**changes) -> FlightSpec:
    base = dict(seed=3, duration_s=1.0, fps=10.0, width=320, height=192, n_vehicles=6, mask_every=5)
    base.update(changes)
    return FlightSpec(**base)


def _read_gt(path) -> np.ndarray:
    return np.loadtxt(path, delimiter=",", ndmin=2)


def test_outputs_are_complete_and_consistent(small_flight):
    f = small_flight
    for p in (f.video, f.srt, f.gt, f.speeds, f.violations, f.vehicles, f.seqinfo, f.spec_path):
        assert p.is_file() and p.stat().st_size > 0, p
    with av.open(str(f.video)) as c:
        stream = c.streams.video[0]
        frames = list(c.decode(stream))
    assert len(frames) == f.n_frames
    assert (frames[0].width, frames[0].height) == (f.width, f.height)
    times = [float(fr.pts * fr.time_base) for fr in frames]
    assert np.allclose(np.diff(times), 1 / f.fps, atol=1e-4)  # constant frame rate

    gt = _read_gt(f.gt)
    assert gt.shape[1] == 9
    assert gt[:, 0].min() == 1 and gt[:, 0].max() <= f.n_frames  # 1-based frames
    assert set(gt[:, 7].astype(int)) <= set(SIM_CLASS_IDS.values())
    assert ((gt[:, 8] > 0) & (gt[:, 8] <= 1)).all()
    with f.speeds.open() as fh:
        speeds = list(csv.DictReader(fh))
    assert len(speeds) == len(gt)  # one speed row per box
    assert {(int(r["frame"]), int(r["id"])) for r in speeds} == {(int(a), int(b)) for a, b in gt[:, :2]}

    masks = sorted(f.road_mask_dir.glob("*.png"))
    assert [m.stem for m in masks] == [f"{k:06d}" for k in range(0, f.n_frames, f.spec.mask_every)]
    mask0 = cv2.imread(str(masks[0]), cv2.IMREAD_GRAYSCALE)
    assert mask0.shape == (f.height, f.width) and set(np.unique(mask0)) <= {0, 255}
    # every fully visible vehicle of frame 1 stands on the road
    for row in gt[(gt[:, 0] == 1) & (gt[:, 8] >= 0.99)]:
        cx, cy = int(row[2] + row[4] / 2), int(row[3] + row[5] / 2)
        assert mask0[cy, cx] == 255

    tel = load_telemetry(f.srt, camera=f.spec.camera)
    sample = tel.at(1.0)
    assert sample.altitude_m == pytest.approx(f.spec.altitude_m)
    assert sample.gimbal_pitch_deg == pytest.approx(f.spec.pitch_deg)
    assert sample.focal_length_mm == pytest.approx(f.intrinsics.fx * 17.3 / f.width, rel=1e-3)
    assert FlightSpec.from_yaml(f.spec_path) == f.spec


def test_ground_truth_is_exact(small_flight):
    """Box centres are the projected vehicle centres (nadir), speeds match the ground displacement."""
    spec = small_flight.spec
    scene = Scene(spec)
    gt = _read_gt(small_flight.gt)
    with small_flight.speeds.open() as fh:
        rows = list(csv.DictReader(fh))
    by_key = {(int(r["frame"]), int(r["id"])): r for r in rows}
    for frame, vid, x, y, w, h, _, _, vis in gt:
        if vis < 0.999:
            continue
        r = by_key[(int(frame), int(vid))]
        ground = np.array([[float(r["ground_x_m"]), float(r["ground_y_m"])]])
        uv = apply_homography(scene.world_to_image(int(frame) - 1), ground)[0]
        assert uv == pytest.approx([x + w / 2, y + h / 2], abs=0.02)  # gt written with 2 decimals
    # speed = ground displacement / dt (constant acceleration: central differences are exact)
    for vid in {int(r["id"]) for r in rows}:
        track = sorted((int(r["frame"]), r) for r in rows if int(r["id"]) == vid)
        for (f0, a), (_f1, b), (f2, c) in zip(track, track[1:], track[2:], strict=False):
            if f2 - f0 != 2:
                continue
            d = np.hypot(
                float(c["ground_x_m"]) - float(a["ground_x_m"]),
                float(c["ground_y_m"]) - float(a["ground_y_m"]),
            )
            dt = float(c["time_s"]) - float(a["time_s"])
            assert d / dt * 3.6 == pytest.approx(float(b["speed_kmh"]), abs=0.3)  # curvature / clamp knee


def test_camera_truth_file_is_exact(small_flight):
    """gt/camera.csv holds each frame's world -> image homography: it projects the true vehicle
    positions onto their box centres and moves the image centre's ground point with the drone."""
    f = small_flight
    cam = load_camera_truth(f.camera)
    assert f.camera == f.out_dir / "gt" / "camera.csv"
    assert list(cam.frames) == list(range(1, f.n_frames + 1))  # 1-based, as the MOT files
    scene = Scene(f.spec)
    for k in (0, f.n_frames // 2, f.n_frames - 1):
        h = scene.world_to_image(k)
        assert np.allclose(cam.at(k + 1), h / h[2, 2], rtol=1e-12, atol=1e-12)
    gt = _read_gt(f.gt)
    with f.speeds.open() as fh:
        rows = {(int(r["frame"]), int(r["id"])): r for r in csv.DictReader(fh)}
    for frame, vid, x, y, w, h, *_ in gt[gt[:, 8] >= 0.999][::7]:
        r = rows[(int(frame), int(vid))]
        uv = apply_homography(
            cam.at(int(frame)), np.array([[float(r["ground_x_m"]), float(r["ground_y_m"])]])
        )
        assert uv[0] == pytest.approx([x + w / 2, y + h / 2], abs=0.02)
    # the ground point under the image centre moves with the drone's drift
    centre = np.array([[f.width / 2, f.height / 2]])
    g0 = apply_homography(np.linalg.inv(cam.at(1)), centre)[0]
    g1 = apply_homography(np.linalg.inv(cam.at(f.n_frames)), centre)[0]
    assert g1 - g0 == pytest.approx(np.array(f.spec.drift_mps) * (f.n_frames - 1) / f.fps, abs=1e-6)


def test_ground_truth_violations(small_flight):
    data = json.loads(small_flight.violations.read_text())
    vehicles = {v["id"]: v for v in json.loads(small_flight.vehicles.read_text())}
    assert data["speed_limit_kmh"] == small_flight.spec.speed_limit_kmh
    for v in data["violations"]:
        assert vehicles[v["id"]]["speeding"]
        assert v["peak_speed_kmh"] > data["speed_limit_kmh"]
        assert v["duration_s"] >= data["min_duration_s"]
    # the speed bands never cross the limit, so every speeding vehicle that is seen long enough violates
    assert {v["id"] for v in data["violations"]} <= {i for i, v in vehicles.items() if v["speeding"]}


@pytest.mark.parametrize(
    ("layout", "pitch", "altitude", "yaw_rate"),
    [
        ("straight", -90.0, 60.0, 0.0),
        ("curved", -60.0, 140.0, 3.0),
        ("intersection", -75.0, 100.0, -2.0),
    ],
)
def test_layouts_render_deterministically(layout, pitch, altitude, yaw_rate):
    spec = _tiny(layout=layout, pitch_deg=pitch, altitude_m=altitude, yaw_rate_dps=yaw_rate, noise_sigma=1.0)
    a, b = Scene(spec), Scene(spec)
    img_a, rows_a = a.render(5)
    img_b, rows_b = b.render(5)
    assert np.array_equal(img_a, img_b) and rows_a == rows_b
    assert len(a.vehicles) > 0
    assert img_a.std() > 10  # textured, not a flat colour
    mask = a.road_mask(5)
    assert 0.02 < (mask > 0).mean() < 0.9
    other = Scene(spec.replace(seed=spec.seed + 1)).render(5)[0]
    assert not np.array_equal(img_a, other)


def test_simulate_flight_is_reproducible(tmp_path):
    spec = _tiny(duration_s=0.5)
    first = simulate_flight(spec, tmp_path / "a")
    simulate_flight(FlightSpec.from_yaml(first.spec_path), tmp_path / "b")
    for name in ("gt/gt.txt", "gt/speeds.csv", "gt/violations.json", "gt/vehicles.json", "video.SRT"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text(), name


@pytest.mark.parametrize(
    ("v0", "accel", "lo", "hi", "t", "speed"),
    [
        (10.0, 0.0, 5.0, 20.0, 3.0, 10.0),
        (10.0, 2.0, 5.0, 20.0, 3.0, 16.0),
        (10.0, 2.0, 5.0, 12.0, 3.0, 12.0),  # clamped at the top of its band
        (10.0, -2.0, 7.0, 20.0, 3.0, 7.0),  # clamped at the bottom
    ],
)
def test_kinematics(v0, accel, lo, hi, t, speed):
    ts = np.linspace(0.0, t, 3001)
    s, v = kinematics(v0, accel, ts, lo, hi)
    assert v[-1] == pytest.approx(speed)
    assert np.allclose(np.gradient(s, ts)[1:-1], v[1:-1], atol=1e-2)  # distance integrates speed


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"pitch_deg": -10.0}, "pitch_deg"),
        ({"layout": "roundabout"}, "layout"),
        ({"width": 321}, "width"),
        ({"camera": "no-such-camera"}, "unknown camera"),
        ({"normal_speed_kmh": (50.0, 30.0)}, "normal_speed_kmh"),
        ({"class_mix": (("tank", 1.0),)}, "class_mix"),
        ({"pitch_deg": -30.0, "altitude_m": 100.0}, "horizon"),
    ],
)
def test_invalid_specs_are_user_errors(changes, message):
    with pytest.raises(SimulationError, match=message):
        Scene(_tiny(**changes))


def test_unknown_spec_key(tmp_path):
    path = tmp_path / "flight.yaml"
    path.write_text("altitude_m: 80\nwarp_speed: 9\n")
    with pytest.raises(SimulationError, match="warp_speed"):
        FlightSpec.from_yaml(path)


def test_real_sprites_from_yolo_pairs(tmp_path):
    frames = shared_path("aerial_cars_dji_frames", "dji_video_frames")
    sprites = load_sprite_crops(frames, max_per_class=20)
    assert {s.class_name for s in sprites} >= {"car"}
    assert all(s.real and s.image.shape[2] == 4 and s.image.shape[1] >= s.image.shape[0] for s in sprites)
    spec = _tiny(duration_s=0.3, real_sprite_fraction=1.0)
    scene = Scene(spec, sprites)
    assert scene.vehicles and all(v.sprite.real for v in scene.vehicles)  # 1.0: no procedural vehicle
    assert {v.class_name for v in scene.vehicles} <= {s.class_name for s in sprites}
    img, rows = scene.render(1)
    assert rows and img.shape == (spec.height, spec.width, 3)
    assert not any(tmp_path.iterdir())  # crops stay in memory


def test_sprites_folder_errors(tmp_path):
    with pytest.raises(SimulationError, match="not found"):
        load_sprite_crops(tmp_path / "missing")
    (tmp_path / "a.jpg").write_bytes(cv2.imencode(".jpg", np.zeros((32, 32, 3), np.uint8))[1].tobytes())
    (tmp_path / "a.txt").write_text("0 0.5 0.5 0.1 0.1\n")  # too small and square
    with pytest.raises(SimulationError, match="no usable"):
        load_sprite_crops(tmp_path)
