"""The simulator's lens and rolling shutter (``FlightSpec.lens_distortion``, ``readout_ms``): a flight
without them renders exactly as before; with them, the vehicles, their boxes and the ground sit where
an independent model puts them (``cv2.projectPoints`` and ``cv2.undistort`` for the lens, the
vehicles' own motion and the drone's drift for the shutter)."""

from __future__ import annotations

import dataclasses
import functools

import cv2
import numpy as np
import pytest

from eval.simulate import CameraPath, FlightSpec, Scene, SimulationError, Sprite, simulate_flight
from eval.simulate.lens_render import SensorRenderer, four_point_homography, frame_renderer, state_at
from eval.simulate.render import FrameRenderer, footprint
from eval.simulate.writers import write_spec
from pipelines.geometry import apply_homography
from pipelines.lens import row_time_offsets

SMALL = {"duration_s": 1.0, "fps": 10.0, "width": 640, "height": 360, "noise_sigma": 0.0, "n_vehicles": 8}
BARREL = (-0.1, 0.0, 0.0, 0.0, 0.0)
MIXED = (0.08, -0.02, 0.003, -0.002, 0.0)  # pincushion with tangential terms
TINY = {"width": 320, "height": 180}
STILL = {"drift_mps": (0.0, 0.0), "yaw_rate_dps": 0.0}
# low and fast: a vehicle crosses a few hundred pixels a second
FAST = {
    "altitude_m": 40.0,
    "duration_s": 0.5,
    "fps": 20.0,
    "road_heading_deg": 20.0,
    "speeding_fraction": 1.0,
    "speeding_speed_kmh": (80, 90),
}


@functools.cache
def _scene(**changes) -> Scene:
    return Scene(FlightSpec(**(SMALL | changes)))


def _matrix(scene: Scene) -> np.ndarray:
    k = scene.camera.intrinsics
    return np.array([[k.fx, 0.0, k.cx], [0.0, k.fy, k.cy], [0.0, 0.0, 1.0]])


def _cv2_distort(scene: Scene, uv: np.ndarray, lens: tuple | None = None) -> np.ndarray:
    """Where OpenCV's own camera model images pinhole pixels ``uv`` (N, 2) through ``lens`` (default:
    the flight's)."""
    rays = cv2.undistortPoints(uv.reshape(-1, 1, 2).astype(np.float64), _matrix(scene), None).reshape(-1, 2)
    obj = np.column_stack([rays, np.ones(len(rays))])
    dist = np.array(lens or scene.spec.lens_distortion or (0.0,) * 5)
    out, _ = cv2.projectPoints(obj, np.zeros(3), np.zeros(3), _matrix(scene), dist)
    return out.reshape(-1, 2)


def _plain(scene: Scene, vehicles=None) -> FrameRenderer:
    v = scene.vehicles if vehicles is None else vehicles
    return FrameRenderer(scene.spec, scene.camera, scene.ground, v, scene.res)


def _renderer(scene: Scene, vehicles=None, **changes) -> FrameRenderer:
    """The renderer of ``scene``'s world (ground, traffic) seen by the camera of its spec with
    ``changes`` (a lens or a shutter changes neither)."""
    spec = scene.spec.replace(**changes)
    v = scene.vehicles if vehicles is None else vehicles
    return frame_renderer(spec, CameraPath(spec), scene.ground, v, scene.res)


def _alpha(scene: Scene, k: int, **changes) -> tuple[np.ndarray, list[dict]]:
    """Where the vehicles' sprites are drawn in frame ``k`` (their alpha, H x W) and the frame's
    ground truth: the frame rendered with all sprites white and with all black (same shadows)."""
    images = []
    for grey in (255, 0):
        sprite = np.full((8, 16, 4), grey, np.uint8)
        sprite[..., 3] = 255
        vehicles = [dataclasses.replace(v, sprite=Sprite(sprite, v.class_name, 0.4)) for v in scene.vehicles]
        images.append(_renderer(scene, vehicles, **changes).render(k))
    (white, rows), (black, _) = images
    return (white.astype(np.float64) - black).mean(axis=2) / 255.0, rows


