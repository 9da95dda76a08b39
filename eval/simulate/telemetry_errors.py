"""Real-world telemetry errors on a simulated flight, without rendering it again.

A simulated flight's telemetry is exact: its altitude is the camera's height above the road and its
gimbal pitch the true one. A real drone's is not (issue 39):

* ``road_level_m``: the road's height above the take-off point. DJI's ``rel_alt`` is the height
  above the take-off point, so a drone flying 60 m above a road that lies 8 m *above* the take-off
  point reads 68 m (``road_level_m = +8``: it reads higher, and every speed is 13 % high); a road
  below the take-off point (negative) makes it read lower. The engine's
  ``camera.takeoff_above_road_m`` is its opposite: ``-road_level_m``.
* ``altitude_bias_m`` and ``altitude_drift_m_per_min``: the barometer's offset when the video
  starts and its drift from then on (both added to ``rel_alt`` and ``abs_alt``).
* ``pitch_bias_deg``: the gimbal's reported pitch is the true one plus this (clamped to DJI's
  [-90, 30]: a nadir gimbal never reads below -90, so a negative bias at nadir vanishes).
* ``delay_s`` and ``rate_hz``: the telemetry arrives late (the sample stamped ``t`` carries the
  state of ``t - delay_s``) and is updated ``rate_hz`` times a second (a 0.5 Hz OSD), its values
  held in between; None: every frame.

A flight may also carry an enterprise payload's laser rangefinder (:class:`LaserSim`): its readings
of the true slant range, with noise, at the OSD's rate, in the SRT as ``measure_target_distance``.

:func:`derive_flight` writes a new flight folder from a simulated one: the video, the ground truth,
the road masks, ``seqinfo.ini`` and ``flight.yaml`` are symbolic links to the source's (nothing big
is copied, the truth stays exact), ``video.SRT`` is written again from the exact camera path
(:class:`~eval.simulate.camera.CameraPath`) with the errors applied, ``telemetry_errors.json``
records what was injected and ``telemetry_errors.csv`` the injected error of every frame (reading
minus truth, as the SRT holds it). A flight may carry its own pipeline settings in ``config.yaml``
(:data:`FLIGHT_CONFIG`: sections of overrides, e.g. the height reference a correction arm gives it;
``airpatrol eval`` applies them to that flight, :mod:`eval.datasets`). :class:`ErrorPrior` draws
errors at random (seeded) from stated standard deviations.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from eval.simulate.camera import CameraPath
from eval.simulate.spec import FlightSpec, SimulationError
from pipelines.height import ScalePriors, pitch_sigma_on_road
from pipelines.telemetry import interpolate_telemetry, write_srt
from pipelines.telemetry.validate import MAX_PITCH_DEG, MIN_ALTITUDE_M, MIN_PITCH_DEG
from pipelines.types import Telemetry

ERRORS_FILE = "telemetry_errors.json"
ERRORS_TABLE = "telemetry_errors.csv"
FLIGHT_CONFIG = "config.yaml"  # the flight's own pipeline overrides (sections of a PipelineConfig)
# linked from the source flight, never copied (the video and the truth stay exactly the source's)
LINKED = ("video.mp4", "gt", "road_mask", "seqinfo.ini", "flight.yaml")
TABLE_COLUMNS = (
    "frame", "time_s", "state_time_s", "true_altitude_m", "altitude_m", "altitude_error_m",
    "true_pitch_deg", "pitch_deg", "pitch_error_deg",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class TelemetryErrors:
    """The errors of one flight's telemetry (see the module docstring for each; all zero: exact)."""

    road_level_m: float = 0.0
    altitude_bias_m: float = 0.0
    altitude_drift_m_per_min: float = 0.0
    pitch_bias_deg: float = 0.0
    delay_s: float = 0.0
    rate_hz: float | None = None

    def __post_init__(self) -> None:
        limits = {
            "road_level_m": 200.0,
            "altitude_bias_m": 50.0,
            "altitude_drift_m_per_min": 20.0,
            "pitch_bias_deg": 15.0,
        }
        for name, limit in limits.items():
            value = getattr(self, name)
            if not (math.isfinite(value) and abs(value) <= limit):
                raise SimulationError(f"telemetry errors: {name} must be within +-{limit:g}, got {value}")
        if not (math.isfinite(self.delay_s) and 0.0 <= self.delay_s <= 10.0):
            raise SimulationError(f"telemetry errors: delay_s must be in [0, 10] s, got {self.delay_s}")
        if self.rate_hz is not None and not (math.isfinite(self.rate_hz) and 0.05 <= self.rate_hz <= 1000):
            raise SimulationError(f"telemetry errors: rate_hz must be in [0.05, 1000] Hz, got {self.rate_hz}")

    @property
    def exact(self) -> bool:
        return self == TelemetryErrors()

    def altitude_error_m(self, state_time_s: float) -> float:
        """What the reading adds to the true height above the road, for the state at that time."""
        return self.road_level_m + self.baro_error_m(state_time_s)

    def baro_error_m(self, state_time_s: float) -> float:
        """The barometer's error (bias and drift since the video started)."""
        return self.altitude_bias_m + self.altitude_drift_m_per_min * state_time_s / 60.0

    def state_time(self, t: float, start_s: float = 0.0) -> float:
        """The time whose state the sample stamped ``t`` carries: ``delay_s`` earlier, at the last
        update of a ``rate_hz`` feed (updates at ``start_s + j / rate_hz``), never before ``start_s``."""
        tau = t - self.delay_s
        if self.rate_hz is not None:
            period = 1.0 / self.rate_hz
            tau = start_s + math.floor((tau - start_s) / period + 1e-9) * period
        return max(tau, start_s)

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> TelemetryErrors:
        known = {f.name for f in fields(TelemetryErrors)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SimulationError(f"telemetry errors: unknown keys {unknown} (known: {sorted(known)})")
        return TelemetryErrors(**{k: (None if v is None else float(v)) for k, v in data.items()})

    def describe(self) -> str:
        """One line: the non-zero errors (``exact`` when there is none)."""
        parts = []
        if self.road_level_m:
            parts.append(f"road {self.road_level_m:+g} m above take-off")
        if self.altitude_bias_m:
            parts.append(f"altitude {self.altitude_bias_m:+g} m")
        if self.altitude_drift_m_per_min:
            parts.append(f"drift {self.altitude_drift_m_per_min:+g} m/min")
        if self.pitch_bias_deg:
            parts.append(f"pitch {self.pitch_bias_deg:+g} deg")
        if self.delay_s:
            parts.append(f"delay {self.delay_s:g} s")
        if self.rate_hz is not None:
            parts.append(f"{self.rate_hz:g} Hz")
        return ", ".join(parts) or "exact"


_ENGINE = ScalePriors()  # the engine's defaults (pipelines.config.CameraConfig): one source


@dataclass(frozen=True, slots=True)
class ErrorPrior:
    """Standard deviations (zero-mean normal) from which :meth:`draw` takes a flight's errors. The
    defaults are the engine's own priors (``camera.unknown_ground_sigma_m``, ``baro_sigma_m``, and
    ``pitch_sigma_deg`` with ``ground_tilt_sigma_deg``: a road's grade along the view is to the camera
    a pitch bias against the road, exactly so for a plane but for the along-slope speed's sqrt(1 + g^2),
    tests/eval/test_simulate_grade.py): flights drawn from them check that the sigmas the engine
    reports hold (not the terrain arms': their model is level where the road's tilt was drawn)."""

    road_level_sigma_m: float = _ENGINE.unknown_ground_sigma_m
    altitude_bias_sigma_m: float = _ENGINE.baro_sigma_m
    pitch_bias_sigma_deg: float = pitch_sigma_on_road(_ENGINE)
    altitude_drift_sigma_m_per_min: float = 0.0

    def draw(self, rng: np.random.Generator) -> TelemetryErrors:
        road, bias, pitch, drift = rng.normal(0.0, 1.0, 4)
        return TelemetryErrors(
            road_level_m=round(float(road * self.road_level_sigma_m), 3),
            altitude_bias_m=round(float(bias * self.altitude_bias_sigma_m), 3),
            pitch_bias_deg=round(float(pitch * self.pitch_bias_sigma_deg), 3),
            altitude_drift_m_per_min=round(float(drift * self.altitude_drift_sigma_m_per_min), 3),
        )

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    def describe(self) -> str:
        text = (
            f"road level N(0, {self.road_level_sigma_m:g} m), altitude bias N(0, {self.altitude_bias_sigma_m:g} m), "
            f"pitch bias N(0, {self.pitch_bias_sigma_deg:g} deg)"
        )
        if self.altitude_drift_sigma_m_per_min:
            text += f", drift N(0, {self.altitude_drift_sigma_m_per_min:g} m/min)"
        return text


@dataclass(frozen=True, slots=True)
class LaserSim:
    """An enterprise payload's laser rangefinder in the flight's OSD: a reading ``hz`` times a
    second (DJI's OSD: 0.5 Hz), the true slant range to the point at the image's centre over the
    flat road (the state the sample carries: delayed as the rest) plus N(0, ``sigma_m`` +
    ``sigma_frac`` x range) - the issue's 0.2 m + 0.1 %. ``preroll``: readings the OSD gave before
    the clip began (a pilot hovering with the laser on, as a live session runs before a car comes),
    delivered with the clip's first frames after its first reading (of the same state)."""

    hz: float = 0.5
    sigma_m: float = 0.2
    sigma_frac: float = 0.001
    preroll: int = 0

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def _laser(state: Telemetry, sim: LaserSim, rng: np.random.Generator) -> float | None:
    """A reading of the true state ``state`` (None where the laser gets no echo: level or up)."""
    if state.altitude_m is None or state.gimbal_pitch_deg is None or state.gimbal_pitch_deg >= -1.0:
        return None
    true_range = state.altitude_m / math.sin(math.radians(-state.gimbal_pitch_deg))
    reading = true_range + float(rng.normal(0.0, sim.sigma_m + sim.sigma_frac * true_range))
    return round(reading, 2) if 3.0 <= reading <= 3000.0 else None


def _truth_at(truth: Sequence[Telemetry], times: np.ndarray, tau: float) -> Telemetry:
    """The exact telemetry at ``tau`` (linear between the per-frame samples; the camera path is
    linear in time between frames)."""
    i = int(np.searchsorted(times, tau, side="right"))
    if i <= 0:
        return truth[0]
    if i >= len(truth):
        return truth[-1]
    return interpolate_telemetry(truth[i - 1], truth[i], tau)


def erroneous_telemetry(
    truth: Sequence[Telemetry], errors: TelemetryErrors, laser: LaserSim | None = None, seed: int = 0
) -> list[Telemetry]:
    """``truth`` (one exact sample per frame) as a drone with ``errors`` would have logged it: the
    same timestamps, each carrying the (delayed, held) state with the altitude and pitch errors;
    with ``laser``, a laser range on the first sample of each of its periods (seeded noise)."""
    if not truth:
        raise SimulationError("no telemetry samples to apply errors to")
    times = np.array([s.timestamp_s for s in truth])
    rng = np.random.default_rng(seed)
    out = []
    last_period = None
    for s in truth:
        tau = errors.state_time(s.timestamp_s, float(times[0]))
        state = _truth_at(truth, times, tau)
        lrf = None
        if laser is not None:
            period = math.floor((s.timestamp_s - float(times[0])) * laser.hz + 1e-9)
            if period != last_period or len(out) <= laser.preroll:
                last_period, lrf = period, _laser(state, laser, rng)
        altitude = state.altitude_m
        if altitude is not None:
            altitude = altitude + errors.altitude_error_m(tau)
            if altitude <= MIN_ALTITUDE_M:
                raise SimulationError(
                    f"with {errors.describe()} the drone would read {altitude:.2f} m at t={s.timestamp_s:.2f} s "
                    f"(a reading must stay above {MIN_ALTITUDE_M:g} m): lower the road level"
                )
        abs_alt = state.abs_altitude_m
        if abs_alt is not None:
            abs_alt = abs_alt + errors.baro_error_m(tau)
        pitch = state.gimbal_pitch_deg
        if pitch is not None:
            pitch = min(max(pitch + errors.pitch_bias_deg, MIN_PITCH_DEG), MAX_PITCH_DEG)
        out.append(
            replace(
                state,
                timestamp_s=s.timestamp_s,
                altitude_m=altitude,
                abs_altitude_m=abs_alt,
                gimbal_pitch_deg=pitch,
                lrf_range_m=lrf,
                lrf_time_s=None,
            )
        )
    return out


def error_rows(
    truth: Sequence[Telemetry], reported: Sequence[Telemetry], errors: TelemetryErrors
) -> list[tuple]:
    """One row per frame (:data:`TABLE_COLUMNS`): the reading against the truth of the same frame."""
    t0 = truth[0].timestamp_s
    rows = []
    for k, (t, r) in enumerate(zip(truth, reported, strict=True)):
        alt_err = None if t.altitude_m is None else r.altitude_m - t.altitude_m
        pitch_err = None if t.gimbal_pitch_deg is None else r.gimbal_pitch_deg - t.gimbal_pitch_deg
        rows.append(
            (
                k + 1,
                t.timestamp_s,
                errors.state_time(t.timestamp_s, t0),
                t.altitude_m,
                r.altitude_m,
                alt_err,
                t.gimbal_pitch_deg,
                r.gimbal_pitch_deg,
                pitch_err,
            )
        )
    return rows


def _link(target: Path, link: Path) -> None:
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.exists():
        raise SimulationError(f"{link} exists and is not a link: derive into an empty folder")
    link.symlink_to(target.resolve(), target_is_directory=target.is_dir())


def _summary(rows: Sequence[tuple]) -> dict[str, dict[str, float] | None]:
    out: dict[str, dict[str, float] | None] = {}
    for name, col in (("altitude_error_m", 5), ("pitch_error_deg", 8)):
        values = np.array([r[col] for r in rows if r[col] is not None], dtype=float)
        out[name] = (
            {"mean": float(values.mean()), "min": float(values.min()), "max": float(values.max())}
            if values.size
            else None
        )
    return out


def derive_flight(
    source: str | Path,
    out: str | Path,
    errors: TelemetryErrors,
    *,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    label: str = "",
    extra: Mapping[str, Any] | None = None,
    laser: LaserSim | None = None,
    seed: int = 0,
) -> Path:
    """Write the flight of ``source`` (a simulated flight folder) with ``errors`` into ``out`` (see
    the module docstring); ``config``: the flight's own pipeline overrides (:data:`FLIGHT_CONFIG`),
    ``label`` and ``extra`` go into the record; ``laser``: its SRT carries a rangefinder's readings
    (``seed``: their noise). Returns ``out``."""
    source, out = Path(source), Path(out)
    spec_path = source / "flight.yaml"
    if not (spec_path.is_file() and (source / "video.mp4").is_file()):
        raise SimulationError(f"{source} is not a simulated flight (flight.yaml and video.mp4)")
    if source.resolve() == out.resolve():
        raise SimulationError("derive a flight into another folder than its source")
    spec = FlightSpec.from_yaml(spec_path)
    out.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        if (source / name).exists():
            _link(source / name, out / name)
    truth = CameraPath(spec).telemetry()
    reported = erroneous_telemetry(truth, errors, laser, seed)
    write_srt(reported, out / "video.SRT", start_time=spec.start_datetime)
    rows = error_rows(truth, reported, errors)
    with (out / ERRORS_TABLE).open("w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(TABLE_COLUMNS)
        wr.writerows([[r[0], *("" if v is None else repr(float(v)) for v in r[1:])] for r in rows])
    record = {
        "source": os.fspath(source.resolve()),
        "label": label,
        "errors": errors.to_dict(),
        "description": errors.describe(),
        "injected": _summary(rows),
        "config": dict(config) if config else None,
        "laser": None if laser is None else laser.to_dict(),
        **dict(extra or {}),
    }
    (out / ERRORS_FILE).write_text(json.dumps(record, indent=2))
    config_path = out / FLIGHT_CONFIG
    if config:
        config_path.write_text(yaml.safe_dump(json.loads(json.dumps(config)), sort_keys=False))
    elif config_path.exists():
        config_path.unlink()
    return out


def read_errors(flight_dir: str | Path) -> dict | None:
    """The record :func:`derive_flight` wrote (None for a flight without injected errors)."""
    path = Path(flight_dir) / ERRORS_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def read_error_table(flight_dir: str | Path) -> dict[str, np.ndarray]:
    """``telemetry_errors.csv`` as columns (NaN where a value is missing)."""
    with (Path(flight_dir) / ERRORS_TABLE).open() as fh:
        rows = list(csv.DictReader(fh))
    return {c: np.array([float(r[c]) if r[c] else math.nan for r in rows]) for c in TABLE_COLUMNS}


__all__ = [
    "ERRORS_FILE",
    "ERRORS_TABLE",
    "FLIGHT_CONFIG",
    "ErrorPrior",
    "LaserSim",
    "TelemetryErrors",
    "derive_flight",
    "erroneous_telemetry",
    "error_rows",
    "read_error_table",
    "read_errors",
]
