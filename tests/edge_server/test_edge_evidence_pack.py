"""Evidence packs: signed, written atomically, verified offline; every kind of tampering found."""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from edge_server.evidence.canonical_zip import canonical_bytes
from edge_server.evidence.keys import KeyRing, KeyRingError, parse_fingerprint, public_pem, show_fingerprint
from edge_server.evidence.pack import EvidencePacker, file_list, manifest_bytes
from edge_server.evidence.verify import MANIFEST, PUBLIC_KEY, SIGNATURE, verify_pack
from edge_server.media import remove_partial_files

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

STORED = {
    "id": 7,
    "session_id": "s1",
    "server_id": "edge-a",
    "occurred_at": "2026-11-27T10:00:00+00:00",
    "zone": "main",
    "class_name": "car",
    "speed_limit_kmh": 50.0,
    "ticket_speed_kmh": 63.2,
    "ticket_sigma_kmh": 0.8,
    "tolerance_kmh": 3.0,
    "confidence_k": 1.645,
    "status": "enforceable",
    "status_reason": "",
    "base": {"duration_s": 1.2, "distance_m": 21.0, "n_samples": 36},
    "scale": {
        "source": "site",
        "height_above_road_m": 60.0,
        "height_sigma_m": 0.5,
        "pitch_deg": -46.3,
        "pitch_sigma_deg": 0.5,
        "pitch_from_traffic_deg": -1.3,
    },  # fmt: skip
    "scale_check": {"status": "ok", "ratio": 1.01},
    "latitude": 52.1,
    "longitude": 4.3,
}

TELEMETRY = {
    "timestamp_s": 10.0, "source": "flight", "camera": "M3E", "altitude_m": 60.0, "gimbal_pitch_deg": -90.0,
    "gimbal_yaw_deg": 12.0, "focal_length_mm": 12.3, "focal_length_35mm": 24.0, "digital_zoom": 1.0,
    "latitude": 52.1, "longitude": 4.3, "abs_altitude_m": 80.0, "lrf_range_m": None,
}  # fmt: skip
RECORD = {
    "format": "airpatrol-violation-record/1",
    "recorded_at": "2026-11-27T10:00:02+00:00",
    "clock": {"synchronized": True, "max_error_ms": 12.0, "detail": "synced"},
    "violation": {"track_id": 3, "ticket_speed_kmh": 63.2},
    "trace": [
        {
            "t_s": 10.0 + i / 30,
            "frame": 300 + i,
            "x_m": 0.58 * i,
            "y_m": 0.0,
            "segment": 1,
            "trusted": True,
            "in_base": 2 <= i <= 37,
            "zone": "main",
            "bbox_xyxy": [10.0, 10.0, 40.0, 25.0],
            "ground_xy_m": [1.0 + i, 2.0],
            "speed_kmh": 62.0 + (i % 3),
            "sigma_kmh": 2.0,
            "gsd_m_per_px": 0.0165,
            "telemetry": TELEMETRY,
        }
        for i in range(40)
    ],  # fmt: skip
    "config": {"rules": {"ticket_rule": "tolerance", "speed_limit_kmh": 50}, "camera": {"name": "M3E"}},
    "session": {"height_reference": {"origin": "site"}},
    "software": {"name": "airpatrol", "version": "0.1.0", "commit": "abc"},
    "models": [{"role": "detector", "path": "w.xml", "sha256": "0" * 64, "bytes": 1}],
}


@pytest.fixture
def ring(tmp_path: Path) -> KeyRing:
    return KeyRing.open(tmp_path / "keys")


@pytest.fixture
def pack(tmp_path: Path, ring: KeyRing) -> Path:
    snap = tmp_path / "snap.jpg"
    clip = tmp_path / "clip.mp4"
    snap.write_bytes(os.urandom(3000))
    clip.write_bytes(os.urandom(20000))
    info = EvidencePacker(ring, "edge-a").make(
        tmp_path / "v7.evidence.zip",
        STORED,
        record=RECORD,
        media={"snapshot.jpg": snap, "clip.mp4": clip, "source.mp4": None},
        made_later=False,
    )
    return info.path


