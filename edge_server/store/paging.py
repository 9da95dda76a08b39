"""How lists are read: the violation list's filter (:class:`ViolationFilter`) and sorts
(:data:`SORTS`), and keyset pagination: a :class:`Page` of rows with the opaque cursor of the
next one; a cursor that comes back from a client is checked field by field (:class:`CursorError`,
HTTP 400), never handed to the database as it is."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, or_

SORTS: dict[str, tuple[str, bool]] = {
    # public name -> (column attribute, descending)
    "-occurred_at": ("occurred_at", True),
    "occurred_at": ("occurred_at", False),
    # the speed on the ticket; rows without one (no measuring base, or stored before it) come last
    # in both directions
    "-ticket_speed_kmh": ("ticket_speed_kmh", True),
    "ticket_speed_kmh": ("ticket_speed_kmh", False),
    # the highest per-frame estimate: informative, not the ticket speed
    "-peak_speed_kmh": ("peak_speed_kmh", True),
    "peak_speed_kmh": ("peak_speed_kmh", False),
    "-id": ("id", True),
    "id": ("id", False),
}
# each sort column's cursor value kind (decode_cursor); "float_or_null": a nullable column
SORT_KINDS: dict[str, str] = {
    "occurred_at": "datetime",
    "ticket_speed_kmh": "float_or_null",
    "peak_speed_kmh": "float",
    "id": "int",
}


class CursorError(ValueError):
    pass


@dataclass(frozen=True)
class ViolationFilter:
    session_id: str | None = None
    since: dt.datetime | None = None  # occurred_at >= since
    until: dt.datetime | None = None  # occurred_at < until
    # the ticket speed: a speed filter leaves out the rows without one
    min_speed_kmh: float | None = None
    zone: str | None = None
    false_positive: bool | None = None
    max_speed_kmh: float | None = None  # the ticket speed, as min_speed_kmh
    class_name: str | None = None
    server_id: str | None = None
    # any of these derived statuses (ViolationRow.status): enforceable, not_enforceable,
    # dismissed, legacy; None or empty: all
    statuses: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_cursor: str | None


def encode_cursor(sort: str, value: Any, row_id: Any) -> str:
    if isinstance(value, dt.datetime):
        value = value.astimezone(dt.timezone.utc).isoformat()
    raw = json.dumps([sort, value, row_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


MAX_ROW_ID = 2**63 - 1  # SQLite INTEGER and PostgreSQL BIGINT; larger ids cannot exist


def decode_cursor(cursor: str, sort: str, kind: str, id_kind: str = "int") -> tuple[Any, Any]:
    """The ``(value, row_id)`` of a cursor made by :func:`encode_cursor`, checked against ``sort``.

    Cursors travel through clients, so every part is validated here: a tampered cursor is a
    :class:`CursorError` (HTTP 400), never a database error. ``kind`` is the sort value's type
    (``datetime``, ``float``, ``float_or_null`` or ``int``), ``id_kind`` the row id's (``int`` or
    ``str``).
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        cur_sort, value, row_id = json.loads(raw)
    except (ValueError, binascii.Error, TypeError, RecursionError) as exc:
        raise CursorError(
            "invalid cursor: pass the next_cursor value of the previous page unchanged"
        ) from exc
    if cur_sort != sort:
        raise CursorError(f"cursor was made for sort={cur_sort!r}, not sort={sort!r}")
    return _cursor_value(value, kind), _cursor_value(row_id, id_kind)


def _cursor_value(value: Any, kind: str) -> Any:
    """One decoded cursor field as a value the database accepts, or CursorError."""
    bad = CursorError("invalid cursor value: pass the next_cursor value of the previous page unchanged")
    if kind == "datetime":
        if not isinstance(value, str):
            raise bad
        try:
            parsed = dt.datetime.fromisoformat(value)
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.timezone.utc)
            return parsed.astimezone(dt.timezone.utc)  # out of datetime's range near years 1 and 9999
        except (ValueError, OverflowError) as exc:
            raise bad from exc
    if kind == "float_or_null":
        return None if value is None else _cursor_value(value, "float")
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad
        try:
            value = float(value)
        except OverflowError as exc:  # an int beyond float's range
            raise bad from exc
        if not math.isfinite(value):  # json.loads accepts NaN, Infinity and 1e400
            raise bad
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ROW_ID:
            raise bad
        return value
    if kind == "str":
        if not isinstance(value, str) or len(value) > 64 or "\x00" in value:
            raise bad
        return value
    raise ValueError(f"unknown cursor field kind {kind!r}")


def keyset(col: Any, id_col: Any, desc: bool, value: Any, row_id: Any) -> Any:
    if desc:
        return or_(col < value, and_(col == value, id_col < row_id))
    return or_(col > value, and_(col == value, id_col > row_id))


def keyset_nulls_last(col: Any, id_col: Any, desc: bool, value: Any, row_id: Any) -> Any:
    """:func:`keyset` for a nullable column ordered with its NULLs last in both directions
    (``ORDER BY col [DESC] NULLS LAST, id [DESC]``): after a non-NULL value come the greater (or
    smaller) values, then every NULL; after a NULL, the NULLs further along by id."""
    after_id = id_col < row_id if desc else id_col > row_id
    if value is None:
        return and_(col.is_(None), after_id)
    return or_(keyset(col, id_col, desc, value, row_id), col.is_(None))
