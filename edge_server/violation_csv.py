"""A violation as a CSV row (``GET /api/v1/violations.csv``): the API's fields, flat, in a fixed
order, safe to open in a spreadsheet. Columns are only ever appended (a spreadsheet or script that
reads them by position keeps working): the ticket's came after ``server_id``; the measuring base is
flattened into ``base_*`` columns; the scale's (issue 39) came last, its pitch and height reference
flattened into ``scale_*`` columns; the scale check's (issue 40) after them as ``scale_check_*``,
then the pitch check's (issue 39) as ``pitch_check_*``."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from edge_server.schemas import ViolationOut

CSV_COLUMNS = (
    "id",
    "occurred_at",
    "session_id",
    "track_id",
    "class_name",
    "zone",
    "speed_limit_kmh",
    "peak_speed_kmh",
    "mean_speed_kmh",
    "sigma_kmh",
    "start_time_s",
    "end_time_s",
    "start_frame",
    "end_frame",
    "latitude",
    "longitude",
    "drone_latitude",
    "drone_longitude",
    "altitude_m",
    "scale_source",
    "false_positive",
    "snapshot_url",
    "clip_url",
    "server_id",
    # the ticket (issue 38): empty on legacy rows, and the speed without a measuring base
    "ticket_speed_kmh",
    "ticket_sigma_kmh",
    "tolerance_kmh",
    "confidence_k",
    "base_start_time_s",
    "base_end_time_s",
    "base_start_frame",
    "base_end_frame",
    "base_distance_m",
    "status",
    "status_reason",
    # the scale the ticket rests on (issue 39): empty on rows stored before it, and without one
    "height_above_road_m",
    "height_sigma_m",
    "scale_sigma_pct",
    "scale_pitch_deg",
    "scale_pitch_sigma_deg",
    "scale_reference",
    "scale_set_by",
    "scale_set_at",
    # the scale check from the vehicles (issue 40): empty on rows stored before it
    "scale_check_status",
    "scale_check_ratio",
    "scale_check_sigma",
    "scale_check_n",
    "scale_check_reason",
    # the pitch check against the traffic (issue 39): empty on rows stored before it
    "pitch_check_status",
    "pitch_check_error_deg",
    "pitch_check_sigma_deg",
    "pitch_check_vehicles",
    "pitch_check_reason",
    # how far the traffic's pitch moved the scale's (pitch_check.correct): empty without a scale
    "scale_pitch_from_traffic_deg",
)
BASE_PREFIX = "base_"
# A text cell a spreadsheet would run as a formula (OWASP "CSV injection"): quoted with a leading '.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_values(violation: ViolationOut) -> list[Any]:
    data = violation.model_dump()
    base = data["base"] or {}
    for name in CSV_COLUMNS:
        if name.startswith(BASE_PREFIX):
            data[name] = base.get(name.removeprefix(BASE_PREFIX))
    scale = data["scale"] or {}
    reference = scale.get("reference") or {}
    data["scale_pitch_deg"] = scale.get("pitch_deg")
    data["scale_pitch_sigma_deg"] = scale.get("pitch_sigma_deg")
    data["scale_pitch_from_traffic_deg"] = scale.get("pitch_from_traffic_deg")
    data["scale_reference"] = reference.get("detail")
    data["scale_set_by"] = reference.get("set_by")
    data["scale_set_at"] = reference.get("set_at")
    check = data["scale_check"] or {}
    for key in ("status", "ratio", "sigma", "n", "reason"):
        data[f"scale_check_{key}"] = check.get(key)
    pitch = data["pitch_check"] or {}
    for key in ("status", "sigma_deg", "vehicles", "reason"):
        data[f"pitch_check_{key}"] = pitch.get(key)
    data["pitch_check_error_deg"] = pitch.get("pitch_error_deg")
    return [_cell(data[name]) for name in CSV_COLUMNS]


def csv_line(values: Sequence[Any]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(values)
    return out.getvalue()
