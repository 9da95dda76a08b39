"""``airpatrol process`` on batches of simulated flights (batch.cli): one after another, and on a
local Ray (batch.ray_executor) with a worker killed mid-flight, or on a running Ray cluster."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from batch_helpers import touch

from airpatrol.cli import main
from batch.commit import PARTIAL_DIR, RECORD_NAME, running_attempts
from eval.simulate import FlightSpec, simulate_flight

REPO = Path(__file__).resolve().parents[2]
AIRPATROL = [sys.executable, "-m", "airpatrol.cli"]
# Ray runs its workers at nice 15 (a batch yields to everything else on the box, e.g. a live
# server: kept in the product). Under other load that starved these tests' workers (a 20 s batch
# took 230 s beside two CPU hogs, and the kill test gave up waiting): they run at normal priority.
RAY_TEST_ENV = {"RAY_worker_niceness": "0"}
# scripts/test.sh's parallel pass: one Ray at a time on the box (here and tests/eval/test_eval_batch.py)
pytestmark = [pytest.mark.usefixtures("ray_alone"), pytest.mark.slow]

# Small simulated flights: 640x360 at 30 fps, nadir 60 m, a few vehicles each.
SPEC = FlightSpec(duration_s=2.0, fps=30.0, width=640, height=360, altitude_m=60.0, n_vehicles=6)


def ray_or_skip() -> None:
    """Ray tests run wherever Ray is installed (the dev extra installs it); CI must have it."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"Ray is not installed ({exc}); pip install 'airpatrol[ray]'")


