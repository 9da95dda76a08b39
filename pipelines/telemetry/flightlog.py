"""Per-frame / per-tick flight logs as CSV: DJI SRT columns already parsed, AirData, Litchi.

Headers are matched case-insensitively after splitting off a unit in brackets
(``height_above_takeoff(feet)`` -> name ``height_above_takeoff``, unit ``feet``; ``OSD.height [ft]``
-> ``osd_height``, ``ft``). Lengths in feet are converted to metres; an unknown unit is an error.

Column meanings (first match wins):

* time: ``timestamp`` (date-time text or seconds), ``time(millisecond)`` (AirData, Litchi),
  ``time_s``, ``time``, ``offsetTime`` / ``OSD.flyTime`` (DatCon), ``datetime(utc)``; else
  ``frame`` / ``fps``;
* height above the take-off point -> ``altitude_m``: ``rel_alt``, ``height``,
  ``height_above_takeoff``, ``osd_height``, ``relative_altitude``, ``altitude`` (in flight-log
  CSVs - Litchi, old AirData - "altitude" is above the take-off point, unlike an SRT's lone
  ``[altitude: ..]``);
* absolute altitude: ``abs_alt``, ``altitude_above_sealevel``, ``absolute_altitude``;
* gimbal: ``gb_pitch`` / ``gimbal_pitch`` / ``gimbal_pitch(degrees)``, ``gb_yaw`` / ``gimbal_yaw`` /
  ``gimbal_heading`` (AirData's plain ``pitch`` is the aircraft's, not the camera's: not used);
* ``focal_len`` (35 mm-eq, same x10 rule as SRT), ``dzoom_ratio`` / ``digital_zoom``,
  ``latitude`` / ``lat``, ``longitude`` / ``lon`` / ``lng``;
* a laser rangefinder's slant range (H20/H30/M30 payloads) -> ``lrf_range_m``:
  ``measure_target_distance`` (Cloud API OSD's name), ``lrf_range``, ``laser_range``; an empty cell
  is no reading (export only the readings whose state was NORMAL).

``timestamp_s`` is relative to the first row kept; when the log has a frame column and ``fps``
is given, the first row's ``frame / fps`` is added so the times line up with the video (without a
time column that makes ``timestamp_s = frame / fps``). With an ``isVideo`` column (AirData), only
the first run of rows recorded while filming is kept.
"""

from __future__ import annotations

import csv
import logging
import math
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from pipelines.errors import TelemetryError
from pipelines.telemetry.srt import focal_35mm_from_literal, real_focal, resolve_camera, zoom_from_literal
from pipelines.types import CameraProfile, Telemetry

log = logging.getLogger(__name__)

_TIME_COLUMNS = (
    "timestamp",
    "time",
    "time_s",
    "time_ms",
    "offsettime",
    "osd_flytime",
    "datetime",
    "datetime_utc",
)
_FRAME_COLUMNS = ("frame", "frame_idx", "frame_index", "frame_id", "frameid", "frame_number")
_COLUMNS: dict[str, tuple[str, ...]] = {
    "altitude_m": (
        "rel_alt",
        "height",
        "height_above_takeoff",
        "osd_height",
        "relative_altitude",
        "rel_altitude",
        "altitude",
    ),
    "abs_altitude_m": ("abs_alt", "altitude_above_sealevel", "absolute_altitude", "abs_altitude"),
    "gimbal_pitch_deg": ("gb_pitch", "gimbal_pitch", "gimbalpitch"),
    "gimbal_yaw_deg": ("gb_yaw", "gimbal_yaw", "gimbal_heading", "gimbalyaw"),
    "focal_length_35mm": ("focal_len", "focal_length_35mm", "focal_35mm"),
    "digital_zoom": ("dzoom_ratio", "digital_zoom", "dzoom"),
    "latitude": ("latitude", "lat", "osd_latitude"),
    "longitude": ("longitude", "lon", "lng", "longtitude", "osd_longitude"),
    "lrf_range_m": ("measure_target_distance", "lrf_range", "laser_range", "lrf_range_m"),
}
_LENGTH_UNITS = {"": 1.0, "m": 1.0, "meter": 1.0, "meters": 1.0, "metre": 1.0, "metres": 1.0}
_LENGTH_UNITS |= {"ft": 0.3048, "feet": 0.3048, "foot": 0.3048}
_ANGLE_UNITS = {"": 1.0, "deg": 1.0, "degree": 1.0, "degrees": 1.0, "°": 1.0}
# Time units as divisors (ticks per second), so that differences of whole ticks stay exact.
_TIME_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0}
_TIME_UNITS |= {"ms": 1e3, "millisecond": 1e3, "milliseconds": 1e3, "us": 1e6, "microsecond": 1e6}
_UNITS_OF: dict[str, dict[str, float]] = {
    "altitude_m": _LENGTH_UNITS,
    "abs_altitude_m": _LENGTH_UNITS,
    "lrf_range_m": _LENGTH_UNITS,
    "gimbal_pitch_deg": _ANGLE_UNITS,
    "gimbal_yaw_deg": _ANGLE_UNITS,
    "latitude": _ANGLE_UNITS,
    "longitude": _ANGLE_UNITS,
}


