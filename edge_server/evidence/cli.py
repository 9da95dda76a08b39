"""``airpatrol verify PACK``: check an evidence pack offline; ``airpatrol keys``: the server's
signing keys (show their fingerprints, rotate, export the public keys); ``airpatrol evidence
backfill``: packs for the violations stored before packs (made later); ``airpatrol audit verify``:
the audit trail checked.

``verify`` trusts the keys given by ``--key`` (a fingerprint as published, or a public-key PEM file)
and, with ``--keyring DIR``, a server's key ring (every key it had); with neither it checks the
pack's integrity and prints the signer's fingerprint to compare (exit 3: not anchored). Exit 0:
intact and signed by a trusted key; 1: tampered or damaged (each problem on a line); 2: bad usage.
Imports nothing beyond the standard library and ``cryptography``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_TAMPERED, EXIT_UNANCHORED = 1, 3


def _trusted(args: argparse.Namespace) -> dict | None:
    from edge_server.evidence.keys import KeyRing, fingerprint, load_public, parse_fingerprint

    trusted: dict = {}
    given = False
    for item in args.key or []:
        given = True
        path = Path(item)
        if path.is_file():
            key = load_public(path.read_bytes())
            trusted[fingerprint(key)] = key
        else:
            trusted[parse_fingerprint(item)] = None  # the pack's key is checked against it
    if args.keyring is not None:
        given = True
        trusted.update(KeyRing.open(args.keyring, create=False).trusted())
    return trusted if given else None


def cmd_verify(args: argparse.Namespace) -> int:
    from edge_server.evidence.verify import verify_pack

    trusted = _trusted(args)
    worst = 0
    for pack in args.packs:
        report = verify_pack(pack, trusted)
        if args.json:
            sys.stdout.write(
                json.dumps(
                    {
                        "pack": report.path,
                        "ok": report.ok,
                        "anchored": report.anchored,
                        "problems": report.problems,
                        "signing_key": report.fingerprint,
                        "violation_id": report.manifest.get("violation_id"),
                        "files_checked": report.files_checked,
                    }
                )
                + "\n"
            )
        else:
            sys.stdout.write(report.summary().split(": ", 1)[0] if report.problems else report.summary())
            if report.problems:
                sys.stdout.write(f": {report.path}\n" + "".join(f"  - {p}\n" for p in report.problems))
            else:
                sys.stdout.write("\n")
        code = EXIT_TAMPERED if report.problems else (0 if report.anchored else EXIT_UNANCHORED)
        worst = code if code == EXIT_TAMPERED or worst == 0 else worst
    return worst


def _ring(args: argparse.Namespace, create: bool):  # noqa: ANN202 - a KeyRing
    from edge_server.evidence.keys import KeyRing

    if args.keys_dir is not None:
        return KeyRing.open(args.keys_dir, create=create)
    from edge_server.settings import ServerSettings

    return KeyRing.open(ServerSettings.load(args.settings).resolved_keys_dir, create=create)


def cmd_keys(args: argparse.Namespace) -> int:
    from edge_server.evidence.keys import public_pem, show_fingerprint

    if args.action == "rotate":
        ring = _ring(args, create=False)
        old, new = ring.rotate()
        sys.stdout.write(
            f"retired {show_fingerprint(old)}\ncurrent {show_fingerprint(new)}\n"
            "Publish the new fingerprint; packs signed with the old key still verify (its public key is kept). "
            "Restart the server to sign with the new key.\n"
        )
        return 0
    ring = _ring(args, create=args.action == "init")
    if args.action == "export":
        for entry in ring.entries:
            sys.stdout.write(f"# {entry.fingerprint} made {entry.created_at}"
                             + (f" retired {entry.retired_at}" if entry.retired_at else "") + "\n")  # fmt: skip
            sys.stdout.write(public_pem(entry.key()).decode())
        return 0
    for entry in ring.entries:
        state = f"retired {entry.retired_at}" if entry.retired_at else "current"
        sys.stdout.write(f"{show_fingerprint(entry.fingerprint)}  made {entry.created_at}  {state}\n")
    return 0


def cmd_evidence(args: argparse.Namespace) -> int:
    """Packs for this server's violations that have none (stored before packs, or whose pack
    failed): made now, marked as made later."""
    from edge_server.evidence.service import EvidenceError, start_evidence
    from edge_server.settings import ServerSettings
    from edge_server.store import Store

    settings = ServerSettings.load(args.settings)
    if not settings.evidence_packs:
        sys.stderr.write(
            "airpatrol evidence: evidence packs are off in these settings (evidence_packs: false)\n"
        )
        return 2
    store = Store.from_url(settings.resolved_database_url)
    try:
        server_id = settings.resolve_server_id()
        service, _ = start_evidence(settings, store, server_id)
        assert service is not None
        ids = store.without_evidence(server_id, args.limit)
        made, failed = 0, []
        for vid in ids:
            try:
                service.make(vid, made_later=True, actor="cli:evidence-backfill")
                made += 1
            except EvidenceError as exc:
                failed.append(f"violation {vid}: {exc}")
        sys.stdout.write(
            f"{made} evidence packs made (marked as made later) for {len(ids)} violations of {server_id} without one"
            + "".join(f"\n  not made: {f}" for f in failed)
            + "\n"
        )
        return 1 if failed else 0
    finally:
        store.close()


def cmd_audit(args: argparse.Namespace) -> int:
    """Check the audit trail: every entry present and in its place (no gap), linked to the one
    before, matching its hash; every signed checkpoint (the database's and those of the packs given
    with --pack) signed by a trusted key and still matching the chain. Exit 1 with one line per
    problem (a removed, changed or cut entry, a forged checkpoint)."""
    from edge_server.evidence.audit import pack_checkpoints, verify_trail
    from edge_server.settings import ServerSettings
    from edge_server.store import Store

    settings = ServerSettings.load(args.settings)
    trusted = _trusted(args)
    if trusted is None:  # the server's own key ring: the keys it signed checkpoints with
        from edge_server.evidence.keys import KeyRing

        trusted = KeyRing.open(settings.resolved_keys_dir, create=False).trusted()
    import zipfile

    from sqlalchemy.exc import SQLAlchemyError

    store = Store.from_url(
        settings.resolved_database_url, run_migrations=False
    )  # read only: never migrated here
    try:
        report = verify_trail(store, trusted, pack_checkpoints(args.pack or []))
    except SQLAlchemyError as exc:
        sys.stderr.write(
            f"airpatrol audit: the audit trail cannot be read ({type(exc).__name__}: {str(exc).splitlines()[0]}): "
            "is this the server's database, upgraded by a server of this version?\n"
        )
        return 2
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:  # a --pack that is no pack
        sys.stderr.write(f"airpatrol audit: {exc}\n")
        return 2
    finally:
        store.close()
    if args.json:
        sys.stdout.write(
            json.dumps({"ok": report.ok, "problems": report.problems, "entries": report.entries,
                        "checkpoints": report.checkpoints, "head": report.head}) + "\n"
        )  # fmt: skip
    else:
        sys.stdout.write(report.summary().split(": ", 1)[0] if report.problems else report.summary())
        sys.stdout.write("".join(f"\n  - {p}" for p in report.problems) + "\n")
    return 0 if report.ok else EXIT_TAMPERED


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "verify",
        help="check evidence packs offline (signature, trusted key, every file, the zip itself)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("packs", nargs="+", type=Path, metavar="PACK", help="a pack (.zip) or its unpacked folder")
    p.add_argument(
        "--key",
        action="append",
        metavar="FINGERPRINT|PEM",
        help="a trusted signing key: its published fingerprint, or a public-key PEM file (repeatable)",
    )
    p.add_argument("--keyring", type=Path, default=None, help="trust every key of this key ring folder")
    p.add_argument("--json", action="store_true", help="one JSON object per pack")
    p.set_defaults(func=cmd_verify)

    k = subparsers.add_parser(
        "keys",
        help="the server's evidence-signing keys: show fingerprints, rotate, export public keys",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    k.add_argument("action", choices=["show", "init", "rotate", "export"], help="init: make the key now")
    k.add_argument("--settings", type=Path, default=None, help="server settings YAML (its data_dir/keys_dir)")
    k.add_argument("--keys-dir", type=Path, default=None, help="the key folder itself")
    k.set_defaults(func=cmd_keys)

    a = subparsers.add_parser(
        "audit",
        help="check the audit trail: a removed, changed or cut entry, a forged checkpoint",
        description=cmd_audit.__doc__,
    )
    a.add_argument("action", choices=["verify"])
    a.add_argument("--settings", type=Path, default=None, help="server settings YAML (its database, keys)")
    a.add_argument(
        "--key", action="append", metavar="PEM", help="trust this public key (default: the key ring)"
    )
    a.add_argument("--keyring", type=Path, default=None, help="trust every key of this key ring folder")
    a.add_argument(
        "--pack", action="append", type=Path, help="also check the checkpoint this evidence pack holds"
    )
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=cmd_audit)

    e = subparsers.add_parser(
        "evidence",
        help="make the evidence packs this server's violations lack (stored before packs): made later",
        description=cmd_evidence.__doc__,
    )
    e.add_argument("action", choices=["backfill"])
    e.add_argument(
        "--settings", type=Path, default=None, help="server settings YAML (its database, media, keys)"
    )
    e.add_argument("--limit", type=int, default=None, help="at most this many (oldest first)")
    e.set_defaults(func=cmd_evidence)


__all__ = ["cmd_audit", "cmd_evidence", "cmd_keys", "cmd_verify", "register"]
