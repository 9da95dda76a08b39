"""The scale check's measurement: cars as a ruler of known size (pure functions; the session's state
is :class:`pipelines.scale_session.ScaleCheck`).

Every speed rests on a ground scale from telemetry the engine cannot see is wrong: a take-off point
above or below the road, the wrong camera profile or zoom, a gimbal that reports -90 while tilted.
On flat ground, a telemetry scale ``k`` times the true one makes every ground distance ``k`` times
too long, whatever the pitch: the whole scene, vehicles included, is seen as the true one scaled by
``k`` about the camera. So the vehicles on the road, measured through the frame's own camera model
(the scale under test), measure ``k`` times their real size, and ``k`` is the factor every speed is
off by. Passenger cars' sizes cluster (a few per cent in width, about 9 % in length): enough of them
give ``k`` to a per cent or two.

Model. A vehicle is three stacked boxes standing on the ground, turned along its direction of travel
(its track's fitted ground velocity): its wheels, its body over the whole footprint up to the belt
line, and its cabin (a share of its length, inset from the sides) up to its height
(:func:`vehicle_corners`). Their corners are projected through the frame's intrinsics, altitude,
pitch and lens (:func:`predicted_boxes`; over a terrain model each vehicle stands on the model's ground
where its ray meets it, :func:`ground_under`), so the prediction holds at nadir and oblique alike: in an
oblique view the box's height in pixels includes the vehicle's height (H cot(pitch) along the line
of sight, +33 % of a car's length at -45 deg) and the model has it. Each detected box's width and
height in pixels are compared to the box a car of the prior's mean size would have at the same place
and heading, in log space (:func:`observe`). The prior's spread of length, width, height and cabin,
carried through the same projection (finite differences), and the box edges' pixel noise give each
comparison's 2 x 2 covariance: at nadir both extents count (height barely shows), in an oblique
view the width across the line of sight counts more than the height along it. The two are combined
by generalised least squares into one log ratio per box.

The session's ratio (:func:`robust_ratio`) is a biweight mean of the tracks' medians, with a
sandwich variance that grows with their actual scatter: SUVs, vans labelled as cars, partial boxes
and a few false tracks do not move it, and a scatter far beyond a car fleet's says so instead of
giving a confident wrong ratio.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pipelines.displacement import box_anchors
from pipelines.geometry import GroundProjector, camera_rotation
from pipelines.lens import distort_points
from pipelines.types import OK, SCALE_CHECK_STATUSES, SUSPECT, UNVERIFIED, ScaleCheckResult


@dataclass(frozen=True, slots=True)
class VehiclePrior:
    """The size distribution (m: mean and one standard deviation) of the vehicles a label covers, as
    the detector boxes them (body, without mirrors), and of their cabin's length as a share of
    theirs (a sedan's glasshouse about 0.6, an SUV's or estate's 0.75, a van's 0.85)."""

    length_m: float
    length_sd_m: float
    width_m: float
    width_sd_m: float
    height_m: float
    height_sd_m: float
    cabin_share: float = 0.65
    cabin_share_sd: float = 0.10

    @property
    def mean(self) -> np.ndarray:
        """Length, width, height (m) and the cabin's share of the length."""
        return np.array([self.length_m, self.width_m, self.height_m, self.cabin_share])

    @property
    def sd(self) -> np.ndarray:
        return np.array([self.length_sd_m, self.width_sd_m, self.height_sd_m, self.cabin_share_sd])


# Passenger cars as a detector labels them ("car": sedans, hatchbacks, estates and SUVs together),
# approximate fleet figures rounded to the centimetre: Europe from the ICCT's European Vehicle
# Market Statistics pocketbooks (the new-car fleet's mean footprint, about 4.4 x 1.8 m, SUVs near a
# third of it) and makers' data for heights; the United States larger (pickups and large SUVs are
# labelled cars too). Set ``scale_check.prior`` to a region's own figures where they are known.
CAR_PRIORS: dict[str, VehiclePrior] = {
    "eu": VehiclePrior(4.46, 0.38, 1.82, 0.08, 1.54, 0.12),
    "us": VehiclePrior(4.90, 0.42, 1.90, 0.09, 1.65, 0.15),
}


# A vehicle's shape (vehicle_corners): wheels up to CLEARANCE_M (inset WHEELS_INSET of the length and
# width on each end and side), the body over the whole footprint up to BELT_SHARE of the height, the
# cabin above it (its length a share of the vehicle's, centred; CABIN_WIDTH_SHARE of the width)
CLEARANCE_M = 0.25
WHEELS_INSET = (0.10, 0.06)
BELT_SHARE = 0.55
CABIN_WIDTH_SHARE = 0.86


