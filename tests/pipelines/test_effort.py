"""The effort ladder and its governor (pipelines/effort.py): what a live stream gives up, in which
order, within which bounds, and when it climbs or steps back down."""

from __future__ import annotations

import numpy as np
import pytest

from edge_client.synthetic import BrightBlobDetector, SceneRoadSegmenter, SyntheticScene
from pipelines.builder import build_pipeline
from pipelines.config import EgoMotionConfig, KeyframeConfig, PipelineConfig, RoadConfig
from pipelines.effort import Effort, LoadGovernor, LoadSample, effort_ladder, keyframes_at
from pipelines.types import Frame

KF = KeyframeConfig(enabled=True, interval=3, max_interval=6)
ROAD = RoadConfig(every_n_frames=30)


@pytest.mark.parametrize(
    ("keyframes", "bounds", "want"),
    [
        # the defaults: slower detector and U-Net, then every 2nd and 3rd frame, then the bounds
        (
            KF,
            {},
            [(1, None, None), (1, 6, 60), (2, 6, 60), (3, 6, 60), (3, 8, 120)],
        ),
        # stride bound 1: only the rates move
        (KF, {"max_stride": 1}, [(1, None, None), (1, 6, 60), (1, 8, 120)]),
        # the detector on every frame by choice (keyframes off): its rate never moves
        (
            KeyframeConfig(enabled=False),
            {"max_stride": 2},
            [(1, None, None), (1, None, 60), (2, None, 60), (2, None, 120)],
        ),
        # ego-motion on: its working width drops to the bound from the first rung on
        (
            KF,
            {"egomotion": EgoMotionConfig(), "max_stride": 2},
            [(1, None, None, None), (1, 6, 60, 640), (2, 6, 60, 640), (2, 8, 120, 640)],
        ),
        # ... unless it is configured that narrow already, or off
        (
            KF,
            {"egomotion": EgoMotionConfig(max_width=480), "max_stride": 1},
            [(1, None, None), (1, 6, 60), (1, 8, 120)],
        ),
        (
            KF,
            {"egomotion": EgoMotionConfig(enabled=False), "max_stride": 1},
            [(1, None, None), (1, 6, 60), (1, 8, 120)],
        ),
        # the road mask off: its U-Net rate never moves; with the detector on every frame as well,
        # nothing is left to give up but frames
        (
            KF,
            {"road": RoadConfig(enabled=False)},
            [(1, None, None), (1, 6, None), (2, 6, None), (3, 6, None), (3, 8, None)],
        ),
        (
            KeyframeConfig(enabled=False),
            {"road": RoadConfig(enabled=False)},
            [(1, None, None), (2, None, None), (3, None, None)],
        ),
        # bounds no looser than the configuration: no rung beyond the strides
        (
            KeyframeConfig(enabled=True, interval=3, max_interval=8),
            {"max_keyframe_interval": 4, "max_road_every_n_frames": 30},
            [(1, None, None), (1, 8, 30), (2, 8, 30), (3, 8, 30)],
        ),
    ],
)
def test_the_ladder_gives_up_work_in_order_within_its_bounds(keyframes, bounds, want) -> None:
    bounds = dict(bounds)
    ladder = effort_ladder(keyframes, bounds.pop("road", ROAD), **bounds)
    ego = any(len(w) == 4 for w in want)
    got = [
        (e.stride, e.keyframe_interval, e.road_every_n_frames) + ((e.ego_max_width,) if ego else ())
        for e in ladder
    ]
    assert got == want
    assert ego or all(e.ego_max_width is None for e in ladder)
    assert [e.level for e in ladder] == list(range(len(want)))
    strides = [e.stride for e in ladder]
    assert strides == sorted(strides)  # each rung does no more work than the one before


