"""Persistent store: flight sessions, track summaries, violations and RTMP stream keys (SQLAlchemy 2).

SQLite (WAL) by default, PostgreSQL by URL. The schema is owned by the Alembic migrations in
``edge_server/migrations`` (run on startup by :func:`migrate`); the ORM classes mirror them.

* :mod:`~edge_server.store.models` - the tables (``SessionRow``, ``TrackRow``, ``ViolationRow``,
  ``RtmpKeyRow``, their ``Base``; ``UTCDateTime``, ``utcnow``; ``violation_status``: a
  violation's derived status, also ``ViolationRow.status`` in SQL);
* :mod:`~edge_server.store.database` - ``make_engine(url)`` and ``migrate(engine)``;
* :mod:`~edge_server.store.paging` - ``ViolationFilter``, the sorts, keyset cursors (``Page``,
  ``CursorError``);
* :mod:`~edge_server.store.access` - ``Store``: every read and write of the server, each in its
  own short session (safe to share between the event loop's thread pool and the stream workers).

Who may import it: the web app and its routes (``edge_server.app``, ``edge_server.routes``), the
API models (``edge_server.schemas``: the rows and sorts), the streams and their outputs
(``edge_server.streams``, ``stream_outputs``, ``violations``), the Alembic environment
(``edge_server/migrations/env.py``: ``Base``), ``airpatrol doctor``, examples and tests. Import
the names below from the package. Inside it, ``access`` imports the other three modules, which
import none of the package; none imports the package itself.
"""

from __future__ import annotations

from edge_server.store.access import Store, drone_fields, ticket_fields, violation_fields
from edge_server.store.database import MIGRATION_LOCK, MIGRATIONS_DIR, make_engine, migrate
from edge_server.store.models import (
    Base,
    RtmpKeyRow,
    SessionRow,
    TrackRow,
    UTCDateTime,
    ViolationRow,
    utcnow,
    violation_status,
)
from edge_server.store.paging import MAX_ROW_ID, SORTS, CursorError, Page, ViolationFilter

__all__ = [
    "MAX_ROW_ID",
    "MIGRATIONS_DIR",
    "MIGRATION_LOCK",
    "SORTS",
    "Base",
    "CursorError",
    "Page",
    "RtmpKeyRow",
    "SessionRow",
    "Store",
    "TrackRow",
    "UTCDateTime",
    "ViolationFilter",
    "ViolationRow",
    "drone_fields",
    "make_engine",
    "migrate",
    "ticket_fields",
    "utcnow",
    "violation_fields",
    "violation_status",
]
