"""Correction arms: what a flight with telemetry errors knows of its height above the road.

Issue 39's benchmark (:mod:`eval.error_budget`) runs every erroneous flight
(:func:`eval.simulate.derive_flight`) under each arm, given to the flight as its own pipeline
overrides (its ``config.yaml``):

* ``none``: nothing (the engine's default): the height above the road is the drone's altitude
  reading, over ground of unknown level (the ``flight`` scale source, a wide sigma).
* ``site``: the pilot measured the take-off point's height above the road: ``camera.takeoff_above_road_m
  = -road_level_m`` exactly, to ``SITE_SIGMA_M`` (the ``site`` source). The barometer's error is
  left: the engine's ``baro_sigma_m`` covers it.
* ``base``: a measured base (:mod:`pipelines.calibrate`). On one frame an officer draws lines between
  road marks of known length: here from the simulator's truth, two segments along the lane markings
  (:data:`ALONG_M`, shortened where the frame is too small) and one across the road from edge line
  to edge line, projected through the *true* camera of that frame (:class:`~eval.simulate.CameraPath`),
  each end moved by click noise (``click_sigma_px``) and each length typed with a relative error
  (``length_sigma_frac``). :func:`pipelines.calibrate.solve_base` solves them against that frame's
  *erroneous* altitude reading and reported pitch, and the solution's reference
  (:meth:`~pipelines.calibrate.BaseSolution.reference`, measured at that frame's time) becomes
  ``camera.height_reference``.
* ``lrf``: an enterprise payload's laser rangefinder (:mod:`pipelines.rangefinder`): nothing in the
  configuration; the flight's SRT carries the laser's readings (:data:`LASER`: the true slant range
  to the image's centre with the issue's noise, at the OSD's 0.5 Hz, two of them from before the
  clip), which the engine takes where their point is the road's.
* ``terrain``: a terrain model of the site (:mod:`eval.site_terrain`: an airborne lidar DTM, 0.15 m)
  and the take-off point on it: the camera's elevation is the take-off point's plus the altitude
  reading, each ray meets the model (:mod:`pipelines.terrain`). ``terrain-glo30``: a 30 m global
  model (2 m, heights above the ellipsoid) and the drone's absolute altitude (the SRT's ``abs_alt``,
  above mean sea level: converted through EGM96); the simulated ``abs_alt`` carries the barometer's
  errors but no GNSS error (the engine's ``altitude_sigma_m``, 3 m, stands for it).
* ``base+lrf``: both: the base's solution (the height and the gimbal's pitch bias, with lines in two
  directions) in the configuration and the laser's readings in the SRT; the engine uses, per frame,
  whichever height leaves the speed less uncertain, the laser's with the pitch the base measured.

:func:`arm_config` returns an arm's overrides and a record of what it knew (for the base: the
lines, the solution and its error against the truth). Everything random is drawn from the seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.simulate import CameraPath, FlightSpec, LaserSim, Road, TelemetryErrors, scene_roads
from eval.simulate.telemetry_errors import erroneous_telemetry
from eval.site_terrain import takeoff_point, write_site_terrain
from pipelines.calibrate import BaseLine, BaseSolution, solve_base
from pipelines.geometry import apply_homography
from pipelines.height import ScalePriors, pitch_sigma_on_road
from pipelines.lens import LensModel, distort_points

ARMS = ("none", "site", "base", "lrf", "base+lrf", "terrain", "terrain-glo30")
DEFAULT_ARMS = ARMS[:5]  # the terrain arms on demand (--arms): each writes a model per flight
# 0.5 Hz, 0.2 m + 0.1 % (the noise), on before the clip: two readings of the hover before it
# come with its first frames (the simulated flights are 8 s long; a live session's laser has been
# ranging since take-off: without them the first 4 s would wait for three readings)
LASER = LaserSim(preroll=2)
SITE_SIGMA_M = 0.3  # a take-off height the pilot measured
CLICK_SIGMA_PX = 1.5
LENGTH_SIGMA_FRAC = 0.005
ALONG_M = (12.0, 30.0)  # segments along the lane markings (shortened to fit the frame)
MIN_LINE_M = 3.0
EDGE_MARGIN = 0.03  # share of the frame kept clear of a line's ends


@dataclass(frozen=True, slots=True)
class TrueLine:
    """A segment on the road: its ends in world metres, its true length (along the ground: on a graded
    road, what a measuring wheel reads) and where it lies."""

    start_xy: tuple[float, float]
    end_xy: tuple[float, float]
    length_m: float
    what: str  # "along" | "across"


def _inside(uv: np.ndarray, width: int, height: int) -> bool:
    mx, my = EDGE_MARGIN * width, EDGE_MARGIN * height
    return bool(
        np.all(np.isfinite(uv))
        and np.all((uv[:, 0] >= mx) & (uv[:, 0] <= width - mx) & (uv[:, 1] >= my) & (uv[:, 1] <= height - my))
    )


def _fit(ends, length: float, project, width: int, height: int) -> float | None:
    """The longest length up to ``length`` (0.5 m steps) whose ends ``ends(L)`` are in view."""
    steps = np.arange(length, MIN_LINE_M - 1e-9, -0.5)
    for L in steps:
        if _inside(project(ends(float(L))), width, height):
            return float(L)
    return None


def true_lines(
    camera: CameraPath, road: Road, frame: int, along: Sequence[float] = ALONG_M
) -> list[TrueLine]:
    """Segments of known length on ``road`` in view on ``frame``: along lane lines (the dashed
    dividers, else the centre line) centred where the road passes nearest the image centre, and one
    across from edge line to edge line."""
    spec = camera.spec
    h_img = camera.world_to_image(frame)

    def project(xy: np.ndarray) -> np.ndarray:
        return apply_homography(h_img, np.asarray(xy, dtype=np.float64))

    centre = camera.image_to_world(frame, np.array([[spec.width / 2, spec.height / 2]]))[0]
    lw, n = road.lane_width_m, road.lanes_per_direction
    offsets = [k * lw for k in (1, -1, 2, -2) if abs(k) < n] or [0.0]
    out: list[TrueLine] = []
    for i, length in enumerate(along):
        line = road.centre.offset(offsets[i % len(offsets)])
        s0 = float(line.cum[int(np.argmin(np.linalg.norm(line.points - centre, axis=1)))])

        def ends(L: float, line=line, s0=s0) -> np.ndarray:
            return line.at(np.array([s0 - L / 2, s0 + L / 2]))[0]

        fitted = _fit(ends, float(length), project, spec.width, spec.height)
        if fitted is not None:
            a, b = ends(fitted)
            out.append(TrueLine(tuple(a), tuple(b), _on_ground(camera, a, b), "along"))
    s0 = float(road.centre.cum[int(np.argmin(np.linalg.norm(road.centre.points - centre, axis=1)))])
    mid, tangent = road.centre.at(np.array([s0]))
    normal = np.array([tangent[0, 1], -tangent[0, 0]])

    def across(L: float) -> np.ndarray:
        return np.stack([mid[0] - normal * L / 2, mid[0] + normal * L / 2])

    fitted = _fit(across, 2 * n * lw, project, spec.width, spec.height)
    if fitted is not None:
        a, b = across(fitted)
        out.append(TrueLine(tuple(a), tuple(b), _on_ground(camera, a, b), "across"))
    return out


def _on_ground(camera: CameraPath, a: np.ndarray, b: np.ndarray) -> float:
    """The length between world points ``a`` and ``b`` along the ground (the chord of a graded plane)."""
    run = float(np.hypot(*(np.asarray(b) - np.asarray(a))))
    if camera.surface is None:
        return run
    rise = float(np.diff(camera.surface.height(np.array([a, b])))[0])
    return math.hypot(run, rise)


def drawn_lines(
    camera: CameraPath,
    frame: int,
    lines: Sequence[TrueLine],
    rng: np.random.Generator,
    click_sigma_px: float = CLICK_SIGMA_PX,
    length_sigma_frac: float = LENGTH_SIGMA_FRAC,
) -> list[BaseLine]:
    """The lines as an officer draws them on ``frame``: the true ends projected through the true
    camera (and its lens: where the frame shows them) plus click noise, the true lengths typed with a
    relative error. The drone hovers while the officer draws (docs/api.md): no rolling shutter."""
    h_img = camera.world_to_image(frame)
    out = []
    for ln in lines:
        uv = apply_homography(h_img, np.array([ln.start_xy, ln.end_xy]))
        if camera.distorts:
            uv = distort_points(uv, camera.intrinsics, camera.lens)
        uv = uv + rng.normal(0.0, click_sigma_px, (2, 2))
        uv[:, 0] = np.clip(uv[:, 0], 0, camera.spec.width)
        uv[:, 1] = np.clip(uv[:, 1], 0, camera.spec.height)
        typed = ln.length_m * (1.0 + rng.normal(0.0, length_sigma_frac))
        out.append(
            BaseLine((float(uv[0, 0]), float(uv[0, 1])), (float(uv[1, 0]), float(uv[1, 1])), float(typed))
        )
    return out


@dataclass(frozen=True, slots=True)
class MeasuredBase:
    """A measured base drawn from the truth and solved against erroneous telemetry."""

    frame: int
    time_s: float
    lines: tuple[TrueLine, ...]
    solution: BaseSolution
    true_height_m: float
    true_pitch_deg: float

    @property
    def height_error_m(self) -> float:
        return self.solution.height_m - self.true_height_m

    def to_dict(self) -> dict[str, Any]:
        return {
            "frame": self.frame,
            "time_s": self.time_s,
            "true_lengths_m": [round(ln.length_m, 3) for ln in self.lines],
            "directions": [ln.what for ln in self.lines],
            "true_height_m": self.true_height_m,
            "height_error_m": round(self.height_error_m, 4),
            "height_z": round(self.height_error_m / self.solution.height_sigma_m, 3),
            "true_pitch_deg": self.true_pitch_deg,
            "solution": self.solution.to_dict(),
        }


def measured_base(
    spec: FlightSpec,
    errors: TelemetryErrors,
    rng: np.random.Generator,
    *,
    frame: int | None = None,
    along: Sequence[float] = ALONG_M,
    click_sigma_px: float = CLICK_SIGMA_PX,
    length_sigma_frac: float = LENGTH_SIGMA_FRAC,
    pitch_sigma_deg: float | None = None,
    lens: LensModel | None = None,
) -> MeasuredBase:
    """Draw a base on ``frame`` (default: the middle one) of the flight of ``spec`` and solve it with
    the telemetry ``errors`` give that frame (:mod:`pipelines.calibrate`); ``pitch_sigma_deg``: the
    prior on the pitch against the road (None: the engine's default, the gimbal's and the road's tilt);
    ``lens``: the lens the engine is told (its profile), undone on the drawn ends (None: a pinhole)."""
    camera, roads = scene_roads(spec)
    k = spec.n_frames // 2 if frame is None else int(frame)
    lines = true_lines(camera, roads[0], k, along)
    if not lines:
        raise ValueError(f"no road segment of {MIN_LINE_M:g} m or more is in view on frame {k}")
    drawn = drawn_lines(camera, k, lines, rng, click_sigma_px, length_sigma_frac)
    truth = camera.telemetry()
    reading = erroneous_telemetry(truth, errors)[k]
    solution = solve_base(
        drawn,
        camera.intrinsics,
        reading.altitude_m,
        reading.gimbal_pitch_deg,
        click_sigma_px=click_sigma_px,
        length_sigma_frac=length_sigma_frac,
        pitch_sigma_deg=pitch_sigma_on_road(ScalePriors()) if pitch_sigma_deg is None else pitch_sigma_deg,
        lens=lens,
    )
    return MeasuredBase(
        k,
        float(camera.times[k]),
        tuple(lines),
        solution,
        float(truth[k].altitude_m),
        float(truth[k].gimbal_pitch_deg),
    )


def arm_config(
    arm: str,
    spec: FlightSpec,
    errors: TelemetryErrors,
    seed: int,
    *,
    base_frame: int | None = None,
    workdir: Path | None = None,
    lens: LensModel | None = None,
) -> tuple[dict[str, dict[str, Any]] | None, dict[str, Any]]:
    """(the flight's pipeline overrides under ``arm``, the record of what the arm knew); a terrain arm
    writes its model into ``workdir``; ``lens``: the lens the engine is told (a base's ends undone
    through it)."""
    if arm == "none":
        return None, {"arm": arm}
    if arm == "site":
        takeoff = -errors.road_level_m
        camera = {"takeoff_above_road_m": takeoff, "takeoff_above_road_sigma_m": SITE_SIGMA_M}
        return {"camera": camera}, {"arm": arm, "takeoff_above_road_m": takeoff, "sigma_m": SITE_SIGMA_M}
    if arm == "lrf":
        return None, {"arm": arm, "laser": LASER.to_dict()}
    if arm.startswith("terrain"):
        if workdir is None:
            raise ValueError(f"the {arm} arm needs a folder for its terrain model")
        kind = "lidar" if arm == "terrain" else arm.split("-", 1)[1]
        record = write_site_terrain(
            workdir / f"{kind}.tif", spec, errors.road_level_m, kind, np.random.default_rng([seed, 3939])
        )
        terrain: dict[str, Any] = {"dem": record["path"], "sigma_m": record["sigma_m"]}
        if kind == "lidar":  # the pilot says where they took off: its height on the model + the barometer
            terrain["takeoff"] = list(takeoff_point(spec))
        else:  # the drone's absolute altitude (SRT abs_alt, above sea level) into the model's ellipsoid
            terrain |= {"dem_datum": "ellipsoid", "altitude_datum": "egm96"}
        return {"camera": {"terrain": terrain}}, {"arm": arm, "terrain": record}
    if arm in ("base", "base+lrf"):
        base = measured_base(spec, errors, np.random.default_rng([seed, 39]), frame=base_frame, lens=lens)
        ref = base.solution.reference(at_time_s=base.time_s, set_by="eval.correction")
        record = {"arm": arm, "base": base.to_dict()} | ({"laser": LASER.to_dict()} if arm != "base" else {})
        return {"camera": {"height_reference": ref.to_dict()}}, record
    raise ValueError(f"unknown correction arm {arm!r}: one of {', '.join(ARMS)}")


def relative_height_error(record: dict[str, Any]) -> float:
    """A base arm's solved height error relative to the true height (NaN for the other arms)."""
    base = record.get("base")
    return base["height_error_m"] / base["true_height_m"] if base else math.nan


__all__ = [
    "ARMS",
    "DEFAULT_ARMS",
    "LASER",
    "MeasuredBase",
    "TrueLine",
    "arm_config",
    "drawn_lines",
    "measured_base",
    "relative_height_error",
    "true_lines",
]
