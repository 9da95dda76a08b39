"""Issue 15's batch target: a batch of simulated flights through ``airpatrol process``, today's
sequential loop against Ray, on this machine.

Modes (each a fresh output folder, the same flights, the same shipped models; wall clock of the
whole command, Ray's start included, and the batch's own wall from batch.json):

* ``sequential``: no ``--ray``: one flight after another in one process, the libraries' default
  threads (OpenVINO and OpenCV use every core);
* ``ray-2x1``: ``--ray --workers 2``: two tasks at a time, 1 CPU and 1 thread each;
* ``ray-1x2``: ``--ray --workers 1 --cpus-per-task 2``: one task at a time on 2 threads (Ray's
  overhead alone);
* ``ray-2x1-kill``: as ray-2x1, one worker SIGKILLed mid-flight: the cost of a retry, and a check
  that no flight is lost or duplicated.

A benchmark, not CI:   .venv/bin/python eval/examples/batch_bench.py [--flights 6] [--seconds 8]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
from batch.commit import running_attempts  # noqa: E402
from eval.simulate import FlightSpec, simulate_flight  # noqa: E402

log = logging.getLogger("batch_bench")

MODES = {
    "sequential": [],
    "ray-2x1": ["--ray", "--workers", "2"],
    "ray-1x2": ["--ray", "--workers", "1", "--cpus-per-task", "2"],
    "ray-2x1-kill": ["--ray", "--workers", "2"],
}


def make_flights(root: Path, n: int, seconds: float, size: tuple[int, int]) -> None:
    for i in range(n):
        spec = FlightSpec(
            seed=100 + i,
            duration_s=seconds,
            width=size[0],
            height=size[1],
            altitude_m=(40, 60, 80, 100, 120, 150)[i % 6],
            pitch_deg=(-90, -60, -45)[i % 3],
            n_vehicles=12,
            drift_mps=(1.0, 0.5),
        )
        simulate_flight(spec, root / f"flight{i:02d}", progress=False)


def kill_one_mid_flight(out: Path, proc: subprocess.Popen) -> dict:
    """SIGKILL the first worker seen with at least 30 frames of a flight written."""
    while proc.poll() is None:
        for attempt in running_attempts(out):
            try:
                tracks = (Path(attempt["folder"]) / "tracks.txt").read_text()
            except OSError:
                continue
            frames = len({line.split(",", 1)[0] for line in tracks.splitlines()})
            if frames >= 30:
                os.kill(attempt["pid"], signal.SIGKILL)
                return {"flight": attempt["name"], "pid": attempt["pid"], "frames_lost": frames}
        time.sleep(0.05)
    return {}


def run_mode(mode: str, flights: Path, out: Path) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "airpatrol.cli",
        "process",
        str(flights),
        "--out",
        str(out),
        "--no-video",
        "-q",
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*cmd, *MODES[mode]], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    killed = kill_one_mid_flight(out, proc) if mode.endswith("kill") else {}
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{stderr[-3000:]}")
    report = json.loads((out / "batch.json").read_text())
    outputs = sorted(p.parent.name for p in out.glob("*/*/tracks.txt"))
    return {
        "mode": mode,
        "wall_s": round(wall, 2),
        "batch_wall_s": report["totals"]["wall_s"],
        "frames": report["totals"]["frames"],
        "fps": round(report["totals"]["frames"] / wall, 2),
        "workers": report["totals"]["workers"],
        "detector_loads": report["totals"]["detector_loads"],
        "flights_done": report["totals"]["done"],
        "output_folders": len(outputs),
        "killed": killed,
        "executor": report["executor"],
    }


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flights", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=8.0, help="length of each flight (30 fps)")
    ap.add_argument("--size", default="960x540")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    with tempfile.TemporaryDirectory(prefix="batch-bench-") as tmp:
        flights = Path(tmp) / "flights"
        t0 = time.perf_counter()
        make_flights(flights, args.flights, args.seconds, size)
        log.info(
            "%d flights of %.0f s at %s simulated in %.0f s",
            args.flights,
            args.seconds,
            args.size,
            time.perf_counter() - t0,
        )
        rows = [run_mode(m, flights, Path(tmp) / m) for m in args.modes.split(",")]
    base = next((r for r in rows if r["mode"] == "sequential"), rows[0])
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}")  # noqa: T201
    print(f"{args.flights} flights x {args.seconds:g} s at {args.size}, 30 fps ({base['frames']} frames)")  # noqa: T201
    header = (
        f"{'mode':<14} {'wall s':>7} {'frames/s':>9} {'vs seq':>7} {'workers':>8} {'loads':>6} {'outputs':>8}"
    )
    print(f"{header}  killed")  # noqa: T201
    for r in rows:
        print(  # noqa: T201
            f"{r['mode']:<14} {r['wall_s']:>7.1f} {r['fps']:>9.1f} {base['wall_s'] / r['wall_s']:>6.2f}x "
            f"{r['workers']:>8} {r['detector_loads']:>6} {r['output_folders']:>8}  {r['killed'] or ''}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