def _drawn_centre(alpha: np.ndarray, near: np.ndarray) -> np.ndarray | None:
    """Centroid of the sprite drawn over pixel ``near``; None where it touches another one."""
    _n, labels = cv2.connectedComponents((alpha > 0.01).astype(np.uint8))
    label = labels[int(round(near[1])), int(round(near[0]))]
    if label == 0:
        return None
    ys, xs = np.nonzero(labels == label)
    w = alpha[ys, xs]
    return np.array([(xs * w).sum(), (ys * w).sum()]) / w.sum()


def _inside(row: dict, scene: Scene) -> bool:
    x, y, w, h = row["xywh"]
    return (
        row["visibility"] == 1.0
        and x > 1
        and y > 1
        and x + w < scene.spec.width - 2
        and y + h < scene.spec.height - 2
    )


# ---- both off: the flight as it was ----------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {**TINY, "noise_sigma": 2.0},
        {
            **TINY,
            "noise_sigma": 2.0,
            "pitch_deg": -40.0,
            "altitude_m": 60.0,
            "climb_rate_mps": 2.0,
            "yaw_rate_dps": 5.0,
        },
        {**TINY, "layout": "intersection", "lens_distortion": (0.0,) * 5, "readout_ms": 0.0},
    ],
)
def test_without_lens_or_shutter_a_flight_renders_as_before(changes: dict) -> None:
    scene = _scene(**changes)
    plain = {k: v for k, v in changes.items() if k not in ("lens_distortion", "readout_ms")}
    before = _plain(_scene(**plain))  # the pinhole renderer, on a spec without the new fields
    assert type(scene._renderer) is FrameRenderer
    for k in (0, 7):
        image, rows = scene.render(k)
        image0, rows0 = before.render(k)
        assert np.array_equal(image, image0) and rows == rows0
        assert np.array_equal(scene.road_mask(k), before.road_mask(k))


@pytest.mark.parametrize("pitch", [-90.0, -40.0])  # -40: the far rows blend the half-resolution ground
def test_the_sensor_path_with_neither_is_the_pinhole_one(pitch: float) -> None:
    """Per-pixel remapping models the very homography the pinhole renderer warps with."""
    scene = _scene(**TINY, pitch_deg=pitch, altitude_m=60.0, climb_rate_mps=1.0, yaw_rate_dps=5.0)
    sensor = SensorRenderer(scene.spec, scene.camera, scene.ground, scene.vehicles, scene.res)
    for k in (0, 5):
        (a, rows_a), (b, rows_b) = _plain(scene).render(k), sensor.render(k)
        diff = np.abs(a.astype(int) - b)
        assert diff.max() <= 1 and diff.mean() < 0.01
        assert rows_a == rows_b
        assert np.array_equal(_plain(scene).road_mask(k), sensor.road_mask(k))


def test_the_camera_at_any_instant() -> None:
    scene = _scene(climb_rate_mps=1.5, yaw_rate_dps=4.0, readout_ms=30.0)
    cam = scene.camera
    for k in (0, 4, 9):
        assert np.array_equal(cam.world_to_image_at(cam.times[k]), cam.world_to_image(k))
        assert cam.row_times(k, np.array([0.0, 180.0, 360.0])) == pytest.approx(
            cam.times[k] + np.array([-0.015, 0.0, 0.015])
        )
    xy, yaw, altitude = cam.pose_at(0.25)
    assert xy == pytest.approx(0.25 * np.array(scene.spec.drift_mps))
    assert (float(yaw), float(altitude)) == pytest.approx(
        (scene.spec.yaw_deg + 1.0, scene.spec.altitude_m + 0.375)
    )


def test_vehicle_state_between_frames() -> None:
    scene = _scene(**FAST)
    v, times = scene.vehicles[0], scene.camera.times
    c, f = state_at(v, times, times[3] + 0.25 * (times[4] - times[3]))
    assert c == pytest.approx(0.75 * v.positions[3] + 0.25 * v.positions[4])
    assert np.linalg.norm(f) == pytest.approx(1.0)
    c, _ = state_at(v, times, times[0] - 0.2 * times[1])  # before the first frame: along the first step
    assert c == pytest.approx(v.positions[0] - 0.2 * (v.positions[1] - v.positions[0]))
    src = np.array([[0.0, 0.0], [30.0, 2.0], [31.0, 14.0], [-1.0, 12.0]]) + 500.0
    dst = src + np.array([[0.3, -0.2], [1.1, 0.4], [0.9, 1.3], [-0.2, 0.8]])
    assert apply_homography(four_point_homography(src, dst), src) == pytest.approx(dst, abs=1e-9)


