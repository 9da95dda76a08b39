"""The database itself: an engine for a URL (SQLite gets WAL, foreign keys and a busy timeout on
every connection; PostgreSQL a pre-ping pool) and the schema migration to the newest Alembic
revision (:func:`migrate`, run on startup; the revisions are in ``edge_server/migrations``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def make_engine(url: str, **kwargs: Any) -> Engine:
    """Engine for ``url``; SQLite gets WAL, foreign keys and a busy timeout on every connection."""
    if url.startswith("sqlite"):
        connect_args = {"check_same_thread": False, "timeout": 30, **kwargs.pop("connect_args", {})}
        if ":///" in url and not url.endswith(":memory:"):
            Path(url.split(":///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args=connect_args, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


# pg_advisory_xact_lock key of the schema migration: any fixed 64-bit number of this project's own
MIGRATION_LOCK = 0x41495250_41545230  # "AIRPATR0"


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision (idempotent).

    On PostgreSQL, servers of a fleet starting at the same instant take turns: the migration runs in
    one transaction holding an advisory lock, so the second waits, then finds the schema at its head.
    """
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
