"""The scale check's measurement (pipelines.scale_check): boxes of cars against the prior's car."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.geometry import GroundProjector
from pipelines.lens import LensModel
from pipelines.scale_check import (
    CAR_PRIORS,
    observe,
    place_vehicles,
    predicted_boxes,
    project_world,
    robust_ratio,
)
from pipelines.types import Intrinsics, ScaleCheckResult

K = Intrinsics(1400.0, 1400.0, 960.0, 540.0, 1920, 1080)
PRIOR = CAR_PRIORS["eu"]


def _cars(proj: GroundProjector, n: int = 24, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Ground centres and headings of ``n`` cars spread over the lower 80 % of the frame."""
    rng = np.random.default_rng(seed)
    px = np.column_stack([rng.uniform(300, 1620, n), rng.uniform(250, 950, n)])
    angle = rng.uniform(0, math.pi, n)
    return proj.to_ground(px), np.column_stack([np.cos(angle), np.sin(angle)])


@pytest.mark.parametrize("pitch", [-90.0, -60.0, -45.0, -30.0])
@pytest.mark.parametrize("altitude", [30.0, 60.0, 150.0])
@pytest.mark.parametrize("k", [0.9, 1.0, 1.1])
def test_a_wrong_altitude_is_the_ratio_the_cars_measure(pitch: float, altitude: float, k: float) -> None:
    """Cars of the prior's size seen by the true camera, measured through telemetry k times the
    true height: every box says k (flat ground: the whole scene scales about the camera)."""
    true = GroundProjector.create(K, altitude, pitch)
    centres, headings = _cars(true)
    boxes = predicted_boxes(true, centres, headings, PRIOR.mean)
    told = GroundProjector.create(K, altitude * k, pitch)
    obs = observe(told, boxes, headings, PRIOR, sigma_px=0.0)
    assert np.all(np.isfinite(obs.log_ratio))
    # exact up to the perspective of a car's own height (under 0.7 % at 30 m, less higher up)
    assert np.max(np.abs(obs.log_ratio - math.log(k))) < 0.2 / altitude
    # a car of the prior varies by about 5 % in these extents: each box's sd says so
    assert 0.03 < float(np.sqrt(np.median(obs.var))) < 0.08
    assert np.all(obs.var_prior <= obs.var + 1e-12)


@pytest.mark.parametrize(
    ("lens", "margin"),
    [(LensModel(-0.12, 0.02, 0.0, 0.0, 0.0, "test"), 0.0), (None, 2.0), (None, -1.0)],
    ids=["barrel-lens", "loose-boxes", "tight-boxes"],
)
def test_the_lens_and_the_detector_margin_are_undone(lens: LensModel | None, margin: float) -> None:
    proj = GroundProjector.create(K, 60.0, -50.0, lens=lens)
    centres, headings = _cars(proj, seed=3)
    boxes = predicted_boxes(proj, centres, headings, PRIOR.mean)
    boxes = boxes + np.array([-margin, -margin, margin, margin])
    obs = observe(proj, boxes, headings, PRIOR, margin_px=margin, sigma_px=0.0)
    assert np.max(np.abs(obs.log_ratio)) < 1e-3
    if margin:  # the same boxes without the margin: the cars look larger or smaller
        plain = observe(proj, boxes, headings, PRIOR, sigma_px=0.0)
        assert np.sign(np.median(plain.log_ratio)) == np.sign(margin)