def split_header(name: str) -> tuple[str, str]:
    """``"Height_Above_Takeoff(feet)"`` -> ``("height_above_takeoff", "feet")``."""
    text = name.strip().lstrip("\ufeff").lower()
    match = re.fullmatch(r"(.*?)\s*[(\[]\s*([^)\]]*?)\s*[)\]]\s*", text)
    base, unit = (match.group(1), match.group(2)) if match else (text, "")
    return re.sub(r"[\s.\-/]+", "_", base).strip("_"), unit


def _find(header: Sequence[tuple[str, str]], names: Sequence[str]) -> int | None:
    for name in names:
        for i, (base, _unit) in enumerate(header):
            if base == name:
                return i
    return None


def _unit_factor(path: Path, header: Sequence[tuple[str, str]], col: int, units: dict[str, float]) -> float:
    base, unit = header[col]
    if unit not in units:
        raise TelemetryError(f"{path}: column {base!r} has an unsupported unit {unit!r}")
    return units[unit]


def _number(cell: str) -> float | None:
    cell = cell.strip()
    if not cell or cell.lower() in ("nan", "none", "null", "n/a", "-"):
        return None
    value = float(cell)
    return value if math.isfinite(value) else None


def _time_value(cell: str) -> float | datetime:
    """A number of ticks or a date-time (subtracted exactly later)."""
    cell = cell.strip()
    try:
        return float(cell)
    except ValueError:
        pass
    if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2}([.,]\d+)?)?", cell):  # time of day only
        cell = "1970-01-01 " + cell.replace(",", ".")
    stamp = datetime.fromisoformat(cell.replace("/", "-").removesuffix("Z"))
    return stamp.replace(tzinfo=None) - (stamp.utcoffset() or timedelta(0))


def _elapsed(t: float | datetime, t0: float | datetime, ticks_per_s: float) -> float:
    if isinstance(t, datetime) and isinstance(t0, datetime):
        return (t - t0).total_seconds()
    if isinstance(t, datetime) or isinstance(t0, datetime):
        raise ValueError("mixed numeric and date-time times")
    return (t - t0) / ticks_per_s


def _video_rows(path: Path, header: Sequence[tuple[str, str]], rows: list[list[str]]) -> list[list[str]]:
    col = _find(header, ("isvideo", "is_video"))
    if col is None:
        return rows
    flags = [r[col].strip().lower() in ("1", "true", "yes") if col < len(r) else False for r in rows]
    if not any(flags):
        return rows
    first = flags.index(True)
    last = flags.index(False, first) if False in flags[first:] else len(rows)
    log.info("%s: using rows %d-%d recorded while filming (isVideo)", path, first, last - 1)
    return rows[first:last]


def _row_time(row: Sequence[str], time_col: int | None, frame_col: int | None) -> float | datetime:
    """The row's time stamp (ticks or date-time), else its frame number."""
    if time_col is not None:
        return _time_value(row[time_col])
    if frame_col is None:
        raise ValueError("no time base")
    return float(row[frame_col])


