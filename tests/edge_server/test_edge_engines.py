"""A stream's engine in a process of its own (edge_server.engines): the same results as the
pipeline in this process, the process reused stream after stream, a killed or hung process found
and reported, a failed start explained, shared memory cleaned up. Real engine processes (from the
fork server), the synthetic scene's frames and bright-blob detector."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from edge_helpers import synthetic_stream, wait_until

from edge_client.bench_server import process_tree
from edge_client.synthetic import DEFAULT_CAMERA, BrightBlobDetector, SceneRoadSegmenter, SyntheticScene
from edge_server.engine_link import EngineLost
from edge_server.engines import slots
from edge_server.engines.child import EngineSpec
from edge_server.engines.remote import EngineStartError
from edge_server.engines.supervisor import EngineProcesses, context, engine_factory
from edge_server.settings import ServerSettings, SettingsError
from pipelines.builder import build_pipeline
from pipelines.config import PipelineConfig
from pipelines.effort import Effort
from pipelines.types import Frame, Telemetry

FPS = 30.0
# live: keyframes on; the scene's road segmenter, its mask waited for (results independent of timing)
CONFIG = PipelineConfig().with_overrides(
    road={"lag_frames": 0}, rules={"speed_limit_kmh": 50.0}, keyframes={"enabled": True}
)


def frames(n: int, start: int = 0) -> list[Frame]:
    scene = SyntheticScene()
    out = []
    for i in range(start, start + n):
        t = i / FPS
        tel = Telemetry(
            timestamp_s=t,
            altitude_m=50.0,
            gimbal_pitch_deg=-90.0,
            focal_length_35mm=24.0,
            camera=DEFAULT_CAMERA,
        )
        out.append(Frame(index=i, timestamp_s=t, image=scene.render(t), telemetry=tel))
    return out


def failing_detector() -> BrightBlobDetector:
    from pipelines.errors import WeightsError

    raise WeightsError("weights/nowhere.xml not found: give detector.weights")


@pytest.fixture(scope="module")
def engines():
    pool = EngineProcesses(timeout_s=3.0, start_timeout_s=120.0, keep_idle=1)
    yield pool
    pool.close()


NICE = 3  # the engines' nice value above this process's (settings.engine_nice)


def spec(**kw) -> EngineSpec:
    return EngineSpec(CONFIG, BrightBlobDetector, SceneRoadSegmenter, **{"nice": NICE, **kw})


def our_slots(pid: int | None = None) -> list[Path]:
    return sorted(slots.slot_dir().glob(f"{slots.PREFIX}{pid or os.getpid()}-*"))


def test_the_engine_process_gives_the_pipelines_results_and_is_reused(engines) -> None:
    """Frames through the process (prepared ahead, and not; on a rung of the effort ladder from half
    way) give what the pipeline gives here: the same tracks, speeds and violations; its next stream
    starts in the same process, fresh."""
    local = build_pipeline(CONFIG, detector=BrightBlobDetector(), segmenter=SceneRoadSegmenter())
    remote = engines.start(spec())
    pid = remote.pid
    tree = process_tree(os.getpid())  # as serve-bench reads a server's processes
    assert tree[os.getpid()]["role"] == "server" and tree[pid]["role"] == "engine"
    assert any(p["role"] == "fork server" for p in tree.values())
    assert tree[pid]["rss_mb"] > 0 and tree[pid]["pss_mb"] > 0 and tree[pid]["cpu_s"] > 0
    cheap = process_tree(os.getpid(), pss=False)[pid]  # serve-bench's reading every second: RSS only
    assert "pss_mb" not in cheap and abs(cheap["rss_mb"] - tree[pid]["rss_mb"]) < 0.2 * tree[pid]["rss_mb"]
    speeds_seen, first_ids = 0, []
    for k, frame in enumerate(frames(150)):
        if k == 75:  # a rung of the effort ladder, half way: the engine applies it as the pipeline does
            for p in (local, remote):
                p.set_effort(Effort(2, 2, 8, 60))
        want = local.process(frame, prepared=local.prepare(frame) if k % 2 else None)
        got = remote.process(frame, prepared=remote.prepare(frame) if k % 2 else None)
        assert got.frame is frame
        assert list(got.detections.tracker_id) == list(want.detections.tracker_id)
        first_ids += list(got.detections.tracker_id) if k < 60 else []
        np.testing.assert_allclose(got.detections.xyxy, want.detections.xyxy)
        assert {t: s.speed_kmh for t, s in got.speeds.items()} == pytest.approx(
            {t: s.speed_kmh for t, s in want.speeds.items()}, nan_ok=True
        )
        assert (got.road_mask is None) == (want.road_mask is None)
        if want.road_mask is not None:
            assert np.array_equal(got.road_mask, want.road_mask)
        assert [v.ticket_speed_kmh for v in got.violations] == [v.ticket_speed_kmh for v in want.violations]
        speeds_seen += sum(np.isfinite(s.speed_kmh) for s in want.speeds.values())
    assert speeds_seen > 100, "the scene was measured (speeds on most frames)"
    if Path(f"/proc/{pid}/task").is_dir():  # it yields the cores to receiving: every thread of it, the
        # models' own pools included, NICE nicer than the server, its prepare thread nicer still
        from edge_server.engines.child import PREPARE_NICE

        ours, nices = os.getpriority(os.PRIO_PROCESS, 0), _nice_of_threads(pid)
        assert nices[pid] == min(nices.values()) == min(19, ours + NICE)
        assert max(nices.values()) == min(19, ours + NICE + PREPARE_NICE)
    closing_here, closing_there = local.finish(), remote.finish()
    assert [v.track_id for v in closing_there] == [v.track_id for v in closing_here]
    assert remote.summary().keys() == local.summary().keys()
    assert remote.metadata == local.metadata and remote.metadata["keyframes"]["propagated"] > 50
    assert len(our_slots()) == 2  # one per pipe, while the process lives
    remote.close()
    local.close()
    again = engines.start(spec())  # the idle process builds the next stream's pipeline
    assert again.pid == pid and engines.started == 1
    ids = [i for f in frames(60) for i in again.process(f).detections.tracker_id]
    assert ids == first_ids and not again.timestamps.problem  # a new tracker, a new clock
    again.close()
    assert engines.health()["processes"][0]["idle"] is True


@pytest.mark.parametrize(
    ("sig", "cause", "said"),
    [
        (signal.SIGKILL, "died", "was killed by SIGKILL"),
        (signal.SIGSTOP, "hung", "hung: no answer to a frame in 3 s; it was stopped"),
    ],
)
def test_a_dead_or_hung_engine_is_found_reported_and_cleaned_up(engines, sig, cause, said) -> None:
    remote = engines.start(spec())
    remote.process(frames(1)[0])
    lost_before = engines.lost[cause]
    os.kill(remote.pid, sig)
    started = time.monotonic()
    with pytest.raises(EngineLost, match=said) as info:
        for frame in frames(30, start=1):
            remote.process(frame)
    assert info.value.cause == cause
    assert time.monotonic() - started < 3.0 + 1.0  # the watchdog's timeout, and no more
    with pytest.raises(EngineLost):  # every later call says the same
        remote.prepare(frames(1)[0])
    assert engines.lost[cause] == lost_before + 1
    assert engines.last_lost["cause"] == cause and said in engines.last_lost["reason"]
    assert remote.summary() == {} and not remote.alive
    remote.close()  # the stream's end: nothing more to ask, the process is gone, its slots removed
    assert our_slots() == []
    assert all(p["pid"] != remote.pid for p in engines.health()["processes"])


def test_an_engine_that_cannot_start_says_why(engines) -> None:
    with pytest.raises(EngineStartError, match="weights/nowhere.xml not found"):
        engines.start(EngineSpec(CONFIG, failing_detector, SceneRoadSegmenter))
    assert our_slots() == []


def test_factories_must_reach_the_process_by_name(engines, tmp_path) -> None:
    settings = ServerSettings(data_dir=tmp_path, engine_processes=True)
    with pytest.raises(SettingsError, match="must be importable callables"):
        engine_factory(CONFIG, settings, engines, lambda: BrightBlobDetector())


def test_a_killed_process_reads_as_killed_however_many_threads_ask() -> None:
    """The fork server sends a child's exit status once: threads asking at once (a stream's two
    pipes' threads) all read the signal, never 255 (CPython's reading of the closed pipe: most runs
    of 20 kills met it before the fix)."""
    ctx = context()
    said = []
    for _ in range(40):
        proc = ctx.Process(target=time.sleep, args=(60,), daemon=True)
        proc.start()
        os.kill(proc.pid, signal.SIGKILL)
        start = threading.Barrier(6)

        def ask(proc=proc, start=start) -> None:
            start.wait()
            while proc.is_alive():
                time.sleep(0.001)

        askers = [threading.Thread(target=ask) for _ in range(6)]
        for t in askers:
            t.start()
        for t in askers:
            t.join(30)
        said.append(proc.exitcode)
    assert said == [-signal.SIGKILL] * 40


def test_slots_of_a_stopped_server_are_swept(tmp_path) -> None:
    dead = 2**22 + 12345  # above pid_max's default: no such process
    stale = tmp_path / f"{slots.PREFIX}{dead}-abc"
    mine = tmp_path / f"{slots.PREFIX}{os.getpid()}-def"
    other = tmp_path / "unrelated"
    for p in (stale, mine, other):
        p.write_bytes(b"x")
    assert slots.sweep_stale(tmp_path) == 1
    assert not stale.exists() and mine.exists() and other.exists()


def test_a_killed_or_hung_engine_ends_its_stream_alone(server_factory) -> None:
    """Two live streams, each with its engine process: one engine killed (-9), later the other
    stopped (a hang). Each time that stream alone ends, failed with the reason, its violations
    kept; the other goes on; /healthz counts both; no shared memory is left."""
    srv = server_factory(
        app_kwargs={"detector_factory": BrightBlobDetector, "segmenter_factory": SceneRoadSegmenter},
        engine_processes=True,
        engine_timeout_s=3.0,
        max_streams=2,
    )
    with srv.client() as c, synthetic_stream(srv, 60) as a, synthetic_stream(srv, 60, others={a}) as b:

        def stored(sid: str) -> int:
            return len(c.get("/api/v1/violations", params={"session_id": sid}).json()["items"])

        wait_until(lambda: stored(a) >= 1, 40, "a violation of the first stream stored")
        before = stored(a)
        worker = srv.manager.sessions[a].worker
        assert worker.outputs.engine_pid == worker.pipeline.pid  # in its live stats events
        os.kill(worker.pipeline.pid, signal.SIGKILL)
        wait_until(lambda: a not in srv.manager.sessions, 15, "the first stream ended")
        ended = c.get(f"/api/v1/sessions/{a}").json()
        assert ended["status"] == "failed" and "was killed by SIGKILL" in ended["end_reason"], ended
        assert stored(a) >= before  # every violation stored before the crash is still there
        processed = srv.manager.sessions[b].stats.processed
        wait_until(
            lambda: srv.manager.sessions[b].stats.processed > processed + 10, 10, "the other stream going on"
        )
        health = c.get("/healthz").json()["engines"]
        assert health["lost"] == {"died": 1} and health["running"] == 1, health

        os.kill(srv.manager.sessions[b].worker.pipeline.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        wait_until(lambda: b not in srv.manager.sessions, 10, "the second stream ended")
        assert time.monotonic() - stopped < 3.0 + 2.0  # the watchdog's timeout, and the stream's close
        ended = c.get(f"/api/v1/sessions/{b}").json()
        assert ended["status"] == "failed" and "hung: no answer to a frame in 3 s" in ended["end_reason"], (
            ended
        )
        health = c.get("/healthz").json()["engines"]
        assert health["lost"] == {"died": 1, "hung": 1} and health["running"] == 0, health
        assert "airpatrol_engines_lost_total" in c.get("/metrics").text
    assert our_slots() == []  # the test server runs in this process: its slots are named by its pid


def test_engine_processes_import_ultralytics_offline_and_quiet() -> None:
    """The fork server every engine starts from imports ultralytics as the engine does: offline, no
    auto-installs, quiet. Imported plain it read an empty environment, once, and each engine then
    logged a warning on every frame (447 in a 20 s four-stream run)."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("YOLO_")}
    code = (
        "import os, edge_server.engines.preload\n"
        "from ultralytics.utils import LOGGER\n"
        "print(os.environ.get('YOLO_OFFLINE'), os.environ.get('YOLO_AUTOINSTALL'), LOGGER.level)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    offline, autoinstall, level = out.stdout.split()
    assert (offline, autoinstall) == ("1", "false")
    assert int(level) >= 40  # ERROR: no per-frame INFO or WARNING lines


def _nice_of_threads(pid: int) -> dict[int, int]:
    """Each thread's nice value (/proc/PID/task/TID/stat, field 19)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        out[int(task.name)] = int(task.joinpath("stat").read_text().rsplit(")", 1)[1].split()[16])
    return out


class _SpecPool:
    """Takes the spec the server's factory starts an engine with."""

    detector_service = None

    def start(self, spec: EngineSpec) -> EngineSpec:
        return spec


def test_the_server_asks_its_engines_for_engine_nice(tmp_path) -> None:
    settings = ServerSettings(data_dir=tmp_path, engine_processes=True, engine_nice=7)
    started = engine_factory(CONFIG, settings, _SpecPool(), BrightBlobDetector, SceneRoadSegmenter)()
    assert started.nice == 7


@pytest.mark.parametrize(
    ("environment", "threads"),
    [({}, 1), ({"AIRPATROL_ENGINE_THREADS": "3"}, 3), ({"AIRPATROL_ENGINE_THREADS": "null"}, None)],
)
def test_engines_get_engine_threads_one_by_default(tmp_path, monkeypatch, environment, threads) -> None:
    """One thread a pool an engine unless told otherwise (docs/scale-out.md: 1.05-1.32x the frames of
    several streams); ``null``: the libraries' own. The engine's detector is told the same."""

    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    settings = ServerSettings(data_dir=tmp_path, engine_processes=True)
    started = engine_factory(CONFIG, settings, _SpecPool(), BrightBlobDetector, SceneRoadSegmenter)()
    assert started.threads == threads and started.config.detector.threads == threads


def test_an_engines_memory_in_healthz_is_read_at_most_every_15_s(monkeypatch) -> None:
    """/healthz shows each engine's RSS and PSS: reading them walks every mapping of the process
    (tens of ms an engine), and every publisher asks /healthz each second, so they are read again
    only once MEMORY_MAX_AGE_S old."""
    from edge_server.engines import supervisor

    reads: list[int] = []
    monkeypatch.setattr(supervisor, "memory_mb", lambda pid: reads.append(pid) or {"rss_mb": 800.0})
    pool = EngineProcesses(timeout_s=1.0, start_timeout_s=1.0)
    pool._all[4242] = None  # type: ignore[assignment] - a process it serves, as far as the cache goes
    t0 = 1000.0
    assert pool._memory_of(4242, now=t0) == {"rss_mb": 800.0}
    assert pool._memory_of(4242, now=t0 + supervisor.MEMORY_MAX_AGE_S - 0.1) == {"rss_mb": 800.0}
    assert reads == [4242]
    pool._memory_of(4242, now=t0 + supervisor.MEMORY_MAX_AGE_S)
    assert reads == [4242, 4242]
    del pool._all[4242]
    pool._memory_of(7, now=t0 + 100)  # a gone process's figures are let go of
    assert set(pool._memory) == {7}
