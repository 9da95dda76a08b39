"""The audit trail: append-only and hash-chained in the database, signed checkpoints of its head;
`airpatrol audit verify` finds a removed, changed, rewritten or cut entry and a forged checkpoint;
the server records who did what (the API's actions, the engine's) and packs carry a checkpoint."""

from __future__ import annotations

import threading
import zipfile
from pathlib import Path

import pytest
from edge_helpers import seed_store
from sqlalchemy import text

from airpatrol.cli import main as airpatrol
from edge_server.evidence.audit import Auditor, pack_checkpoints, verify_trail
from edge_server.evidence.keys import KeyRing
from edge_server.evidence.verify import verify_pack
from edge_server.store import Store
from edge_server.store.audit import entry_hash
from edge_server.store.database import make_engine, migrate

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)


@pytest.fixture
def trail(tmp_path: Path, database_url: str):
    engine = make_engine(database_url)
    migrate(engine)
    store = Store(engine, server_id="edge-a")
    ring = KeyRing.open(tmp_path / "keys")
    auditor = Auditor(store, ring, "edge-a", every=5)
    for k in range(12):
        auditor.record("api-token@10.0.0.2", "violation.false_positive", "violation", k % 3 + 1,
                       {"false_positive": False}, {"false_positive": True, "n": k})  # fmt: skip
    yield store, ring, auditor
    engine.dispose()


def _sql(store: Store, statement: str, **params) -> None:
    with store.engine.begin() as conn:
        conn.execute(text(statement), params)


def _rehash_from(store: Store, seq: int) -> None:
    """What an attacker with the database does: recompute every hash from ``seq`` on."""
    entries = list(store.audit.iter_all())
    prev = entries[seq - 2]["hash"] if seq > 1 else "0" * 64
    for e in entries[seq - 1 :]:
        h = entry_hash(e, prev)
        _sql(store, "UPDATE audit_log SET prev_hash = :p, hash = :h WHERE seq = :s", p=prev, h=h, s=e["seq"])
        prev = h


def test_an_untouched_trail_holds(trail) -> None:
    store, ring, _ = trail
    report = verify_trail(store, ring.trusted())
    assert report.ok, report.problems
    assert (report.entries, report.checkpoints, report.head[0]) == (12, 2, 12)
    history = store.audit.history("violation", 2)
    assert [e["seq"] for e in history] == [2, 5, 8, 11] and history[0]["actor"] == "api-token@10.0.0.2"


@pytest.mark.parametrize(
    ("tamper", "expected"),
    [
        ("change", "entry 3 (violation.false_positive on violation 3) was changed"),
        ("remove", "entries 4 are missing (removed)"),
        ("remove_two", "entries 6-7 are missing (removed)"),
        ("rewrite", "entry 5 is not what was signed (the chain was rewritten)"),
        ("forge_checkpoint", "its signature does not verify with a trusted key"),
        ("cut_tail", "the trail ends at entry 8: entries 9-10 were cut"),
    ],
)
def test_each_tampering_is_found(trail, tamper: str, expected: str) -> None:
    store, ring, _ = trail
    if tamper == "change":
        _sql(store, """UPDATE audit_log SET actor = 'someone else' WHERE seq = 3""")
    elif tamper == "remove":
        _sql(store, "DELETE FROM audit_log WHERE seq = 4")
    elif tamper == "remove_two":
        _sql(store, "DELETE FROM audit_log WHERE seq IN (6, 7)")
    elif tamper == "rewrite":  # entry 3 changed and the chain after it recomputed: the checkpoints hold
        _sql(store, """UPDATE audit_log SET actor = 'someone else' WHERE seq = 3""")
        _rehash_from(store, 3)
    elif tamper == "forge_checkpoint":
        _sql(store, "UPDATE audit_checkpoints SET head_hash = :h WHERE seq = 10", h="f" * 64)
    elif tamper == "cut_tail":  # the last entries removed, past a checkpoint (entry 10's)
        _sql(store, "DELETE FROM audit_log WHERE seq > 8")
    report = verify_trail(store, ring.trusted())
    assert not report.ok and any(expected in p for p in report.problems), report.problems
    assert report.summary().startswith("AUDIT TRAIL BROKEN")


def test_a_cut_after_the_last_checkpoint_is_found_from_a_pack(trail, tmp_path: Path) -> None:
    """Entries cut with every checkpoint after them: the database alone cannot tell; the checkpoint
    an evidence pack carries (signed when the pack was made) can."""
    store, ring, auditor = trail
    in_pack = auditor.checkpoint()  # seq 12, as a pack made now holds it
    _sql(store, "DELETE FROM audit_log WHERE seq > 10")
    _sql(store, "DELETE FROM audit_checkpoints WHERE seq > 10")
    assert verify_trail(store, ring.trusted()).ok  # undetectable from the database alone
    report = verify_trail(store, ring.trusted(), [in_pack])
    assert report.problems == [
        f"checkpoint of entry 12 signed {in_pack['at']}: the trail ends at entry 10: entries 11-12 were cut"
    ]


