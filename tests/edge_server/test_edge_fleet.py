"""A fleet of edge servers on one database: every session and violation carries the id of the server
that recorded it, any server lists the whole fleet's (filtered by server on request), media kept by
another server are named, not faked; on PostgreSQL two servers started at the same instant both come
up (the migration takes an advisory lock), take a real stream each, and store each violation once."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from edge_helpers import (
    PG_MISSING,
    PG_URL,
    RunningServer,
    postgres_schema,
    seed_store,
    start_server,
    synthetic_stream,
    wait_until,
)
from sqlalchemy import text

from edge_server.settings import ServerSettings

pytestmark = pytest.mark.timeout(240)


def test_the_server_id_is_made_once_and_stamped_on_what_it_records(server_factory, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = server_factory(data_dir=data)
    made = (data / "server_id").read_text().strip()
    assert httpx.get(f"{first.url}/healthz").json()["server_id"] == made
    ids = seed_store(first, {"sess-a": "webrtc"}, [("sess-a", 0, 61.0, "global")])
    first.stop()
    again = server_factory(data_dir=data)  # a restart keeps its id
    assert httpx.get(f"{again.url}/healthz").json()["server_id"] == made
    with again.client() as c:
        assert c.get(f"/api/v1/violations/{ids[0]}").json()["server_id"] == made
        assert c.get("/api/v1/sessions/sess-a").json()["server_id"] == made


@pytest.mark.parametrize("bad", ["", "a b", "x/y", "é", "a" * 65])
def test_bad_server_ids_are_refused(bad: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="server_id"):
        ServerSettings(server_id=bad, data_dir=tmp_path)


def test_one_database_two_servers(server_factory, tmp_path: Path) -> None:
    """Two servers on one SQLite file (a lab setup; a fleet uses PostgreSQL, below): each stamps its
    own id, both list everything, ?server_id= selects one, and media recorded by the other are named."""
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    a = server_factory(server_id="edge-a", database_url=url)
    b = server_factory(server_id="edge-b", database_url=url)
    seed_store(a, {"sess-a": "webrtc"}, [("sess-a", 0, 61.0, "global"), ("sess-a", 1, 75.0, "global")])
    seed_store(b, {"sess-b": "whip"}, [("sess-b", 2, 90.0, "global")])
    for srv in (a, b):
        with srv.client() as c:
            every = c.get("/api/v1/violations", params={"sort": "id"}).json()["items"]
            assert [v["server_id"] for v in every] == ["edge-a", "edge-a", "edge-b"]
            only_b = c.get("/api/v1/violations", params={"server_id": "edge-b"}).json()["items"]
            assert [v["session_id"] for v in only_b] == ["sess-b"]
            sessions = c.get("/api/v1/sessions", params={"server_id": "edge-a"}).json()["items"]
            assert [s["id"] for s in sessions] == ["sess-a"]
            assert c.get("/api/v1/violations", params={"server_id": "a b"}).status_code == 422
    with a.client() as c:  # b's snapshot is on b's disk: a says where it is
        first_b = c.get("/api/v1/violations", params={"server_id": "edge-b"}).json()["items"][0]
        r = c.get(f"/api/v1/violations/{first_b['id']}/snapshot.jpg")
        assert r.status_code == 404 and "kept by server edge-b" in r.json()["detail"], r.text
        own = c.get("/api/v1/violations", params={"server_id": "edge-a", "sort": "id"}).json()["items"][0]
        assert c.get(f"/api/v1/violations/{own['id']}/snapshot.jpg").status_code == 200


@pytest.mark.postgres
def test_two_servers_start_at_once_on_postgresql_and_stream(tmp_path: Path) -> None:
    if not PG_URL:
        pytest.skip(PG_MISSING)
    with postgres_schema() as url:
        servers: dict[str, RunningServer] = {}
        errors: list[BaseException] = []
        go = threading.Barrier(2)

        def start(name: str) -> None:
            try:
                go.wait()  # the same instant: both migrate an empty schema
                servers[name] = start_server(tmp_path / name, server_id=name, database_url=url)
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(name,)) for name in ("edge-a", "edge-b")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        try:
            assert not errors, errors
            a, b = servers["edge-a"], servers["edge-b"]
            with a.store.engine.connect() as conn:
                assert conn.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1
            with synthetic_stream(a, 12) as sid_a, synthetic_stream(b, 12) as sid_b, a.client() as c:

                def both() -> list[dict]:
                    items = c.get("/api/v1/violations", params={"limit": 500}).json()["items"]
                    return items if {v["session_id"] for v in items} >= {sid_a, sid_b} else []

                items = wait_until(both, 60, "violations from both servers")
            assert len({v["id"] for v in items}) == len(items)  # each stored once
            owner = {sid_a: "edge-a", sid_b: "edge-b"}
            assert all(v["server_id"] == owner[v["session_id"]] for v in items if v["session_id"] in owner)
            with b.client() as c:
                mine = c.get("/api/v1/sessions", params={"server_id": "edge-b"}).json()["items"]
                assert [s["id"] for s in mine] == [sid_b]
        finally:
            for srv in servers.values():
                srv.stop()
