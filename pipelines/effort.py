"""What a live stream gives up when its box cannot keep up: the effort ladder and the governor.

A stream whose frames arrive faster than the engine processes them used to drop whichever frames
found the queue full: bursts of dropped frames, frames that waited a processing time or two (the
latency), and the detector run as often as on a fast box. Here the server chooses instead, one
rung of an :class:`Effort` ladder at a time, each rung cheaper than the one before:

1. the detector at most every ``max_interval`` frames (the keyframe schedule's slow setting), the
   road U-Net half as often and the camera motion measured on a smaller image (640 px wide: 1080p
   at a third instead of a half; measured neutral on 1080p flights, +0.09 km/h MAE at 30 m);
2. every 2nd received frame processed, evenly (``stride``), then every 3rd ... up to the bound:
   frames are skipped on purpose, evenly spaced, so the speeds' timing stays regular and a frame
   never waits behind another;
3. the detector even less often and the U-Net rarer still, up to their bounds.

The bounds are the accuracy the site accepts (``adapt_max_stride`` etc. in the server's settings):
beyond the last rung frames are dropped as before. :class:`LoadGovernor` (pure: the caller hands it
counters and times) climbs a rung when the stream drops frames or its latency passes the target, and
steps back down when the engine has been idle enough, long enough, for the rung below to fit. A
pipeline applies a rung's detector and U-Net rates (:meth:`pipelines.pipeline.Pipeline.set_effort`);
the stride is the server's (it never hands the pipeline a skipped frame).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.config import EgoMotionConfig, KeyframeConfig, RoadConfig


@dataclass(frozen=True, slots=True)
class Effort:
    """One rung: ``stride`` (process every Nth received frame), the detector at least every
    ``keyframe_interval`` processed frames, the road U-Net every ``road_every_n_frames`` frames and
    ego-motion on an image at most ``ego_max_width`` wide (each None: the configuration's). Level 0
    is the configuration."""

    level: int = 0
    stride: int = 1
    keyframe_interval: int | None = None
    road_every_n_frames: int | None = None
    ego_max_width: int | None = None  # ego-motion's working image at most this wide (None: configured)

    def describe(self) -> str:
        if self.level == 0:
            return "full effort (the configuration's)"
        parts = ["every frame" if self.stride == 1 else f"every {_nth(self.stride)} frame"]
        if self.keyframe_interval is not None:
            parts.append(f"detector at least every {self.keyframe_interval} frames")
        if self.road_every_n_frames is not None:
            parts.append(f"road U-Net every {self.road_every_n_frames} frames")
        if self.ego_max_width is not None:
            parts.append(f"camera motion at {self.ego_max_width} px")
        return f"level {self.level}: " + ", ".join(parts)

    def to_dict(self) -> dict[str, int | None]:
        return {
            "level": self.level,
            "stride": self.stride,
            "keyframe_interval": self.keyframe_interval,
            "road_every_n_frames": self.road_every_n_frames,
            "ego_max_width": self.ego_max_width,
        }


def keyframes_at(configured: KeyframeConfig, effort: Effort) -> KeyframeConfig:
    """The keyframe schedule of a rung: the detector at least every ``effort.keyframe_interval``
    frames, loaded or not, and a trigger (flow lost, a vehicle entering) only half that many frames
    after the last detection (the configuration's schedule when the rung leaves it alone)."""
    if effort.keyframe_interval is None or effort.keyframe_interval <= configured.interval:
        return configured
    every = effort.keyframe_interval
    return configured.model_copy(
        update={
            "interval": every,
            "max_interval": max(every, configured.max_interval),
            "min_gap": max(configured.min_gap, every // 2),
        }
    )


def _nth(n: int) -> str:
    return {2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def effort_ladder(
    keyframes: KeyframeConfig,
    road: RoadConfig,
    egomotion: EgoMotionConfig | None = None,
    *,
    max_stride: int = 3,
    max_keyframe_interval: int = 8,
    max_road_every_n_frames: int = 120,
    min_ego_width: int | None = 640,
) -> tuple[Effort, ...]:
    """The rungs from the configuration (level 0) to the bounds, each cheaper than the one before.
    The detector's rate only moves where keyframes are on (else it runs on every frame by choice);
    the U-Net's only where the road mask is on; ego-motion's working width only where it is on and
    configured wider than ``min_ego_width``."""
    slow_kf = max(keyframes.max_interval, keyframes.interval) if keyframes.enabled else None
    road_bound = max(max_road_every_n_frames, road.every_n_frames) if road.enabled else None
    road_x2 = min(road.every_n_frames * 2, road_bound) if road_bound is not None else None
    ego_w = (
        min_ego_width
        if egomotion is not None
        and egomotion.enabled
        and min_ego_width is not None
        and (egomotion.max_width is None or egomotion.max_width > min_ego_width)
        else None
    )
    rungs = [Effort()]
    if (slow_kf, road_x2, ego_w) != (None, None, None):  # rung 1 has something to give up
        rungs.append(Effort(1, 1, slow_kf, road_x2, ego_w))
    for stride in range(2, max(max_stride, 1) + 1):
        rungs.append(Effort(len(rungs), stride, slow_kf, road_x2, ego_w))
    last = rungs[-1]
    kf_bound = max(max_keyframe_interval, slow_kf) if slow_kf is not None else None
    if (kf_bound, road_bound) != (last.keyframe_interval, last.road_every_n_frames):
        rungs.append(Effort(len(rungs), last.stride, kf_bound, road_bound, ego_w))
    return tuple(rungs)


@dataclass(frozen=True, slots=True)
class LoadSample:
    """The stream's counters at one moment (cumulative): frames received, dropped (the queue was
    full) and skipped on purpose (stride); seconds the engine spent processing; the latencies (ms)
    of the frames processed since the last sample; and frames lost before the server's code while
    the box could not read its sockets in time (its receive buffers full: the server's own loss,
    counted as drops; ``edge_server.receive_loss``)."""

    t: float
    received: int
    dropped: int
    skipped: int
    busy_s: float
    latencies_ms: tuple[float, ...] = ()
    lost: int = 0


@dataclass(frozen=True, slots=True)
class Decision:
    level: int
    reason: str


class LoadGovernor:
    """Chooses the rung (see the module doc). ``observe(sample)`` after each processed frame; it
    returns a :class:`Decision` when the rung changes, else None.

    Up a rung when, over the last ``window_s``, more than ``drop_share`` of the frames it was meant
    to process were dropped, or the latency's 90th percentile passed ``target_latency_ms``. Down a
    rung when, over ``calm_s``, nothing was dropped, the latency stayed under target and the engine
    was busy less than ``idle_busy`` of the time scaled to the rung below (a rung with stride s
    processes 1/s of the frames: busy b at stride 2 means about 1.5 b at stride 3 -> 2). After any
    change it waits ``settle_s`` before judging again (the queue drains, the new rate shows). A
    stream may start on a higher rung (``start_level``: near where the box's last stream ended)."""

    def __init__(
        self,
        ladder: tuple[Effort, ...],
        *,
        target_latency_ms: float = 150.0,
        window_s: float = 2.0,
        calm_s: float = 8.0,
        settle_s: float = 2.0,
        drop_share: float = 0.05,
        idle_busy: float = 0.7,
        start_level: int = 0,
    ) -> None:
        if not ladder or ladder[0].level != 0:
            raise ValueError("the ladder starts at level 0")
        self.ladder = ladder
        self.target_latency_ms = target_latency_ms
        self.window_s, self.calm_s, self.settle_s = window_s, calm_s, settle_s
        self.drop_share, self.idle_busy = drop_share, idle_busy
        self.level = min(max(start_level, 0), len(ladder) - 1)
        self._samples: list[LoadSample] = []
        self._changed_at: float | None = None

    @property
    def effort(self) -> Effort:
        return self.ladder[self.level]

    def observe(self, s: LoadSample) -> Decision | None:
        if self._changed_at is None:
            self._changed_at = s.t
        self._samples.append(s)
        horizon = s.t - max(self.window_s, self.calm_s)
        while len(self._samples) > 2 and self._samples[1].t <= horizon:
            self._samples.pop(0)
        if s.t - self._changed_at < self.settle_s:
            return None
        window = [x for x in self._samples if x.t >= max(s.t - self.window_s, self._changed_at)]
        if len(window) >= 2 and (reason := self._overloaded(window)) and self.level < len(self.ladder) - 1:
            return self._move(+1, s.t, reason)
        calm = [x for x in self._samples if x.t >= self._changed_at]
        if self.level > 0 and calm and s.t - calm[0].t >= self.calm_s:
            reason = self._idle(calm)
            if reason:
                return self._move(-1, s.t, reason)
        return None

    def _overloaded(self, w: list[LoadSample]) -> str | None:
        a, b = w[0], w[-1]
        meant = (b.received - b.skipped) - (a.received - a.skipped)  # the frames it was meant to process
        dropped, lost = b.dropped - a.dropped, b.lost - a.lost
        if meant + lost > 0 and (dropped + lost) / (meant + lost) > self.drop_share:
            if not lost:
                return f"{dropped} of {meant} frames dropped in {b.t - a.t:.1f} s"
            return (
                f"{dropped} of {meant} frames dropped and {lost} lost before the server (the box's "
                f"receive buffers full) in {b.t - a.t:.1f} s"
            )
        latencies = sorted(x for s in w[1:] for x in s.latencies_ms)
        if latencies:
            p90 = latencies[min(len(latencies) - 1, int(0.9 * len(latencies)))]
            if p90 > self.target_latency_ms:
                return f"latency p90 {p90:.0f} ms over the {self.target_latency_ms:.0f} ms target"
        return None

    def _idle(self, w: list[LoadSample]) -> str | None:
        a, b = w[0], w[-1]
        span = b.t - a.t
        if span <= 0 or b.dropped > a.dropped or b.lost > a.lost:
            return None
        if any(x > self.target_latency_ms * 0.7 for s in w[1:] for x in s.latencies_ms):
            return None
        busy = (b.busy_s - a.busy_s) / span
        here, below = self.ladder[self.level], self.ladder[self.level - 1]
        expected = busy * here.stride / below.stride
        if below.stride == here.stride:  # the detector and the U-Net back to their faster rates
            expected = busy * 1.4
        if expected >= self.idle_busy:
            return None
        return f"engine busy {100 * busy:.0f} % of the time for {span:.0f} s (about {100 * expected:.0f} % a rung lower)"

    def _move(self, step: int, t: float, reason: str) -> Decision:
        self.level += step
        self._changed_at = t
        self._samples = self._samples[-1:]
        return Decision(self.level, reason)


__all__ = ["Decision", "Effort", "LoadGovernor", "LoadSample", "effort_ladder", "keyframes_at"]
