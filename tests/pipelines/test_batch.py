"""pipelines.batch: finding flights, the exactly-once commit, resume, and real batches of simulated
flights through ``airpatrol process`` (one after another, and on a local Ray with a worker killed
mid-flight)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from eval.simulate import FlightSpec, simulate_flight
from pipelines.batch import (
    PARTIAL_DIR,
    RECORD_NAME,
    RUNNING_DIR,
    BatchError,
    Flight,
    LocalExecutor,
    discover_flights,
    fingerprint,
    run_batch,
    run_item,
    running_attempts,
)

REPO = Path(__file__).resolve().parents[2]
AIRPATROL = [sys.executable, "-m", "airpatrol.cli"]
# Ray runs its workers at nice 15 (a batch yields to everything else on the box, e.g. a live
# server: kept in the product). Under other load that starved these tests' workers (a 20 s batch
# took 230 s beside two CPU hogs, and the kill test gave up waiting): they run at normal priority.
RAY_TEST_ENV = {"RAY_worker_niceness": "0"}

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


# ---------------------------------------------------------------- discovery


def _touch(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _layout(root: Path) -> None:
    """A DJI card (flat videos + .SRT), a simulator folder (video + masks), a MOT frame folder."""
    _touch(root / "card" / "DJI_0001.MP4")
    _touch(root / "card" / "DJI_0001.SRT")
    _touch(root / "card" / "DJI_0002.MP4")
    _touch(root / "sim" / "video.mp4")
    _touch(root / "sim" / "video.SRT")
    _touch(root / "sim" / "road_mask" / "000001.png")  # a flight's own folder: not a flight
    _touch(root / "mot" / "seqinfo.ini", "[Sequence]\nname=mot\nimDir=img1\nframeRate=30\nimExt=.jpg\n")
    _touch(root / "mot" / "img1" / "000001.jpg")
    _touch(root / "notes" / "readme.md")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            ["."],
            {
                "card/DJI_0001": ("card/DJI_0001.MP4", "card/DJI_0001.SRT"),
                "card/DJI_0002": ("card/DJI_0002.MP4", None),
                "mot": ("mot", None),
                "sim/video": ("sim/video.mp4", "sim/video.SRT"),
            },
        ),
        (
            ["card/*.MP4"],
            {"DJI_0001": ("card/DJI_0001.MP4", "card/DJI_0001.SRT"), "DJI_0002": ("card/DJI_0002.MP4", None)},
        ),
        (["card/DJI_0002.MP4"], {"DJI_0002": ("card/DJI_0002.MP4", None)}),
        (["mot"], {"mot": ("mot", None)}),
        (  # one flight named twice (names are relative to the folder given): processed once
            ["card", "card/DJI_0001.MP4"],
            {
                "DJI_0001": ("card/DJI_0001.MP4", "card/DJI_0001.SRT"),
                "DJI_0002": ("card/DJI_0002.MP4", None),
            },
        ),
    ],
    ids=["folder-of-flights", "glob", "one-video", "frame-folder", "named-twice"],
)
def test_discover_flights(tmp_path, monkeypatch, given, expected) -> None:
    _layout(tmp_path)
    monkeypatch.chdir(tmp_path)
    found = {f.name: f for f in discover_flights(given)}
    assert set(found) == set(expected)
    for name, (video, srt) in expected.items():
        assert found[name].video.resolve() == (tmp_path / video).resolve()
        assert (found[name].srt.resolve() if found[name].srt else None) == (
            (tmp_path / srt).resolve() if srt else None
        )


def test_outputs_inside_the_input_folder_are_not_flights(tmp_path) -> None:
    """``airpatrol process /archive --out /archive/results``, run twice: the first run's annotated
    videos are not flights of the second (nor of a batch over an older output folder)."""
    _layout(tmp_path)
    _touch(tmp_path / "results" / ".batch.lock")
    _touch(tmp_path / "results" / "card" / "DJI_0001" / "annotated.mp4")
    _touch(tmp_path / "older" / "DJI_0001" / RECORD_NAME, "{}")
    _touch(tmp_path / "older" / "DJI_0001" / "annotated.mp4")
    names = {f.name for f in discover_flights([tmp_path], exclude=tmp_path / "results")}
    assert names == {"card/DJI_0001", "card/DJI_0002", "mot", "sim/video"}
    assert {f.name for f in discover_flights([str(tmp_path / "**" / "*.mp4")])} == {"video"}  # sim/video.mp4


def test_list_file_with_telemetry_and_comments(tmp_path) -> None:
    _layout(tmp_path)
    _touch(tmp_path / "logs" / "flight2.csv")
    listing = _touch(
        tmp_path / "batch.txt",
        "# tonight's flights\ncard/DJI_0001.MP4\n\ncard/DJI_0002.MP4 logs/flight2.csv  # log from the app\n",
    )
    flights = discover_flights([listing])
    assert [(f.name, f.video.name, f.srt.name if f.srt else None) for f in flights] == [
        ("card/DJI_0001", "DJI_0001.MP4", "DJI_0001.SRT"),
        ("card/DJI_0002", "DJI_0002.MP4", "flight2.csv"),
    ]


@pytest.mark.parametrize(
    ("setup", "given", "message"),
    [
        (lambda r: _touch(r / "notes" / "a.md"), ["notes"], "no videos"),
        (lambda r: None, ["missing.mp4"], "not found"),
        (lambda r: None, ["*.mp4"], "matches nothing"),
        (lambda r: _touch(r / "l.txt", "gone.mp4\n"), ["l.txt"], "l.txt:1: gone.mp4 not found"),
        (lambda r: _touch(r / "l.txt", "a b c\n"), ["l.txt"], "expected 'VIDEO [TELEMETRY]'"),
        (
            lambda r: (_touch(r / "a" / "x.mp4"), _touch(r / "b" / "x.mp4")),
            ["a/x.mp4", "b/x.mp4"],
            "two flights would write to 'x'",
        ),
    ],
    ids=["no-videos", "missing", "empty-glob", "list-missing", "list-columns", "name-clash"],
)
def test_discover_flights_refuses_clearly(tmp_path, monkeypatch, setup, given, message) -> None:
    monkeypatch.chdir(tmp_path)
    setup(tmp_path)
    with pytest.raises(BatchError, match=message.replace("[", r"\[").replace("]", r"\]")):
        discover_flights(given)


# ---------------------------------------------------------------- the commit protocol


class WriteJob:
    """A job that writes one file per item (and can be told to fail or wait)."""

    def __init__(self, fail: set[str] = frozenset(), gate: threading.Event | None = None) -> None:
        self.fail = set(fail)
        self.gate = gate
        self.calls: list[str] = []

    def name_of(self, item: Flight) -> str:
        return item.name

    def inputs_of(self, item: Flight):
        return item.inputs

    def settings(self):
        return {"job": "write"}

    def __call__(self, item: Flight, out_dir: Path) -> dict:
        self.calls.append(item.name)
        if self.gate is not None:
            self.gate.wait(10)
        if item.name in self.fail:
            raise ValueError(f"{item.video.name} is corrupt")
        (out_dir / "out.txt").write_text(item.video.read_text())
        return {"frames": len(item.video.read_text())}


def _items(root: Path, n: int = 3) -> list[Flight]:
    return [Flight(f"f{i}", _touch(root / "in" / f"f{i}.mp4", "x" * (i + 1))) for i in range(n)]


def test_batch_resumes_reruns_changed_inputs_and_reports_failures(tmp_path) -> None:
    items = _items(tmp_path)
    out = tmp_path / "out"
    first = run_batch(WriteJob(fail={"f1"}), items, out, progress=False)
    assert [r["status"] for r in first.items] == ["done", "failed", "done"]
    assert "ValueError: f1.mp4 is corrupt" in first.items[1]["error"]
    assert (out / "f0" / "out.txt").read_text() == "x"
    assert not (out / "f1").exists() and not (out / PARTIAL_DIR).exists() and not (out / RUNNING_DIR).exists()
    report = json.loads((out / "batch.json").read_text())
    assert report["totals"]["failed"] == 1 and report["totals"]["done"] == 2
    assert "failed: ValueError: f1.mp4 is corrupt" in (out / "batch.md").read_text()

    again = WriteJob()
    second = run_batch(again, items, out, progress=False)
    assert again.calls == ["f1"]  # only the failed one re-runs
    assert [r["status"] for r in second.items] == ["skipped", "done", "skipped"]

    time.sleep(0.01)
    items[2].video.write_text("changed")  # a re-recorded input: its outputs are redone and replaced
    third = WriteJob()
    run_batch(third, items, out, progress=False)
    assert third.calls == ["f2"]
    assert (out / "f2" / "out.txt").read_text() == "changed"
    assert sorted(p.name for p in out.iterdir()) == [
        ".batch.lock",
        "batch.json",
        "batch.md",
        "f0",
        "f1",
        "f2",
    ]


def test_a_second_attempt_of_a_committed_item_discards_its_own_output(tmp_path) -> None:
    """Two attempts of one item (a retry racing a straggler): the first to commit wins, the other's
    folder is removed, and both return the winner's record."""
    (item,) = _items(tmp_path, 1)
    job = WriteJob()
    fp = fingerprint(item.inputs, [job.settings(), None])
    first = run_item(job, item, tmp_path / "out", fp)
    item.video.write_text("xx")  # (same fingerprint passed: a straggler that started before)
    late = run_item(WriteJob(), item, tmp_path / "out", fp)
    assert first["status"] == "done" and late["status"] == "skipped"
    assert late["worker"] == first["worker"]
    assert (tmp_path / "out" / "f0" / "out.txt").read_text() == "x"


