"""Helpers for the edge server and edge client tests: a real uvicorn server on a free port,
loopback-only WebRTC. The fixtures here are imported by tests/edge_server/conftest.py and
tests/edge_client/conftest.py.

Models are the only fakes: streams use the synthetic scene (bright vehicles on a textured road)
and :class:`edge_client.synthetic.BrightBlobDetector`; peers, server, database and the pipeline
(``build_pipeline``) are real.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import aioice.ice
import cv2
import httpx
import numpy as np
import pytest
import uvicorn
from sqlalchemy import text

from edge_client.synthetic import BrightBlobDetector
from edge_server.app import create_app, uvicorn_config
from edge_server.child_process import free_port  # noqa: F401 - the tests' ports, re-exported
from edge_server.media import FrameRing, write_clip
from edge_server.settings import ServerSettings
from edge_server.store import MIGRATIONS_DIR, make_engine
from pipelines.types import MeasuringBase, Violation

TOKEN = "test-token-123"
SEED_T0 = dt.datetime(2025, 6, 1, 12, 0, tzinfo=dt.timezone.utc)  # seed_store's violations' minute 0
SEED_PEAK_EXCESS = 2.5  # seed_store's per-frame peaks above the ticket speed (the peak's upward bias)
PG_URL = os.environ.get("AIRPATROL_TEST_POSTGRES_URL")
PG_MISSING = 'AIRPATROL_TEST_POSTGRES_URL is not set (eval "$(.ci/postgres.sh)" provides one)'


@contextlib.contextmanager
def postgres_schema() -> Iterator[str]:
    """A database URL whose connections use a fresh schema of the test PostgreSQL (dropped after).

    One schema per test: runs in parallel never collide. Needs ``AIRPATROL_TEST_POSTGRES_URL``.
    """
    assert PG_URL, PG_MISSING
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = make_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{PG_URL}{'&' if '?' in PG_URL else '?'}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@dataclass
class RunningServer:
    url: str
    app: object
    settings: ServerSettings
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def token(self) -> str:
        return TOKEN

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKEN}"}

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """What a client trusts: the server's own (self-signed) certificate when it speaks HTTPS."""
        if self.settings.tls_certfile is None:
            return True
        return ssl.create_default_context(cafile=str(self.settings.tls_certfile))

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=30, verify=self.verify)

    @property
    def store(self):
        return self.app.state.store

    @property
    def manager(self):
        return self.app.state.manager

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)
        assert not self.thread.is_alive(), "uvicorn did not stop"


def start_server(tmp_path: Path, app_kwargs: dict | None = None, **overrides) -> RunningServer:
    values = {
        "api_token": TOKEN,
        "data_dir": tmp_path / "data",
        "host": "127.0.0.1",
        "port": free_port(),
        "stream_idle_timeout_s": 4.0,
        "clip_pre_s": 1.0,
        "clip_post_s": 0.5,
        "stats_interval_s": 0.5,
        "return_video_max_width": 320,
        "shutdown_timeout_s": 30.0,
        "rtmp_port": None,  # tests/edge_server/test_edge_rtmp.py starts nginx on a port of its own
        "mqtt_port": None,  # ... and Mosquitto
        "warm_pipeline": False,  # no spare pipeline built by every test server (CPU); the RTMP tests use one
    }
    values.update(overrides)
    settings = ServerSettings(**values)
    app = create_app(settings, **(app_kwargs or {"detector_factory": BrightBlobDetector}))
    config = uvicorn_config(app, settings, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.05)
    return RunningServer(f"{settings.scheme}://127.0.0.1:{settings.port}", app, settings, server, thread)


@pytest.fixture(autouse=True, scope="session")
def loopback_ice() -> Iterator[None]:
    """aioice would offer this machine's other interfaces; keep every peer on 127.0.0.1."""
    original = aioice.ice.get_host_addresses
    aioice.ice.get_host_addresses = lambda use_ipv4=True, use_ipv6=True: ["127.0.0.1"]
    yield
    aioice.ice.get_host_addresses = original


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    srv = start_server(tmp_path)
    yield srv
    srv.stop()


