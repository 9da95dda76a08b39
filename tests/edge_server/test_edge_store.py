"""The violation store on SQLite (WAL) and PostgreSQL (when AIRPATROL_TEST_POSTGRES_URL is set)."""

from __future__ import annotations

import base64
import datetime as dt
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from edge_helpers import alembic_to, seed_old_violation
from sqlalchemy import text

from edge_server.schemas import ViolationOut
from edge_server.store import Base, CursorError, Store, ViolationFilter, make_engine, migrate
from edge_server.store.models import violation_status
from pipelines.types import MeasuringBase, Telemetry, Violation

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

T0 = dt.datetime(2025, 6, 1, 12, 0, tzinfo=dt.timezone.utc)


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    """A migrated store on SQLite, then on PostgreSQL (conftest's ``database_url``)."""
    s = Store.from_url(database_url)
    yield s
    s.close()


def _violation(
    store: Store, session_id: str, minutes: float, speed: float | None, zone: str = "global", **kw
):
    """A violation whose ticket speed is ``speed`` (None: no measuring base, not enforceable); its
    informative per-frame peak is 2 km/h above it."""
    ticket = {}
    if speed is not None:
        base = MeasuringBase(
            minutes * 60, minutes * 60 + 1.5, int(minutes * 1800), int(minutes * 1800) + 45, 30.0, 45
        )
        ticket = {"ticket_speed_kmh": speed, "ticket_sigma_kmh": 1.0, "tolerance_kmh": 3.0, "confidence_k": 1.645,
                  "base": base, "status": "enforceable"}  # fmt: skip
    peak = (speed or 60.0) + 2
    v = Violation(
        track_id=kw.pop("track_id", int(minutes * 10)),
        zone=zone,
        speed_limit_kmh=50.0,
        peak_speed_kmh=peak,
        mean_speed_kmh=peak - 3,
        sigma_kmh=0.0,
        start_frame=int(minutes * 1800),
        end_frame=int(minutes * 1800) + 60,
        start_time_s=minutes * 60,
        end_time_s=minutes * 60 + 2,
        **{**ticket, **kw},
    )
    return store.add_violation(session_id, v, occurred_at=T0 + dt.timedelta(minutes=minutes))


def test_migrations_match_models_and_are_idempotent(store: Store) -> None:
    migrate(store.engine)  # second run: nothing to do
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    assert diff == []
    assert version == "0013"
    if store.engine.dialect.name == "sqlite":
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_session_lifecycle_and_tracks(store: Store) -> None:
    store.create_session("s1", "webrtc", remote="127.0.0.1")
    row = store.get_session("s1")
    assert row.status == "active" and row.started_at.tzinfo is not None
    store.save_tracks(
        "s1",
        [
            {"track_id": 1, "class_name": "car", "first_time_s": 0.0, "last_time_s": 3.0, "frames": 90,
             "peak_speed_kmh": 73.0, "mean_speed_kmh": 72.0, "violated": True},
            {"track_id": 2, "class_name": "truck", "first_time_s": 1.0, "last_time_s": 4.0, "frames": 80,
             "peak_speed_kmh": None, "mean_speed_kmh": None, "violated": False},
        ],
    )  # fmt: skip
    store.save_tracks(  # track 1 again (its final summary): replaced; track 2 kept
        "s1", [{"track_id": 1, "class_name": "car", "first_time_s": 0.0, "last_time_s": 3.5, "frames": 95}]
    )
    assert store.save_tracks("s1", []) == 0
    tracks = store.session_tracks("s1")
    assert [(t.track_id, t.frames) for t in tracks] == [(1, 95), (2, 80)]
    store.end_session(
        "s1", "ended", "ended by client", frames_received=100, info={"clock_sync": {"method": "rtcp"}}
    )
    row = store.get_session("s1")
    assert (
        row.status == "ended"
        and row.ended_at >= row.started_at
        and row.info["clock_sync"]["method"] == "rtcp"
    )
    store.create_session("s2", "whip")
    assert store.mark_abandoned_sessions() == 1
    assert store.get_session("s2").status == "failed"


