"""The scale a violation's ticket rests on, in the store (issue 39, migration 0005) on SQLite and
PostgreSQL: the source, the camera's height above the road and its sigma, the speed's relative
sigma, the whole scale with its height reference; the session's scale check from the vehicles
(issue 40, migration 0006): its status and the whole check; and its pitch check against the traffic
(issue 39, migration 0013). How the API and the CSV show them; rows stored before keep their data
with NULL there, down to the revision before and up again."""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import io
import math
from collections.abc import Iterator

import pytest
from edge_helpers import alembic_to, seed_old_violation
from sqlalchemy import inspect, text

from edge_server.schemas import ViolationOut
from edge_server.store import Store, make_engine, migrate
from edge_server.violation_csv import CSV_COLUMNS, csv_line, csv_values
from pipelines.height import HeightReference, ScaleInfo
from pipelines.types import PitchCheckResult, ScaleCheckResult, Telemetry, Violation

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

T0 = dt.datetime(2026, 12, 4, 10, 0, tzinfo=dt.timezone.utc)
SCALE_COLUMNS = ("height_above_road_m", "height_sigma_m", "scale_sigma_pct", "scale")
BASE = HeightReference(
    "measured_base", -5.0, 0.4, pitch_bias_deg=0.2, pitch_sigma_deg=0.3, at_time_s=12.5,
    set_by="officer 12", set_at="2026-12-04T09:58:00+00:00", detail="2 line(s): 59.40 +- 0.40 m above the road",
)  # fmt: skip
SITE = HeightReference("site", -8.0, 0.5, set_by="officer 7", set_at="2026-12-04T09:00:00+00:00")
LRF = HeightReference("lrf", -6.0, 0.3, at_time_s=30.0, detail="laser rangefinder: 40 readings")
TERRAIN = HeightReference(
    "terrain",
    -8.1,
    1.02,
    set_by="terrain model",
    detail="terrain model dtm.tif (egm96, +- 0.15 m), take-off point ...",
)


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    s = Store.from_url(database_url)
    s.create_session("s", "webrtc")
    yield s
    s.close()


def _violation(
    scale: ScaleInfo | None, check: ScaleCheckResult | None = None, pitch: PitchCheckResult | None = None
) -> Violation:
    return Violation(
        7, "global", 50.0, 68.0, 64.0, 2.0, 100, 160, 3.3, 5.3, ticket_speed_kmh=61.0, scale=scale,
        scale_check=check, pitch_check=pitch,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("scale", "telemetry", "columns"),
    [
        (None, Telemetry(1.0, altitude_m=64.4), ("flight", None, None, None)),
        (None, Telemetry(1.0, altitude_m=64.4, source="operator"), ("operator", None, None, None)),
        (None, None, (None, None, None, None)),
        (ScaleInfo("flight", 64.4, 5.05, -90.0, 1.0, 0.0784), Telemetry(1.0), ("flight", 64.4, 5.05, 7.84)),
        (ScaleInfo("site", 56.4, 0.86, -60.0, 1.0, 0.021, SITE), None, ("site", 56.4, 0.86, 2.1)),
        (
            ScaleInfo("measured_base", 59.4, 0.4, -59.8, 0.3, 0.008, BASE),
            Telemetry(1.0, source="flight"),
            ("measured_base", 59.4, 0.4, 0.8),
        ),
        (ScaleInfo("site", 56.4, 0.86, -60.0, 1.0, math.nan, SITE), None, ("site", 56.4, 0.86, None)),
        # the engine's own reference from the laser rangefinder: a plain string column, no migration
        (ScaleInfo("lrf", 58.4, 0.3, -60.0, 1.0, 0.019, LRF), Telemetry(1.0), ("lrf", 58.4, 0.3, 1.9)),
        # a terrain model of the site (issue 39): the engine's too
        (
            ScaleInfo("terrain", 59.9, 1.02, -60.0, 1.0, 0.021, TERRAIN),
            Telemetry(1.0),
            ("terrain", 59.9, 1.02, 2.1),
        ),
        # a source the store does not know is not stored as one: the telemetry's stays
        (ScaleInfo("guess", 50.0, 1.0, -90.0, 1.0, 0.02), Telemetry(1.0), ("flight", 50.0, 1.0, 2.0)),
    ],
)
def test_the_scale_fills_its_columns(store: Store, scale, telemetry, columns) -> None:
    row = store.add_violation("s", _violation(scale), occurred_at=T0, telemetry=telemetry)
    got = store.get_violation(row.id)
    assert (got.scale_source, got.height_above_road_m, got.height_sigma_m, got.scale_sigma_pct) == columns
    assert got.scale == (None if scale is None else scale.to_dict())
    out = ViolationOut.from_row(got)
    assert (out.scale_source, out.height_above_road_m, out.height_sigma_m, out.scale_sigma_pct) == (
        None
        if columns[0] not in ("flight", "operator", "site", "measured_base", "lrf", "terrain")
        else columns[0],
        *columns[1:],
    )
    if scale is None or scale.source == "guess":
        assert out.scale is None
    else:
        assert out.scale.model_dump() == scale.to_dict()
    reference = scale.reference if scale is not None else None
    cells = dict(zip(CSV_COLUMNS, csv_values(out), strict=True))
    assert cells["scale_set_by"] == (reference.set_by if reference else "")
    assert cells["height_above_road_m"] == ("" if columns[1] is None else columns[1])


