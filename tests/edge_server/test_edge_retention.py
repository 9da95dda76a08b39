"""Retention and legal holds (edge_server.retention): each rule removes what it says and nothing
else, from a real store and real files; a legal hold, another server's violations and recent ones
are kept; a dry run removes nothing; every removal is in the audit trail; the API (admins only), the
server's own pass at its start, and ``airpatrol retention``."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from edge_helpers import wait_until

from airpatrol.cli import main as airpatrol
from edge_server.retention.purge import Purger, RetentionPolicy
from edge_server.store import Store
from edge_server.store.models import ViolationRow

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

NOW = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.timezone.utc)
FILES = ("snapshot_path", "clip_path", "source_path", "record_path", "evidence_path")


def add(
    store: Store, media: Path, days_ago: float, status: str, server_id: str = "edge-a", files: bool = True
) -> int:
    """One violation ``days_ago`` old (``enforceable``, ``not_enforceable`` or ``dismissed``), with its
    five files on disk."""
    at = NOW - dt.timedelta(days=days_ago)
    if store.get_session("s1") is None:
        store.create_session("s1", "webrtc")
    row = ViolationRow(
        session_id="s1", occurred_at=at, created_at=at, track_id=1, zone="global", speed_limit_kmh=50.0,
        peak_speed_kmh=70.0, mean_speed_kmh=68.0, start_time_s=0.0, end_time_s=2.0, start_frame=0, end_frame=60,
        ticket_speed_kmh=66.0, ticket_status="not_enforceable" if status == "not_enforceable" else "enforceable",
        false_positive=status == "dismissed", server_id=server_id, evidence_sha256="ab" * 32,
    )  # fmt: skip
    with store._sessions.begin() as s:
        s.add(row)
        s.flush()
        if files:
            for column in FILES:
                name = f"v{row.id}.{column}.bin"
                (media / name).write_bytes(b"x" * 1000)
                setattr(row, column, name)
    return row.id


@pytest.fixture
def store(tmp_path: Path):
    store = Store.from_url(f"sqlite:///{tmp_path / 'a.db'}", server_id="edge-a")
    yield store
    store.close()


@pytest.fixture
def media(tmp_path: Path) -> Path:
    path = tmp_path / "media"
    path.mkdir()
    return path


def seed(store: Store, media: Path) -> dict[str, int]:
    return {
        "old enforceable": add(store, media, 400, "enforceable"),
        "old not enforceable": add(store, media, 40, "not_enforceable"),
        "old dismissed": add(store, media, 40, "dismissed"),
        "young not enforceable": add(store, media, 5, "not_enforceable"),
        "young dismissed": add(store, media, 5, "dismissed"),
        "young enforceable": add(store, media, 5, "enforceable"),
        "other server's": add(store, media, 400, "dismissed", server_id="edge-b"),
    }


def remaining(store: Store, media: Path, ids: dict[str, int]) -> dict[str, str]:
    """Each seeded violation: gone, kept without media, or kept with its five files."""
    out = {}
    for name, vid in ids.items():
        row = store.get_violation(vid)
        on_disk = len(list(media.glob(f"v{vid}.*")))
        out[name] = "gone" if row is None else "record only" if row.media_purged_at else "kept"
        assert on_disk == (5 if out[name] == "kept" else 0), (name, on_disk)
    return out


KEPT = "kept"


@pytest.mark.parametrize(
    ("policy", "gone", "record_only"),
    [
        (RetentionPolicy(), set(), set()),
        (RetentionPolicy(media_days=30), set(), {"old not enforceable", "old dismissed"}),
        (RetentionPolicy(dismissed_days=30), {"old dismissed"}, set()),
        (RetentionPolicy(dismissed_days=3), {"old dismissed", "young dismissed"}, set()),
        (RetentionPolicy(violation_days=365), {"old enforceable"}, set()),
        (
            RetentionPolicy(media_days=3, dismissed_days=30, violation_days=365),
            {"old enforceable", "old dismissed"},
            {"old not enforceable", "young not enforceable", "young dismissed"},
        ),
    ],
)
def test_each_rule_removes_what_it_says(store, media, policy, gone, record_only) -> None:
    ids = seed(store, media)
    report = Purger(store, media, "edge-a", policy).run(now=NOW)
    expected = {n: "gone" if n in gone else "record only" if n in record_only else KEPT for n in ids}
    assert remaining(store, media, ids) == expected
    assert sorted(report.deleted) == sorted(ids[n] for n in gone)
    assert sorted(report.media_cleared) == sorted(ids[n] for n in record_only)
    assert report.files == 5 * (len(gone) + len(record_only)) and report.bytes == 1000 * report.files
    assert report.errors == []


def test_a_legal_hold_keeps_the_violation_and_its_media(store, media) -> None:
    ids = seed(store, media)
    for name in ("old enforceable", "old dismissed", "old not enforceable"):
        store.retention.set_hold(ids[name], "user:ada[admin]@x", "case 2026-114")
    report = Purger(store, media, "edge-a", RetentionPolicy(1, 1, 1)).run(now=NOW)
    left = remaining(store, media, ids)
    assert [n for n, state in left.items() if state == KEPT] == [
        "old enforceable", "old not enforceable", "old dismissed", "other server's"
    ]  # fmt: skip
    assert report.held == 3
    store.retention.set_hold(ids["old dismissed"], None, None)  # released: the next pass removes it
    Purger(store, media, "edge-a", RetentionPolicy(dismissed_days=1)).run(now=NOW)
    assert store.get_violation(ids["old dismissed"]) is None


def test_a_hold_placed_during_a_pass_wins(store, media, monkeypatch) -> None:
    ids = seed(store, media)
    found = store.retention.candidates

    def hold_after_the_look(*args, **kwargs):
        rows = found(*args, **kwargs)
        for row in rows:
            store.retention.set_hold(row.id, "officer", "a case opened just now")
        return rows

    monkeypatch.setattr(store.retention, "candidates", hold_after_the_look)
    report = Purger(store, media, "edge-a", RetentionPolicy(1, 1, 1)).run(now=NOW)
    assert report.deleted == report.media_cleared == []
    assert set(remaining(store, media, ids).values()) == {KEPT}


def test_recent_violations_are_never_purged(store, media) -> None:
    vid = add(store, media, 0.01, "dismissed")  # stored 15 minutes ago: its pack may be in the making
    Purger(store, media, "edge-a", RetentionPolicy(0.001, 0.001, 0.001)).run(now=NOW)
    assert store.get_violation(vid) is not None


def test_a_dry_run_removes_nothing(store, media) -> None:
    ids = seed(store, media)
    report = Purger(store, media, "edge-a", RetentionPolicy(3, 30, 365)).run(dry_run=True, now=NOW)
    assert set(remaining(store, media, ids).values()) == {KEPT}
    assert len(report.deleted) == 2 and len(report.media_cleared) == 3 and report.files == 25
    assert store.audit.entries(0, 100) == []


def test_every_removal_is_in_the_audit_trail(store, media) -> None:
    ids = seed(store, media)
    trail = []
    Purger(
        store, media, "edge-a", RetentionPolicy(media_days=30, dismissed_days=30), lambda *e: trail.append(e)
    ).run("retention", now=NOW)
    actions = [(e[1], e[3]) for e in trail]
    assert actions == [
        ("violation.purged", ids["old dismissed"]),
        ("violation.media_purged", ids["old not enforceable"]),
        ("retention.run", NOW.isoformat(timespec="seconds")),
    ]
    before = trail[0][4]
    assert before["status"] == "dismissed" and before["evidence_sha256"] == "ab" * 32
    assert len(before["files"]) == 5 and "occurred more than 30 days ago" in trail[0][6]
    assert trail[2][5] == {"deleted": 1, "media_cleared": 1, "files": 10, "bytes": 10_000, "held": 0}


def test_missing_files_are_no_error(store, media) -> None:
    vid = add(store, media, 40, "dismissed")
    for path in media.glob(f"v{vid}.*"):
        path.unlink()
    report = Purger(store, media, "edge-a", RetentionPolicy(dismissed_days=30)).run(now=NOW)
    assert report.deleted == [vid] and report.files == 0 and report.errors == []


# -- over the API, at the server's start, and from the command line ------------------------------


def _old_dismissed(server) -> int:
    store = server.store
    return add(
        store, server.settings.resolved_media_dir, 40, "dismissed", server_id=server.app.state.server_id
    )


def test_holds_and_passes_over_the_api(server_factory) -> None:
    srv = server_factory(retention_dismissed_days=30)
    vid = _old_dismissed(srv)
    officer = srv.app.state.accounts.add_machine_token("officer", "officer", "test").token
    with srv.client() as c:
        hold = {"hold": True, "reason": "case 2026-114"}
        refused = c.put(
            f"/api/v1/violations/{vid}/legal-hold", json=hold, headers={"Authorization": f"Bearer {officer}"}
        )
        assert refused.status_code == 403
        assert c.put(f"/api/v1/violations/{vid}/legal-hold", json={"hold": True}).status_code == 422
        held = c.put(f"/api/v1/violations/{vid}/legal-hold", json=hold).json()
        assert held["legal_hold"]["reason"] == "case 2026-114" and held["legal_hold"]["by"].startswith(
            "api-token@"
        )
        plan = c.get("/api/v1/retention").json()
        assert plan["policy"]["dismissed_days"] == 30 and plan["held"] == 1 and plan["next"]["deleted"] == []
        assert c.post("/api/v1/retention/purge").json()["deleted"] == []
        assert (
            c.put(f"/api/v1/violations/{vid}/legal-hold", json={"hold": False}).json()["legal_hold"] is None
        )
        assert c.get("/api/v1/retention").json()["next"]["deleted"] == [vid]
        assert c.post("/api/v1/retention/purge", params={"dry_run": "true"}).json()["deleted"] == [vid]
        assert c.get(f"/api/v1/violations/{vid}").status_code == 200
        done = c.post("/api/v1/retention/purge").json()
        assert done["deleted"] == [vid] and done["files"] == 5
        assert c.get(f"/api/v1/violations/{vid}").status_code == 404
        history = c.get(f"/api/v1/violations/{vid}/history").json()["entries"]
    assert [e["action"] for e in history] == [
        "violation.legal_hold", "violation.legal_hold_released", "violation.purged"
    ]  # fmt: skip
    assert history[-1]["actor"].startswith("api-token@") and history[-1]["before"]["status"] == "dismissed"


def test_the_server_runs_retention_from_its_start(server_factory, tmp_path: Path) -> None:
    first = server_factory()
    vid = _old_dismissed(first)
    kept = add(
        first.store, first.settings.resolved_media_dir, 40, "enforceable", server_id=first.app.state.server_id
    )
    first.stop()
    again = server_factory(
        data_dir=first.settings.data_dir, retention_media_days=30, retention_interval_s=3600
    )
    # the pass at start runs beside the server's start-up, not before it answers: wait for it (reading at
    # once failed on a loaded CI box: media_purged_at not yet set)
    wait_until(lambda: again.store.get_violation(vid).media_purged_at is not None, 30.0, "the pass at start")
    row = again.store.get_violation(vid)
    assert row is not None and row.media_purged_at is not None and row.clip_path is None
    with again.client() as c:
        shown = c.get(f"/api/v1/violations/{vid}").json()
        assert shown["media_purged_at"] and shown["clip_url"] is None
        assert c.get(f"/api/v1/violations/{kept}").json()["clip_url"] is not None
        assert c.get("/api/v1/retention").json()["last"]["media_cleared"] == [vid]


def test_the_retention_command(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("AIRPATROL_SETTINGS_FILE", raising=False)
    monkeypatch.setenv("AIRPATROL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("AIRPATROL_SERVER_ID", "edge-a")
    monkeypatch.setenv("AIRPATROL_RETENTION_DISMISSED_DAYS", "30")
    media = tmp_path / "media"
    media.mkdir()
    store = Store.from_url(f"sqlite:///{tmp_path / 'airpatrol.db'}", server_id="edge-a")
    try:
        dismissed = add(store, media, 40, "dismissed")
        assert airpatrol(["retention", "show"]) == 0
        out = capsys.readouterr().out
        assert "retention of edge-a: dismissed after 30 days" in out and "would remove: 1 violations" in out
        assert airpatrol(["retention", "hold", str(dismissed)]) == 2
        assert "needs --reason" in capsys.readouterr().err
        assert airpatrol(["retention", "hold", str(dismissed), "--reason", "case 7"]) == 0
        assert airpatrol(["retention", "run", "--json"]) == 0
        capsys.readouterr()
        assert store.get_violation(dismissed) is not None
        assert airpatrol(["retention", "release", str(dismissed)]) == 0
        assert airpatrol(["retention", "run", "--json"]) == 0
        report = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert report["deleted"] == [dismissed] and report["policy"]["dismissed_days"] == 30
        assert airpatrol(["retention", "hold", "999", "--reason", "x"]) == 2
        actions = [e["action"] for e in store.audit.entries(0, 100) if e["actor"] != "pre-audit"]
        assert actions == [
            "violation.legal_hold",
            "violation.legal_hold_released",
            "violation.purged",
            "retention.run",
        ]
    finally:
        store.close()