def test_violation_filters(store: Store) -> None:
    store.create_session("a", "webrtc")
    store.create_session("b", "whip")
    _violation(store, "a", 0, 61.0)
    _violation(store, "a", 1, 75.0, zone="school")
    _violation(store, "a", 2, 90.5, zone="school", latitude=59.1, longitude=18.2)
    _violation(store, "b", 3, 55.0)
    fp = _violation(store, "b", 4, 120.0)
    store.update_violation(fp.id, false_positive=True)

    def ids(**kw) -> list[float]:
        return sorted(
            v.ticket_speed_kmh for v in store.list_violations(ViolationFilter(**kw), limit=100).items
        )

    assert ids() == [55.0, 61.0, 75.0, 90.5, 120.0]
    assert ids(session_id="a") == [61.0, 75.0, 90.5]
    assert ids(zone="school") == [75.0, 90.5]
    assert ids(min_speed_kmh=75.0) == [75.0, 90.5, 120.0]
    assert ids(since=T0 + dt.timedelta(minutes=1), until=T0 + dt.timedelta(minutes=3)) == [75.0, 90.5]
    assert ids(false_positive=True) == [120.0]
    assert ids(false_positive=False, session_id="b") == [55.0]
    assert store.count_violations("a") == 3
    assert store.get_session("a").violations_count == 3
    v = store.get_violation(fp.id)
    assert v.false_positive is True and v.updated_at is not None
    assert v.occurred_at == T0 + dt.timedelta(minutes=4)  # UTC round trip, tz-aware
    assert store.update_violation(999999, false_positive=True) is None


@pytest.mark.parametrize(
    "telemetry, drone",
    [
        (Telemetry(12.0, altitude_m=80.0, latitude=59.3, longitude=18.07), (59.3, 18.07, 80.0)),
        (Telemetry(12.0), (None, None, None)),
        (None, (None, None, None)),
    ],
)
def test_a_typed_violation_and_the_drone_telemetry_fill_the_row(store: Store, telemetry, drone) -> None:
    store.create_session("t", "webrtc")
    v = Violation(
        track_id=np.int64(7),
        zone="school",
        speed_limit_kmh=30.0,
        peak_speed_kmh=np.float64(47.25),
        mean_speed_kmh=44.0,
        sigma_kmh=1.5,
        start_frame=100,
        end_frame=160,
        start_time_s=3.3,
        end_time_s=5.3,
        class_name="van",
        bbox_xyxy=(10.04, 20.0, 50.96, 41.0),
        ground_xy_m=(1.5, -2.0),
        latitude=59.31,
        longitude=18.08,
        snapshot=np.zeros((4, 4, 3), np.uint8),  # pixels are the recorder's business, not the row's
    )
    row = store.add_violation("t", v, occurred_at=T0, telemetry=telemetry, snapshot_path="t/a.jpg")
    got = store.get_violation(row.id)
    assert (got.track_id, got.class_name, got.zone, got.peak_speed_kmh, got.sigma_kmh) == (
        7,
        "van",
        "school",
        47.25,
        1.5,
    )
    assert (got.start_frame, got.end_frame, got.start_time_s, got.end_time_s) == (100, 160, 3.3, 5.3)
    assert got.bbox_xyxy == [10.0, 20.0, 51.0, 41.0]
    assert (got.ground_x_m, got.ground_y_m, got.latitude, got.longitude) == (1.5, -2.0, 59.31, 18.08)
    assert (got.drone_latitude, got.drone_longitude, got.altitude_m) == drone
    assert got.snapshot_path == "t/a.jpg" and got.clip_path is None
    assert store.get_session("t").violations_count == 1


TICKET = {
    "ticket_speed_kmh": np.float64(61.234),
    "ticket_sigma_kmh": 1.456,
    "tolerance_kmh": 3.0,
    "confidence_k": 1.6449,
    "base": MeasuringBase(3.4, 5.0, 103, 151, 27.25, 49, index=2, of=3),
    "status": "enforceable",
}