def test_concurrent_writers_never_fork_the_chain(trail) -> None:
    """Four threads appending at once (on PostgreSQL: as a fleet's servers would): one chain."""
    store, ring, auditor = trail
    errors: list[BaseException] = []

    def write(k: int) -> None:
        try:
            for i in range(25):
                store.audit.append(f"writer-{k}", "session.rules", "session", f"s{k}", None, {"i": i})
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    report = verify_trail(store, ring.trusted())
    assert report.ok and report.entries == 112 and report.head[0] == 112


def test_the_server_records_who_did_what(server_factory) -> None:
    """A false positive marked over the API, a pack made and downloaded: each an entry with its actor
    and before/after; the pack holds the violation's entries and a checkpoint that verifies."""
    server = server_factory()
    (vid,) = seed_store(server, {"s1": "webrtc"}, [("s1", 1, 71.0, "global")])
    with server.client() as c:
        assert (
            c.put(f"/api/v1/violations/{vid}/false_positive", json={"false_positive": True}).status_code
            == 200
        )
        made = c.post(f"/api/v1/violations/{vid}/evidence").json()
        pack_bytes = c.get(made["evidence"]["url"]).content
        history = c.get(f"/api/v1/violations/{vid}/history").json()["entries"]
        page = c.get("/api/v1/audit", params={"limit": 2}).json()
        assert c.get("/api/v1/violations/999/history").status_code == 404
    actions = [(e["action"], e["actor"]) for e in history]
    assert actions == [
        ("violation.false_positive", "api-token@127.0.0.1"),
        ("evidence.made", "api-token@127.0.0.1"),
        ("evidence.downloaded", "api-token@127.0.0.1"),
    ]
    assert history[0]["before"] == {"false_positive": False, "status": "enforceable"}
    assert history[0]["after"] == {"false_positive": True, "status": "dismissed"}
    assert [e["seq"] for e in page["entries"]] == [1, 2] and page["next_after_seq"] == 2
    pack = server.settings.resolved_media_dir / "p.zip"
    pack.write_bytes(pack_bytes)
    ring = KeyRing.open(server.settings.resolved_keys_dir, create=False)
    assert verify_pack(pack, ring.trusted()).ok
    with zipfile.ZipFile(pack) as zf:
        assert "audit.json" in zf.namelist()
    (checkpoint,) = pack_checkpoints([pack])
    assert checkpoint["seq"] >= 1
    assert verify_trail(server.store, ring.trusted(), [checkpoint]).ok


def test_false_positives_from_before_the_trail_get_a_pre_audit_entry(server_factory, tmp_path: Path) -> None:
    first = server_factory()
    ids = seed_store(first, {"s1": "webrtc"}, [("s1", 1, 71.0, "global"), ("s1", 2, 75.0, "global")])
    first.store.update_violation(ids[1], false_positive=True)  # marked without the API: no entry
    with first.store.engine.begin() as conn:  # as a database from before the trail
        conn.execute(text("DELETE FROM audit_log"))
        conn.execute(text("DELETE FROM audit_checkpoints"))
    first.stop()
    again = server_factory(data_dir=first.settings.data_dir)
    with again.client() as c:
        history = c.get(f"/api/v1/violations/{ids[1]}/history").json()["entries"]
        assert c.get(f"/api/v1/violations/{ids[0]}/history").json()["entries"] == []
    assert [(e["actor"], e["action"], e["after"]) for e in history] == [
        ("pre-audit", "violation.false_positive", {"false_positive": True})
    ]
    assert "before the audit trail existed" in history[0]["detail"]


def test_audit_verify_command(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("AIRPATROL_SETTINGS_FILE", raising=False)
    monkeypatch.setenv("AIRPATROL_DATA_DIR", str(tmp_path))
    store = Store.from_url(f"sqlite:///{tmp_path / 'airpatrol.db'}", server_id="edge-a")
    auditor = Auditor(store, KeyRing.open(tmp_path / "keys"), "edge-a", every=3)
    for k in range(7):
        auditor.record("cli", "session.rules", "session", "s1", None, {"k": k})
    assert airpatrol(["audit", "verify"]) == 0
    assert capsys.readouterr().out.startswith("OK: 7 entries, head entry 7, 2 signed checkpoints hold")
    _sql(store, "DELETE FROM audit_log WHERE seq = 2")
    assert airpatrol(["audit", "verify"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("AUDIT TRAIL BROKEN") and "entries 2 are missing (removed)" in out
    store.close()


def test_audit_verify_says_what_it_cannot_read(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("AIRPATROL_SETTINGS_FILE", raising=False)
    monkeypatch.setenv("AIRPATROL_DATA_DIR", str(tmp_path))
    KeyRing.open(tmp_path / "keys")
    assert airpatrol(["audit", "verify"]) == 2  # no database there: not migrated by a verify
    assert "the audit trail cannot be read" in capsys.readouterr().err
    (tmp_path / "not-a-pack.zip").write_text("x")
    Store.from_url(f"sqlite:///{tmp_path / 'airpatrol.db'}").close()
    assert airpatrol(["audit", "verify", "--pack", str(tmp_path / "not-a-pack.zip")]) == 2
    assert capsys.readouterr().err.startswith("airpatrol audit: ")
