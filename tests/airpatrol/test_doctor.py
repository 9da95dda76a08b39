"""``airpatrol doctor``: every check on a real box, and what it says when something is broken."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from shared_material import REPO

from airpatrol.cli import main
from edge_server.store import Store

pytestmark = pytest.mark.timeout(120)

NAMES = [
    "models",
    "openvino",
    "onnxruntime",
    "torch",
    "h264",
    "database",
    "rtmp",
    "mqtt",
    "disk",
    "evidence",
    "users",
    "terrain",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A server configuration of its own: data folder in tmp_path, RTMP and MQTT on free ports."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AIRPATROL_SETTINGS_FILE", raising=False)
    monkeypatch.setenv("AIRPATROL_DATA_DIR", str(tmp_path / "data"))
    for name, value in {"RTMP_HOST": "127.0.0.1", "MQTT_HOST": "127.0.0.1"}.items():
        monkeypatch.setenv(f"AIRPATROL_{name}", value)
    monkeypatch.setenv("AIRPATROL_RTMP_PORT", str(_free_port()))
    monkeypatch.setenv("AIRPATROL_MQTT_PORT", str(_free_port()))
    return tmp_path


def doctor(capsys, *args: str) -> tuple[int, dict[str, dict]]:
    rc = main(["doctor", "--json", *args])
    report = json.loads(capsys.readouterr().out)
    checks: dict[str, dict] = {}
    for check in report["checks"]:  # the worst finding of each name
        if check["name"] not in checks or check["status"] == "fail":
            checks[check["name"]] = check
    return rc, checks


def test_a_ready_box_passes_every_check(box: Path, capsys) -> None:
    rc, checks = doctor(capsys)
    assert rc == 0, checks
    assert list(checks) == NAMES
    assert checks["models"]["status"] == "ok" and "sha256 as their cards say" in checks["models"]["detail"]
    assert checks["h264"]["status"] == "ok"
    assert "created at the first" in checks["database"]["detail"]


def test_a_migrated_database_is_reported_current(box: Path, capsys) -> None:
    Store.from_url(f"sqlite:///{box / 'data' / 'airpatrol.db'}").close()
    rc, checks = doctor(capsys)
    assert rc == 0 and "(newest)" in checks["database"]["detail"], checks["database"]


def test_the_user_accounts_are_counted(box: Path, capsys) -> None:
    rc, checks = doctor(capsys)
    assert (
        checks["users"]["status"] == "warn"
        and "airpatrol users add NAME --role admin" in checks["users"]["detail"]
    )
    store = Store.from_url(f"sqlite:///{box / 'data' / 'airpatrol.db'}")
    try:
        for name, role in [("olga", "officer"), ("otto", "officer"), ("vera", "viewer")]:
            store.accounts.add_user(name, role, "$argon2id$not-checked-here", "test")
        rc, checks = doctor(capsys)
        assert checks["users"] == {"name": "users", "status": "warn", "detail": (
            "2 officers, 1 viewer; no admin account (only the server's API token administers)")}  # fmt: skip
        store.accounts.add_user("ada", "admin", "$argon2id$not-checked-here", "test")
        store.accounts.update_user("vera", disabled_at=store.accounts.user("olga").created_at)
        rc, checks = doctor(capsys)
        assert (
            rc == 0
            and checks["users"]["status"] == "ok"
            and checks["users"]["detail"] == "1 admin, 2 officers"
        )
    finally:
        store.close()


@pytest.mark.parametrize(
    ("damage", "detail"),
    [
        ("flip", "sha256 differs from the card: airpatrol_road_unet_mnv3s.pt"),
        (
            "remove",
            "the default model airpatrol_vehicles_n_int8_openvino_model/airpatrol_vehicles_n.xml is missing",
        ),
    ],
)
def test_damaged_models_fail(box: Path, capsys, damage: str, detail: str) -> None:
    weights = box / "weights"
    shutil.copytree(REPO / "weights", weights)
    if damage == "flip":
        data = bytearray((weights / "airpatrol_road_unet_mnv3s.pt").read_bytes())
        data[1000] ^= 0xFF
        (weights / "airpatrol_road_unet_mnv3s.pt").write_bytes(bytes(data))
    else:
        (weights / "airpatrol_vehicles_n_int8_openvino_model" / "airpatrol_vehicles_n.xml").unlink()
    rc, checks = doctor(capsys, "--weights", str(weights))
    assert rc == 1
    assert checks["models"]["status"] == "fail" and detail in checks["models"]["detail"]


def test_an_unreachable_database_fails_and_a_taken_port_warns(box: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("AIRPATROL_DATABASE_URL", f"postgresql+psycopg2://u:p@127.0.0.1:{_free_port()}/db")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setenv("AIRPATROL_RTMP_PORT", str(taken.getsockname()[1]))
        rc, checks = doctor(capsys)
    assert rc == 1
    assert checks["database"]["status"] == "fail" and "not reachable" in checks["database"]["detail"]
    assert "u:p" not in checks["database"]["detail"]  # no credentials in the report
    assert checks["rtmp"]["status"] == "warn" and "in use" in checks["rtmp"]["detail"]


def test_the_text_report_ends_with_a_verdict(box: Path, capsys) -> None:
    assert main(["doctor"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("OK    models")
    assert lines[-1].startswith("ready (")


def test_map_tiles_and_webhooks_are_reported(box: Path, capsys, monkeypatch) -> None:
    (box / "broken.mbtiles").write_bytes(b"not a database")
    monkeypatch.setenv("AIRPATROL_MAP_TILES", str(box / "broken.mbtiles"))
    monkeypatch.setenv(
        "AIRPATROL_WEBHOOKS",
        '[{"name": "dispatch", "url": "http://10.0.0.5/hook", "secret": "0123456789abcdef"}]',
    )
    rc, checks = doctor(capsys)
    assert rc == 1 and checks["map"]["status"] == "fail" and "not raster MBTiles" in checks["map"]["detail"]
    assert (
        checks["webhooks"]["status"] == "warn"
        and "plain HTTP off this box: dispatch" in checks["webhooks"]["detail"]
    )


def test_the_sites_terrain_model_is_read_as_the_server_would(box: Path, capsys, monkeypatch) -> None:
    rc, checks = doctor(capsys)
    assert (
        checks["terrain"]["status"] == "ok" and "no terrain model configured" in checks["terrain"]["detail"]
    )
    (box / "site.yaml").write_text(f"camera:\n  terrain:\n    dem: {box / 'missing.tif'}\n")
    monkeypatch.setenv("AIRPATROL_PIPELINE_CONFIG", str(box / "site.yaml"))
    rc, checks = doctor(capsys)
    assert (
        rc == 1
        and checks["terrain"]["status"] == "fail"
        and "missing.tif: no such file" in checks["terrain"]["detail"]
    )