def vehicle_corners(centres: np.ndarray, headings: np.ndarray, dims: np.ndarray) -> np.ndarray:
    """(N, 24, 3) world corners of vehicles standing on the ground at ``centres`` (N, 2), their length
    along the unit ``headings`` (N, 2): three stacked boxes (wheels, body, cabin). ``dims`` (N, 4)
    or (4,): length, width, height (m) and the cabin's share of the length."""
    c = np.asarray(centres, dtype=float).reshape(-1, 2)
    f = np.asarray(headings, dtype=float).reshape(-1, 2)
    n = len(c)
    d = np.broadcast_to(np.asarray(dims, dtype=float), (n, 4))
    r = np.column_stack([f[:, 1], -f[:, 0]])
    length, width, height = d[:, 0], d[:, 1], d[:, 2]
    clear = np.minimum(CLEARANCE_M, 0.25 * height)
    belt = BELT_SHARE * height
    # per part (wheels, body, cabin): its length and width (N, 3), its bottom and top (N, 3)
    part_len = np.column_stack([np.full(n, 1 - 2 * WHEELS_INSET[0]), np.ones(n), d[:, 3]]) * length[:, None]
    part_wid = np.array([1 - 2 * WHEELS_INSET[1], 1.0, CABIN_WIDTH_SHARE])[None, :] * width[:, None]
    z = np.stack(
        [np.column_stack([np.zeros(n), clear, belt]), np.column_stack([clear, belt, height])], axis=-1
    )
    along = _CORNER_SIGNS[:, 0][None, None, :] * part_len[:, :, None]  # (N, 3, 4)
    across = _CORNER_SIGNS[:, 1][None, None, :] * part_wid[:, :, None]
    xy = (
        c[:, None, None, :] + along[..., None] * f[:, None, None, :] + across[..., None] * r[:, None, None, :]
    )
    pts = np.empty((n, 3, 4, 2, 3))
    pts[..., :2] = xy[:, :, :, None, :]
    pts[..., 2] = z[:, :, None, :]
    return pts.reshape(n, 24, 3)


_CORNER_SIGNS = np.array([[-0.5, -0.5], [-0.5, 0.5], [0.5, -0.5], [0.5, 0.5]])


def project_world(proj: GroundProjector, points: np.ndarray) -> np.ndarray:
    """World points (..., 3) (the projector's frame: camera above the origin) -> image pixels (..., 2)
    as the lens images them; NaN behind the camera."""
    pts = np.asarray(points, dtype=float)
    flat = pts.reshape(-1, 3) - np.array([0.0, 0.0, proj.altitude_m])
    cam = flat @ camera_rotation(proj.pitch_deg)  # camera-from-world, rows
    k = proj.intrinsics
    with np.errstate(divide="ignore", invalid="ignore"):
        uv = np.column_stack([k.fx * cam[:, 0] / cam[:, 2] + k.cx, k.fy * cam[:, 1] / cam[:, 2] + k.cy])
    uv[cam[:, 2] <= 1e-6] = np.nan
    if proj.lens is not None:
        uv = distort_points(uv, k, proj.lens)
    return uv.reshape(*pts.shape[:-1], 2)


def predicted_boxes(
    proj: GroundProjector,
    centres: np.ndarray,
    headings: np.ndarray,
    dims: np.ndarray,
    ground_z: np.ndarray | None = None,
) -> np.ndarray:
    """(N, 4) image boxes (x0, y0, x1, y1) of the vehicles (:func:`vehicle_corners`), standing
    ``ground_z`` (N,) above the projector's ground plane (None: on it; :func:`ground_under`)."""
    corners = vehicle_corners(centres, headings, dims)
    if ground_z is not None:
        corners[..., 2] += np.nan_to_num(np.asarray(ground_z, dtype=float).reshape(-1), nan=0.0)[:, None]
    uv = project_world(proj, corners)
    return np.concatenate([uv.min(axis=1), uv.max(axis=1)], axis=1)


def ground_under(proj: GroundProjector, centres: np.ndarray) -> np.ndarray | None:
    """(N,) the ground's height under ground points (lifted: ``proj.to_ground``) above the projector's
    plane where the frame has a terrain model (a car on a road that climbs across the view stands
    higher, nearer the camera, than the centre's ground); None over flat ground."""
    if proj.terrain is None:
        return None
    return proj.terrain.relief(centres, proj.altitude_m)


