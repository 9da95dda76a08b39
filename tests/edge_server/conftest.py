"""Fixtures for the edge server tests (helpers live in edge_helpers.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import aioice.ice
import pytest
from edge_helpers import PG_MISSING, PG_URL, RunningServer, postgres_schema, start_server


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


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """SQLite in tmp_path, then PostgreSQL (a schema of its own) when AIRPATROL_TEST_POSTGRES_URL is set."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    if not PG_URL:
        pytest.skip(PG_MISSING)
    with postgres_schema() as url:
        yield url


@pytest.fixture
def db_server(tmp_path: Path, database_url: str) -> Iterator[RunningServer]:
    """A server on each database of :func:`database_url`."""
    srv = start_server(tmp_path, database_url=database_url)
    yield srv
    srv.stop()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator:
    started: list[RunningServer] = []

    def make(app_kwargs: dict | None = None, **overrides) -> RunningServer:
        srv = start_server(tmp_path / f"s{len(started)}", app_kwargs, **overrides)
        started.append(srv)
        return srv

    yield make
    for srv in started:
        with contextlib.suppress(AssertionError):
            srv.stop()
