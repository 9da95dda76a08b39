"""Retention, measured (``python -m eval.retention_bench [--violations N]``): a store (SQLite) with N
old violations, each with five small media files, a third dismissed, a third not enforceable, a third
enforceable, 1 % under a legal hold; the time of a dry run, and of a pass that removes the dismissed
ones and the media of the not enforceable ones (rows, files, audit entries signed in checkpoints).
Prints one JSON object; the machine is the caller's to name."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--violations", type=int, default=3000)
    args = parser.parse_args(argv)
    from edge_server.evidence.audit import Auditor
    from edge_server.evidence.keys import KeyRing
    from edge_server.retention.purge import Purger, RetentionPolicy
    from edge_server.store import Store
    from edge_server.store.models import ViolationRow

    now = dt.datetime.now(dt.timezone.utc)
    with tempfile.TemporaryDirectory(prefix="airpatrol-retention-bench-") as tmp:
        root = Path(tmp)
        media = root / "media"
        media.mkdir()
        store = Store.from_url(f"sqlite:///{root / 'a.db'}", server_id="bench")
        store.create_session("s", "webrtc")
        at = now - dt.timedelta(days=60)
        with store._sessions.begin() as s:
            for k in range(args.violations):
                kind = k % 3
                row = ViolationRow(
                    session_id="s", occurred_at=at, created_at=at, track_id=k, zone="global", speed_limit_kmh=50.0,
                    peak_speed_kmh=70.0, mean_speed_kmh=68.0, start_time_s=0.0, end_time_s=2.0, start_frame=0,
                    end_frame=60, ticket_status="not_enforceable" if kind == 1 else "enforceable",
                    false_positive=kind == 0, server_id="bench",
                    legal_hold_at=now if k % 100 == 50 else None,
                )  # fmt: skip
                for column in ("snapshot_path", "clip_path", "source_path", "record_path", "evidence_path"):
                    name = f"{k}.{column}"
                    (media / name).write_bytes(b"x" * 2000)
                    setattr(row, column, name)
                s.add(row)
        auditor = Auditor(store, KeyRing.open(root / "keys"), "bench")
        purger = Purger(
            store, media, "bench", RetentionPolicy(media_days=30, dismissed_days=30), auditor.record
        )
        t0 = time.perf_counter()
        plan = purger.run(dry_run=True)
        t1 = time.perf_counter()
        done = purger.run()
        t2 = time.perf_counter()
        store.close()
    report = {
        "violations": args.violations,
        "dry_run_s": round(t1 - t0, 2),
        "pass_s": round(t2 - t1, 2),
        "removed": len(done.deleted),
        "media_cleared": len(done.media_cleared),
        "files": done.files,
        "held": done.held,
        "per_violation_ms": round((t2 - t1) / max(1, len(done.deleted) + len(done.media_cleared)) * 1000, 2),
        "plan_matches_pass": (sorted(plan.deleted), sorted(plan.media_cleared))
        == (sorted(done.deleted), sorted(done.media_cleared)),
    }
    sys.stdout.write(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
