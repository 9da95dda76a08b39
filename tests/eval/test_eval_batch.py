"""``airpatrol eval --ray``: one task per (configuration, sequence) on a local Ray, merged into the
same report as the sequential evaluator's, and resumable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TIMING_KEYS = {"fps", "wall_s", "timings", "timings_ms"}  # how fast, not what was found


def _without_timings(value):
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _eval(dataset: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "airpatrol.cli", "eval", str(dataset), "--out", str(out), "-q"]
    args += ["--ablate", "egomotion=off", "--max-frames", "45", *extra]
    # normal priority for Ray's workers (nice 15 by default starved them under other load: see
    # tests/batch/test_batch_cli.py)
    env = {**os.environ, "RAY_worker_niceness": "0"}
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600, check=False, env=env)


def test_eval_on_ray_equals_the_sequential_evaluation_and_resumes(
    small_flight_dir: Path, oblique_flight_dir: Path, tmp_path: Path
) -> None:
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"Ray is not installed ({exc}); pip install 'airpatrol[ray]'")
    dataset = tmp_path / "two.yaml"
    dataset.write_text(
        yaml.safe_dump(
            {
                "name": "two",
                "sequences": [
                    {"name": "nadir", "layout": "sim", "path": str(small_flight_dir)},
                    {"name": "oblique", "layout": "sim", "path": str(oblique_flight_dir)},
                ],
            }
        )
    )
    sequential = _eval(dataset, tmp_path / "seq")
    assert sequential.returncode == 0, sequential.stderr[-3000:]
    distributed = _eval(dataset, tmp_path / "ray", "--ray", "--workers", "2")
    assert distributed.returncode == 0, distributed.stderr[-3000:]

    a = json.loads((tmp_path / "seq" / "metrics.json").read_text())
    b = json.loads((tmp_path / "ray" / "metrics.json").read_text())
    assert [(s["variant"], s["sequence"]) for s in b["sequences"]] == [
        ("base", "nadir"),
        ("base", "oblique"),
        ("egomotion=off", "nadir"),
        ("egomotion=off", "oblique"),
    ]
    assert _without_timings(b) == _without_timings(a)  # the same scores, merged the same way
    assert (tmp_path / "ray" / "report.md").read_text().count("| base |") >= 1
    parts = json.loads((tmp_path / "ray" / "parts" / "batch.json").read_text())
    assert parts["totals"]["done"] == 4 and parts["totals"]["failed"] == 0

    again = _eval(dataset, tmp_path / "ray", "--ray", "--workers", "2")  # resume: nothing to redo
    assert again.returncode == 0, again.stderr[-3000:]
    parts = json.loads((tmp_path / "ray" / "parts" / "batch.json").read_text())
    assert parts["totals"]["skipped"] == 4 and parts["totals"]["done"] == 0
    assert _without_timings(json.loads((tmp_path / "ray" / "metrics.json").read_text())) == _without_timings(
        a
    )