def test_the_csv_appends_the_scale_columns(store: Store) -> None:
    """Columns are only ever appended: the ticket's (issue 38) end at status_reason; the scale's follow."""
    assert CSV_COLUMNS.index("status_reason") == 34
    assert CSV_COLUMNS[35:43] == (
        "height_above_road_m", "height_sigma_m", "scale_sigma_pct", "scale_pitch_deg",
        "scale_pitch_sigma_deg", "scale_reference", "scale_set_by", "scale_set_at",
    )  # fmt: skip
    scale = ScaleInfo("measured_base", 59.4, 0.4, -59.8, 0.3, 0.008, BASE)
    out = ViolationOut.from_row(store.add_violation("s", _violation(scale), occurred_at=T0))
    (row,) = csv.DictReader(io.StringIO(csv_line(CSV_COLUMNS) + csv_line(csv_values(out))))
    assert {k: row[k] for k in CSV_COLUMNS[35:43]} == {
        "height_above_road_m": "59.4",
        "height_sigma_m": "0.4",
        "scale_sigma_pct": "0.8",
        "scale_pitch_deg": "-59.8",
        "scale_pitch_sigma_deg": "0.3",
        "scale_reference": "2 line(s): 59.40 +- 0.40 m above the road",
        "scale_set_by": "officer 12",
        "scale_set_at": "2026-12-04T09:58:00+00:00",
    }
    assert row["scale_source"] == "measured_base"


def test_a_session_info_takes_new_keys(store: Store) -> None:
    store.update_session("s", info={"pipeline": {"a": 1}})
    assert store.merge_session_info("s", {"height_reference": {"origin": "session"}})
    assert store.get_session("s").info == {"pipeline": {"a": 1}, "height_reference": {"origin": "session"}}
    assert store.merge_session_info("nope", {"x": 1}) is False


OLD_ROW = {  # a violation as a 0004 server stored it: the telemetry's source, a ticket
    "id": 41, "session_id": "old", "occurred_at": dt.datetime(2026, 6, 1, 12, 0), "track_id": 3,
    "class_name": "car", "zone": "global", "speed_limit_kmh": 50.0, "peak_speed_kmh": 73.5,
    "mean_speed_kmh": 70.25, "sigma_kmh": 1.5, "start_time_s": 3.0, "end_time_s": 5.0,
    "start_frame": 91, "end_frame": 151, "false_positive": False, "altitude_m": 64.4,
    "scale_source": "flight", "created_at": dt.datetime(2026, 6, 1, 12, 0, 5), "ticket_speed_kmh": 71.0,
    "ticket_sigma_kmh": 2.5, "ticket_status": "not_enforceable", "status_reason": "uncertainty too large",
}  # fmt: skip
# a 0005 server's: a ticket on a site scale, no check
ROW_0005 = OLD_ROW | {"scale_source": "site", "height_above_road_m": 56.4, "height_sigma_m": 0.86}
CHECK_COLUMNS = ("scale_check_status", "scale_check", "pitch_check")