@pytest.fixture(scope="module")
def flights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three simulated flights, each in its own folder as the simulator writes them (video.mp4,
    video.SRT, ground truth and road masks beside them)."""
    root = tmp_path_factory.mktemp("flights")
    for i in (1, 2, 3):
        simulate_flight(SPEC.replace(seed=i), root / f"f{i}")
    return root


def run_cli(*args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*AIRPATROL, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **RAY_TEST_ENV, **(env or {})},
    )


def _tracks(out: Path) -> dict[str, str]:
    return {p.parent.relative_to(out).as_posix(): p.read_text() for p in sorted(out.glob("*/*/tracks.txt"))}


@pytest.fixture(scope="module")
def local_batch(flights: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local") / "out"
    r = run_cli("process", str(flights), "--out", str(out), "--no-video", "-q")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "3 flights: 3 processed, 0 already done, 0 failed" in r.stdout
    return out


def test_process_a_folder_of_flights_then_resume(local_batch: Path, flights: Path, capsys) -> None:
    report = json.loads((local_batch / "batch.json").read_text())
    assert report["totals"]["frames"] == 180 and report["totals"]["detector_loads"] == 1  # once for 3 flights
    for name in ("f1/video", "f2/video", "f3/video"):
        summary = json.loads((local_batch / name / "summary.json").read_text())
        assert summary["frames"] == 60 and summary["telemetry"].endswith("video.SRT")
        assert json.loads((local_batch / name / RECORD_NAME).read_text())["status"] == "done"
    # the re-run in this process (``main`` as the console script calls it): nothing to do
    assert main(["process", str(flights), "--out", str(local_batch), "--no-video", "-q"]) == 0
    assert "0 processed, 3 already done" in capsys.readouterr().out


def test_a_corrupt_flight_fails_alone_with_a_clear_line(flights: Path, tmp_path, capsys, caplog) -> None:
    """In this process (the real process's exit code and stderr: the wrong-address case below)."""
    listing = touch(
        tmp_path / "l.txt", f"{flights / 'f1' / 'video.mp4'}\n{touch(tmp_path / 'bad.mp4', 'not a video')}\n"
    )
    args = ["process", str(listing), "--out", str(tmp_path / "out"), "--no-video", "-q", "--max-frames", "10"]
    assert main(args) == 1
    assert "2 flights: 1 processed, 0 already done, 1 failed" in capsys.readouterr().out
    # what the process writes on stderr is its log: the failure's line, and no traceback
    assert "bad: SourceError" in caplog.text
    assert not [r for r in caplog.records if r.exc_info], caplog.text


def _kill_when_writing(out: Path, name: str, min_lines: int) -> dict:
    """SIGKILL the worker running ``name`` once its attempt has written ``min_lines`` tracks."""
    for attempt in running_attempts(out):
        try:
            tracks = (Path(attempt["folder"]) / "tracks.txt").read_text() if attempt["name"] == name else ""
        except OSError:
            continue  # no frame yet
        if tracks.count("\n") >= min_lines:
            os.kill(attempt["pid"], signal.SIGKILL)
            return attempt | {"lines_written": tracks.count("\n")}
    return {}


def test_a_ray_batch_matches_the_local_one_with_a_worker_killed_mid_flight(
    flights: Path, local_batch: Path, tmp_path
) -> None:
    """A batch on a local Ray gives the one-process result. SIGKILL the worker process running a
    flight, once it has started: Ray runs the flight again on another worker; every flight ends
    with one complete output folder, and the other two run as in a batch without a kill."""
    ray_or_skip()
    out = tmp_path / "ray"
    proc = subprocess.Popen(
        [
            *AIRPATROL,
            "process",
            str(flights),
            "--out",
            str(out),
            "--no-video",
            "-q",
            "--ray",
            "--workers",
            "2",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **RAY_TEST_ENV},
    )
    killed: dict = {}
    try:
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline and proc.poll() is None:
            killed = _kill_when_writing(out, "f2/video", min_lines=5)
            time.sleep(0.02)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert killed, "the flight never started writing"
    assert proc.returncode == 0, stderr[-3000:]
    assert "3 flights: 3 processed, 0 already done, 0 failed" in stdout
    # progress from the tasks; the killed attempt's frames not counted
    assert "batch: 3/3 items (0 failed), 180/180 frames" in stderr
    report = json.loads((out / "batch.json").read_text())
    assert report["executor"] == "local Ray, 1 CPU per task" and report["threads_per_task"] == 1
    assert report["totals"]["done"] == 3 and report["totals"]["workers"] >= 1
    # a worker loads the detector once however many flights it runs (the killed one wrote no record)
    assert report["totals"]["detector_loads"] == report["totals"]["workers"]
    record = json.loads((out / "f2" / "video" / RECORD_NAME).read_text())
    assert record["worker"]["attempt"] != killed["attempt"] and record["worker"]["pid"] != killed["pid"]
    assert _tracks(out) == _tracks(local_batch)  # complete, and exactly the one-process result
    assert not (out / PARTIAL_DIR).exists()
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "batch.json",
        "batch.md",
        "f1",
        "f2",
        "f3",
    ]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_batch_joins_a_running_ray_cluster_by_address(flights: Path, local_batch: Path, tmp_path) -> None:
    """``--ray HOST:PORT``: the flights go to a cluster started beforehand (``ray start --head``, as
    on a real head node, with token authentication as docs/scale-out.md sets it up), not to a Ray of
    the command's own; the cluster outlives the command. A wrong address fails fast and clearly."""
    import secrets

    ray_or_skip()
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    port = _free_port()
    ray_tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    log_file = (tmp_path / "head.log").open("w")
    head = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={ray_tmp}",  # short: Ray's socket paths must fit in 107 bytes
        ],
        stdout=log_file,
        stderr=subprocess.STDOUT,
        env={**os.environ, **RAY_TEST_ENV, **auth},
    )
    try:
        deadline = time.monotonic() + 60
        while not _listening(port) and time.monotonic() < deadline:
            assert head.poll() is None, (tmp_path / "head.log").read_text()[-3000:]
            time.sleep(0.2)
        out = tmp_path / "out"
        args = ("process", str(flights), "--out", str(out), "--no-video", "-q", "--ray", f"127.0.0.1:{port}")
        r = run_cli(*args, env=auth)
        assert r.returncode == 0, r.stderr[-3000:]
        report = json.loads((out / "batch.json").read_text())
        assert report["executor"] == f"Ray at 127.0.0.1:{port}, 1 CPU per task"
        assert _tracks(out) == _tracks(local_batch)
        assert head.poll() is None  # the command left the cluster running

        nobody = _free_port()
        t0 = time.monotonic()
        wrong = run_cli(
            "process", str(flights), "--out", str(tmp_path / "x"), "-q", "--ray", f"127.0.0.1:{nobody}"
        )
        assert wrong.returncode == 2 and f"cannot reach the Ray cluster at 127.0.0.1:{nobody}" in wrong.stderr
        assert "Traceback" not in wrong.stderr and time.monotonic() - t0 < 60
    finally:
        head.terminate()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        log_file.close()
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _listening(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False