# ---- the lens ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("lens", "pitch"), [(BARREL, -90.0), (MIXED, -55.0)])
def test_the_lens_moves_vehicles_and_their_boxes(lens: tuple, pitch: float) -> None:
    """Every fully visible vehicle is drawn, and boxed, where OpenCV's lens model images its centre
    (within 0.5 px), not at its pinhole position: several pixels away near the frame's edge."""
    scene = _scene(lens_distortion=lens, pitch_deg=pitch, altitude_m=60.0, road_heading_deg=60.0, **STILL)
    moved = []
    for k in range(0, scene.spec.n_frames, 2):
        alpha, rows = _alpha(scene, k)
        hw = scene.camera.world_to_image(k)
        for row in filter(lambda r: _inside(r, scene), rows):
            v = next(v for v in scene.vehicles if v.id == row["id"])
            pinhole = apply_homography(hw, v.positions[k])
            expected = _cv2_distort(scene, pinhole)[0]
            drawn = _drawn_centre(alpha, expected)
            if drawn is None:
                continue
            x, y, w, h = row["xywh"]
            assert np.linalg.norm(drawn - expected) < 0.5
            assert np.linalg.norm(np.array([x + w / 2, y + h / 2]) - expected) < 0.5
            # the box bounds the distorted footprint corners: the drawn sprite's
            corners = footprint(v.positions[k], v.headings[k], v.length_m / 2, v.width_m / 2)
            uv = _cv2_distort(scene, apply_homography(hw, corners))
            assert (x, y, x + w, y + h) == pytest.approx((*uv.min(0), *uv.max(0)), abs=1e-3)
            moved.append(float(np.linalg.norm(expected - pinhole[0])))
    assert len(moved) >= 5 and max(moved) > 3.0