@pytest.mark.parametrize("pitch", [-90.0, -45.0])
@pytest.mark.parametrize("altitude", [60.0, 100.0])
@pytest.mark.parametrize(
    ("k", "extra"), [(1.0, 0.0), (1.1, 0.0), (0.9, 0.0), (1.0, 6.0), (1.1, 6.0), (1.0, -2.0)]
)
def test_a_box_shape_tells_a_margin_from_a_scale(
    pitch: float, altitude: float, k: float, extra: float
) -> None:
    """A wrong scale makes a car's box longer and wider alike; a margin beyond the detector's own
    (shadows boxed with the car) widens its shorter extent more: ``loose_px`` reads that margin
    whatever the scale, and nothing where there is none."""
    true = GroundProjector.create(K, altitude, pitch)
    centres, headings = _cars(true, n=40, seed=5)
    boxes = predicted_boxes(true, centres, headings, PRIOR.mean) + np.array([-1.4, -1.4, 1.4, 1.4])
    boxes = boxes + extra * np.array([-1.0, -1.0, 1.0, 1.0])
    told = GroundProjector.create(K, altitude * k, pitch)
    obs = observe(told, boxes, headings, PRIOR, margin_px=1.4, sigma_px=0.0)
    w = 1.0 / obs.loose_var
    mean = float(np.nansum(w * obs.loose_px) / np.nansum(w))
    assert mean == pytest.approx(extra, abs=0.15 + 0.05 * abs(extra))
    # a diagonal car's two extents move alike: it says little, and its variance says so
    spread = np.sqrt(obs.loose_var)
    assert np.nanmax(spread) > 5 * np.nanmin(spread)


def test_projection_inverts_the_ground_mapping_and_heights_rise_in_an_oblique_view() -> None:
    proj = GroundProjector.create(K, 60.0, -45.0, lens=LensModel(-0.1, 0.0, 0.0, 0.0, 0.0, "t"))
    px = np.array([[400.0, 300.0], [960.0, 540.0], [1500.0, 900.0]])
    ground = proj.to_ground(px)
    back = project_world(proj, np.column_stack([ground, np.zeros(3)]))
    np.testing.assert_allclose(back, px, atol=1e-6)
    raised = project_world(proj, np.column_stack([ground, np.full(3, 1.5)]))
    assert np.all(raised[:, 1] < px[:, 1])  # a roof is above (higher in the image than) its footprint
    behind = project_world(proj, np.array([[0.0, -100.0, 0.0]]))  # behind the camera
    assert np.isnan(behind).all()


@pytest.mark.parametrize(("pitch", "grade"), [(-45.0, 0.08), (-45.0, -0.06), (-90.0, 0.08), (-60.0, 0.05)])
def test_over_a_terrain_model_cars_stand_on_the_graded_road(pitch: float, grade: float) -> None:
    """A road rising ``grade`` northward, the camera looking north: cars of the prior's size on it,
    their boxes by the plane's own heights. Over flat ground the check reads them as the wrong size,
    more the further from the centre's ground; with the frame's terrain model they are the prior's."""
    from pipelines.terrain import TerrainView

    camera, base = 160.0, 100.0  # elevations: the road at 100 m where it passes below the drone
    cot = 1.0 / math.tan(math.radians(-pitch))
    y_c = (camera - base) * cot / (1.0 + grade * cot)  # where the centre ray meets the road
    h_c = camera - (base + grade * y_c)
    view = TerrainView(camera, h_c, lambda xy: (xy[:, 1], xy[:, 0]), lambda north, east: base + grade * north)
    flat = GroundProjector.create(K, h_c, pitch)
    rng = np.random.default_rng(7)
    centres = np.column_stack([rng.uniform(-15, 15, 16), y_c + rng.uniform(-25, 25, 16)])
    headings = np.tile([0.0, 1.0], (16, 1))
    boxes = predicted_boxes(flat, centres, headings, PRIOR.mean, grade * (centres[:, 1] - y_c))
    lifted = GroundProjector(flat.intrinsics, h_c, pitch, flat.image_to_ground, terrain=view)
    on_model = observe(lifted, boxes, headings, PRIOR, sigma_px=0.0).log_ratio
    assert np.max(np.abs(on_model)) < 2e-3
    assert np.allclose(place_vehicles(lifted, boxes, headings, PRIOR.mean), centres, atol=0.03)
    on_flat = observe(flat, boxes, headings, PRIOR, sigma_px=0.0).log_ratio
    rise = grade * (centres[:, 1] - y_c) / h_c  # a car this much nearer the camera looks this much larger
    assert np.corrcoef(on_flat, rise)[0, 1] > 0.9 and np.max(np.abs(on_flat)) > 0.5 * np.max(np.abs(rise))


