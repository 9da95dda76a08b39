"""``airpatrol eval --ray``: one task per (configuration, sequence) on a local Ray, merged into the
same report as the sequential evaluator's, and resumable."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import yaml

from airpatrol.cli import main

pytestmark = [pytest.mark.usefixtures("ray_alone"), pytest.mark.slow]  # one Ray at a time (conftest)
TIMING_KEYS = {"fps", "wall_s", "timings", "timings_ms"}  # how fast, not what was found


def _without_timings(value):
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def _eval(dataset: Path, out: Path, *extra: str) -> int:
    """``airpatrol eval`` as the console script runs it, in this process (the Ray tasks run in
    Ray's worker processes all the same; a real ``--ray`` process is tests/batch/test_batch_cli.py's)."""
    args = ["eval", str(dataset), "--out", str(out), "-q", "--ablate", "egomotion=off", "--max-frames", "30"]
    return main([*args, *extra])


@pytest.fixture
def local_ray(monkeypatch: pytest.MonkeyPatch):
    """A local Ray of 2 CPUs (what ``--ray --workers 2`` starts), started once for the distributed
    run and its resume: the executor joins a Ray this process already runs and leaves it running,
    so the resume's tasks find the first run's workers instead of starting Ray and them again."""
    try:
        import ray
    except ImportError as exc:
        pytest.skip(f"Ray is not installed ({exc}); pip install 'airpatrol[ray]'")
    env, sigterm = dict(os.environ), signal.getsignal(signal.SIGTERM)
    # normal priority for Ray's workers (nice 15 by default starved them under other load: see
    # tests/batch/test_batch_cli.py)
    monkeypatch.setenv("RAY_worker_niceness", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        # what ray.init set in this process (RAY_AUTH_MODE, a SIGTERM handler) goes with it
        os.environ.clear()
        os.environ.update(env)
        signal.signal(signal.SIGTERM, sigterm)


def test_eval_on_ray_equals_the_sequential_evaluation_and_resumes(
    small_flight_dir: Path, oblique_flight_dir: Path, tmp_path: Path, local_ray
) -> None:
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
    assert _eval(dataset, tmp_path / "seq") == 0
    assert _eval(dataset, tmp_path / "ray", "--ray", "--workers", "2") == 0

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

    assert _eval(dataset, tmp_path / "ray", "--ray", "--workers", "2") == 0  # resume: nothing to redo
    parts = json.loads((tmp_path / "ray" / "parts" / "batch.json").read_text())
    assert parts["totals"]["skipped"] == 4 and parts["totals"]["done"] == 0
    assert _without_timings(json.loads((tmp_path / "ray" / "metrics.json").read_text())) == _without_timings(
        a
    )