def _row_values(
    row: Sequence[str], columns: dict[str, int | None], factors: dict[str, float]
) -> dict[str, float | None]:
    """Field -> value in SI units / degrees (None for an empty cell); ValueError on garbage."""
    values: dict[str, float | None] = {}
    for field, col in columns.items():
        cell = row[col].strip() if col is not None and col < len(row) else ""
        if field == "focal_length_35mm":
            values[field] = focal_35mm_from_literal(cell) if cell else None
        elif field == "digital_zoom":
            values[field] = zoom_from_literal(cell) if cell else 1.0
        else:
            x = _number(cell)
            values[field] = None if x is None else x * factors[field]
    if values["latitude"] == 0.0 and values["longitude"] == 0.0:  # no GPS fix
        values["latitude"] = values["longitude"] = None
    return values


def _sample(
    t: float, values: dict[str, float | None], camera: str | None, profile: CameraProfile | None
) -> Telemetry:
    zoom = values.pop("digital_zoom")
    return Telemetry(
        timestamp_s=t,
        focal_length_mm=real_focal(values["focal_length_35mm"], profile),
        digital_zoom=1.0 if zoom is None else zoom,
        camera=camera,
        **values,
    )


def parse_flightlog_csv(
    path: str | Path, fps: float | None = None, camera: str | None = None
) -> list[Telemetry]:
    """Telemetry samples of a CSV flight log (not validated); see the module doc for columns.

    Raises :class:`TelemetryError` when the file cannot be read, has no usable time base
    (no time column, and no frame column with ``fps``), or a column has an unknown unit.
    Rows whose cells do not parse are skipped with one counted warning.
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig", errors="replace") as f:
            table = [row for row in csv.reader(f) if any(cell.strip() for cell in row)]
    except OSError as exc:
        raise TelemetryError(f"cannot read flight log {path}: {exc}") from exc
    except csv.Error as exc:
        raise TelemetryError(f"{path} is not a valid CSV file: {exc}") from exc
    if len(table) < 2:
        raise TelemetryError(f"{path}: no data rows in the flight log")
    header = [split_header(h) for h in table[0]]
    rows = _video_rows(path, header, table[1:])

    time_col = _find(header, _TIME_COLUMNS)
    frame_col = _find(header, _FRAME_COLUMNS)
    if time_col is None and (frame_col is None or not fps):
        raise TelemetryError(
            f"{path}: no time column ({', '.join(_TIME_COLUMNS)}) and no frame column with fps"
        )
    ticks_per_s = float(fps or 1.0) if time_col is None else 1.0  # without a time column: frames
    if time_col is not None and not header[time_col][0].startswith("datetime"):  # its "unit" is a zone
        base, unit = header[time_col]
        time_header = [(base, unit or ("ms" if base == "time_ms" else ""))]
        ticks_per_s = _unit_factor(path, time_header, 0, _TIME_UNITS)
    columns = {field: _find(header, names) for field, names in _COLUMNS.items()}
    factors = {
        field: _unit_factor(path, header, col, _UNITS_OF[field]) if field in _UNITS_OF else 1.0
        for field, col in columns.items()
        if col is not None
    }
    if columns["altitude_m"] is None and columns["abs_altitude_m"] is not None:
        log.warning(
            "%s: no height above the take-off point, only an absolute altitude; altitude_m is left "
            "unknown: give the flying height (--altitude / camera.altitude_m)",
            path,
        )
    name, profile = resolve_camera(camera)

    samples: list[Telemetry] = []
    skipped = 0
    t0: float | datetime | None = None
    offset = 0.0
    for row in rows:
        try:
            t = _row_time(row, time_col, frame_col)
            values = _row_values(row, columns, factors)
            offset_here = float(row[frame_col]) / fps if frame_col is not None and fps else 0.0
            elapsed = 0.0 if t0 is None else _elapsed(t, t0, ticks_per_s)
        except (ValueError, IndexError, OverflowError):
            skipped += 1
            continue
        if t0 is None:
            t0, offset = t, offset_here
        samples.append(_sample(elapsed + offset, values, name, profile))
    if skipped:
        log.warning("%s: skipped %d of %d rows that did not parse", path, skipped, len(rows))
    return samples
