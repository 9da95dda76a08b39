"""The camera's motion in the sensor's ideal image (pipelines.motion.sensor_motion), and the ground
steps of vehicles measured through it (pipelines.displacement), against a sensor simulated here:
a camera flying along the road, every point seen through a distorting lens at its row's time."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from pipelines.displacement import GroundDisplacement
from pipelines.geometry import GroundProjector, apply_homography, ground_to_image_homography
from pipelines.lens import LensModel, distort_points, row_time_offsets
from pipelines.motion.sensor_motion import IdealMotion, IdealView, Sensor, fit_ideal, ideal_pairs
from pipelines.types import EgoMotion, Intrinsics

INTR = Intrinsics(1066.0, 1066.0, 960.0, 540.0, 1920, 1080)
LENS = LensModel(k1=-0.08, p1=2e-4, p2=-1e-4)
FPS = 30.0
CAMERA_MPS = 10.0  # flying forward: along the ground's Y (the camera's horizontal viewing direction)


def seen(
    world, k: int, altitude: float, pitch: float, lens, readout_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Where the sensor images points ``world(t)`` -> (N, 3) in frame ``k``, and when (each at its
    row's time, a fixed point): the camera flies CAMERA_MPS along Y at ``altitude``."""
    t = np.full(len(world(0.0)), k / FPS)
    for _ in range(8):
        xyz = world(t)
        px = np.empty((len(xyz), 2))
        for z in np.unique(xyz[:, 2]):  # a plane per height: the camera (altitude - z) above it
            rows = xyz[:, 2] == z
            g2i = ground_to_image_homography(INTR, altitude - z, pitch)
            rel = xyz[rows, :2] - np.column_stack([np.zeros(rows.sum()), CAMERA_MPS * t[rows]])
            px[rows] = distort_points(apply_homography(g2i, rel), INTR, lens)
        t = k / FPS + row_time_offsets(px[:, 1], INTR.height, readout_s)
    return px, t


def ground_grid(altitude: float, pitch: float) -> np.ndarray:
    """Static ground points spread over the first frames' view."""
    i2g = np.linalg.inv(ground_to_image_homography(INTR, altitude, pitch))
    u, v = np.meshgrid(np.linspace(100, 1820, 14), np.linspace(60, 1020, 9))
    g = apply_homography(i2g, np.column_stack([u.ravel(), v.ravel()]))
    return np.column_stack([g, np.zeros(len(g))])


def background_pairs(k: int, altitude: float, pitch: float, lens, readout_s: float) -> np.ndarray:
    """(M, 4) the static ground's pixels in frames k - 1 and k (inside both)."""
    pts = ground_grid(altitude, pitch)
    pts[:, 1] += CAMERA_MPS * (k - 1) / FPS  # keep the grid under the camera

    def world(t):
        return pts

    p0, _ = seen(world, k - 1, altitude, pitch, lens, readout_s)
    p1, _ = seen(world, k, altitude, pitch, lens, readout_s)
    inside = (np.abs(p0 - [960, 540]) < [950, 530]).all(axis=1) & (np.abs(p1 - [960, 540]) < [950, 530]).all(
        axis=1
    )
    return np.hstack([p0, p1])[inside]


def ego_of(pairs: np.ndarray, with_pairs: bool = True) -> EgoMotion:
    h, _ = cv2.findHomography(pairs[:, :2], pairs[:, 2:], 0)
    return EgoMotion(h / h[2, 2], 1.0, len(pairs), 1.0, True, pairs if with_pairs else None)