def place_vehicles(
    proj: GroundProjector, xyxy: np.ndarray, headings: np.ndarray, dims: np.ndarray, steps: int = 2
) -> np.ndarray:
    """(N, 2) ground centres at which the vehicles' predicted boxes are centred on the observed ones:
    the observed centre's ground point, moved by what the prediction's centre misses (a vehicle's
    height shifts its box away from its footprint in an oblique view)."""
    target = proj.to_ground(box_anchors(xyxy))
    centres = target.copy()
    for _ in range(steps):
        boxes = predicted_boxes(proj, centres, headings, dims, ground_under(proj, centres))
        centres = centres + (target - proj.to_ground(box_anchors(boxes)))
    return centres


@dataclass(frozen=True, slots=True, eq=False)
class Observation:
    """One frame's comparison of boxes with the prior's car: ``log_ratio`` (N,) the boxes' size over
    the prediction's (log), ``var`` (N,) its variance, ``var_prior`` (N,) the part of it that is the
    vehicle's own size (the same on every frame of one vehicle), ``per_margin_px`` (N,) how much
    the log ratio moves per pixel the detector's margin is off (the same sign on every box of a
    session: it does not average out); NaN where a box cannot be compared. ``loose_px``: how much
    looser than ``margin_px`` the box is for a car's shape (:func:`observe`)."""

    log_ratio: np.ndarray
    var: np.ndarray
    var_prior: np.ndarray
    per_margin_px: np.ndarray
    # the box's shape against the car's: the margin (px a side, beyond ``margin_px``) that would make
    # its two extents read one scale (a scale moves both alike, a margin the shorter one more), its
    # variance and the part of it that is the vehicle's own; NaN where the extents are alike
    loose_px: np.ndarray
    loose_var: np.ndarray
    loose_var_prior: np.ndarray


def observe(
    proj: GroundProjector,
    xyxy: np.ndarray,
    headings: np.ndarray,
    prior: VehiclePrior,
    *,
    margin_px: float = 0.0,
    sigma_px: float = 1.5,
    vehicle_sigma_px: float = 0.0,
    model_frac: float = 0.02,
) -> Observation:
    """Compare each box (N, 4) with the box a car of ``prior``'s mean size would have at its place,
    turned along its ground heading (N, 2, unit vectors). ``margin_px``: what the detector adds to
    each side of a vehicle's box; ``sigma_px``: one box edge's noise from frame to frame;
    ``vehicle_sigma_px``: how much that margin varies from vehicle to vehicle; ``model_frac``: the shape
    model's own misfit (a car is rounded), per extent."""
    xyxy = np.asarray(xyxy, dtype=float).reshape(-1, 4)
    n = len(xyxy)
    if not n:
        empty = np.zeros(0)
        return Observation(empty, empty, empty, empty, empty, empty, empty)
    centres = place_vehicles(proj, xyxy, headings, prior.mean)
    dims = np.vstack([prior.mean, prior.mean + np.diag(prior.sd)])  # the mean, then +1 sd of each
    z = ground_under(proj, centres)
    boxes = predicted_boxes(
        proj,
        np.tile(centres, (5, 1)),
        np.tile(headings, (5, 1)),
        np.repeat(dims, n, axis=0),
        None if z is None else np.tile(z, 5),
    )
    boxes = boxes.reshape(5, n, 4)
    ext = np.stack([boxes[..., 2] - boxes[..., 0], boxes[..., 3] - boxes[..., 1]], axis=-1)  # (5, N, 2)
    pred = ext[0] + 2.0 * margin_px
    seen = np.column_stack([xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        g = (ext[1:] - ext[0]) / pred  # (4, N, 2): one sd of L, W, H and the cabin in log extent
        # the vehicle's own: its size's spread, and how loosely the detector boxes this one (each
        # side, both extents alike: its shadow, its colour against the road)
        loose = vehicle_sigma_px * 2.0 / pred
        cov_prior = np.einsum("dni,dnj->nij", g, g) + loose[:, :, None] * loose[:, None, :]
        noise = 2.0 * sigma_px**2 / pred**2 + model_frac**2
        cov = cov_prior + noise[:, :, None] * np.eye(2)
        r = np.log(seen / pred)
        det = cov[:, 0, 0] * cov[:, 1, 1] - cov[:, 0, 1] ** 2
        a = np.column_stack([cov[:, 1, 1] - cov[:, 0, 1], cov[:, 0, 0] - cov[:, 0, 1]]) / det[:, None]
        total = a.sum(axis=1)
        log_ratio = (a * r).sum(axis=1) / total
        var = 1.0 / total
        w = a / total[:, None]  # the combination's weights: the prior's share of its variance
        var_prior = np.einsum("ni,nij,nj->n", w, cov_prior, w)
        per_margin = (w * 2.0 / pred).sum(axis=1)  # both sides of each extent
        # a wrong scale k makes both extents k times the car's, a margin m adds 2 m px to each: the
        # two extents (less the margin already allowed) give both, m the margin the box's shape
        # says it has beyond margin_px (shadows boxed with the car, another detector's margin)
        car, net = ext[0], seen - 2.0 * margin_px
        lever = 2.0 * (car[:, 0] - car[:, 1])
        lever = np.where(lever != 0, lever, np.nan)
        loose = (net[:, 1] * car[:, 0] - net[:, 0] * car[:, 1]) / lever
        grad = np.column_stack([-car[:, 1] * seen[:, 0], car[:, 0] * seen[:, 1]]) / lever[:, None]  # per log
        loose_var = np.einsum("ni,nij,nj->n", grad, cov, grad)
        loose_var_prior = np.einsum("ni,nij,nj->n", grad, cov_prior, grad)
    bad = ~(np.isfinite(log_ratio) & np.isfinite(var) & (var > 0) & (seen > 0).all(axis=1))
    for arr in (log_ratio, var, var_prior, per_margin, loose, loose_var, loose_var_prior):
        arr[bad] = np.nan
    return Observation(log_ratio, var, var_prior, per_margin, loose, loose_var, loose_var_prior)


@dataclass(frozen=True, slots=True)
class RobustRatio:
    """The session's log ratio: ``mu`` and its standard error ``se``; ``spread``: the tracks' robust
    scatter in units of their own expected sd (about 1 for cars as the prior says; far more: false
    or partial boxes, or not cars); ``n`` the tracks, ``n_inliers`` those the biweight counts."""

    mu: float
    se: float
    spread: float
    n: int
    n_inliers: int


def weighted_median(x: np.ndarray, w: np.ndarray) -> float:
    """The value below which half of the weight ``w`` lies."""
    order = np.argsort(x)
    cum = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cum, cum[-1] / 2)])