@pytest.mark.parametrize(
    ("effort", "interval", "max_interval"),
    [
        (Effort(), 3, 6),
        (Effort(1, 1, 6, 60), 6, 6),
        (Effort(4, 3, 8, 120), 8, 8),
        (Effort(1, 1, 2, 60), 3, 6),
    ],
)
def test_a_rung_sets_the_detectors_schedule(effort, interval, max_interval) -> None:
    cfg = keyframes_at(KF, effort)
    assert (cfg.interval, cfg.max_interval, cfg.min_gap) == (interval, max_interval, max(2, interval // 2))


def test_describe_says_what_is_given_up() -> None:
    assert Effort().describe() == "full effort (the configuration's)"
    assert Effort(3, 3, 8, 120, 640).describe() == (
        "level 3: every 3rd frame, detector at least every 8 frames, road U-Net every 120 frames, "
        "camera motion at 640 px"
    )


LADDER = effort_ladder(KF, ROAD)  # 5 rungs: 0 .. 4


def feed(
    gov: LoadGovernor,
    t0: float,
    seconds: float,
    *,
    fps: float,
    drop: float,
    busy: float,
    latency: float,
    state,
    lose: float = 0.0,
):
    """A stream for ``seconds`` at ``fps`` sent, ``lose`` of them lost before the server while its
    box's receive buffers overflow, ``drop`` of the frames meant for the engine dropped, the engine
    ``busy`` of the time, each processed frame ``latency`` ms late; the decisions taken."""
    decisions = []
    n = int(seconds * fps)
    lost_here = 0
    for k in range(1, n + 1):
        t = t0 + k / fps
        if k * lose >= lost_here + 1:
            lost_here += 1
            state["lost"] += 1
            continue
        state["received"] += 1
        if state["received"] % gov.effort.stride:
            state["skipped"] += 1
            continue
        state["meant"] += 1
        if (state["meant"] * drop) >= state["dropped"] + 1:
            state["dropped"] += 1
            continue
        state["busy"] += busy * gov.effort.stride / fps
        d = gov.observe(
            LoadSample(
                t,
                state["received"],
                state["dropped"],
                state["skipped"],
                state["busy"],
                (latency,),
                state["lost"],
            )
        )
        if d is not None:
            decisions.append((round(t - t0, 1), d.level, d.reason))
    return decisions


def fresh_state():
    return {"lost": 0, "received": 0, "dropped": 0, "skipped": 0, "meant": 0, "busy": 0.0}


def test_a_stream_dropping_frames_climbs_a_rung_at_a_time_to_the_top_and_no_further() -> None:
    gov = LoadGovernor(LADDER)
    state = fresh_state()
    decisions = feed(gov, 0.0, 30.0, fps=30, drop=0.4, busy=1.0, latency=120, state=state)
    assert [lvl for _, lvl, _ in decisions] == [1, 2, 3, 4]
    times = [t for t, _, _ in decisions]
    assert all(b - a >= 1.9 for a, b in zip(times, times[1:], strict=False))  # settles between rungs
    assert "frames dropped" in decisions[0][2]
    assert gov.level == 4 and gov.effort == LADDER[-1]


def test_latency_over_target_climbs_even_without_drops() -> None:
    gov = LoadGovernor(LADDER, target_latency_ms=150)
    decisions = feed(gov, 0.0, 5.0, fps=30, drop=0.0, busy=0.9, latency=220, state=fresh_state())
    assert decisions and decisions[0][1] == 1 and "latency p90 220 ms" in decisions[0][2]


def test_a_stream_that_keeps_up_stays_at_full_effort() -> None:
    gov = LoadGovernor(LADDER)
    assert feed(gov, 0.0, 60.0, fps=30, drop=0.0, busy=0.8, latency=60, state=fresh_state()) == []
    assert gov.level == 0


def test_an_idle_engine_steps_back_down_when_the_rung_below_fits() -> None:
    gov = LoadGovernor(LADDER)
    state = fresh_state()
    feed(gov, 0.0, 30.0, fps=30, drop=0.4, busy=1.0, latency=120, state=state)
    assert gov.level == 4
    # the load eases: at stride 3 the engine is busy 20 % of the time
    down = feed(gov, 30.0, 60.0, fps=30, drop=0.0, busy=0.2, latency=40, state=state)
    assert [lvl for _, lvl, _ in down] == [3, 2, 1, 0]
    assert down[0][0] >= 8.0  # calm for calm_s first
    assert "engine busy" in down[0][2]


def test_it_does_not_step_down_into_a_rung_that_would_overload() -> None:
    """Busy 45 % at stride 3: stride 2 would be ~68 % (fits under 70 %), stride 1 ~135 % (not)."""
    gov = LoadGovernor(LADDER)
    state = fresh_state()
    feed(gov, 0.0, 30.0, fps=30, drop=0.4, busy=1.0, latency=120, state=state)
    down = feed(gov, 30.0, 120.0, fps=30, drop=0.0, busy=0.45, latency=40, state=state)
    assert gov.level >= 2 and gov.effort.stride >= 2, down


def test_frames_the_box_lost_before_the_server_count_as_drops() -> None:
    """A server that cannot read its sockets in time loses frames before its queue: with nothing
    dropped and the latency fine, a fifth of the frames lost so climbs as drops do, and an engine
    that looks idle does not step down while they are lost."""
    gov = LoadGovernor(LADDER)
    state = fresh_state()
    decisions = feed(gov, 0.0, 30.0, fps=30, drop=0.0, busy=0.5, latency=60, state=state, lose=0.2)
    assert [lvl for _, lvl, _ in decisions] == [1, 2, 3, 4]
    assert "lost before the server (the box's receive buffers full)" in decisions[0][2]
    assert feed(gov, 30.0, 60.0, fps=30, drop=0.0, busy=0.1, latency=40, state=state, lose=0.05) == []
    down = feed(gov, 90.0, 30.0, fps=30, drop=0.0, busy=0.1, latency=40, state=state)  # the loss stops
    assert down and down[0][1] == 3 and "engine busy" in down[0][2]


def test_the_ladder_must_start_at_full_effort() -> None:
    with pytest.raises(ValueError, match="level 0"):
        LoadGovernor(LADDER[1:])


def test_a_pipeline_on_a_rung_detects_less_often() -> None:
    """The same frames through two pipelines, one on the top rung: its detector runs on fewer
    frames (at least every 8 instead of every 3), and its road U-Net less often."""
    scene = SyntheticScene()
    cfg = PipelineConfig().with_overrides(
        keyframes={"enabled": True}, road={"lag_frames": 0, "every_n_frames": 10}
    )
    runs = {}
    for name, effort in (("full", Effort()), ("top", Effort(4, 3, 8, 40))):
        p = build_pipeline(cfg, detector=BrightBlobDetector(), segmenter=SceneRoadSegmenter())
        p.set_effort(effort)
        keyframes = [p.process(Frame(i, i / 30, scene.render(i / 30))).keyframe for i in range(80)]
        runs[name] = (int(np.sum(keyframes)), p.road.n_runs)
        assert p.effort == effort
    assert runs["top"][0] < runs["full"][0] and runs["top"][1] < runs["full"][1], runs
    assert runs["full"][1] >= 8 and runs["top"][1] <= 3


def test_a_stream_may_start_on_a_higher_rung_and_steps_down_when_it_can() -> None:
    """Where the box's last stream ended (the server remembers): the governor starts there, within
    the ladder, and steps down once the engine has room."""
    assert LoadGovernor(LADDER, start_level=99).level == len(LADDER) - 1
    assert LoadGovernor(LADDER, start_level=-1).level == 0
    gov = LoadGovernor(LADDER, start_level=2)
    assert gov.effort == LADDER[2]
    down = feed(gov, 0.0, 40.0, fps=30, drop=0.0, busy=0.15, latency=40, state=fresh_state())
    assert [lvl for _, lvl, _ in down] == [1, 0]


@pytest.mark.parametrize("stride", [1, 2, 4, 6])
def test_a_fast_vehicle_keeps_one_track_however_few_frames_are_processed(stride: int) -> None:
    """The scene's fast lane (6 px a frame, its box 40 px long) given every stride-th frame, as a box
    that strides or drops them does: at every 6th frame a vehicle moves 0.9 of its length a step and
    its untextured box gives no flow. It keeps one id across the view (gap-buffered association;
    a new vehicle that could not be carried is detected on the next frame instead of being left
    where it was); with every frame there is no such extra detection."""
    scene = SyntheticScene()
    cfg = PipelineConfig().with_overrides(keyframes={"enabled": True}, road={"lag_frames": 0})
    p = build_pipeline(cfg, detector=BrightBlobDetector(), segmenter=SceneRoadSegmenter())
    ids: set[int] = set()
    for i in range(0, 110, stride):  # the first fast vehicle: in full view from frame 14 to 100
        t = i / 30
        r = p.process(Frame(i, t, scene.render(t)), backlog=int(stride > 1))
        fast = (
            (r.detections.xyxy[:, 1] < 180) & (r.detections.xyxy[:, 0] > 40) & (r.detections.xyxy[:, 2] < 600)
        )
        ids |= {int(x) for x in r.detections.tracker_id[fast]}
    assert len(ids) == 1, ids
    late = p.metadata["keyframes"]["new vehicle not carried"]
    assert (late > 0) is (stride > 1), dict(p.metadata["keyframes"])