@pytest.mark.parametrize("pitch", [-90.0, -45.0])
def test_vehicles_are_placed_under_their_boxes(pitch: float) -> None:
    proj = GroundProjector.create(K, 60.0, pitch)
    centres, headings = _cars(proj, n=8, seed=5)
    boxes = predicted_boxes(proj, centres, headings, PRIOR.mean)
    np.testing.assert_allclose(place_vehicles(proj, boxes, headings, PRIOR.mean), centres, atol=0.02)


@pytest.mark.parametrize(("pitch", "share", "bound"), [(-90.0, 10.0, 0.04), (-35.0, 0.85, 1.0)])
def test_a_tall_car_moves_the_ratio_less_than_its_box_height(
    pitch: float, share: float, bound: float
) -> None:
    """A car 20 % taller than the prior: at nadir its height shows only off-centre, as its sides
    (at most 4 % here); at -35 deg the box's height carries it (cot 35 = 1.4 times it) and the
    combination leans on the width, which does not."""
    proj = GroundProjector.create(K, 60.0, pitch)
    centres, _ = _cars(proj, n=16, seed=7)
    headings = np.tile([1.0, 0.0], (16, 1))  # crossing the view
    tall = predicted_boxes(proj, centres, headings, PRIOR.mean * np.array([1.0, 1.0, 1.2, 1.0]))
    plain = predicted_boxes(proj, centres, headings, PRIOR.mean)
    height_only = np.log((tall[:, 3] - tall[:, 1]) / (plain[:, 3] - plain[:, 1]))
    obs = observe(proj, tall, headings, PRIOR, sigma_px=0.0)
    assert np.all(np.abs(obs.log_ratio) < np.minimum(share * np.abs(height_only) + 1e-3, bound))


@pytest.mark.parametrize(
    ("outliers", "shift", "tol"),
    [(0.0, 0.0, 0.01), (0.2, 0.3, 0.012), (0.3, -0.4, 0.015)],
    ids=["clean", "20%-vans", "30%-partial-boxes"],
)
def test_the_session_ratio_resists_outliers(outliers: float, shift: float, tol: float) -> None:
    rng = np.random.default_rng(11)
    n = 400
    x = rng.normal(math.log(1.08), 0.05, n)
    bad = rng.random(n) < outliers
    x[bad] += shift
    est = robust_ratio(x, np.full(n, 0.05))
    assert est is not None
    assert abs(est.mu - math.log(1.08)) < tol
    assert est.se < 0.006
    assert est.n == n


def test_the_standard_error_follows_the_actual_scatter() -> None:
    rng = np.random.default_rng(2)
    sd = np.full(100, 0.05)
    tight = robust_ratio(rng.normal(0, 0.05, 100), sd)
    wide = robust_ratio(rng.normal(0, 0.15, 100), sd)
    assert tight is not None and wide is not None
    assert 0.003 < tight.se < 0.008
    assert wide.se > 2 * tight.se
    assert wide.spread > 2.0 > tight.spread
    assert robust_ratio(np.array([0.1]), np.array([0.05])) is None


def test_a_result_round_trips_and_describes_itself() -> None:
    r = ScaleCheckResult("suspect", 1.1234567, 0.0123456, 31, "too large")
    assert ScaleCheckResult.from_dict(r.to_dict()) == ScaleCheckResult(
        "suspect", 1.1235, 0.0123, 31, "too large"
    )
    assert r.describe() == "scale check suspect: 1.123 +- 0.012 from 31 vehicles (too large)"
    assert ScaleCheckResult("unverified", reason="no vehicles yet").describe() == (
        "scale check unverified (no vehicles yet)"
    )