def test_one_driver_per_output_folder(tmp_path) -> None:
    items = _items(tmp_path, 1)
    gate = threading.Event()
    errors: list[Exception] = []

    def first() -> None:
        run_batch(WriteJob(gate=gate), items, tmp_path / "out", progress=False)

    t = threading.Thread(target=first)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "out" / RUNNING_DIR).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            run_batch(WriteJob(), items, tmp_path / "out", progress=False)
        except BatchError as exc:
            errors.append(exc)
    finally:
        gate.set()
        t.join()
    assert errors and "in use by another batch" in str(errors[0])


def test_local_executor_keeps_going_after_an_unexpected_error(tmp_path) -> None:
    class Boom(WriteJob):
        def __call__(self, item, out_dir):
            if item.name == "f0":
                raise RuntimeError("decoder crashed")
            return super().__call__(item, out_dir)

    report = run_batch(Boom(), _items(tmp_path), tmp_path / "out", LocalExecutor(), progress=False)
    assert [r["status"] for r in report.items] == ["failed", "done", "done"]
    assert report.items[0]["error"] == "RuntimeError: decoder crashed"


def test_progress_counts_running_attempts_once() -> None:
    """A retried item's frames count from its new attempt; a finished item counts its summary's
    frames; a late report of a finished item changes nothing."""
    from pipelines.batch import BatchProgress, Outcome

    p = BatchProgress(items=2, total_frames=100, show=False)
    p.running("a", "1", 30)
    p.running("b", "1", 10)
    assert p.frames == 40
    p.running("a", "2", 5)  # a's worker died after 30 frames; its retry has done 5
    assert p.frames == 15
    p.done(Outcome("a", record={"status": "done", "summary": {"frames": 50}}))
    p.running("a", "2", 50)
    assert p.frames == 60 and p.line().startswith("1/2 items (0 failed), 60/100 frames")
    p.done(Outcome("b", error="SourceError: damaged"))
    assert p.frames == 50 and p.failed == 1 and "left" not in p.line()


