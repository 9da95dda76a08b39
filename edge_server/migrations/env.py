"""Alembic environment for the edge server store.

Used two ways: by ``edge_server.store.migrate(engine)`` at server start (the connection is passed
in ``config.attributes["connection"]``), and from the command line with
``alembic -c edge_server/alembic.ini upgrade head`` (URL from ``AIRPATROL_DATABASE_URL``).
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import engine_from_config, pool

from edge_server.store import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    url = os.environ.get("AIRPATROL_DATABASE_URL") or config.get_main_option("sqlalchemy.url")
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    section = config.get_section(config.config_ini_section) or {}
    if os.environ.get("AIRPATROL_DATABASE_URL"):
        section["sqlalchemy.url"] = os.environ["AIRPATROL_DATABASE_URL"]
    engine = engine_from_config(section, prefix="sqlalchemy.", poolclass=pool.NullPool)
    with engine.connect() as conn:
        _configure(conn)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