@pytest.mark.parametrize("pitch", [-90.0, -60.0, -45.0])
def test_fit_ideal_is_the_ground_motion_of_a_pinhole_global_shutter(pitch):
    """Through a barrel lens and a 30 ms readout, the pairs taken to the ideal image give the
    homography a pinhole, global-shutter camera would have seen; the pixels' own fit is off by a
    tenth to a sixth of a pixel a frame (2 % of the ground's 9 px flow)."""
    sensor = Sensor(INTR, LENS, 0.030)
    pairs = background_pairs(5, 40.0, pitch, LENS, 0.030)
    fitted = fit_ideal(pairs, sensor, 1 / FPS)
    g2i = ground_to_image_homography(INTR, 40.0, pitch)
    shift = np.array([[1, 0, 0], [0, 1, -CAMERA_MPS / FPS], [0, 0, 1]])  # the ground, relative to the camera
    truth = g2i @ shift @ np.linalg.inv(g2i)
    probe = np.array([[960, 540], [300, 200], [1600, 900], [960, 1000]], float)
    err = np.linalg.norm(apply_homography(fitted, probe) - apply_homography(truth, probe), axis=1)
    assert err.max() < 0.05  # of a 9 px flow: 0.5 %, where the ideal pairs are a first-order model
    raw = ego_of(pairs).homography  # the pixels' fit, as the ego-motion has it
    raw_err = np.linalg.norm(
        distort_points(apply_homography(truth, probe), INTR, LENS)
        - apply_homography(raw, distort_points(probe, INTR, LENS)),
        axis=1,
    )
    assert raw_err.max() > 0.1


def test_ideal_pairs_without_a_lens_or_a_readout_are_the_pixels():
    pairs = np.array([[10.0, 20.0, 13.0, 24.0], [500.0, 600.0, 503.5, 604.0]])
    u0, u1 = ideal_pairs(pairs, Sensor(INTR), 1 / FPS)
    assert np.array_equal(u0, pairs[:, :2]) and np.array_equal(u1, pairs[:, 2:])
    assert Sensor(INTR).pinhole and not Sensor(INTR, LENS).pinhole and not Sensor(INTR, None, 0.02).pinhole


def test_fit_ideal_refuses_too_few_pairs():
    assert fit_ideal(None, Sensor(INTR, LENS), 1 / FPS) is None
    assert fit_ideal(np.zeros((5, 4)), Sensor(INTR, LENS), 1 / FPS) is None


def test_ideal_view_moves_a_rolled_point_to_the_frames_time():
    """A ground point read 15 ms after the frame's time is where the ground was 15 ms before that."""
    step = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 12.0], [0.0, 0.0, 1.0]])  # 12 px a frame, downwards
    view = IdealView(Sensor(INTR, None, 0.030), step, 1 / FPS)
    bottom = np.array([[960.0, 1080.0]])  # read readout / 2 after the middle row
    assert view.points(bottom)[0, 1] == pytest.approx(1080.0 - 12.0 * FPS * 0.015)
    assert view.points(np.array([[960.0, 540.0]]))[0, 1] == pytest.approx(540.0)