@pytest.mark.parametrize(
    ("ticket", "columns"),
    [
        (TICKET, (61.234, 1.456, 3.0, 1.6449, "enforceable", "")),
        (  # no measuring base of the minimum length: no ticket speed, and why
            {"tolerance_kmh": 3.0, "confidence_k": 1.645, "status": "not_enforceable",
             "status_reason": "no measuring base of 1.0 s and 15 m"},
            (None, None, 3.0, 1.645, "not_enforceable", "no measuring base of 1.0 s and 15 m"),
        ),
        (  # a status the store does not know is not a ticket
            {"ticket_speed_kmh": 70.0, "status": "maybe"},
            (70.0, None, None, None, "not_enforceable", "unknown engine status 'maybe'"),
        ),
    ],
)  # fmt: skip
def test_the_ticket_fills_its_columns(store: Store, ticket: dict, columns: tuple) -> None:
    store.create_session("t", "webrtc")
    v = Violation(7, "global", 50.0, 68.0, 64.0, 2.0, 100, 160, 3.3, 5.3, **ticket)
    got = store.get_violation(store.add_violation("t", v, occurred_at=T0).id)
    assert (got.ticket_speed_kmh, got.ticket_sigma_kmh, got.tolerance_kmh, got.confidence_k) == columns[:4]
    assert (got.ticket_status, got.status_reason) == columns[4:]
    assert got.peak_speed_kmh == 68.0  # kept: informative
    assert got.base == (ticket["base"].to_dict() if "base" in ticket else None)
    out = ViolationOut.from_row(got)
    assert (out.ticket_speed_kmh, out.status, out.status_reason) == (
        None if columns[0] is None else round(columns[0], 2),
        columns[4],
        columns[5],
    )
    if "base" in ticket:
        assert out.base.model_dump() == {**ticket["base"].to_dict(), "duration_s": 1.6}


# false_positive x ticket_status -> the one status: Python (violation_status) and SQL (the filter)
STATUS_TABLE = [
    (False, "enforceable", "enforceable"),
    (False, "not_enforceable", "not_enforceable"),
    (False, None, "legacy"),
    (True, "enforceable", "dismissed"),
    (True, "not_enforceable", "dismissed"),
    (True, None, "dismissed"),
]


@pytest.mark.parametrize(("false_positive", "ticket_status", "status"), STATUS_TABLE)
def test_status_is_derived(false_positive: bool, ticket_status: str | None, status: str) -> None:
    assert violation_status(false_positive, ticket_status) == status


def test_status_filter_in_sql_matches_the_derivation(store: Store) -> None:
    store.create_session("s", "webrtc")
    expected = {}
    for i, (false_positive, ticket_status, status) in enumerate(STATUS_TABLE):
        row = _violation(store, "s", i, 60.0 + i, track_id=i)
        store.update_violation(row.id, false_positive=false_positive, ticket_status=ticket_status)
        expected[row.id] = status
        assert store.get_violation(row.id).status == status  # the hybrid, on a loaded row

    def ids(*statuses: str) -> set[int]:
        page = store.list_violations(ViolationFilter(statuses=statuses or None), limit=100)
        return {v.id for v in page.items}

    for status in ("enforceable", "not_enforceable", "dismissed", "legacy"):
        assert ids(status) == {i for i, s in expected.items() if s == status}, status
    assert ids("enforceable", "legacy") == {i for i, s in expected.items() if s in ("enforceable", "legacy")}
    assert ids() == set(expected)
    # with the other filters (AND): dismissed and not a false positive is nothing
    assert store.list_violations(ViolationFilter(statuses=("dismissed",), false_positive=False)).items == []


def test_speed_filters_are_on_the_ticket_speed(store: Store) -> None:
    """min/max_speed_kmh read the ticket speed, not the (higher) per-frame peak; a violation
    without a ticket speed is left out by either."""
    store.create_session("f", "webrtc")
    _violation(store, "f", 0, 60.0)  # peak 62
    _violation(store, "f", 1, 70.0)  # peak 72
    _violation(store, "f", 2, None, status_reason="no base")  # peak 62
    legacy = _violation(store, "f", 3, 80.0)
    store.update_violation(legacy.id, ticket_speed_kmh=None, ticket_status=None)

    def speeds(**kw) -> list:
        return [
            (v.ticket_speed_kmh, v.peak_speed_kmh)
            for v in store.list_violations(ViolationFilter(**kw), sort="occurred_at").items
        ]

    assert speeds(min_speed_kmh=61) == [(70.0, 72.0)]  # not the peak of 62
    assert speeds(max_speed_kmh=61) == [(60.0, 62.0)]
    assert speeds(min_speed_kmh=0) == [(60.0, 62.0), (70.0, 72.0)]  # no ticket speed: never in a speed range
    assert len(speeds()) == 4


