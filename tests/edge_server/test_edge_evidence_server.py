"""Evidence packs on the server: the recorder keeps the engine's record and makes the signed pack
once the clip is written; the API serves it and makes one on request for an older violation; the
store's migration; `airpatrol verify`, `airpatrol keys` and the doctor's key check."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from edge_helpers import alembic_to, seed_old_violation, seed_store
from sqlalchemy import inspect, text

from airpatrol.cli import main as airpatrol
from airpatrol.doctor import check_signing_key
from edge_server.events import EventBus
from edge_server.evidence.audit import Auditor
from edge_server.evidence.keys import KeyRing, show_fingerprint
from edge_server.evidence.pack import EvidencePacker
from edge_server.evidence.service import EvidenceService
from edge_server.evidence.verify import verify_pack
from edge_server.metrics import Metrics
from edge_server.settings import ServerSettings
from edge_server.store import Store
from edge_server.store.database import make_engine, migrate
from edge_server.violations import ViolationRecorder
from pipelines.types import MeasuringBase, Telemetry, TrackPoint, Violation

pytestmark = pytest.mark.parallel_safe  # API, store, files and child processes: no stream (tests/conftest.py)

TEL = Telemetry(timestamp_s=2.0, altitude_m=61.5, gimbal_pitch_deg=-90.0, latitude=52.0, longitude=4.0)


def _violation() -> Violation:
    trace = tuple(
        TrackPoint(
            t=2.0 + i / 30, frame=61 + i, x_m=0.5 * i, y_m=0.0, segment=1, trusted=True, zone="global",
            bbox_xyxy=(100.0, 100.0, 160.0, 140.0), ground_xy_m=(3.0, 0.5 * i), speed_kmh=60.0 + i % 4,
            sigma_kmh=1.5, gsd_m_per_px=0.02, in_base=5 <= i < 40, telemetry=TEL,
        )
        for i in range(45)
    )  # fmt: skip
    return Violation(
        7, "global", 50.0, 64.0, 61.0, 1.5, 61, 105, 2.0, 3.5,
        bbox_xyxy=(100.0, 100.0, 160.0, 140.0), ticket_speed_kmh=61.0, ticket_sigma_kmh=0.9, tolerance_kmh=3.0,
        confidence_k=1.645, base=MeasuringBase(2.17, 3.3, 66, 100, 19.5, 35), status="enforceable", trace=trace,
    )  # fmt: skip


@pytest.mark.parametrize("frames", [True, False])
async def test_the_recorder_packs_each_violation_after_its_clip(tmp_path: Path, frames: bool) -> None:
    settings = ServerSettings(data_dir=tmp_path, clip_pre_s=1.0, clip_post_s=0.5)
    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    store.create_session("s1", "test")
    ring = KeyRing.open(settings.resolved_keys_dir)
    auditor = Auditor(store, ring, "edge-a")
    service = EvidenceService(EvidencePacker(ring, "edge-a"), store, settings.resolved_media_dir, auditor)
    bus = EventBus(asyncio.get_running_loop())
    sub = bus.subscribe("s1")
    with ThreadPoolExecutor(2) as clips:
        recorder = ViolationRecorder(
            "s1", settings=settings, store=store, bus=bus, metrics=Metrics(), clip_executor=clips,
            snapshot_margin_px=20, evidence=service,
        )  # fmt: skip
        recorder.context = lambda: {"config": {"rules": {"speed_limit_kmh": 50.0}}, "session": {"x": 1}}
        for k in range(120 if frames else 0):
            if recorder.frame_due(k / 30):
                recorder.add_frame(k / 30, np.full((180, 320, 3), k, np.uint8))
        image = np.zeros((360, 640, 3), np.uint8)
        row = await asyncio.to_thread(
            recorder.record, _violation(), image, TEL, dt.datetime.now(dt.timezone.utc)
        )
        recorder.flush(None)
        assert await asyncio.to_thread(recorder.wait_for_clips, 60) == 0
    events = [await asyncio.wait_for(sub.get(), 5) for _ in range(2 + frames)]
    assert [e["type"] for e in events] == ["violation"] + ["violation.clip_ready"] * frames + [
        "violation.evidence_ready"
    ]
    stored = store.get_violation(row.id)
    assert stored.record_path == "s1/t7_global_61.record.json" and stored.evidence_made_later is False
    pack = settings.resolved_media_dir / stored.evidence_path
    assert events[-1]["evidence"]["sha256"] == stored.evidence_sha256
    report = verify_pack(pack, ring.trusted())
    assert report.ok, report.problems
    with zipfile.ZipFile(pack) as zf:
        names = zf.namelist()
        manifest = json.loads(zf.read("manifest.json"))
        track = zf.read("track.csv").decode().splitlines()
        telemetry = zf.read("telemetry.csv").decode().splitlines()
        comp = json.loads(zf.read("computation.json"))
    assert ("clip.mp4" in names) is frames and "snapshot.jpg" in names
    missing = {m["what"] for m in manifest["missing"]}
    assert missing == ({"source.mp4"} if frames else {"clip.mp4", "source.mp4"})  # WebRTC-like: no source
    assert len(track) == 46 and sum(line.split(",")[6] == "1" for line in track[1:]) == 35
    assert telemetry[1].split(",")[5] == "61.5"
    assert comp["gsd"]["mean_cm_per_px"] == 2.0 and comp["ticket"]["speed_kmh"] == 61.0
    assert json.loads(zf_read(pack, "rules.json")) == {"speed_limit_kmh": 50.0}
    store.close()


def zf_read(pack: Path, name: str) -> bytes:
    with zipfile.ZipFile(pack) as zf:
        return zf.read(name)


def test_an_older_violation_is_packed_on_request(server_factory) -> None:
    """A violation stored before packs: POST makes its pack, marked as made later, saying the
    engine's record is missing; GET serves it; a violation without one is a 404 with a reason."""
    server = server_factory()
    ids = seed_store(server, {"s1": "webrtc"}, [("s1", 1, 71.0, "global"), ("s1", 2, 65.0, "global")])
    with server.client() as c:
        assert c.get(f"/api/v1/violations/{ids[0]}").json()["evidence"] is None
        missing = c.get(f"/api/v1/violations/{ids[0]}/evidence.zip")
        assert missing.status_code == 404 and "has no evidence pack" in missing.json()["detail"]
        made = c.post(f"/api/v1/violations/{ids[0]}/evidence")
        assert made.status_code == 200, made.text
        evidence = made.json()["evidence"]
        assert evidence["made_later"] is True
        again = c.post(f"/api/v1/violations/{ids[0]}/evidence").json()["evidence"]
        assert again == evidence  # made once
        pack = c.get(evidence["url"])
        assert pack.status_code == 200
        assert c.post("/api/v1/violations/999/evidence").status_code == 404
    path = server.settings.resolved_media_dir / "got.zip"
    path.write_bytes(pack.content)
    report = verify_pack(path, KeyRing.open(server.settings.resolved_keys_dir, create=False).trusted())
    assert report.ok and report.manifest["made_later"] is True
    why = {m["what"]: m["why"] for m in report.manifest["missing"]}
    assert any(w.startswith("the engine's record") for w in why)
    assert why["source.mp4"].startswith("not kept: a WebRTC stream")  # seeded as a webrtc session
    names = zipfile.ZipFile(path).namelist()
    assert {"snapshot.jpg", "clip.mp4", "violation.json", "summary.html"} <= set(names)
    assert "track.csv" not in names