def _members(path: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as zf:
        return [(n, zf.read(n)) for n in zf.namelist()]


def _write(path: Path, members: list[tuple[str, bytes]]) -> Path:
    path.write_bytes(canonical_bytes(members))
    return path


def test_a_pack_verifies_and_holds_every_piece(pack: Path, ring: KeyRing) -> None:
    report = verify_pack(pack, ring.trusted())
    assert report.ok, report.problems
    assert report.summary().startswith("OK:")
    names = [n for n, _ in _members(pack)]
    assert names == [
        "snapshot.jpg", "clip.mp4", "violation.json", "track.csv", "telemetry.csv", "computation.json",
        "rules.json", "session.json", "provenance.json", "summary.html", MANIFEST, SIGNATURE, PUBLIC_KEY,
    ]  # fmt: skip
    members = dict(_members(pack))
    manifest = json.loads(members[MANIFEST])
    assert manifest["signing_key"] == ring.fingerprint
    assert manifest["missing"] == [{"what": "source.mp4", "why": "not recorded for this violation"}]
    assert manifest["made_later"] is False
    track = members["track.csv"].decode().splitlines()
    assert len(track) == 41 and track[0].startswith("t_s,frame,x_m")
    assert sum(line.split(",")[6] == "1" for line in track[1:]) == 36  # in_base
    comp = json.loads(members["computation.json"])
    assert comp["gsd"]["n"] == 36 and comp["gsd"]["mean_cm_per_px"] == pytest.approx(1.65)
    assert comp["ticket"]["rule"] == "tolerance"
    page = members["summary.html"].decode()
    assert "63.2 ± 0.8 km/h" in page and show_fingerprint(ring.fingerprint) not in page
    assert "60.0 ± 0.5 m above the road, pitch -46.3 ± 0.5° (-1.30° from the traffic&#x27;s speeds)" in page
    assert ring.fingerprint in page
    # any zip tool reads it
    assert zipfile.ZipFile(pack).testzip() is None


def test_unanchored_and_folder_forms(pack: Path, tmp_path: Path, ring: KeyRing) -> None:
    report = verify_pack(pack)
    assert report.ok and not report.anchored and "UNANCHORED" in report.summary()
    folder = tmp_path / "unpacked"
    zipfile.ZipFile(pack).extractall(folder)
    assert verify_pack(folder, ring.trusted()).ok
    (folder / "notes.txt").write_text("added")
    assert verify_pack(folder, ring.trusted()).problems == ["notes.txt is not in the manifest (added)"]


def _resigned(members: list[tuple[str, bytes]], change: str, other: KeyRing) -> list[tuple[str, bytes]]:
    """An attacker's pack: one file changed, manifest rebuilt and signed with their own key."""
    data = [
        (n, d + b"x" if n == change else d) for n, d in members if n not in (MANIFEST, SIGNATURE, PUBLIC_KEY)
    ]
    meta = json.loads(dict(members)[MANIFEST])
    meta.pop("files")
    meta["signing_key"] = other.fingerprint
    manifest = manifest_bytes(meta, file_list(data))
    sig, pub = other.sign(manifest)
    return [
        *data,
        (MANIFEST, manifest),
        (SIGNATURE, base64.b64encode(sig) + b"\n"),
        (PUBLIC_KEY, public_pem(pub)),
    ]


@pytest.mark.parametrize(
    ("mutation", "expected"),
    [
        ("drop:clip.mp4", "clip.mp4 is listed in the manifest but missing (removed)"),
        ("rename:clip.mp4>clip2.mp4", "clip.mp4 was renamed to clip2.mp4"),
        ("add:extra.txt", "extra.txt is not in the manifest (added)"),
        ("edit:track.csv", "track.csv is"),
        ("drop:manifest.sig", "manifest.sig missing"),
        ("reorder-manifest", "the manifest's signature does not verify"),
        ("resign", "which is not a trusted key"),
        ("swap-key", "the manifest's signature does not verify"),
        ("reorder-files", "the zip's bytes differ"),
    ],
)
def test_each_tampering_is_named(
    pack: Path, tmp_path: Path, ring: KeyRing, mutation: str, expected: str
) -> None:
    members = _members(pack)
    other = KeyRing.open(tmp_path / "other")
    kind, _, arg = mutation.partition(":")
    if kind == "drop":
        members = [(n, d) for n, d in members if n != arg]
    elif kind == "rename":
        old, new = arg.split(">")
        members = [(new if n == old else n, d) for n, d in members]
    elif kind == "add":
        members.insert(2, (arg, b"hello"))
    elif kind == "edit":
        members = [(n, d.replace(b"63.2", b"53.2") + b"\n" if n == arg else d) for n, d in members]
    elif kind == "reorder-manifest":
        manifest = json.loads(dict(members)[MANIFEST])
        reordered = json.dumps(dict(reversed(list(manifest.items()))), indent=2).encode() + b"\n"
        members = [(n, reordered if n == MANIFEST else d) for n, d in members]
    elif kind == "resign":
        members = _resigned(members, "clip.mp4", other)
    elif kind == "swap-key":
        members = [(n, public_pem(other.public_key) if n == PUBLIC_KEY else d) for n, d in members]
    elif kind == "reorder-files":
        members = [members[1], members[0], *members[2:]]
    report = verify_pack(_write(tmp_path / "t.zip", members), ring.trusted())
    assert not report.ok
    assert any(expected in p for p in report.problems), report.problems
    assert report.summary().startswith("TAMPERED")


def test_fuzz_every_byte_flip_and_truncation_is_detected(pack: Path, ring: KeyRing, tmp_path: Path) -> None:
    """100 % of 400 random byte flips anywhere in the file (members, headers, directory), plus
    truncations and appended bytes: verify never calls a changed pack intact."""
    data = pack.read_bytes()
    rng = random.Random(41)
    trusted = ring.trusted()
    target = tmp_path / "fuzz.zip"
    cases = [("flip", rng.randrange(len(data)), rng.randrange(1, 256)) for _ in range(400)]
    cases += [("flip", i, 1) for i in range(0, 60)] + [("flip", len(data) - 1 - i, 1) for i in range(0, 120)]
    cases += [("cut", rng.randrange(1, len(data)), 0) for _ in range(20)] + [
        ("append", 0, 0),
        ("prepend", 0, 0),
    ]
    missed = []
    for kind, pos, xor in cases:
        if kind == "flip":
            changed = data[:pos] + bytes([data[pos] ^ xor]) + data[pos + 1 :]
        elif kind == "cut":
            changed = data[:pos]
        elif kind == "append":
            changed = data + b"\0"
        else:
            changed = b"PK" + data
        target.write_bytes(changed)
        if verify_pack(target, trusted).ok:
            missed.append((kind, pos, xor))
    assert missed == []


def test_a_crash_mid_write_leaves_no_pack(tmp_path: Path, ring: KeyRing) -> None:
    """A process killed while writing its pack leaves no file at the pack's name; the half-written
    one is removed at the next start."""
    script = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from pathlib import Path
from edge_server.evidence import pack as P
from edge_server.evidence.keys import KeyRing
def dying(out, members):
    out.write(b"PK\\x03\\x04 half a pack")
    os._exit(9)
P.write_canonical = dying
ring = KeyRing.open(Path({str(tmp_path / "keys")!r}))
P.EvidencePacker(ring, "edge-a").make(Path({str(tmp_path / "out" / "v.evidence.zip")!r}), {STORED!r},
    record=None, media={{}}, made_later=True)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    out = tmp_path / "out"
    assert not (out / "v.evidence.zip").exists()
    assert len(list(out.iterdir())) == 1  # the partial file
    assert remove_partial_files(tmp_path) == 1 and list(out.iterdir()) == []


def test_rotation_keeps_old_keys_verifying(tmp_path: Path, pack: Path, ring: KeyRing) -> None:
    old = ring.fingerprint
    was, now = ring.rotate()
    assert was == old and now != old
    reopened = KeyRing.open(tmp_path / "keys", create=False)
    assert reopened.fingerprint == now
    assert set(reopened.trusted()) == {old, now}
    assert [e.retired_at is not None for e in reopened.entries] == [True, False]
    assert verify_pack(pack, reopened.trusted()).ok  # signed with the retired key
    assert oct((tmp_path / "keys" / "signing-ed25519.pem").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("SHA256:" + " ".join(["abcd"] * 16), True),
        ("AB:CD:" + "ab" * 30, True),
        ("abc", False),
        ("g" * 64, False),
    ],
)
def test_fingerprints_as_typed(text: str, ok: bool) -> None:
    if ok:
        assert len(parse_fingerprint(text)) == 64
    else:
        with pytest.raises(KeyRingError, match="not a key fingerprint"):
            parse_fingerprint(text)


def test_a_broken_key_file_is_named(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    (keys / "signing-ed25519.pem").write_text("not a key")
    with pytest.raises(KeyRingError, match="is not a private key"):
        KeyRing.open(keys)
    with pytest.raises(KeyRingError, match="no signing key"):
        KeyRing.open(tmp_path / "empty", create=False)


@pytest.mark.parametrize(
    "stored",
    [
        {"id": 1, "session_id": "s"},  # the least a row has
        {**STORED, "ticket_sigma_kmh": None, "tolerance_kmh": None, "base": None, "scale": None},
        {**STORED, "zone": "<script>alert(1)</script>", "status_reason": "a & b"},  # escaped in the page
    ],
)
def test_any_stored_row_makes_a_verifiable_pack(tmp_path: Path, ring: KeyRing, stored: dict) -> None:
    info = EvidencePacker(ring, "edge-a").make(
        tmp_path / "p.zip", stored, record=None, media={}, made_later=True
    )
    assert verify_pack(info.path, ring.trusted()).ok
    page = dict(_members(info.path))["summary.html"].decode()
    assert "<script>" not in page
