"""Evidence packs, measured (``bash eval/examples/evidence_bench.sh`` runs all of it):

* without arguments: a pack with a 20 MB clip (random bytes: nothing compresses them) made (read,
  hashed, signed, written, fsynced) and verified, each the median of 5 (target: verify <= 1 s);
* ``--compare serve_*.json``: ``airpatrol serve-bench`` reports of the same flight with evidence
  packs on and off (``AIRPATROL_EVIDENCE_PACKS``): the stream's processed fps each way (target: the
  packs cost <= 3 %), and each pack's delay after its clip (target: <= 2 s).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)


def pack_timings(clip_mb: float = 20.0, repeats: int = 5) -> dict:
    from edge_server.evidence.keys import KeyRing
    from edge_server.evidence.pack import EvidencePacker
    from edge_server.evidence.verify import verify_pack

    with tempfile.TemporaryDirectory(prefix="airpatrol-evidence-bench-") as tmp:
        root = Path(tmp)
        ring = KeyRing.open(root / "keys")
        clip = root / "clip.mp4"
        clip.write_bytes(os.urandom(int(clip_mb * 1e6)))
        snap = root / "snap.jpg"
        snap.write_bytes(os.urandom(60_000))
        stored = {"id": 1, "session_id": "bench", "server_id": "bench", "ticket_speed_kmh": 61.0}
        packer = EvidencePacker(ring, "bench")
        make_s, verify_s = [], []
        for k in range(repeats):
            t0 = time.perf_counter()
            info = packer.make(
                root / f"p{k}.zip", stored, record=None, media={"snapshot.jpg": snap, "clip.mp4": clip},
                made_later=False,
            )  # fmt: skip
            make_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            report = verify_pack(info.path, ring.trusted())
            verify_s.append(time.perf_counter() - t0)
            assert report.ok, report.problems
        return {
            "pack_mb": round(info.bytes / 1e6, 2),
            "make_s_median": round(statistics.median(make_s), 3),
            "verify_s_median": round(statistics.median(verify_s), 3),
            "verify_s_max": round(max(verify_s), 3),
        }


def compare(paths: list[Path]) -> dict:
    """fps and pack delays of serve-bench reports named ``..._packs_{true,false}_N.json``."""
    arms: dict[str, list[dict]] = {"true": [], "false": []}
    for p in sorted(paths):
        arm = "true" if "_packs_true" in p.name else "false"
        report = json.loads(p.read_text())
        for run in report["runs"]:
            for s in run["sessions"]:
                arms[arm].append(
                    {
                        "file": p.name,
                        "fps": s["processed_fps"],
                        "violations": s["violations"],
                        **(s.get("evidence") or {}),
                    }
                )
    fps = {arm: [r["fps"] for r in rows] for arm, rows in arms.items()}
    mean = {arm: statistics.fmean(v) if v else None for arm, v in fps.items()}
    cost = (
        None if not (mean["true"] and mean["false"]) else round(100 * (1 - mean["true"] / mean["false"]), 2)
    )
    delays = [r["after_clip_ms_max"] for r in arms["true"] if r.get("after_clip_ms_max") is not None]
    return {
        "machine": report.get("machine") if paths else None,
        "runs": arms,
        "fps_mean_packs_on": mean["true"],
        "fps_mean_packs_off": mean["false"],
        "fps_cost_pct": cost,
        "pack_after_clip_ms_max": max(delays) if delays else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.evidence_bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--compare", nargs="+", type=Path, help="serve-bench JSON reports, packs on and off")
    parser.add_argument("--clip-mb", type=float, default=20.0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    out = compare(args.compare) if args.compare else pack_timings(args.clip_mb)
    text = json.dumps(out, indent=2)
    sys.stdout.write(text + "\n")
    if args.json:
        args.json.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
