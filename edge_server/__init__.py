"""AirPatrol live edge server: stream ingest, an engine per stream, the violation store and the API.

What lives here, by floor:

* the app: ``app.create_app`` (lifespan: store, media loop, streams, nginx-rtmp, Mosquitto),
  ``settings``, ``middleware``, ``routes/`` (one module per resource: health, WebRTC/WHIP, sessions,
  violations, the DJI apps' and cameras' ingest, the events WebSocket), ``schemas`` (the wire
  format), ``console`` and ``guides`` (the browser pages), ``cli`` (``airpatrol serve``);
* the streams: ``streams/`` (the registry and one module per way a stream arrives: WebRTC/WHIP,
  RTMP, RTSP pull; viewers; telemetry routing; the spare pipeline), with ``media_loop``, ``pull``,
  ``rtmp``, ``mosquitto``, ``dji_cloud`` and ``telemetry`` (transports and clocks);
* the seam: ``engine_link`` - the one interface between a stream's ingest and its engine
  (``IncomingFrame``, ``PeerLink``, ``StreamEngine``); ingest modules import nothing else of the
  engine side (``tests/edge_server/test_edge_streams_layering.py``);
* the engine side: ``worker`` (a stream's thread running its pipeline), ``frame_queue``,
  ``stream_outputs``, ``violations`` (snapshot, clip), ``stream_stats``, ``events`` (the bus);
  ``engines/`` runs each stream's pipeline in an engine process of its own instead
  (``settings.engine_processes``: the worker then holds a ``RemotePipeline``);
* the store: ``store/`` (SQLAlchemy models, queries, Alembic migrations in ``migrations/``).

It imports ``pipelines`` (built through ``pipelines.builder.build_pipeline``, as the offline
evaluator builds it); only the ``airpatrol`` command and the tests import it.
``edge_client`` may import its wire formats (``schemas``, ``telemetry``'s message, ``ice``), never
its internals.
"""

from __future__ import annotations

try:
    from importlib.metadata import PackageNotFoundError, version

    __version__ = version("airpatrol")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"
