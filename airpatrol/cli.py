"""The ``airpatrol`` command: one entry point, subcommands registered by each package.

Each package that adds subcommands exposes ``register(subparsers)`` in its own ``cli`` module;
the modules are imported lazily so that ``airpatrol process`` never pays for the web server's imports.
Errors a user can fix (bad input, missing weights) print one clear line and exit non-zero.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# (module, description) in the order the help lists them
COMMAND_MODULES = (
    "batch.cli",  # process
    "pipelines.cli",  # bench, cameras
    "pipelines.calibrate_cli",  # calibrate
    "airpatrol.demo",  # demo
    "airpatrol.doctor",  # doctor
    "eval.cli",  # eval, simulate
    "edge_server.cli",  # serve
    "edge_server.evidence.cli",  # verify, keys, evidence, audit
    "edge_server.auth.cli",  # users, tokens
    "edge_server.retention.cli",  # retention
    "edge_client.cli",  # publish, serve-bench
    "training.cli",  # train
)

log = logging.getLogger("airpatrol")


class UserError(Exception):
    """An error caused by the user's input; shown as one line, without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="airpatrol", description="Drone traffic monitoring at the edge.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):  # that package has no commands (yet)
                continue
            raise
        module.register(sub)
    return parser


def configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # INFO from our own packages is useful by default; third-party chatter is not.
    for ours in ("airpatrol", "pipelines", "batch", "eval", "edge_server", "edge_client", "training"):
        logging.getLogger(ours).setLevel(min(level, logging.INFO))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        log.warning("interrupted")
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place that turns errors into messages
        from pipelines.errors import is_user_error

        if is_user_error(exc):
            sys.stderr.write(f"airpatrol {args.command}: error: {exc}\n")
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