def test_with_packs_off_a_request_says_so(server_factory) -> None:
    server = server_factory(evidence_packs=False)
    (vid,) = seed_store(server, {"s1": "webrtc"}, [("s1", 1, 71.0, "global")])
    with server.client() as c:
        r = c.post(f"/api/v1/violations/{vid}/evidence")
    assert r.status_code == 409 and "evidence packs are off" in r.json()["detail"]
    assert server.settings.resolved_keys_dir.exists()  # the audit trail's checkpoints are signed anyway


def test_upgrade_from_0006_and_back(database_url: str) -> None:
    engine = make_engine(database_url)
    alembic_to(engine, "upgrade", "0006")
    row = {
        "id": 41, "session_id": "old", "occurred_at": dt.datetime(2026, 6, 1, 12), "track_id": 3,
        "class_name": "car", "zone": "global", "speed_limit_kmh": 50.0, "peak_speed_kmh": 71.0,
        "mean_speed_kmh": 70.0, "sigma_kmh": 1.0, "start_time_s": 3.0, "end_time_s": 5.0,
        "start_frame": 91, "end_frame": 151, "false_positive": False, "created_at": dt.datetime(2026, 6, 1, 12),
        "ticket_speed_kmh": 66.0, "ticket_status": "enforceable",
    }  # fmt: skip
    before = seed_old_violation(engine, row, "2026-06-01 11:59:00")
    migrate(engine)
    cols = (
        "record_path", "source_path", "evidence_path", "evidence_sha256", "evidence_made_at", "evidence_made_later",
    )  # fmt: skip
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0013"
        assert conn.execute(text(f"SELECT {', '.join(row)} FROM violations")).all() == before
        assert tuple(conn.execute(text(f"SELECT {', '.join(cols)} FROM violations")).one()) == (None,) * 6
    alembic_to(engine, "downgrade", "0006")
    assert not {c["name"] for c in inspect(engine).get_columns("violations")} & set(cols)
    assert not {"audit_log", "audit_checkpoints"} & set(inspect(engine).get_table_names())
    with engine.connect() as conn:
        assert conn.execute(text(f"SELECT {', '.join(row)} FROM violations")).all() == before
    engine.dispose()


