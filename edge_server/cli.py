"""``airpatrol serve``; its client tools (``publish``, ``serve-bench``) are in edge_client/cli.py."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the live edge server (WebRTC/WHIP ingest, violation store, REST API)",
        description="Run the edge server. Settings: flags > AIRPATROL_* environment > --settings YAML > defaults.",
    )
    p.add_argument("--host", default=None, help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default 8080)")
    p.add_argument("--config", type=Path, default=None, help="site pipeline config YAML (PipelineConfig)")
    p.add_argument(
        "--settings", type=Path, default=None, help="server settings YAML (AIRPATROL_SETTINGS_FILE)"
    )
    p.add_argument(
        "--data-dir", type=Path, default=None, help="database and media folder (default ./airpatrol-data)"
    )
    p.add_argument("--database-url", default=None, help="SQLAlchemy URL (default SQLite in the data dir)")
    p.add_argument("--max-streams", type=int, default=None)
    p.add_argument(
        "--ice-host",
        action="append",
        default=None,
        metavar="ADDR",
        help="offer only this host address in ICE (repeatable; e.g. 127.0.0.1 for loopback tests)",
    )
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from edge_server.app import serve
    from edge_server.settings import ServerSettings

    settings = ServerSettings.load(
        args.settings,
        host=args.host,
        port=args.port,
        pipeline_config=args.config,
        data_dir=args.data_dir,
        database_url=args.database_url,
        max_streams=args.max_streams,
    )
    serve(settings, ice_host_addresses=args.ice_host)
    return 0