@pytest.mark.parametrize(
    ("revision", "row", "new_columns", "kept"),
    [
        ("0004", OLD_ROW, SCALE_COLUMNS + CHECK_COLUMNS, ("flight", 64.4, None)),
        ("0005", ROW_0005, CHECK_COLUMNS, ("site", 64.4, 56.4)),
    ],
)
def test_upgrade_from_an_older_revision_and_back(
    database_url: str, revision: str, row: dict, new_columns: tuple, kept: tuple
) -> None:
    engine = make_engine(database_url)
    alembic_to(engine, "upgrade", revision)
    before = seed_old_violation(engine, row, "2026-06-01 11:59:00")
    old_columns = ", ".join(row)
    migrate(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0013"  # the head
        assert conn.execute(text(f"SELECT {old_columns} FROM violations")).all() == before
        new = conn.execute(text(f"SELECT {', '.join(new_columns)} FROM violations")).one()
    assert tuple(new) == (None,) * len(new_columns)
    out = ViolationOut.from_row(Store(engine).get_violation(41))
    assert (out.scale_source, out.altitude_m, out.height_above_road_m) == kept
    assert (out.scale, out.scale_check, out.pitch_check) == (None, None, None)
    assert (out.ticket_speed_kmh, out.status) == (71.0, "not_enforceable")

    alembic_to(engine, "downgrade", revision)
    names = {c["name"] for c in inspect(engine).get_columns("violations")}
    assert not names & set(new_columns) and set(row) <= names
    with engine.connect() as conn:
        assert conn.execute(text(f"SELECT {old_columns} FROM violations")).all() == before
    migrate(engine)
    with engine.connect() as conn:
        assert conn.execute(text(f"SELECT {old_columns} FROM violations")).all() == before
    engine.dispose()


SUSPECT = ScaleCheckResult("suspect", 1.1234, 0.0121, 34, "the cars measure 1.12 times their usual size")
PITCH_SUSPECT = PitchCheckResult(
    "suspect", 2.6312, 0.4519, 17, "the traffic's speeds say the pitch used is +2.6 +- 0.5 deg off: ..."
)


@pytest.mark.parametrize(
    "check",
    [
        None,
        ScaleCheckResult("unverified", n=3, reason="too few vehicles yet (3 of 10)"),
        ScaleCheckResult("ok", 0.9912, 0.0084, 52),
        SUSPECT,
        ScaleCheckResult("confused", 1.0, 0.01, 12),  # a status the store does not know: not stored
    ],
    ids=["none", "unverified", "ok", "suspect", "unknown"],
)
def test_the_check_fills_its_columns_and_reads_back(store: Store, check: ScaleCheckResult | None) -> None:
    row = store.add_violation("s", _violation(None, check), occurred_at=T0)
    got = store.get_violation(row.id)
    known = check is not None and check.status != "confused"
    assert got.scale_check_status == (check.status if known else None)
    assert got.scale_check == (check.to_dict() if known else None)
    out = ViolationOut.from_row(got)
    assert (out.scale_check.model_dump() if out.scale_check else None) == (check.to_dict() if known else None)
    cells = dict(zip(CSV_COLUMNS, csv_values(out), strict=True))
    assert cells["scale_check_status"] == (check.status if known else "")
    assert cells["scale_check_n"] == (check.n if known else "")


def test_the_csv_appends_the_check_columns(store: Store) -> None:
    """Columns are only ever appended: the scale's end at scale_set_at; the check's (issue 40) follow."""
    assert CSV_COLUMNS.index("scale_set_at") == 42
    assert CSV_COLUMNS[43:] == (
        "scale_check_status", "scale_check_ratio", "scale_check_sigma", "scale_check_n", "scale_check_reason",
        "pitch_check_status", "pitch_check_error_deg", "pitch_check_sigma_deg", "pitch_check_vehicles",
        "pitch_check_reason", "scale_pitch_from_traffic_deg",
    )  # fmt: skip
    v = _violation(None, SUSPECT, PITCH_SUSPECT)
    out = ViolationOut.from_row(store.add_violation("s", v, occurred_at=T0))
    (row,) = csv.DictReader(io.StringIO(csv_line(CSV_COLUMNS) + csv_line(csv_values(out))))
    assert {k: row[k] for k in CSV_COLUMNS[43:]} == {
        "scale_check_status": "suspect",
        "scale_check_ratio": "1.1234",
        "scale_check_sigma": "0.0121",
        "scale_check_n": "34",
        "scale_check_reason": "the cars measure 1.12 times their usual size",
        "pitch_check_status": "suspect",
        "pitch_check_error_deg": "2.631",
        "pitch_check_sigma_deg": "0.452",
        "pitch_check_vehicles": "17",
        "pitch_check_reason": PITCH_SUSPECT.reason,
        "scale_pitch_from_traffic_deg": "",  # no scale
    }
    moved = dataclasses.replace(
        v, scale=ScaleInfo("site", 60.0, 0.9, -46.3, 0.5, pitch_from_traffic_deg=-1.3)
    )
    out = ViolationOut.from_row(store.add_violation("s", moved, occurred_at=T0))
    (row,) = csv.DictReader(io.StringIO(csv_line(CSV_COLUMNS) + csv_line(csv_values(out))))
    assert row["scale_pitch_from_traffic_deg"] == "-1.3" and row["scale_pitch_deg"] == "-46.3"


def test_a_stored_check_that_no_longer_reads_is_shown_as_none(store: Store) -> None:
    row = store.add_violation("s", _violation(None, SUSPECT), occurred_at=T0)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE violations SET scale_check = :v"), {"v": '{"status": "maybe"}'})
    assert ViolationOut.from_row(store.get_violation(row.id)).scale_check is None


def test_a_sessions_enforceable_tickets_are_held_at_once(store: Store) -> None:
    store.create_session("t", "webrtc")
    enforceable = dataclasses.replace(_violation(None), status="enforceable")
    ids = [
        store.add_violation(sid, v, occurred_at=T0).id
        for sid, v in (("s", enforceable), ("s", _violation(None)), ("t", enforceable))
    ]
    assert store.hold_enforceable("s", "held for review: scale check suspect", SUSPECT.to_dict()) == [ids[0]]
    rows = [store.get_violation(i) for i in ids]
    assert [(r.ticket_status, r.scale_check_status) for r in rows] == [
        ("not_enforceable", "suspect"),
        ("not_enforceable", None),
        ("enforceable", None),
    ]
    assert rows[0].status_reason == "held for review: scale check suspect" and rows[0].updated_at is not None
    assert store.hold_enforceable("s", "again", SUSPECT.to_dict()) == []


@pytest.mark.parametrize(
    "check",
    [
        None,
        PitchCheckResult("unverified", n=2, reason="2 of 8 vehicles that crossed enough of the view to tell"),
        PitchCheckResult("ok", -0.1234, 0.2711, 14),
        PITCH_SUSPECT,
        PitchCheckResult("confused", 1.0, 0.1, 12),  # a status the store does not know: not stored
    ],
    ids=["none", "unverified", "ok", "suspect", "unknown"],
)
def test_the_pitch_check_is_stored_and_reads_back(store: Store, check: PitchCheckResult | None) -> None:
    row = store.add_violation("s", _violation(None, pitch=check), occurred_at=T0)
    got = store.get_violation(row.id)
    known = check is not None and check.status != "confused"
    assert got.pitch_check == (check.to_dict() if known else None)
    assert got.scale_check is None  # the scale check's columns are its own
    out = ViolationOut.from_row(got)
    assert (out.pitch_check.model_dump() if out.pitch_check else None) == (check.to_dict() if known else None)
    cells = dict(zip(CSV_COLUMNS, csv_values(out), strict=True))
    assert cells["pitch_check_status"] == (check.status if known else "")
    if known:  # what an evidence pack's summary prints from it
        assert PitchCheckResult.from_dict(out.pitch_check.model_dump()).describe() == check.describe()


def test_a_pitch_check_that_turned_holds_the_sessions_tickets(store: Store) -> None:
    store.create_session("t", "webrtc")
    enforceable = dataclasses.replace(_violation(None, SUSPECT), status="enforceable")
    ids = [
        store.add_violation(sid, v, occurred_at=T0).id
        for sid, v in (("s", enforceable), ("s", _violation(None)), ("t", enforceable))
    ]
    reason = f"held for review: {PITCH_SUSPECT.describe()} (found after it closed)"
    assert store.hold_enforceable("s", reason, PITCH_SUSPECT.to_dict(), "pitch_check") == [ids[0]]
    rows = [store.get_violation(i) for i in ids]
    assert [(r.ticket_status, r.pitch_check) for r in rows] == [
        ("not_enforceable", PITCH_SUSPECT.to_dict()),
        ("not_enforceable", None),
        ("enforceable", None),
    ]
    assert rows[0].scale_check == SUSPECT.to_dict()  # the scale check it carried stays
    out = ViolationOut.from_row(rows[0])
    assert out.status == "not_enforceable" and out.status_reason == reason
    assert out.status_reason.startswith(
        "held for review: pitch check suspect: the pitch used is +2.63 +- 0.45 deg"
    )


def test_a_stored_pitch_check_that_no_longer_reads_is_shown_as_none(store: Store) -> None:
    row = store.add_violation("s", _violation(None, pitch=PITCH_SUSPECT), occurred_at=T0)
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE violations SET pitch_check = :v"), {"v": '{"status": "maybe"}'})
    assert ViolationOut.from_row(store.get_violation(row.id)).pitch_check is None