def measured_speed(
    pitch: float,
    altitude: float,
    height: float,
    along: float,
    lens,
    readout_s: float,
    with_pairs: bool = True,
    told: float | None = None,
    camera_steps: list | None = None,
) -> float:
    """The mean speed (m/s) GroundDisplacement measures for a point ``height`` above the road moving
    ``along`` m/s along the road (Y) while the camera flies forward, timed by its rows; ``told``: the
    point height the engine is told (None: the true one); ``camera_steps`` collects the camera's
    steps behind each measured displacement."""
    gd = GroundDisplacement("center", None, IdealMotion())
    gray = np.zeros((INTR.height, INTR.width), np.uint8)
    start = ground_grid(altitude, pitch)[len(ground_grid(altitude, pitch)) // 2 + 3]

    def world(t):
        t = np.atleast_1d(t)
        return np.column_stack([np.full(len(t), start[0]), start[1] + along * t, np.full(len(t), height)])

    speeds, last = [], None
    for k in range(12):
        ego = (
            EgoMotion.identity()
            if k == 0
            else ego_of(background_pairs(k, altitude, pitch, lens, readout_s), with_pairs)
        )
        gd.advance(ego, k / FPS)
        px, t = seen(world, k, altitude, pitch, lens, readout_s)
        proj = GroundProjector.create(INTR, altitude, pitch, lens, readout_s)
        box = np.array([[px[0, 0] - 15, px[0, 1] - 15, px[0, 0] + 15, px[0, 1] + 15]])
        _, disp = gd.measure(
            gray, np.array([1]), box, ego, proj, None, np.array([height if told is None else told])
        )
        gd.remember(k, np.array([1]), px, box)
        if k >= 2:  # the first frame's points are taken before the sensor's motion is known
            speeds.append(disp[0, 1] / (t[0] - last))
            if camera_steps is not None:
                camera_steps.append((disp[0], gd.camera_steps[0]))
        last = t[0]
    return float(np.mean(speeds))


@pytest.mark.parametrize(
    ("pitch", "height", "along"),
    [(-90.0, 0.0, 13.9), (-90.0, 0.0, -13.9), (-90.0, 1.5, -13.9), (-45.0, 0.0, 13.9), (-45.0, 1.5, 13.9),
     (-45.0, 1.5, -13.9), (-60.0, 0.75, -13.9)],
)  # fmt: skip
def test_a_vehicle_under_a_camera_flying_forward_steps_its_own_speed(pitch, height, along):
    """A camera flying 10 m/s along the road, through a barrel lens and a 30 ms readout, 30 m up: a
    vehicle's step (on the road or a point 1.5 m above it, told its height) is its own, whichever
    way it drives - within 0.2 %."""
    speed = measured_speed(pitch, 30.0, height, along, LENS, 0.030)
    assert speed == pytest.approx(along, rel=0.002)


def test_without_the_ideal_image_the_camera_flying_forward_shows_in_the_speed():
    """The control: the pixels' homography (no pairs to fit the ideal image with) gives a coming
    vehicle a share of the camera's speed (the realistic grid's forward cells: +2 to +5 %)."""
    speed = measured_speed(-60.0, 30.0, 0.0, -13.9, LENS, 0.030, with_pairs=False)
    assert abs(speed / -13.9 - 1.0) > 0.01


@pytest.mark.parametrize("pitch", [-90.0, -45.0])
def test_a_raised_point_under_a_moving_pinhole_camera_steps_its_own_speed(pitch):
    """No lens, no shutter: the pixels are the ideal image, and a point 1.5 m up still sees the
    camera's motion as a parallax of h / H of it, which the step adds back."""
    assert measured_speed(pitch, 30.0, 1.5, 13.9, None, 0.0) == pytest.approx(13.9, rel=0.002)
    assert measured_speed(pitch, 30.0, 1.5, -13.9, None, 0.0) == pytest.approx(-13.9, rel=0.002)


@pytest.mark.parametrize(("pitch", "along"), [(-90.0, 13.9), (-90.0, -13.9), (-45.0, 13.9), (-45.0, -13.9)])
def test_a_point_height_s_error_acts_on_the_motion_relative_to_the_camera(pitch, along):
    """A point 1.5 m up told 0.75 m, 30 m under a camera flying 10 m/s along the road (pinhole): the
    speed is off by (h - h') / (H - h) of the vehicle's motion relative to the camera, 2.6 % x
    |1 - c / u|: +0.7 % for a vehicle driving with the camera, +4.5 % for one coming; what
    moving_camera_factor makes of the steps the displacement stage reports."""
    from pipelines.vehicle_height import moving_camera_factor

    steps: list = []
    speed = measured_speed(pitch, 30.0, 1.5, along, None, 0.0, told=0.75, camera_steps=steps)
    relative = 1.0 - CAMERA_MPS / along
    assert speed / along - 1.0 == pytest.approx(0.75 / 28.5 * relative, abs=0.002)
    disp, camera = (np.array([s[i] for s in steps]) for i in (0, 1))
    assert camera[:, 1] == pytest.approx(CAMERA_MPS / FPS, rel=0.01)
    assert moving_camera_factor(disp, camera) == pytest.approx(abs(relative), rel=0.02)
