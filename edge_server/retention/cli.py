"""``airpatrol retention``: the server's retention on its database and media (its settings YAML names
them), for an operator's shell or a cron job; every removal, hold and release is in the audit trail
as ``cli:<os user>@<host>``.

  airpatrol retention show                 the policy, the holds, what a pass now would remove
  airpatrol retention run [--dry-run]      a pass now
  airpatrol retention hold 42 --reason "case 2026-114"
  airpatrol retention release 42
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _report_text(report) -> str:  # noqa: ANN001 - a PurgeReport
    verb = "would remove" if report.dry_run else "removed"
    text = (
        f"{verb}: {len(report.deleted)} violations (record and media), the media of {len(report.media_cleared)} "
        f"more; {report.files} files, {report.bytes / 1e6:.1f} MB; {report.held} under a legal hold kept"
    )
    return text + "".join(f"\n  not removed: {e}" for e in report.errors)


def cmd_retention(args: argparse.Namespace) -> int:
    from edge_server.auth.cli import cli_actor
    from edge_server.evidence.service import beside_server
    from edge_server.retention.purge import Purger, RetentionPolicy

    with beside_server(args.settings) as (settings, store, server_id, auditor):
        policy = RetentionPolicy.from_settings(settings)
        purger = Purger(store, settings.resolved_media_dir, server_id, policy, auditor.record)
        if args.action in ("hold", "release"):
            return _hold(args, purger, cli_actor())
        if args.action == "show" or args.dry_run:
            report = purger.run(cli_actor(), dry_run=True)
        else:
            report = purger.run(cli_actor())
        if args.json:
            sys.stdout.write(json.dumps({"policy": vars(policy), **report.to_dict()}, default=str) + "\n")
            return 0
        if args.action == "show":
            rules = (
                ", ".join(f"{rule} after {days:g} days" for rule, days in policy.rules())
                or "off (everything kept)"
            )
            sys.stdout.write(f"retention of {server_id}: {rules}\n")
        sys.stdout.write(_report_text(report) + "\n")
        return 1 if report.errors else 0


def _hold(args: argparse.Namespace, purger, actor: str) -> int:  # noqa: ANN001 - a Purger
    if args.violation is None:
        sys.stderr.write(f"airpatrol retention: '{args.action}' needs a violation id\n")
        return 2
    hold = args.action == "hold"
    reason = (args.reason or "").strip()
    if hold and not reason:
        sys.stderr.write("airpatrol retention: a legal hold needs --reason (e.g. the case number)\n")
        return 2
    row = purger.set_hold(args.violation, actor, reason if hold else None)
    if row is None:
        sys.stderr.write(f"airpatrol retention: no violation {args.violation}\n")
        return 2
    sys.stdout.write(f"violation {args.violation}: {'held: ' + reason if hold else 'hold released'}\n")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    r = subparsers.add_parser(
        "retention",
        help="retention and legal holds: show the policy, run a pass, hold or release a violation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("action", choices=["show", "run", "hold", "release"])
    r.add_argument("violation", nargs="?", type=int, help="hold, release: the violation's id")
    r.add_argument("--reason", help="hold: why (e.g. the case number)")
    r.add_argument("--dry-run", action="store_true", help="run: remove nothing, only report")
    r.add_argument("--json", action="store_true")
    r.add_argument("--settings", type=Path, default=None, help="server settings YAML (its database, media)")
    r.set_defaults(func=cmd_retention)


__all__ = ["cmd_retention", "register"]