def self_signed_certificate(folder: Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """A certificate for ``host`` (an IP address) signed by its own key: (cert.pem, key.pem)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host))]), critical=False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@contextlib.contextmanager
def synthetic_stream(
    server: RunningServer, seconds: float = 40.0, others: Collection[str] = ()
) -> Iterator[str]:
    """`airpatrol publish synthetic` streaming to ``server`` over WebRTC (a fast lane at ~73 km/h, a
    slow one at ~24 km/h) in a process of its own; yields the session id once its worker runs (a
    session not among ``others``: the server's streams already there), and stops the publisher at
    the end."""
    publisher = subprocess.Popen(
        [sys.executable, "-m", "airpatrol.cli", "publish", "synthetic", "--server", server.url]
        + ["--token", TOKEN, "--max-seconds", str(seconds), "--no-return-video"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def started() -> str | None:  # this server's own stream (a fleet's listing shows others' too)
            return next(
                (
                    sid
                    for sid, sess in list(server.manager.sessions.items())
                    if sess.worker is not None and sid not in others
                ),
                None,
            )

        yield wait_until(started, 60, "the synthetic stream running on the server")
    finally:
        publisher.kill()
        publisher.wait()


def wait_until(predicate, timeout: float = 30.0, what: str = "condition"):
    """``predicate()``'s first truthy value, asked every 50 ms; AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} not met within {timeout} s")


async def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError("condition not met in time")


def violation_recorder(app, settings: ServerSettings, session_id: str):
    """A live server's own ViolationRecorder for a session (made if new), as a stream's worker has
    one: what it records is stored, announced on the events bus and queued for the webhooks like a
    live violation."""
    from concurrent.futures import ThreadPoolExecutor

    from edge_server.violations import ViolationRecorder

    if app.state.store.get_session(session_id) is None:
        app.state.store.create_session(session_id, "webrtc")
    return ViolationRecorder(
        session_id, settings=settings, store=app.state.store, bus=app.state.bus, metrics=app.state.metrics,
        clip_executor=ThreadPoolExecutor(1), snapshot_margin_px=12,
    )  # fmt: skip


def seed_store(
    server: RunningServer,
    sessions: dict[str, str],
    violations: list[tuple[str, int, float, str]],
    sigma_kmh: float = 0.0,
) -> list[int]:
    """Sessions (id -> kind; webrtc ones from 10.0.0.2) and violations (session, minute after
    ``SEED_T0``, ticket speed km/h, zone: limit 50 global, 30 elsewhere) in the server's store; the
    first violation gets a snapshot and a clip on disk, and the first session is ended. Their ids.

    Each violation is enforceable, its ticket speed (sigma ``sigma_kmh``, tolerance 3 km/h, k 1.645)
    measured over a base of 1.5 s and 30 m from frame ``minute * 1800 + 1``; its per-frame peak,
    informative, is ``SEED_PEAK_EXCESS`` above the ticket speed."""
    store = server.store
    for sid, kind in sessions.items():
        store.create_session(sid, kind, remote="10.0.0.2" if kind == "webrtc" else None)
    ids = []
    for i, (sid, minute, speed, zone) in enumerate(violations):
        peak = speed + SEED_PEAK_EXCESS
        base = MeasuringBase(
            minute * 60.0, minute * 60.0 + 1.5, minute * 1800 + 1, minute * 1800 + 46, 30.0, 46,
            snapshot_frame=minute * 1800 + 23, snapshot_time_s=minute * 60.0 + 0.7333,
        )  # fmt: skip
        violation = Violation(
            track_id=i,
            zone=zone,
            speed_limit_kmh=50.0 if zone == "global" else 30.0,
            peak_speed_kmh=peak,
            mean_speed_kmh=peak - 2,
            sigma_kmh=sigma_kmh,
            start_frame=minute * 1800,
            end_frame=minute * 1800 + 60,
            start_time_s=minute * 60.0,
            end_time_s=minute * 60.0 + 2,
            bbox_xyxy=(10, 20, 50, 40),
            ticket_speed_kmh=speed,
            ticket_sigma_kmh=sigma_kmh,
            tolerance_kmh=3.0,
            confidence_k=1.645,
            base=base,
            status="enforceable",
        )
        ids.append(store.add_violation(sid, violation, occurred_at=SEED_T0 + dt.timedelta(minutes=minute)).id)
    first = next(iter(sessions))
    media = server.settings.resolved_media_dir
    (media / first).mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(media / first / "v1.jpg"), np.full((60, 80, 3), 200, np.uint8))
    ring = FrameRing(10, 10, 320)
    for k in range(12):
        ring.add(k / 10, np.full((120, 160, 3), 20 * k % 255, np.uint8))
    write_clip(media / first / "v1.mp4", ring.window(0, 2), 10)
    store.update_violation(ids[0], snapshot_path=f"{first}/v1.jpg", clip_path=f"{first}/v1.mp4")
    store.end_session(first, "ended", "ended by client", frames_received=10)
    return ids


def assert_documented(server: RunningServer, response: httpx.Response, method: str, path: str) -> None:
    """``response`` is what the server's own OpenAPI document says for ``method path``: its status
    is listed, a JSON body has a schema there (not FastAPI's untyped ``{}``), and the body, content
    type and headers conform to it (checked by schemathesis); raises otherwise."""
    import schemathesis

    with server.client() as c:
        doc = c.get("/openapi.json").json()
    documented = doc["paths"][path][method.lower()]["responses"].get(str(response.status_code))
    assert documented is not None, f"{method} {path} answered {response.status_code}, not in its document"
    if response.headers.get("content-type", "").startswith("application/json"):
        schema = documented.get("content", {}).get("application/json", {}).get("schema")
        assert schema, (
            f"{method} {path} {response.status_code}: the document gives no schema for its JSON body"
        )
    schemathesis.openapi.from_dict(doc)[path][method.upper()].validate_response(response)


def speeding_in_view(server: RunningServer, session_id: str | None = None) -> bool:
    """True once a stream has a fast car (~73 km/h) measured long enough to be a violation."""
    sessions = server.manager.sessions
    sess = sessions.get(session_id) if session_id else next(iter(sessions.values()), None)
    if sess is None or sess.worker is None:
        return False
    try:
        rows = sess.worker.outputs.tracks.rows()
    except RuntimeError:  # the worker thread changed the dict under us: ask again
        return False
    # speeds start after min_track_age (0.5 s); a violation needs min_duration (0.5 s) above the limit
    return any(
        r["peak_speed_kmh"] and r["peak_speed_kmh"] > 55 and r["last_time_s"] - r["first_time_s"] > 1.6
        for r in rows
    )


def alembic_to(engine, action: str, revision: str) -> None:
    """Alembic's ``upgrade`` or ``downgrade`` to ``revision`` on ``engine``, as ``migrate`` runs it."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        getattr(command, action)(cfg, revision)


def seed_old_violation(engine, row: dict, started_at: str) -> list:
    """Store an ended session 'old' and the violation ``row`` (its columns as an older schema had
    them) straight in SQL, before a migration; returns the row as read back (those columns)."""
    from sqlalchemy import text

    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO sessions (id, kind, status, started_at, frames_received, frames_processed, "
                "frames_dropped, telemetry_received, telemetry_rejected, violations_count) "
                f"VALUES ('old', 'webrtc', 'ended', '{started_at}', 0, 0, 0, 0, 0, 1)"
            )
        )
        conn.execute(
            text(f"INSERT INTO violations ({', '.join(row)}) VALUES ({', '.join(':' + k for k in row)})"), row
        )
    with engine.connect() as conn:
        return conn.execute(text(f"SELECT {', '.join(row)} FROM violations")).all()
