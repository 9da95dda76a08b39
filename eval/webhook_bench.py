"""Outgoing webhooks, measured against issue 41's targets (``python -m eval.webhook_bench``):

* while the receiver is up: ``--n`` enforceable violations stored by the server's own recorder at
  ``--rate`` a second -> each one acted on by a receiver on 127.0.0.1 that checks its signature (as
  a dispatch system would): p50, p95, max (target p95 <= 1 s);
* an outage: the receiver down (its port closed) for ``--outage-s`` (300: five minutes) while one
  violation a second is stored, then back: how long after it is back until every queued webhook is
  delivered, and whether in order and each once (target: within 60 s, in order).

Default settings (backoff capped at 15 s, 50 tries). Prints one JSON object; the machine is the
caller's to name.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / "tests"))
sys.path.append(str(REPO / "tests" / "edge_server"))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--rate", type=float, default=5.0)
    parser.add_argument("--outage-s", type=float, default=300.0)
    args = parser.parse_args(argv)
    from edge_helpers import start_server, violation_recorder
    from test_edge_alerts import speeding
    from webhook_receiver import SECRET, Receiver

    receiver = Receiver().start()
    with tempfile.TemporaryDirectory(prefix="airpatrol-webhook-bench-") as tmp:
        srv = start_server(Path(tmp), webhooks=[{"name": "dispatch", "url": receiver.url, "secret": SECRET}])
        try:
            recorder = violation_recorder(srv.app, srv.settings, "bench")
            sent: dict[int, float] = {}

            def store_one(k: int) -> None:
                t = time.time()
                sent[
                    recorder.record(speeding(track_id=k), None, None, dt.datetime.now(dt.timezone.utc)).id
                ] = t

            for k in range(args.n):
                store_one(k)
                time.sleep(1.0 / args.rate)
            deadline = time.time() + 30
            while len(receiver.acted) < args.n and time.time() < deadline:
                time.sleep(0.05)
            delays = [r.at - sent[r.event["data"]["violation"]["id"]] for r in receiver.acted]
            up = {
                "delivered": len(delays),
                "p50_ms": round(statistics.median(delays) * 1000, 1),
                "p95_ms": round(_pct(delays, 0.95) * 1000, 1),
                "max_ms": round(max(delays) * 1000, 1),
            }
            receiver.stop()
            before = len(receiver.acted)
            queued = []
            started = time.time()
            k = args.n
            while time.time() - started < args.outage_s:
                store_one(k)
                queued.append(max(sent))
                k += 1
                time.sleep(1.0)
            receiver.start()
            back = time.time()
            deadline = back + 300
            while len(receiver.acted) < before + len(queued) and time.time() < deadline:
                time.sleep(0.05)
            after = [r.event["data"]["violation"]["id"] for r in receiver.acted[before:]]
            outage = {
                "outage_s": args.outage_s,
                "queued": len(queued),
                "delivered": len(after),
                "in_order_and_once": after == queued,
                "all_delivered_after_recovery_s": round(receiver.acted[-1].at - back, 2) if after else None,
                "first_after_recovery_s": round(receiver.acted[before].at - back, 2) if after else None,
            }
        finally:
            srv.stop()
            receiver.stop()
    sys.stdout.write(
        json.dumps({"receiver_up": up, "outage": outage, "refused": len(receiver.refused)}, indent=1) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