def test_the_lens_bends_the_ground() -> None:
    """The lens render, undistorted by OpenCV (``cv2.undistort``: its forward model), is the pinhole
    render of the same world; the lens does not change that world (ground and traffic)."""
    scene = _scene(lens_distortion=BARREL, pitch_deg=-60.0, **STILL)
    pinhole_scene = _scene(pitch_deg=-60.0, **STILL)
    assert np.array_equal(scene.ground.texture, pinhole_scene.ground.texture)
    assert [v.positions.tolist() for v in scene.vehicles] == [
        v.positions.tolist() for v in pinhole_scene.vehicles
    ]
    sensor = frame_renderer(scene.spec, scene.camera, scene.ground, [], scene.res)
    lens_img, pin_img = sensor.render(4)[0], _plain(scene, []).render(4)[0]
    undone = cv2.undistort(lens_img, _matrix(scene), np.array(BARREL))
    valid = cv2.undistort(np.full(lens_img.shape[:2], 255, np.uint8), _matrix(scene), np.array(BARREL)) == 255
    valid = cv2.erode(valid.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
    assert valid.mean() > 0.8

    def gap(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.abs(a.astype(float) - b)[valid].mean())

    assert gap(undone, pin_img) < 2.0  # two interpolations' blur
    assert gap(lens_img, pin_img) > 3 * gap(undone, pin_img)  # unaligned: far worse
    lens_mask = cv2.undistort(sensor.road_mask(4), _matrix(scene), np.array(BARREL))
    assert (lens_mask[valid] != _plain(scene, []).road_mask(4)[valid]).mean() < 0.01


@pytest.mark.parametrize(
    ("pitch", "lens", "same_world"),
    [(-60.0, BARREL, True), (-45.0, (-0.2, 0.0, 0.0, 0.0, 0.0), False), (-45.0, MIXED, True)],
)
def test_the_ground_under_every_pixel_is_painted(pitch: float, lens: tuple, same_world: bool) -> None:
    """A barrel lens sees beyond the pinhole view: within the ground's margin the world is the one
    without the lens, beyond it the ground is painted wider (never reflected at its edge)."""
    changes = {**TINY, "pitch_deg": pitch, "n_vehicles": 2, "readout_ms": 20.0}
    scene, pinhole = _scene(**changes, lens_distortion=lens), _scene(**changes)
    assert (scene.bounds == pinhole.bounds) is same_world
    assert np.array_equal(scene.ground.texture, pinhole.ground.texture) is same_world
    height, width = scene.ground.texture.shape[:2]
    for k in (0, scene.spec.n_frames - 1):
        tx, ty = scene._renderer.texture_maps(k)
        assert tx.min() >= 0 and ty.min() >= 0 and tx.max() <= width - 1 and ty.max() <= height - 1


def test_a_lens_that_sees_past_the_horizon_is_refused() -> None:
    """An oblique view the pinhole camera may take (78 deg at the top) that a wide barrel lens
    pushes past the 80 deg limit."""
    oblique = SMALL | {"pitch_deg": -33.0}
    assert CameraPath(FlightSpec(**oblique)).lens is None
    with pytest.raises(SimulationError, match="horizon"):
        CameraPath(FlightSpec(**(oblique | {"lens_distortion": (-0.3, 0.0, 0.0, 0.0, 0.0)})))


# ---- the rolling shutter --------------------------------------------------------------------------


@pytest.mark.parametrize("lens", [None, BARREL])
def test_the_shutter_moves_vehicles_along_their_motion(lens: tuple | None) -> None:
    """Read 30 ms from top to bottom, a vehicle is drawn (and boxed) where it is when its row is
    read: displaced from the global-shutter image by its image velocity times its row's offset."""
    still = _scene(**STILL, **FAST)  # its world, seen through ``lens``
    dt, height = 1.0 / still.spec.fps, still.spec.height
    shifts = []
    for k in range(1, still.spec.n_frames - 1, 2):
        (alpha0, rows0), (alpha1, rows1) = (
            _alpha(still, k, lens_distortion=lens),
            _alpha(still, k, lens_distortion=lens, readout_ms=30.0),
        )
        boxes1 = {r["id"]: r for r in rows1}
        hw = still.camera.world_to_image(k)
        for row in filter(lambda r: _inside(r, still), rows0):
            v = next(v for v in still.vehicles if v.id == row["id"])
            track = _cv2_distort(still, apply_homography(hw, v.positions[k - 1 : k + 2]), lens)
            velocity = (track[2] - track[0]) / (2 * dt)  # px/s on the sensor
            c0, c1 = _drawn_centre(alpha0, track[1]), _drawn_centre(alpha1, track[1])
            if c0 is None or c1 is None or row["id"] not in boxes1:
                continue
            expected = velocity * row_time_offsets(c1[1], height, 0.030)
            assert np.linalg.norm((c1 - c0) - expected) < 0.5
            x, y, w, h = boxes1[row["id"]]["xywh"]
            x0, y0, w0, h0 = row["xywh"]
            box_shift = np.array([x + w / 2 - x0 - w0 / 2, y + h / 2 - y0 - h0 / 2])
            assert np.linalg.norm(box_shift - expected) < 0.5
            assert boxes1[row["id"]]["speed_kmh"] == row["speed_kmh"]  # the truth stays the frame time's
            shifts.append(float(np.linalg.norm(expected)))
    assert len(shifts) >= 4 and max(shifts) > 2.5


@pytest.mark.parametrize("drift", [(0.0, 0.0), (12.0, 0.0), (0.0, -10.0)])
def test_the_shutter_shifts_the_ground_of_a_drifting_drone(drift: tuple[float, float]) -> None:
    """Nadir, north up: row ``v`` sees the ground from where the drone is ``offset(v)`` later, so the
    ground is drawn ``-drift * offset(v) / gsd`` away (east right, north up); a still drone's ground
    does not move."""
    still = _scene(**TINY, altitude_m=30.0, drift_mps=drift, yaw_rate_dps=0.0, n_vehicles=0)
    k, height = 5, still.spec.height
    a = _plain(still).render(k)[0]
    b = _renderer(still, readout_ms=30.0).render(k)[0]
    if drift == (0.0, 0.0):
        diff = np.abs(a.astype(int) - b)
        assert diff.max() <= 1 and diff.mean() < 0.01
    gsd = still.camera.gsd_at(k, (still.spec.width / 2, height / 2))
    for top in (5, 75, 145):
        offset = float(row_time_offsets(top + 14.5, height, 0.030))
        expected = np.array([-drift[0], drift[1]]) * offset / gsd
        assert _translation(a, b, slice(top, top + 30)) == pytest.approx(expected, abs=0.1)


def _translation(a: np.ndarray, b: np.ndarray, rows: slice) -> np.ndarray:
    """The shift ``d`` (px) with ``b(x) = a(x - d)`` over image rows ``rows`` (Lucas-Kanade, a few
    Gauss-Newton steps on the blurred grey images; sub-0.05 px on the ground texture)."""
    a, b = (
        cv2.GaussianBlur(cv2.cvtColor(im, cv2.COLOR_BGR2GRAY).astype(np.float64), (0, 0), 1.0)
        for im in (a, b)
    )
    inner = (rows, slice(20, -20))
    d = np.zeros(2)
    for _ in range(6):
        moved = cv2.warpAffine(
            a, np.array([[1.0, 0.0, d[0]], [0.0, 1.0, d[1]]]), a.shape[::-1], flags=cv2.INTER_CUBIC,
            borderMode=cv2.BORDER_REFLECT,
        )  # fmt: skip
        gx, gy = (cv2.Sobel(moved, cv2.CV_64F, dx, 1 - dx, ksize=3)[inner].ravel() / 8 for dx in (1, 0))
        jac = np.column_stack([gx, gy])
        d -= np.linalg.solve(jac.T @ jac, jac.T @ (b[inner] - moved[inner]).ravel())
    return d


# ---- the spec ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"lens_distortion": (99.0, 0.0, 0.0, 0.0, 0.0)}, "lens_distortion"),
        ({"lens_distortion": (0.0, 0.0, float("nan"), 0.0, 0.0)}, "lens_distortion"),
        ({"lens_distortion": (0.1, 0.0)}, "lens_distortion"),
        ({"readout_ms": -1.0}, "readout_ms"),
        ({"readout_ms": 250.0}, "readout_ms"),
    ],
)
def test_invalid_lens_or_shutter_is_a_one_line_user_error(changes: dict, field: str) -> None:
    with pytest.raises(SimulationError) as err:
        FlightSpec(**changes)
    message = str(err.value)
    assert "\n" not in message and f"{field}:" in message


