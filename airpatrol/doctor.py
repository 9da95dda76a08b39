"""``airpatrol doctor``: what this box has and lacks for AirPatrol, each check with its reason.

Checks: the shipped models (present, sha256 as their cards say), the inference backends (OpenVINO,
ONNX Runtime, CUDA) and the one the default detector runs on, H.264 encode and decode in PyAV, the
server's database (reachable, schema up to date), RTMP (nginx with its module, the port) and MQTT
(Mosquitto or ``mqtt_url``, the port) where the settings turn them on, free disk for media, and
the evidence-signing key (its fingerprint: the trust anchor to publish).
Exit status 1 when something would break a run; warnings do not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

OK, WARN, FAIL = "ok", "warn", "fail"
_CARD_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|.*\|\s*`([0-9a-f]{64})`\s*\|\s*$")
DEFAULT_DETECTOR = "airpatrol_vehicles_n_int8_openvino_model/airpatrol_vehicles_n.xml"
DEFAULT_ROAD = "airpatrol_road_unet_mnv3s.pt"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str


def card_checksums(weights: Path) -> dict[str, str]:
    """file (relative to ``weights``) -> sha256, from the tables of the model cards there."""
    out = {}
    for card in sorted(weights.glob("*.md")):
        for line in card.read_text(encoding="utf-8").splitlines():
            m = _CARD_ROW.match(line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_models(weights: Path) -> list[Check]:
    if not weights.is_dir():
        return [
            Check("models", FAIL, f"no models folder at {weights}: reinstall, or give detector/road weights")
        ]
    sums = card_checksums(weights)
    out = []
    for rel in (DEFAULT_DETECTOR, DEFAULT_ROAD):
        if not (weights / rel).is_file():
            out.append(Check("models", FAIL, f"the default model {rel} is missing from {weights}"))
    bad = [
        rel for rel, digest in sums.items() if (weights / rel).is_file() and sha256(weights / rel) != digest
    ]
    absent = [rel for rel in sums if not (weights / rel).is_file()]
    if bad:
        out.append(
            Check("models", FAIL, f"sha256 differs from the card: {', '.join(bad)} (corrupt or replaced)")
        )
    if absent:
        out.append(Check("models", WARN, f"listed in a card but not installed: {', '.join(absent)}"))
    if not out:
        out.append(Check("models", OK, f"{len(sums)} files in {weights}, sha256 as their cards say"))
    return out


def check_backends() -> list[Check]:
    out = []
    try:
        import openvino

        devices = openvino.Core().available_devices
        out.append(
            Check(
                "openvino",
                OK,
                f"{openvino.__version__}, devices {', '.join(devices)}: the default detector runs here",
            )
        )
    except Exception as exc:  # noqa: BLE001 - any import or runtime failure is the finding
        out.append(
            Check("openvino", FAIL, f"not usable ({exc}): the default detector (OpenVINO int8) cannot run")
        )
    try:
        import onnxruntime

        out.append(
            Check(
                "onnxruntime",
                OK,
                f"{onnxruntime.__version__}, {', '.join(onnxruntime.get_available_providers())}",
            )
        )
    except Exception as exc:  # noqa: BLE001
        out.append(Check("onnxruntime", WARN, f"not usable ({exc}): ONNX models cannot run"))
    try:
        import torch

        cuda = torch.cuda.is_available()
        name = torch.cuda.get_device_name(0) if cuda else "none: CPU only"
        out.append(Check("torch", OK, f"{torch.__version__}, CUDA {name}"))
    except Exception as exc:  # noqa: BLE001
        out.append(Check("torch", FAIL, f"not usable ({exc}): the road U-Net and .pt models need it"))
    return out


def check_h264() -> Check:
    """Eight frames through libx264 and back through the decoder, in memory."""
    import io
    from fractions import Fraction

    import av
    import numpy as np

    try:
        buf = io.BytesIO()
        with av.open(buf, "w", format="mp4") as out:
            stream = out.add_stream("libx264", rate=30)
            stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
            for i in range(8):
                frame = av.VideoFrame.from_ndarray(np.full((64, 64, 3), i * 30, np.uint8), format="bgr24")
                frame.pts, frame.time_base = i, Fraction(1, 30)
                for packet in stream.encode(frame):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
        buf.seek(0)
        with av.open(buf) as src:
            decoded = sum(1 for _ in src.decode(video=0))
    except Exception as exc:  # noqa: BLE001
        return Check("h264", FAIL, f"PyAV {av.__version__} cannot encode or decode H.264: {exc}")
    if decoded != 8:
        return Check("h264", FAIL, f"8 frames encoded, {decoded} decoded")
    return Check("h264", OK, f"PyAV {av.__version__}: libx264 encode and H.264 decode work")


def check_database(settings) -> Check:
    from sqlalchemy import inspect, text

    from edge_server.store import MIGRATIONS_DIR, make_engine

    url = settings.resolved_database_url
    shown = url.split("@", 1)[-1] if "@" in url else url
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return Check("database", OK, f"{shown}: created at the first `airpatrol serve`")
    from alembic.script import ScriptDirectory

    newest = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()  # what migrate() upgrades to
    engine = make_engine(
        url, **({} if url.startswith("sqlite") else {"connect_args": {"connect_timeout": 3}})
    )
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return Check("database", OK, f"{shown}: reachable, empty (migrated at the first start)")
            version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except Exception as exc:  # noqa: BLE001
        return Check("database", FAIL, f"{shown}: not reachable: {str(exc).splitlines()[0][:200]}")
    finally:
        engine.dispose()
    if version != newest:
        return Check("database", OK, f"{shown}: schema {version}, migrated to {newest} at the next start")
    return Check("database", OK, f"{shown}: reachable, schema {version} (newest)")


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


def check_ingest(settings) -> list[Check]:
    from edge_server.mosquitto import MOSQUITTO_CANDIDATES, find_program
    from edge_server.rtmp import RtmpUnavailable, find_nginx

    out = []
    if settings.rtmp_port is None:
        out.append(Check("rtmp", OK, "off (rtmp_port: null)"))
    else:
        try:
            binary = find_nginx(settings.nginx_path)
            free = _port_free(settings.rtmp_host, settings.rtmp_port)
            where = f"{settings.rtmp_host}:{settings.rtmp_port}"
            out.append(
                Check("rtmp", OK, f"nginx {binary.path} with the RTMP module; port {where} free")
                if free
                else Check("rtmp", WARN, f"port {where} is in use (a server running already?)")
            )
        except RtmpUnavailable as exc:
            out.append(Check("rtmp", WARN, f"{exc}; the server runs without RTMP"))
    if settings.mqtt_url:
        from edge_server.dji_cloud import parse_mqtt_url

        target = parse_mqtt_url(settings.mqtt_url)
        try:
            socket.create_connection((target.host, target.port), timeout=3).close()
            out.append(Check("mqtt", OK, f"broker {target.host}:{target.port} (mqtt_url) reachable"))
        except OSError as exc:
            out.append(
                Check("mqtt", WARN, f"broker {target.host}:{target.port} (mqtt_url) not reachable: {exc}")
            )
    elif settings.mqtt_port is None:
        out.append(Check("mqtt", OK, "off (mqtt_port: null)"))
    else:
        binary = find_program("mosquitto", settings.mosquitto_path, MOSQUITTO_CANDIDATES)
        where = f"{settings.mqtt_host}:{settings.mqtt_port}"
        if binary is None:
            out.append(
                Check(
                    "mqtt",
                    WARN,
                    "mosquitto not found (apt-get install mosquitto): no DJI Cloud API telemetry",
                )
            )
        elif not _port_free(settings.mqtt_host, settings.mqtt_port):
            out.append(Check("mqtt", WARN, f"port {where} is in use (a server running already?)"))
        else:
            out.append(Check("mqtt", OK, f"mosquitto {binary}; port {where} free"))
    return out


def check_disk(path: Path, fail_gb: float = 1.0, warn_gb: float = 5.0) -> Check:
    probe = path
    while not probe.exists():
        probe = probe.parent
    free_gb = shutil.disk_usage(probe).free / 1e9
    detail = f"{free_gb:.1f} GB free for {path} (snapshots and clips)"
    if free_gb < fail_gb:
        return Check("disk", FAIL, detail)
    return Check("disk", WARN if free_gb < warn_gb else OK, detail)


def check_signing_key(settings) -> Check:
    """The evidence-signing key's fingerprint (the trust anchor an agency publishes); it is made
    at the server's first start, not here."""
    if not settings.evidence_packs:
        return Check("evidence", WARN, "evidence packs are off (evidence_packs: false): violations unsigned")
    from edge_server.evidence.keys import KeyRing, KeyRingError, show_fingerprint

    directory = settings.resolved_keys_dir
    if not directory.exists():
        return Check(
            "evidence", OK, f"no signing key yet: the server makes one in {directory} at its first start"
        )
    try:
        ring = KeyRing.open(directory, create=False)
    except KeyRingError as exc:
        return Check("evidence", FAIL, str(exc))
    retired = len(ring.entries) - 1
    return Check(
        "evidence",
        OK,
        f"packs signed with key {show_fingerprint(ring.fingerprint)}"
        + (f" ({retired} retired keys kept)" if retired else "")
        + ": publish this fingerprint (docs/evidence.md)",
    )