def test_verify_keys_and_doctor_commands(tmp_path: Path, capsys) -> None:
    keys = tmp_path / "keys"
    settings = ServerSettings(data_dir=tmp_path)
    assert check_signing_key(settings).detail.startswith("no signing key yet")
    assert airpatrol(["keys", "init", "--keys-dir", str(keys)]) == 0
    ring = KeyRing.open(keys, create=False)
    fp = show_fingerprint(ring.fingerprint)
    assert fp in capsys.readouterr().out
    assert fp in check_signing_key(settings).detail
    snap = tmp_path / "s.jpg"
    snap.write_bytes(b"\xff\xd8 a picture")
    stored = {"id": 3, "session_id": "s", "server_id": "edge-a", "ticket_speed_kmh": None, "status": "legacy"}
    pack = (
        EvidencePacker(ring, "edge-a")
        .make(tmp_path / "p.zip", stored, record=None, media={"snapshot.jpg": snap}, made_later=True)
        .path
    )

    assert airpatrol(["verify", str(pack)]) == 3  # intact, not anchored
    assert "UNANCHORED" in capsys.readouterr().out
    assert airpatrol(["verify", str(pack), "--key", fp]) == 0
    assert capsys.readouterr().out.startswith("OK: ")
    assert airpatrol(["verify", str(pack), "--keyring", str(keys), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True

    other = KeyRing.open(tmp_path / "other")
    assert airpatrol(["verify", str(pack), "--key", other.fingerprint]) == 1
    assert "not a trusted key" in capsys.readouterr().out
    data = bytearray(pack.read_bytes())
    data[40] ^= 0xFF
    (tmp_path / "bad.zip").write_bytes(bytes(data))
    assert airpatrol(["verify", str(tmp_path / "bad.zip"), "--key", fp]) == 1
    out = capsys.readouterr().out
    assert out.startswith("TAMPERED or damaged: ") and "\n  - " in out
    assert airpatrol(["verify", str(pack), "--key", "12ab"]) == 2  # a typo in the fingerprint
    assert "not a key fingerprint" in capsys.readouterr().err

    assert airpatrol(["keys", "rotate", "--keys-dir", str(keys)]) == 0
    assert "retired " + fp in capsys.readouterr().out
    assert airpatrol(["verify", str(pack), "--keyring", str(keys)]) == 0  # the old key still counts
    assert airpatrol(["keys", "export", "--keys-dir", str(keys)]) == 0
    assert capsys.readouterr().out.count("BEGIN PUBLIC KEY") == 2
    assert "1 retired keys kept" in check_signing_key(settings).detail


def test_backfill_packs_this_servers_older_violations(tmp_path: Path, monkeypatch, capsys) -> None:
    """`airpatrol evidence backfill`: a pack (made later) for each violation of this server (or of no
    server: before fleets) that has none; another server's are left to it; a second run makes none."""
    monkeypatch.delenv("AIRPATROL_SETTINGS_FILE", raising=False)
    monkeypatch.setenv("AIRPATROL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("AIRPATROL_SERVER_ID", "edge-a")
    store = Store.from_url(f"sqlite:///{tmp_path / 'airpatrol.db'}")
    store.create_session("s1", "rtmp")
    now = dt.datetime.now(dt.timezone.utc)
    mine = [store.add_violation("s1", _violation(), occurred_at=now).id for _ in range(2)]
    other = Store(store.engine, server_id="edge-b").add_violation("s1", _violation(), occurred_at=now).id
    assert airpatrol(["evidence", "backfill"]) == 0
    assert capsys.readouterr().out.startswith("2 evidence packs made (marked as made later) for 2 violations")
    ring = KeyRing.open(tmp_path / "keys", create=False)
    for vid in mine:
        row = store.get_violation(vid)
        assert row.evidence_made_later is True
        report = verify_pack(tmp_path / "media" / row.evidence_path, ring.trusted())
        assert report.ok and report.manifest["made_later"] is True
    assert store.get_violation(other).evidence_path is None
    assert airpatrol(["evidence", "backfill"]) == 0
    assert capsys.readouterr().out.startswith("0 evidence packs made")
    store.close()
