"""``airpatrol users`` and ``airpatrol tokens``: user accounts and machine tokens on the server's
database (its settings YAML names it), for bootstrapping the first admin and for scripts. Every
change goes into the audit trail as ``cli:<os user>@<host>``.

  airpatrol users add alice --role admin          (asks for the password twice)
  airpatrol users add bob --role officer --password-stdin < pass.txt
  airpatrol users set bob --role viewer | --disable | --enable | --password
  airpatrol users list
  airpatrol tokens create "phone of unit 7" --role publisher [--expires-days 90]
  airpatrol tokens list [--all]
  airpatrol tokens revoke tok_0123456789ab
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import os
import socket
import sys
from pathlib import Path

from edge_server.auth.roles import MACHINE_ROLES, PERSON_ROLES


def cli_actor() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"cli:{user}@{socket.gethostname()}"[:128]


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise SystemExit("airpatrol users: the two passwords differ; nothing changed")
    return first


@contextlib.contextmanager
def _accounts(settings_path: Path | None):  # noqa: ANN202 - yields (Accounts, Store)
    from edge_server.auth.accounts import start_accounts
    from edge_server.auth.authenticator import Authenticator
    from edge_server.evidence.service import beside_server

    with beside_server(settings_path) as (settings, store, _, auditor):
        auth = Authenticator(settings.resolve_api_token())
        yield start_accounts(auth, store, auditor, settings), store


def _with_accounts(args: argparse.Namespace, what: str, body) -> int:  # noqa: ANN001
    """Run ``body(args, accounts, store)`` on the server's accounts; a mistake is one line, exit 2."""
    from edge_server.auth.accounts import AccountError

    with _accounts(args.settings) as (accounts, store):
        try:
            return body(args, accounts, store)
        except AccountError as exc:
            sys.stderr.write(f"airpatrol {what}: {exc}\n")
            return 2


def _user_line(row) -> str:  # noqa: ANN001 - a UserRow
    state = "disabled" if row.disabled_at else "active"
    return f"{row.username:<24} {row.role:<8} {state:<8} created {row.created_at:%Y-%m-%d %H:%M} by {row.created_by}"


def _users(args: argparse.Namespace, accounts, store) -> int:  # noqa: ANN001
    from edge_server.auth.accounts import AccountError

    if args.action == "list":
        rows = store.accounts.users()
        if args.json:
            out = [
                {"username": r.username, "role": r.role, "disabled": r.disabled_at is not None} for r in rows
            ]
            sys.stdout.write(json.dumps(out) + "\n")
        else:
            sys.stdout.write("".join(_user_line(r) + "\n" for r in rows) or "no users\n")
        return 0
    if not args.name:
        raise AccountError("invalid", f"'users {args.action}' needs a user name")
    if args.action == "add":
        if args.role is None:
            raise AccountError("invalid", "'users add' needs --role (admin, officer or viewer)")
        row = accounts.add_user(args.name, args.role, _password(args), cli_actor())
        sys.stdout.write(f"added {row.username} ({row.role})\n")
        return 0
    disabled = True if args.disable else False if args.enable else None
    password = _password(args) if args.password or args.password_stdin else None
    row = accounts.update_user(args.name, cli_actor(), role=args.role, disabled=disabled, password=password)
    sys.stdout.write(_user_line(row) + "\n")
    return 0


def cmd_users(args: argparse.Namespace) -> int:
    return _with_accounts(args, "users", _users)


def _tokens(args: argparse.Namespace, accounts, store) -> int:  # noqa: ANN001
    from edge_server.auth.accounts import AccountError

    if args.action == "list":
        for row, username, role in store.accounts.tokens(include_revoked=args.all):
            state = (
                "revoked"
                if row.revoked_at
                else f"expires {row.expires_at:%Y-%m-%d %H:%M}"
                if row.expires_at
                else "no expiry"
            )
            who = f"{username} (sign-in)" if username else row.name
            sys.stdout.write(f"{row.id}  {row.kind:<7} {row.role or role:<9} {who:<28} {state}\n")
        return 0
    if not args.name:
        raise AccountError(
            "invalid",
            f"'tokens {args.action}' needs a {'name' if args.action == 'create' else 'token id'}",
        )
    if args.action == "create":
        if args.role is None:
            raise AccountError(
                "invalid", "'tokens create' needs --role (admin, officer, viewer or publisher)"
            )
        issued = accounts.add_machine_token(args.name, args.role, cli_actor(), args.expires_days)
        sys.stderr.write(f"token {issued.row.id} ({issued.row.role}) for {issued.row.name}; shown once:\n")
        sys.stdout.write(issued.token + "\n")
        return 0
    accounts.revoke_token(args.name, cli_actor())
    sys.stdout.write(f"revoked {args.name}\n")
    return 0


def cmd_tokens(args: argparse.Namespace) -> int:
    return _with_accounts(args, "tokens", _tokens)


def register(subparsers: argparse._SubParsersAction) -> None:
    u = subparsers.add_parser(
        "users",
        help="user accounts (admin, officer, viewer): add, change, disable, list",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    u.add_argument("action", choices=["add", "set", "list"])
    u.add_argument("name", nargs="?", help="the user name")
    u.add_argument("--role", choices=[r.value for r in PERSON_ROLES])
    state = u.add_mutually_exclusive_group()
    state.add_argument("--disable", action="store_true", help="no more sign-ins; every token of theirs ends")
    state.add_argument("--enable", action="store_true")
    u.add_argument("--password", action="store_true", help="set: a new password (asked for)")
    u.add_argument("--password-stdin", action="store_true", help="read the password from one line of stdin")
    u.add_argument("--json", action="store_true", help="list: as JSON")
    u.add_argument("--settings", type=Path, default=None, help="server settings YAML (its database)")
    u.set_defaults(func=cmd_users)

    t = subparsers.add_parser(
        "tokens",
        help="machine tokens (a publisher's phone, a scraper): create, list, revoke",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument("action", choices=["create", "list", "revoke"])
    t.add_argument("name", nargs="?", help="create: what uses it; revoke: the token id")
    t.add_argument("--role", choices=[r.value for r in MACHINE_ROLES])
    t.add_argument("--expires-days", type=float, default=None)
    t.add_argument("--all", action="store_true", help="list: also revoked and expired tokens")
    t.add_argument("--settings", type=Path, default=None, help="server settings YAML (its database)")
    t.set_defaults(func=cmd_tokens)


__all__ = ["cli_actor", "cmd_tokens", "cmd_users", "register"]
