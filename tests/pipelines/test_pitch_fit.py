"""The camera's pitch from the cars (pipelines.pitch_fit): on synthetic traffic whose boxes are the
projected shapes of cars of realistic, varied sizes seen through a camera of known pitch, the
cars' size trend across the image crosses zero at that pitch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.geometry import GroundProjector
from pipelines.pitch_fit import PITCH_FLOOR_DEG, PitchFinder, fit_pitch, image_directions, row_trend
from pipelines.scale_check import CAR_PRIORS, predicted_boxes
from pipelines.types import Intrinsics

K = Intrinsics(1400.0, 1400.0, 960.0, 540.0, 1920, 1080)
PRIOR = CAR_PRIORS["eu"]


def _cars(pitch: float, vehicles: int = 40, seed: int = 0, altitude: float = 50.0):
    """(boxes, ground velocities through the true view, vehicle ids, the true view): each car seen
    on three frames as it drives 12 m/s along one of two road directions, boxes 1.4 px a side larger
    than its outline with 0.7 px of noise."""
    rng = np.random.default_rng(seed)
    view = GroundProjector.create(K, altitude, pitch)
    boxes, velocities, ids = [], [], []
    for vid in range(vehicles):
        dims = PRIOR.mean + PRIOR.sd * np.clip(rng.normal(size=4), -2, 2)
        angle = rng.choice([0.3, 0.3 + math.pi / 2]) + rng.choice([0.0, math.pi])
        heading = np.array([math.cos(angle), math.sin(angle)])
        start = view.to_ground(np.array([[rng.uniform(250, 1670), rng.uniform(150, 930)]]))[0]
        for step in range(3):
            outline = predicted_boxes(view, (start + heading * 0.4 * step)[None], heading[None], dims)[0]
            boxes.append(outline + np.array([-1.4, -1.4, 1.4, 1.4]) + rng.normal(0, 0.7, 4))
            velocities.append(heading * 12.0)
            ids.append(vid)
    return np.array(boxes), np.array(velocities), np.array(ids), view


@pytest.mark.parametrize("pitch", [-90.0, -75.0, -60.0, -45.0, -35.0])
def test_the_cars_give_the_cameras_pitch(pitch: float) -> None:
    xyxy, velocities, ids, view = _cars(pitch)
    fit = fit_pitch(K, xyxy, image_directions(view, xyxy, velocities), ids, PRIOR, margin_px=1.4)
    assert fit is not None and fit.n == 40
    assert abs(fit.pitch_deg - pitch) < max(3 * fit.sigma_deg, 1.0), fit
    assert 0.1 < fit.sigma_deg < 3.0


def test_the_height_and_the_directions_through_another_pitch_do_not_matter() -> None:
    """The cars' image directions are the same through any view of the same pixels, and the trend does
    not depend on the height the candidates are measured at."""
    xyxy, velocities, ids, view = _cars(-50.0, seed=3, altitude=90.0)
    truth = image_directions(view, xyxy, velocities)
    other = GroundProjector.create(K, 30.0, -80.0)
    moved = apply_view(view, other, xyxy, velocities)
    assert np.allclose(image_directions(other, xyxy, moved), truth, atol=1e-6)
    fit = fit_pitch(K, xyxy, truth, ids, PRIOR, margin_px=1.4)
    assert fit is not None and abs(fit.pitch_deg + 50.0) < 3 * fit.sigma_deg


def apply_view(
    true: GroundProjector, other: GroundProjector, xyxy: np.ndarray, velocities: np.ndarray
) -> np.ndarray:
    """The ground velocities ``other`` measures for the image motion ``true``'s give."""
    from pipelines.displacement import box_anchors

    px = box_anchors(xyxy)
    ahead = true.to_ground(px)
    img_ahead = np.linalg.solve(
        true.image_to_ground, np.column_stack([ahead + velocities / 12.0, np.ones(len(px))]).T
    ).T
    img_ahead = img_ahead[:, :2] / img_ahead[:, 2:]
    return (other.to_ground(img_ahead) - other.to_ground(px)) * 12.0


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [({"vehicles": 6}, "too few vehicles"), ({"pitch": -60.0, "vehicles": 40}, "")],
)
def test_too_few_vehicles_give_no_pitch(kwargs: dict, why: str) -> None:
    xyxy, velocities, ids, view = _cars(kwargs.get("pitch", -45.0), vehicles=kwargs["vehicles"], seed=5)
    fit = fit_pitch(K, xyxy, image_directions(view, xyxy, velocities), ids, PRIOR, min_vehicles=10)
    assert (fit is None) == bool(why)


@pytest.mark.parametrize(
    ("y", "rows", "slope", "used"),
    [
        (0.2 * np.linspace(-0.4, 0.4, 30), np.linspace(-0.4, 0.4, 30), 0.2, 30),
        # a van labelled as a car far off the line (+40 %) does not move it
        (np.r_[0.1 * np.linspace(-0.4, 0.4, 29), 0.4], np.r_[np.linspace(-0.4, 0.4, 29), -0.4], 0.1, 29),
    ],
)
def test_the_trend_is_the_slope_of_size_against_row(y, rows, slope, used) -> None:
    noisy = y + np.random.default_rng(1).normal(0, 0.01, len(y))
    s, se, n = row_trend(noisy, np.full(len(y), 0.05), rows)
    assert abs(s - slope) < 3 * se and se < 0.02
    assert n == used
    assert all(math.isnan(v) for v in row_trend(y, np.full(len(y), 0.05), np.zeros(len(y)))[:2])


def test_a_finder_keeps_the_cars_fits_as_they_come_and_forgets_another_camera() -> None:
    xyxy, velocities, ids, view = _cars(-45.0, seed=7)
    finder = PitchFinder(PRIOR, 1.4, 2.5, 10)
    finder.add(view, xyxy[:27], ids[:27], velocities[:27])  # 9 vehicles
    assert not finder.due(1)
    finder.add(view, xyxy[27:], ids[27:], velocities[27:])
    assert finder.due(2)
    fit = finder.refit(2)
    assert fit is not None and abs(fit.pitch_deg + 45.0) < 3 * fit.sigma_deg
    assert fit.sigma_deg >= PITCH_FLOOR_DEG
    assert not finder.due(3)  # tried now, and no new vehicles
    other = GroundProjector.create(Intrinsics(1000.0, 1000.0, 640.0, 360.0, 1280, 720), 50.0, -45.0)
    finder.add(other, xyxy[:3], ids[:3], velocities[:3])
    assert not finder.due(500)  # the boxes of the other image size only: one vehicle
