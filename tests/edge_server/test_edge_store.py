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
from sqlalchemy import text

from edge_server.store import Base, CursorError, Store, ViolationFilter, migrate
from pipelines.types import Telemetry, Violation

T0 = dt.datetime(2025, 6, 1, 12, 0, tzinfo=dt.timezone.utc)


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    """A migrated store on SQLite, then on PostgreSQL (conftest's ``database_url``)."""
    s = Store.from_url(database_url)
    yield s
    s.close()


def _violation(store: Store, session_id: str, minutes: float, speed: float, zone: str = "global", **kw):
    v = Violation(
        track_id=kw.pop("track_id", int(minutes * 10)),
        zone=zone,
        speed_limit_kmh=50.0,
        peak_speed_kmh=speed,
        mean_speed_kmh=speed - 3,
        sigma_kmh=0.0,
        start_frame=int(minutes * 1800),
        end_frame=int(minutes * 1800) + 60,
        start_time_s=minutes * 60,
        end_time_s=minutes * 60 + 2,
        **kw,
    )
    return store.add_violation(session_id, v, occurred_at=T0 + dt.timedelta(minutes=minutes))


def test_migrations_match_models_and_are_idempotent(store: Store) -> None:
    migrate(store.engine)  # second run: nothing to do
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    assert diff == []
    assert version == "0003"
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
        return sorted(v.peak_speed_kmh for v in store.list_violations(ViolationFilter(**kw), limit=100).items)

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


@pytest.mark.parametrize(
    "sort", ["-occurred_at", "occurred_at", "-peak_speed_kmh", "peak_speed_kmh", "-id", "id"]
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