@pytest.mark.parametrize("sort", ["-ticket_speed_kmh", "ticket_speed_kmh"])
def test_ticket_speed_pages_put_rows_without_one_last(store: Store, sort: str) -> None:
    store.create_session("p", "webrtc")
    # ties across page borders, and rows without a ticket speed (no base; legacy) among them
    speeds = [60.0, None, 70.0, 70.0, None, 80.0, 65.0, 70.0, None, 90.0, 55.0, 70.0, None]
    for i, speed in enumerate(speeds):
        _violation(store, "p", i // 2, speed, track_id=i)
    seen, cursor, pages = [], None, 0
    while True:
        page = store.list_violations(sort=sort, limit=3, cursor=cursor)
        seen.extend(page.items)
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 5 and len({v.id for v in seen}) == len(seen) == len(speeds)
    desc = sort.startswith("-")
    measured = [(v.ticket_speed_kmh, v.id) for v in seen if v.ticket_speed_kmh is not None]
    assert measured == sorted(measured, reverse=desc)
    assert [v.ticket_speed_kmh for v in seen[len(measured) :]] == [None] * 4  # last, both ways
    unmeasured = [v.id for v in seen[len(measured) :]]
    assert unmeasured == sorted(unmeasured, reverse=desc)


@pytest.mark.parametrize(
    "sort",
    [
        "-occurred_at",
        "occurred_at",
        "-ticket_speed_kmh",
        "ticket_speed_kmh",
        "-peak_speed_kmh",
        "peak_speed_kmh",
        "-id",
        "id",
    ],
)
def test_cursor_pagination_is_complete_and_ordered(store: Store, sort: str) -> None:
    store.create_session("p", "webrtc")
    speeds = [60.0, 70.0, 70.0, 70.0, 80.0, 65.0, 70.0, 90.0, 55.0, 75.0, 70.0]  # ties across page borders
    for i, speed in enumerate(speeds):
        _violation(store, "p", i // 2, speed, track_id=i)  # occurred_at ties too
    seen, cursor, pages = [], None, 0
    while True:
        page = store.list_violations(sort=sort, limit=3, cursor=cursor)
        seen.extend(page.items)
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 4
    assert sorted(v.id for v in seen) == sorted({v.id for v in seen}) and len(seen) == len(speeds)
    attr = sort.lstrip("-")
    keys = [(getattr(v, attr), v.id) for v in seen]
    assert keys == sorted(keys, reverse=sort.startswith("-"))


def test_bad_cursors(store: Store) -> None:
    store.create_session("c", "webrtc")
    for i in range(3):
        _violation(store, "c", i, 60.0 + i)
    cursor = store.list_violations(limit=1).next_cursor
    with pytest.raises(CursorError, match="invalid cursor"):
        store.list_violations(cursor="not-a-cursor")
    with pytest.raises(CursorError, match="sort"):
        store.list_violations(sort="-peak_speed_kmh", cursor=cursor)
    with pytest.raises(CursorError):
        store.list_sessions(cursor="%%%")


def _raw_cursor(raw_json: str) -> str:
    return base64.urlsafe_b64encode(raw_json.encode()).decode().rstrip("=")


HUGE = "99999999999999999999999"


@pytest.mark.parametrize(
    ("sort", "raw"),
    [
        ("-id", '["-id",1e400,1]'),  # int(inf): OverflowError
        ("-id", f'["-id",{HUGE},1]'),  # beyond 64 bits: SQLite OverflowError at bind time
        ("-id", '["-id",-1,1]'),
        ("-id", '["-id",true,1]'),
        ("-id", '["-id",2.5,1]'),
        ("-peak_speed_kmh", f'["-peak_speed_kmh",70.5,{HUGE}]'),
        ("-peak_speed_kmh", '["-peak_speed_kmh",NaN,1]'),
        ("-peak_speed_kmh", '["-peak_speed_kmh",Infinity,1]'),
        ("-peak_speed_kmh", f'["-peak_speed_kmh",1{"0" * 309},1]'),  # int too large for a float
        ("-peak_speed_kmh", '["-peak_speed_kmh","fast",1]'),
        ("-peak_speed_kmh", '["-peak_speed_kmh",null,1]'),  # the peak is never NULL
        ("-ticket_speed_kmh", '["-ticket_speed_kmh",NaN,1]'),
        ("ticket_speed_kmh", '["ticket_speed_kmh","fast",1]'),
        ("ticket_speed_kmh", '["ticket_speed_kmh",null,-1]'),
        ("-occurred_at", '["-occurred_at","9999-12-31T23:59:59-12:00",1]'),  # no UTC equivalent
        ("-occurred_at", '["-occurred_at","0001-01-01T00:00:00+01:00",1]'),
        ("-occurred_at", '["-occurred_at",1700000000,1]'),
        ("-occurred_at", '["-occurred_at","2025-06-01T12:00:00+00:00","1"]'),
        ("-occurred_at", '["-occurred_at","2025-06-01T12:00:00+00:00"]'),
        ("-started_at", '["-started_at","9999-12-31T23:59:59-12:00","s"]'),
        ("-started_at", '["-started_at","2025-06-01T12:00:00+00:00",7]'),
        ("-started_at", '["-started_at","2025-06-01T12:00:00+00:00","a\\u0000"]'),  # NUL: PG refuses it
    ],
)
def test_tampered_cursors_are_cursor_errors(store: Store, sort: str, raw: str) -> None:
    """Whatever a client does to a cursor, the store answers CursorError (HTTP 400), never a DB error."""
    store.create_session("c", "webrtc")
    _violation(store, "c", 0, 60.0)
    with pytest.raises(CursorError, match="invalid cursor"):
        if sort == "-started_at":
            store.list_sessions(cursor=_raw_cursor(raw))
        else:
            store.list_violations(sort=sort, cursor=_raw_cursor(raw))


def test_concurrent_writers(store: Store) -> None:
    """Worker threads of several streams write at once (SQLite WAL + busy timeout, PG pool)."""
    for k in range(4):
        store.create_session(f"w{k}", "webrtc")
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for i in range(15):
                _violation(store, f"w{k}", i, 60.0 + i, track_id=i)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.count_violations() == 60
    assert all(store.get_session(f"w{k}").violations_count == 15 for k in range(4))


OLD_ROW = {  # a violation as a 0003 server stored it: its peak was the reported speed
    "id": 41, "session_id": "old", "occurred_at": dt.datetime(2025, 6, 1, 12, 0), "track_id": 3,
    "class_name": "car", "zone": "global", "speed_limit_kmh": 50.0, "peak_speed_kmh": 73.5,
    "mean_speed_kmh": 70.25, "sigma_kmh": 1.5, "start_time_s": 3.0, "end_time_s": 5.0,
    "start_frame": 91, "end_frame": 151, "false_positive": False,
    "created_at": dt.datetime(2025, 6, 1, 12, 0, 5), "server_id": "edge-1",
}  # fmt: skip
TICKET_COLUMNS = (
    "ticket_speed_kmh", "ticket_sigma_kmh", "tolerance_kmh", "confidence_k", "base", "ticket_status", "status_reason",
)  # fmt: skip


def test_upgrade_from_0003_keeps_old_rows_as_legacy(database_url: str) -> None:
    """A database made at 0003 with a violation: 0004 adds the ticket columns, NULL on the old row,
    which keeps its data and reads as ``legacy`` (peak only); down to 0003 and up again keeps it too."""
    engine = make_engine(database_url)
    alembic_to(engine, "upgrade", "0003")
    before = seed_old_violation(engine, OLD_ROW, "2025-06-01 11:59:00")
    old_columns = ", ".join(OLD_ROW)
    migrate(engine)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0013"  # the head
        assert conn.execute(text(f"SELECT {old_columns} FROM violations")).all() == before
        ticket = conn.execute(text(f"SELECT {', '.join(TICKET_COLUMNS)} FROM violations")).one()
    assert tuple(ticket) == (None,) * len(TICKET_COLUMNS)

    store = Store(engine)
    row = store.get_violation(41)
    out = ViolationOut.from_row(row)
    assert (out.status, out.peak_speed_kmh, out.ticket_speed_kmh, out.base) == ("legacy", 73.5, None, None)
    assert "peak only" in out.status_reason
    assert [v.id for v in store.list_violations(ViolationFilter(statuses=("legacy",))).items] == [41]
    assert store.list_violations(ViolationFilter(min_speed_kmh=0)).items == []  # no ticket speed
    assert [v.id for v in store.list_violations(sort="-ticket_speed_kmh").items] == [41]
    store.update_violation(41, false_positive=True)  # an officer's mark wins over legacy
    assert ViolationOut.from_row(store.get_violation(41)).status == "dismissed"
    store.update_violation(41, false_positive=False)

    alembic_to(engine, "downgrade", "0003")
    with engine.connect() as conn:
        assert conn.execute(text(f"SELECT {old_columns} FROM violations")).all() == before
    migrate(engine)
    with engine.connect() as conn:
        assert conn.execute(text(f"SELECT {old_columns} FROM violations")).all() == before
    engine.dispose()
