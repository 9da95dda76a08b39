"""A violation as a CSV row (``GET /api/v1/violations.csv``): the API's fields, flat, in a fixed
order, safe to open in a spreadsheet. Columns are only ever appended (a spreadsheet or script that
reads them by position keeps working): the ticket's came after ``server_id``; the measuring base is
flattened into ``base_*`` columns."""

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
    return [_cell(data[name]) for name in CSV_COLUMNS]


def csv_line(values: Sequence[Any]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(values)
    return out.getvalue()