def test_the_fields_go_through_flight_yaml(tmp_path) -> None:
    spec = FlightSpec(
        seed=1, duration_s=0.3, fps=10.0, width=320, height=180, n_vehicles=3, mask_every=1,
        lens_distortion=MIXED, readout_ms=12.5,
    )  # fmt: skip
    assert FlightSpec.from_dict(spec.to_dict()) == spec
    assert spec.to_dict()["lens_distortion"] == list(MIXED)
    flight = simulate_flight(spec, tmp_path / "flight")
    again = FlightSpec.from_yaml(flight.spec_path)
    assert again == spec and again.lens_distortion == MIXED and again.readout_ms == 12.5
    plain = FlightSpec()
    assert (plain.to_dict()["lens_distortion"], plain.to_dict()["readout_ms"]) == (None, 0.0)
    write_spec(tmp_path / "plain.yaml", plain)
    assert FlightSpec.from_yaml(tmp_path / "plain.yaml") == plain
    scene = Scene(spec)
    mask = cv2.imread(str(flight.road_mask_dir / "000002.png"), cv2.IMREAD_GRAYSCALE)
    assert np.array_equal(mask, scene.road_mask(2))
    gt = np.loadtxt(flight.gt, delimiter=",", ndmin=2)
    rows = scene.render(2)[1]
    frame3 = gt[gt[:, 0] == 3]
    assert len(frame3) == len(rows)
    for line, row in zip(frame3, rows, strict=True):
        assert line[2:6] == pytest.approx(row["xywh"], abs=0.01)