# ---------------------------------------------------------------- real batches


def _tracks(out: Path) -> dict[str, str]:
    return {p.parent.relative_to(out).as_posix(): p.read_text() for p in sorted(out.glob("*/*/tracks.txt"))}


@pytest.fixture(scope="module")
def local_batch(flights: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("local") / "out"
    r = run_cli("process", str(flights), "--out", str(out), "--no-video", "-q")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "3 flights: 3 processed, 0 already done, 0 failed" in r.stdout
    return out


def test_process_a_folder_of_flights_then_resume(local_batch: Path, flights: Path) -> None:
    report = json.loads((local_batch / "batch.json").read_text())
    assert report["totals"]["frames"] == 180 and report["totals"]["detector_loads"] == 1  # once for 3 flights
    for name in ("f1/video", "f2/video", "f3/video"):
        summary = json.loads((local_batch / name / "summary.json").read_text())
        assert summary["frames"] == 60 and summary["telemetry"].endswith("video.SRT")
        assert json.loads((local_batch / name / RECORD_NAME).read_text())["status"] == "done"
    r = run_cli("process", str(flights), "--out", str(local_batch), "--no-video", "-q")
    assert r.returncode == 0 and "0 processed, 3 already done" in r.stdout


def test_a_corrupt_flight_fails_alone_with_a_clear_line(flights: Path, tmp_path) -> None:
    listing = _touch(
        tmp_path / "l.txt", f"{flights / 'f1' / 'video.mp4'}\n{_touch(tmp_path / 'bad.mp4', 'not a video')}\n"
    )
    r = run_cli(
        "process", str(listing), "--out", str(tmp_path / "out"), "--no-video", "-q", "--max-frames", "10"
    )
    assert r.returncode == 1
    assert "2 flights: 1 processed, 0 already done, 1 failed" in r.stdout
    assert "bad: SourceError" in r.stderr and "Traceback" not in r.stderr


def test_ray_batch_matches_the_local_one(flights: Path, local_batch: Path, tmp_path) -> None:
    ray_or_skip()
    out = tmp_path / "ray"
    r = run_cli("process", str(flights), "--out", str(out), "--no-video", "-q", "--ray", "--workers", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((out / "batch.json").read_text())
    assert report["executor"] == "local Ray, 1 CPU per task" and report["threads_per_task"] == 1
    assert report["totals"]["done"] == 3 and report["totals"]["workers"] >= 1
    assert "batch: 3/3 items (0 failed), 180/180 frames" in r.stderr  # progress from the tasks
    # a worker loads the detector once however many flights it runs
    assert report["totals"]["detector_loads"] == report["totals"]["workers"]
    assert _tracks(out) == _tracks(local_batch)


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


def test_a_worker_killed_mid_flight_loses_and_duplicates_nothing(
    flights: Path, local_batch: Path, tmp_path
) -> None:
    """SIGKILL the worker process running a flight, once it has started: Ray runs the flight again
    on another worker; every flight ends with one complete output folder."""
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
    assert "batch: 3/3 items (0 failed), 180/180 frames" in stderr  # the killed attempt's not counted
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
