"""Fixtures for the edge server tests (helpers, and the fixtures shared with tests/edge_client, live in
tests/edge_helpers.py; the headless browser in tests/browser_helpers.py)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_helpers import chromium  # noqa: F401 - a fixture
from edge_helpers import (  # noqa: F401 - loopback_ice and server are fixtures
    PG_MISSING,
    PG_URL,
    RunningServer,
    loopback_ice,
    postgres_schema,
    server,
    start_server,
)


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
def own_heap() -> Iterator[None]:
    """For a test that bounds a live stream's latency: the objects the test session has piled up so
    far (a thousand tests' worth, in this one process) are moved out of the garbage collector's
    sight (``gc.freeze``), so that its full collections scan what the server allocates, as in the
    server's own process. Without it a full collection took 0.7-1.0 s in the suite's edge tests and
    put a frame's latency past its bound (1.7 s against 0.8) in one of two full runs."""
    gc.collect()
    gc.freeze()  # kept frozen after it (as the run's imports are: tests/conftest.py); refcounts still free
    yield


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
