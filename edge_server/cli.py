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
    p.add_argument(
        "--rtmp-port",
        type=_port_or_off,
        default=None,
        metavar="PORT|off",
        help="RTMP ingest for the DJI apps (nginx-rtmp; default 1935); off: none",
    )
    p.add_argument(
        "--mqtt-port",
        type=_port_or_off,
        default=None,
        metavar="PORT|off",
        help="the MQTT broker of DJI Cloud API telemetry (Mosquitto; default 1883); off: none",
    )
    p.add_argument("--tls-cert", type=Path, default=None, help="HTTPS certificate (PEM; with --tls-key)")
    p.add_argument("--tls-key", type=Path, default=None, help="HTTPS private key (PEM)")
    p.set_defaults(func=_serve)


OFF = "off"


def _port_or_off(text: str) -> int | str:
    if text.lower() == OFF:
        return OFF
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port (0-65535) or 'off', got {text!r}")
    return port


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
        tls_certfile=args.tls_cert,
        tls_keyfile=args.tls_key,
    )
    ports = {
        name: getattr(args, name) for name in ("rtmp_port", "mqtt_port") if getattr(args, name) is not None
    }
    if ports:  # flags win; "off" is None, which load() would take for "not given"
        settings = settings.model_copy(update={k: None if v == OFF else v for k, v in ports.items()})
    serve(settings, ice_host_addresses=args.ice_host)
    return 0