def check_users(settings) -> Check:
    """Who can sign in: the people with accounts by role (issue 41). With none, only the server's
    API token (an admin machine token, shared) works: warn, and say how to add the first admin."""
    from sqlalchemy import inspect, text

    from edge_server.store import make_engine

    hint = "add one: airpatrol users add NAME --role admin"
    url = settings.resolved_database_url
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        return Check("users", WARN, f"no user accounts yet, only the server's API token; {hint}")
    engine = make_engine(
        url, **({} if url.startswith("sqlite") else {"connect_args": {"connect_timeout": 3}})
    )
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("users"):
                return Check("users", WARN, f"no user accounts yet (schema before 0009); {hint}")
            rows = conn.execute(
                text("SELECT role, COUNT(*) FROM users WHERE disabled_at IS NULL GROUP BY role")
            ).all()
    except Exception as exc:  # noqa: BLE001 - check_database says why the database cannot be read
        return Check("users", WARN, f"cannot read the users: {str(exc).splitlines()[0][:160]}")
    finally:
        engine.dispose()
    counts = dict(rows)
    if not counts:
        return Check("users", WARN, f"no user accounts yet, only the server's API token; {hint}")
    shown = ", ".join(
        f"{counts[r]} {r}{'s' if counts[r] > 1 else ''}"
        for r in ("admin", "officer", "viewer")
        if r in counts
    )
    if "admin" not in counts:
        return Check("users", WARN, f"{shown}; no admin account (only the server's API token administers)")
    return Check("users", OK, shown)