def robust_ratio(x: np.ndarray, sd: np.ndarray, c: float = 4.685, iterations: int = 30) -> RobustRatio | None:
    """Tukey-biweight M-estimate of the common location of ``x`` (the tracks' log ratios, their
    expected sd ``sd``), started at the weighted median: values beyond ``c`` sds (vans labelled as
    cars, partial or false boxes) weigh nothing, so a fifth of them at +30 % does not move it. Its
    standard error by the sandwich formula grows with the actual scatter, not only the expected.
    None for fewer than two values."""
    x, sd = np.asarray(x, dtype=float), np.asarray(sd, dtype=float)
    ok = np.isfinite(x) & np.isfinite(sd) & (sd > 0)
    x, sd = x[ok], sd[ok]
    n = len(x)
    if n < 2:
        return None
    mu = weighted_median(x, 1.0 / sd**2)
    for _ in range(iterations):
        u = (x - mu) / sd
        w = np.where(np.abs(u) < c, (1.0 - (u / c) ** 2) ** 2, 0.0) / sd**2
        if w.sum() <= 0:
            break
        new = float((w * x).sum() / w.sum())
        if abs(new - mu) < 1e-10:
            mu = new
            break
        mu = new
    u = (x - mu) / sd
    inside = np.abs(u) < c
    t = (u / c) ** 2
    psi = np.where(inside, u * (1.0 - t) ** 2, 0.0) / sd
    dpsi = np.where(inside, (1.0 - t) * (1.0 - 5.0 * t), 0.0) / sd**2
    denom = float(dpsi.sum())
    spread = 1.4826 * float(np.median(np.abs(u - np.median(u))))
    if denom <= 0:
        return RobustRatio(mu, math.inf, spread, n, int(inside.sum()))
    se = math.sqrt(float((psi**2).sum()) / denom**2 * n / (n - 1))
    return RobustRatio(mu, se, spread, n, int(inside.sum()))


__all__ = [
    "CAR_PRIORS",
    "OK",
    "SCALE_CHECK_STATUSES",
    "SUSPECT",
    "UNVERIFIED",
    "Observation",
    "RobustRatio",
    "ScaleCheckResult",
    "VehiclePrior",
    "vehicle_corners",
    "observe",
    "ground_under",
    "place_vehicles",
    "predicted_boxes",
    "project_world",
    "robust_ratio",
    "weighted_median",
]