def check_outputs(settings) -> list[Check]:
    """The map's tiles (an MBTiles file the server serves) and the webhook targets (named, not
    called: a probe would be a delivery)."""
    out = []
    if settings.map_tiles is not None:
        from edge_server.geo import MbTiles

        try:
            info = MbTiles(Path(settings.map_tiles)).info()
            out.append(
                Check(
                    "map",
                    OK,
                    f"{settings.map_tiles}: {info.get('name') or 'tiles'}, zoom {info.get('minzoom')}-{info.get('maxzoom')}",
                )
            )
        except Exception as exc:  # noqa: BLE001 - the check reports what is wrong
            out.append(
                Check(
                    "map",
                    FAIL,
                    f"{settings.map_tiles}: not raster MBTiles ({str(exc).splitlines()[0][:160]})",
                )
            )
    if settings.webhooks:
        names = ", ".join(f"{w.name} -> {w.url}" for w in settings.webhooks)
        plain = [
            w.name for w in settings.webhooks if w.url.startswith("http://") and "127.0.0.1" not in w.url
        ]
        status = WARN if plain else OK
        detail = f"{len(settings.webhooks)} targets: {names}" + (
            f"; plain HTTP off this box: {', '.join(plain)}" if plain else ""
        )
        out.append(Check("webhooks", status, detail))
    return out


def check_terrain(settings) -> Check:
    """The site's terrain model (camera.terrain of the site YAML) read as the server would, and
    whether PROJ has the EGM96 geoid grid that an absolute altitude needs (Debian's proj-data)."""
    from pipelines.config import ConfigError, PipelineConfig
    from pipelines.terrain_io import TerrainError, geoid_available, load_terrain

    grid = "EGM96 geoid grid present" if geoid_available() else "no EGM96 geoid grid (apt install proj-data)"
    try:
        config = PipelineConfig.from_yaml(settings.pipeline_config) if settings.pipeline_config else None
    except ConfigError as exc:
        return Check("terrain", FAIL, str(exc))
    if config is None or config.camera.terrain is None:
        return Check("terrain", OK, f"no terrain model configured; {grid}")
    try:
        heights = load_terrain(config.camera.terrain)
    except TerrainError as exc:
        return Check("terrain", FAIL, str(exc))
    return Check("terrain", OK, heights.settings.detail)


def run_checks(weights: Path, settings_file: Path | None) -> list[Check]:
    from edge_server.settings import ServerSettings

    settings = ServerSettings.load(settings_file)
    steps: list[Callable[[], list[Check] | Check]] = [
        lambda: check_models(weights),
        check_backends,
        check_h264,
        lambda: check_database(settings),
        lambda: check_ingest(settings),
        lambda: check_disk(settings.resolved_media_dir),
        lambda: check_signing_key(settings),
        lambda: check_users(settings),
        lambda: check_outputs(settings),
        lambda: check_terrain(settings),
    ]
    out: list[Check] = []
    for step in steps:
        result = step()
        out.extend(result if isinstance(result, list) else [result])
    return out


def cmd_doctor(args: argparse.Namespace) -> int:
    from pipelines.config import DEFAULT_WEIGHTS_DIR

    t0 = time.perf_counter()
    checks = run_checks(args.weights or DEFAULT_WEIGHTS_DIR, args.settings)
    elapsed = time.perf_counter() - t0
    failed = [c for c in checks if c.status == FAIL]
    if args.json:
        sys.stdout.write(
            json.dumps({"checks": [asdict(c) for c in checks], "seconds": round(elapsed, 2)}) + "\n"
        )
    else:
        for c in checks:
            sys.stdout.write(f"{c.status.upper():5} {c.name:12} {c.detail}\n")
        verdict = f"{len(failed)} problem(s) would break a run" if failed else "ready"
        sys.stdout.write(f"{verdict} ({elapsed:.1f} s)\n")
    return 1 if failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check what this box has and lacks (models, backends, H.264, database, RTMP/MQTT, disk)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--weights", type=Path, default=None, help="models folder to check (default: the shipped one)"
    )
    p.add_argument(
        "--settings", type=Path, default=None, help="server settings YAML (AIRPATROL_SETTINGS_FILE)"
    )
    p.add_argument("--json", action="store_true", help="the checks as one JSON object")
    p.set_defaults(func=cmd_doctor)


__all__ = ["Check", "card_checksums", "check_models", "check_users", "cmd_doctor", "register", "run_checks"]
