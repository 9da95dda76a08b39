"""The windowed speed of every track: :class:`SpeedEstimator` and its per-track state (the box size
checks of its trust flag: :mod:`pipelines.speed.sizes`).

It integrates each track's per-step ground displacement (metres, in the ego-motion-stabilised
ground frame) into a position track and re-fits its velocity over a trailing time window at every
update (the fit: :mod:`pipelines.speed.velocity`), a frame's tracks together in one vectorised fit.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from pipelines.config import SpeedConfig
from pipelines.height import ScaleTerms
from pipelines.speed.fit import kmh, m_per_s
from pipelines.speed.sizes import _recent_size, _window_size_changes, size_mismatch
from pipelines.speed.velocity import _speed_and_sigma, _velocity_now, half_indices
from pipelines.types import SpeedEstimate

logger = logging.getLogger(__name__)

LONGER = "longer"  # the key of a track's fit over the longer window: (track id, LONGER)
# the most a pitch may change for a track's history to be re-measured to first order (rescale); more
# (a base that found the gimbal far off) starts the tracks again, as the vehicles' own scale does
RESCALE_MAX_PITCH_DEG = 3.0
OUTLIER_FACTOR = 2.0  # a step faster than this multiple of max_plausible_kmh is a measurement error


def _padded_windows(
    windows: list[tuple[_TrackState, int]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The last ``k`` samples of each track as rows of one array, shorter ones padded at the
    front: times (G, K), positions (G, K, 2), box sizes (G, K; NaN in the padding) and which
    entries are samples (G, K). The padding repeats a row's first position at times 1 s apart
    before its first sample (finite, and distinct from its times, as the fits need)."""
    kmax = max(k for _, k in windows)
    g = len(windows)
    ts, ys = np.empty((g, kmax)), np.empty((g, kmax, 2))
    sizes, valid = np.full((g, kmax), np.nan), np.zeros((g, kmax), dtype=bool)
    for row, (st, k) in enumerate(windows):
        n, pad = len(st.t), kmax - k
        ts[row, pad:] = list(itertools.islice(st.t, n - k, n))
        ys[row, pad:] = list(itertools.islice(st.xy, n - k, n))
        sizes[row, pad:] = list(itertools.islice(st.size, n - k, n))
        valid[row, pad:] = True
        if pad:
            ts[row, :pad] = ts[row, pad] - np.arange(pad, 0, -1)
            ys[row, :pad] = ys[row, pad]
    return ts, ys, sizes, valid


class _Fit(NamedTuple):
    """One track's fit over one window (:meth:`SpeedEstimator._fits`)."""

    speed: float  # m/s
    fit_sigma: float  # its sigma (m/s), the carry's and the lag's terms in
    velocity: np.ndarray  # (2,)
    size_change: float  # its box's size change over the window (size_changes)
    window_t: np.ndarray  # the window's times
    scatter: float  # the sigma of the window's scatter alone (m/s)
    cut: bool  # whether a box in the window was cut by the frame's border


@dataclass(slots=True)
class _TrackState:
    start_t: float  # when the current integration started (the track's age counts from here)
    last_t: float
    pos: np.ndarray  # integrated ground position (m) at last_t
    t: deque[float] = field(default_factory=deque)
    xy: deque[tuple[float, float]] = field(default_factory=deque)
    size: deque[float] = field(default_factory=deque)  # box size per sample; NaN when not given
    velocity: np.ndarray | None = None  # last accepted fit (m/s), bridges rejected steps
    jump_t: float | None = None  # when the box last jumped (a step far off the fitted path)
    trusted: bool = False  # whether its last estimate was
    # which continuous measurement its positions belong to: a new number wherever the
    # integration restarted or a position was carried rather than measured (SpeedEstimate.segment)
    segment: int = 0
    segment_t: float = -math.inf  # the time its segment's first position may have (SpeedEstimate.earlier)
    reported: int = -1  # the segment of its last estimate
    scale_frac: float = math.nan  # the scale's relative sigma at its last update (nan: the config's)
    scale_per_deg: float = math.nan  # ... its pitch sensitivity there, and its point height's sigma
    point_frac: float = math.nan  # (pipelines.height.ScaleTerms)


class SpeedEstimator:
    """Per-track speed over a trailing time window, re-fitted at every update (never locked).

    ``update(timestamp_s, track_ids, displacements_m)``: row i is track i's ground displacement
    (metres, stabilised frame) since the previous update of that track. A NaN row (new track, or
    position unknown) starts the track's integration again: its history and age restart.

    A step implying more than ``2 x max_plausible_kmh`` is a measurement error: it is dropped from
    the fit and the position is carried forward with the last fitted velocity (or integration
    restarts when there is none yet). Samples older than ``window_s`` (by timestamp) leave the fit,
    or older than ``window_max_s`` where the track's longer fit agrees with its shorter one
    (:meth:`_takes_longer`: noisy boxes on a steady drive; ``SpeedEstimate.window_s`` says which).

    Trust: an estimate is ``trusted=False`` (with ``doubt`` saying why) while a jump lies within
    its window - a step landing more than ``max_step_jump_m`` from where the track's fitted
    velocity puts it (a box that jumped to a neighbouring vehicle or to part of its own) - or
    when the track's box size (``sizes`` of :meth:`update`) varies by more than
    ``max_box_size_change`` within it (a partial or merged box slides its anchor along the
    vehicle). The figure is still reported, computed as always; the rules count only trusted ones.
    (Leaving jumps out of the fit instead was measured on perturbed oracle boxes and not kept: it
    halved the p95 error on an oblique flight but doubled it on a nadir one.)
    An estimate is reported when the window holds at least ``min_samples`` samples and the track's
    age is at least ``min_track_age_s`` - or, younger, once the fit's sigma is at most
    ``early_max_sigma_kmh`` - unless it exceeds ``max_plausible_kmh`` (then it is
    logged at debug level and counted in ``n_implausible``). Its sigma combines the fit's standard
    error and ``altitude_sigma_frac * speed`` (scale uncertainty) in quadrature.
    """

    def __init__(self, cfg: SpeedConfig) -> None:
        self.cfg = cfg
        self._tracks: dict[int, _TrackState] = {}
        self.n_outliers = 0  # per-step displacements rejected
        self.n_implausible = 0  # fitted speeds above max_plausible_kmh (not reported)
        self._max_step_m_s = OUTLIER_FACTOR * float(m_per_s(cfg.max_plausible_kmh))
        self._segments = itertools.count(1)
        self._scale_source = ""  # update()'s, for the estimates it makes

    def __len__(self) -> int:
        return len(self._tracks)

    @property
    def track_ids(self) -> list[int]:
        return list(self._tracks)

    def forget(self, track_id: int) -> None:
        self._tracks.pop(int(track_id), None)

    def bridge(self, track_id: int, timestamp_s: float, size: float = math.nan) -> bool:
        """The track's vehicle is the same but where it is now was not measured (another tracker
        track took it over, its box perhaps further along the vehicle): carry its position to
        ``timestamp_s`` at its fitted velocity, adding no sample, so that its next displacement
        goes on from there. Only for a track whose last estimate was trusted (a window holding a
        jump or a partial box would go on misleading the new box's fit: measured, the fresh
        start is better), and a box of the size its last ones had (``size``, as given to
        :meth:`update`: within ``max_box_size_change`` of their median; a box that now covers
        more or less of the vehicle would mix two anchors in one window). Otherwise (or without
        a velocity) the track is forgotten, restarting at its next update; returns whether bridged."""
        st = self._tracks.get(int(track_id))
        last = _recent_size(st.size) if st is not None else math.nan
        same_size = (
            size > 0 and last > 0 and not size_mismatch(size, last, self.cfg.max_box_size_change)[0, 0]
        )
        if (
            st is None
            or st.velocity is None
            or not st.trusted
            or not timestamp_s > st.last_t
            or not same_size
        ):
            self.forget(track_id)
            return False
        st.pos = st.pos + st.velocity * (timestamp_s - st.last_t)
        st.last_t = float(timestamp_s)
        self._carried(st)
        return True

    def velocity(self, track_id: int) -> np.ndarray | None:
        """The track's last fitted ground velocity (m/s, a view: do not modify); None before its
        first fit or for a track not held."""
        st = self._tracks.get(int(track_id))
        return None if st is None else st.velocity

    def last_seen(self, track_id: int) -> tuple[float, np.ndarray | None, float] | None:
        """When the track was last updated, its last fitted ground velocity (m/s; None before its
        first fit) and its box's recent ground size (m: the median of its last few; NaN when
        unknown); None for a track not held."""
        st = self._tracks.get(int(track_id))
        if st is None:
            return None
        return st.last_t, None if st.velocity is None else st.velocity.copy(), _recent_size(st.size)

    def prune(self, active_ids: np.ndarray | list[int] | set[int]) -> None:
        """Drop every track not in ``active_ids``."""
        keep = {
            int(i)
            for i in np.asarray(list(active_ids) if isinstance(active_ids, set) else active_ids).ravel()
        }
        for tid in [k for k in self._tracks if k not in keep]:
            del self._tracks[tid]

    def reset(self) -> None:
        self._tracks.clear()

    def rescale(self, height_ratio: float, pitch_change_deg: float = 0.0) -> None:
        """The ground is measured anew from now on (:attr:`pipelines.ground.GroundModel.reinterpreted`:
        a height reference taken or updated, the traffic's pitch weighed in): every track's history
        is re-measured as its next step will be, so that no speed window mixes two scales (a window
        across a change read it as an acceleration, which the carry then drove past the new speed:
        a laser taken 32 % below the take-off altitude read +48 % then -22 % for a second). Over flat
        ground a displacement scales with the height; with the pitch by the track's sensitivity at
        its last update (``scale_per_deg``, first order). About the track's position now: the positions
        it reports go on from there without a jump (a ticket's base keeps what it was handed). Box
        sizes (m) scale alike. A pitch changed by more than ``RESCALE_MAX_PITCH_DEG`` changes the
        ground's shape, not its scale: every track starts again."""
        if abs(pitch_change_deg) > RESCALE_MAX_PITCH_DEG:
            self.reset()
            return
        for st in self._tracks.values():
            per_deg = st.scale_per_deg if math.isfinite(st.scale_per_deg) else 0.0
            k = height_ratio * (1.0 + per_deg * pitch_change_deg)
            if k == 1.0 or not (k > 0.0 and math.isfinite(k)):
                continue
            px, py = float(st.pos[0]), float(st.pos[1])  # about where it is now: no position jumps
            st.xy = deque((px + (x - px) * k, py + (y - py) * k) for x, y in st.xy)
            st.size = deque(v * k for v in st.size)
            if st.velocity is not None:
                st.velocity = st.velocity * k

    def _carried(self, st: _TrackState) -> None:
        """The track's position was carried to ``last_t``, not measured: a new segment (no base spans
        it) whose positions are those measured after it."""
        st.segment = next(self._segments)
        st.segment_t = math.nextafter(st.last_t, math.inf)

    def _restart(self, tid: int, t: float, size: float = math.nan) -> _TrackState:
        st = _TrackState(start_t=t, last_t=t, pos=np.zeros(2), segment=next(self._segments), segment_t=t)
        st.t.append(t)
        st.xy.append((0.0, 0.0))
        st.size.append(size)
        self._tracks[tid] = st
        return st

    def _step(self, tid: int, t: float, d: np.ndarray, size: float = math.nan) -> _TrackState:
        st = self._tracks.get(tid)
        if st is None or not np.all(np.isfinite(d)):
            return self._restart(tid, t, size)
        dt = t - st.last_t
        if dt < 0:
            logger.debug("track %d: timestamp went back (%.3f -> %.3f); restarting", tid, st.last_t, t)
            return self._restart(tid, t)
        if dt == 0:  # a second update at the same instant: fold it into the last sample
            st.pos = st.pos + d
            st.xy[-1] = (float(st.pos[0]), float(st.pos[1]))
            return st
        step_speed = float(np.hypot(d[0], d[1])) / dt
        expected = self._expected_velocity(st)
        jumped = expected is not None and float(np.hypot(*(d - expected * dt))) > self.cfg.max_step_jump_m
        if jumped:
            st.jump_t = t
        if step_speed > self._max_step_m_s:
            self.n_outliers += 1
            logger.debug("track %d: step of %.1f km/h rejected as an outlier", tid, kmh(step_speed))
            if st.velocity is None:
                return self._restart(tid, t, size)
            st.pos = st.pos + st.velocity * dt  # carry on at the fitted velocity, no sample
            st.last_t = t
            self._carried(st)
            return st
        st.pos = st.pos + d
        st.last_t = t
        st.t.append(t)
        st.xy.append((float(st.pos[0]), float(st.pos[1])))
        st.size.append(size)
        return st

    @staticmethod
    def _expected_velocity(st: _TrackState) -> np.ndarray | None:
        """The velocity a track's next step is checked against for a jump: its last fit's, or
        before it has one, the median of its steps so far (at least 3), so that a box jumping in
        a track's first half-second is caught as well."""
        if st.velocity is not None:
            return st.velocity
        if len(st.t) < 4:
            return None
        t = np.fromiter(st.t, dtype=np.float64, count=len(st.t))
        xy = np.asarray(st.xy, dtype=np.float64)
        return np.median(np.diff(xy, axis=0) / np.diff(t)[:, None], axis=0)

    @property
    def _history_s(self) -> float:
        """How far back a track's samples are kept: the speed window, or the acceleration's history."""
        return max(self.cfg.window_s, self.cfg.window_max_s or 0.0, self.cfg.accel_window_s)

    def _trim(self, st: _TrackState, now: float) -> None:
        oldest = now - self._history_s - 1e-9
        while st.t and st.t[0] < oldest:
            st.t.popleft()
            st.xy.popleft()
            st.size.popleft()

    def _in_window(self, st: _TrackState, now: float, window_s: float | None = None) -> int:
        """How many of the track's samples lie in the speed window (``window_s``, default the
        config's; the last ones: the history before them only serves the acceleration)."""
        oldest = now - (self.cfg.window_s if window_s is None else window_s) - 1e-9
        n = len(st.t)
        k = 0
        while k < n and st.t[n - 1 - k] >= oldest:
            k += 1
        return k

    def _carries(self, st: _TrackState, now: float) -> bool:
        """Whether the track's speed is carried to now by its acceleration: unless off, or a box
        jump lies in the history the acceleration is estimated from (a jump reads as one)."""
        return self.cfg.accel_window_s > 0 and (st.jump_t is None or now - st.jump_t > self._history_s + 1e-9)

    def _ready(self, st: _TrackState, now: float, in_window: int) -> bool:
        """Whether the track, ``in_window`` of its samples in the speed window, has the samples for
        an estimate (and the age, unless it may be reported early: ``early_max_sigma_kmh``, checked
        once fitted)."""
        return in_window >= self.cfg.min_samples and (
            self.cfg.early_max_sigma_kmh is not None or self._of_age(st, now)
        )

    def _of_age(self, st: _TrackState, now: float) -> bool:
        return now - st.start_t >= self.cfg.min_track_age_s - 1e-9

    def _estimate(self, tid: int, st: _TrackState) -> SpeedEstimate | None:
        return self._estimates([(tid, st)]).get(tid)

    def _estimates(self, tracks: list[tuple[int, _TrackState]]) -> dict[int, SpeedEstimate]:
        """The estimates of the ready tracks, fitted together (:meth:`_fits`); where the config
        allows a longer window (``window_max_s``), each track's longer fit, in the same pass,
        replaces its ``window_s`` one where :meth:`_takes_longer`."""
        windows = ((tid, st, self._in_window(st, st.last_t)) for tid, st in tracks)
        ready = [(tid, st, k) for tid, st, k in windows if self._ready(st, st.last_t, k)]
        longer = self._longer_candidates(ready)
        fits = self._fits(ready + [((tid, LONGER), st, k) for tid, st, k in longer])
        out: dict[int, SpeedEstimate] = {}
        for tid, st, _k in ready:
            fit = fits[tid]
            if (tid, LONGER) in fits and self._takes_longer(fit, fits[tid, LONGER]):
                fit = fits[tid, LONGER]
            est = self._estimate_from(
                tid, st, st.last_t, fit.speed, fit.fit_sigma, fit.velocity, fit.size_change, fit.window_t
            )
            if est is not None:
                out[tid] = est
        return out

    def _longer_candidates(
        self, ready: list[tuple[int, _TrackState, int]]
    ) -> list[tuple[int, _TrackState, int]]:
        """The ready tracks with samples beyond ``window_s`` and within ``window_max_s`` (with those
        samples' count), unless a box jump lies in the longer window only (taken, it would make a
        trusted speed untrusted for longer). Empty where the config has no longer window."""
        cfg = self.cfg
        if cfg.window_max_s is None or cfg.window_max_s <= cfg.window_s:
            return []
        longer = []
        for tid, st, k in ready:
            now = st.last_t
            k_long = self._in_window(st, now, cfg.window_max_s)
            jumped = (
                st.jump_t is not None and cfg.window_s + 1e-9 < now - st.jump_t <= cfg.window_max_s + 1e-9
            )
            if k_long > k and not jumped:
                longer.append((tid, st, k_long))
        return longer

    def _takes_longer(self, short: _Fit, longer: _Fit) -> bool:
        """Whether a track's fit over ``window_max_s`` replaces its ``window_s`` one: their speeds
        within ``window_agree_sigma`` x the sum of their scatters' sigmas - the intersection of
        confidence intervals rule of adaptive windows (Lepski; Katkovnik's ICI): a longer window
        only averages more noise away while its speed stays inside the shorter one's interval; a
        change of speed the carry did not follow moves it out, and the track keeps the short
        window. The scatters, not the full sigmas: their priors (the lag's) are what the test
        measures, and with them exact boxes always agreed. And only where the longer window is as
        clean as the short one: no box cut by the border in it (measured by its uncut edge, an
        error its scatter does not show), no change of size the short window does not hold too."""
        agree = abs(longer.speed - short.speed) <= self.cfg.window_agree_sigma * (
            longer.scatter + short.scatter
        )
        resized = longer.size_change > self.cfg.max_box_size_change >= short.size_change
        return agree and not longer.cut and not resized

    def _fits(self, ready: list[tuple[Hashable, _TrackState, int]]) -> dict[Hashable, _Fit]:
        """Each entry's fit over its track's last ``k`` samples (entries keyed by anything: a
        track's id, or (id, LONGER) for its longer window): one vectorised fit per kind (carried or
        not, and the thinned halves' length), windows of different lengths padded at the front
        (:func:`velocity_now_many`'s figures for each track, to rounding). Each track's "now" is the
        time of its newest sample (its row's, with a rolling shutter)."""
        groups: dict[tuple[int, bool], list[tuple[Hashable, _TrackState, int]]] = {}
        for tid, st, k in ready:
            n = len(st.t)
            # a track younger than its window has no history beyond it: no carry (its lag
            # is a fraction of a short window's)
            carry = self._carries(st, st.last_t) and n > k
            key = (len(half_indices(n)[0]) if carry else 0, carry)
            groups.setdefault(key, []).append((tid, st, k))
        out: dict[Hashable, _Fit] = {}
        for (_, carry), group in groups.items():
            # a track's sample times only increase (_step folds a repeated time, restarts on one
            # going back), as the fits need; tracks of one group share their halves' shapes
            ts, ys, sizes, valid = _padded_windows([(st, k) for _, st, k in group])
            h1t, h1y, h2t, h2y, span = [], [], [], [], []
            for _, st, _k in group:
                span.append(st.t[-1] - st.t[0])
                if carry:
                    t, xy = list(st.t), list(st.xy)
                    first, second = half_indices(len(t))
                    h1t.append([t[i] for i in first])
                    h1y.append([xy[i] for i in first])
                    h2t.append([t[i] for i in second])
                    h2y.append([xy[i] for i in second])
            halves = (
                (np.array(h1t), np.array(h1y, np.float64), np.array(h2t), np.array(h2y, np.float64))
                if carry
                else None
            )
            padded = None if valid.all() else valid
            v, sig, noise = _velocity_now(
                ts,
                ys,
                halves,
                np.array(span),
                self.cfg.error_correlation_s,
                padded,
                self.cfg.accel_sigma_mps2,
            )
            changes, cut = _window_size_changes(sizes, valid)
            for g, (tid, _st, k) in enumerate(group):
                speed, fit_sigma, velocity = _speed_and_sigma(v[g], float(sig[g, 0]), float(sig[g, 1]))
                scatter = _speed_and_sigma(v[g], float(noise[g, 0]), float(noise[g, 1]))[1]
                out[tid] = _Fit(
                    speed,
                    fit_sigma,
                    velocity,
                    float(changes[g]),
                    ts[g, ts.shape[1] - k :],
                    scatter,
                    bool(cut[g]),
                )
        return out

    def _estimate_from(
        self,
        tid: int,
        st: _TrackState,
        now: float,
        speed: float,
        fit_sigma: float,
        velocity: np.ndarray,
        size_change: float,
        window_t: np.ndarray,
    ) -> SpeedEstimate | None:
        """The estimate of a fitted track, or None: when it is implausibly fast (counted), or the
        track is younger than ``min_track_age_s`` and its fit not yet precise enough
        (``early_max_sigma_kmh``). ``size_change``: :func:`size_changes` over the speed window;
        ``window_t``: its times."""
        if not self._of_age(st, now) and not float(kmh(fit_sigma)) <= (self.cfg.early_max_sigma_kmh or 0.0):
            return None
        speed_kmh = float(kmh(speed))
        if speed_kmh > self.cfg.max_plausible_kmh:
            self.n_implausible += 1
            logger.debug(
                "track %d: %.1f km/h above the plausible %.0f km/h; not reported",
                tid,
                speed_kmh,
                self.cfg.max_plausible_kmh,
            )
            return None
        st.velocity = velocity
        scale_frac = st.scale_frac if math.isfinite(st.scale_frac) else self.cfg.altitude_sigma_frac
        sigma = math.hypot(fit_sigma, scale_frac * speed)
        doubt = self._doubt(st, now, size_change, max(self.cfg.window_s, float(now - window_t[0])))
        st.trusted = not doubt
        earlier: tuple[tuple[float, float, float], ...] = ()
        if st.reported != st.segment:  # its segment's first estimate: the positions its window held before
            since = max(st.segment_t, float(window_t[0]))
            earlier = tuple(
                (t, xy[0], xy[1]) for t, xy in zip(st.t, st.xy, strict=True) if since <= t < st.t[-1]
            )
            st.reported = st.segment
        return SpeedEstimate(
            track_id=tid,
            speed_kmh=speed_kmh,
            sigma_kmh=float(kmh(sigma)),
            n_samples=len(window_t),
            window_s=float(window_t[-1] - window_t[0]),
            trusted=not doubt,
            doubt=doubt,
            position_m=st.xy[-1],
            position_t=st.t[-1],
            segment=st.segment,
            scale_sigma_frac=scale_frac,
            scale_source=self._scale_source,
            scale_per_deg=st.scale_per_deg,
            point_sigma_frac=st.point_frac,
            earlier=earlier,
        )

    def _doubt(self, st: _TrackState, now: float, size_change: float, window_s: float) -> str:
        """Why the track's speed cannot be trusted now ("" when it can). ``size_change``: the
        track's :func:`size_changes` over its speed window, ``window_s`` long."""
        if st.jump_t is not None and now - st.jump_t <= window_s + 1e-9:
            return "box jumped (another vehicle, or part of one)"
        if size_change > self.cfg.max_box_size_change:
            return f"box size changed by {size_change:.0%} (partial or merged box)"
        return ""

    def update(
        self,
        timestamp_s: float,
        track_ids: np.ndarray,
        displacements_m: np.ndarray,
        sizes: np.ndarray | None = None,
        scale_sigma_frac: np.ndarray | ScaleTerms | None = None,
        scale_source: str = "",
        row_times_s: np.ndarray | None = None,
    ) -> dict[int, SpeedEstimate]:
        """Add one frame's displacements; return the estimates of the tracks updated now.

        ``sizes``: each track's box size now for the trust check (the pipeline gives sqrt of the
        box area times the local GSD: metres, so that perspective does not count as a change).
        ``scale_sigma_frac``: each track's relative sigma of the scale now (pipelines.height; None:
        the configuration's ``altitude_sigma_frac``; a ``ScaleTerms``: with what it is made of, which
        a ticket's base needs), and ``scale_source`` where the scale came from: both go into the
        estimates. ``row_times_s``: when each track's position was seen, relative
        to ``timestamp_s`` (its image row's time with a rolling shutter: pipelines.lens); None: at
        ``timestamp_s``.
        """
        ids = np.asarray(track_ids).reshape(-1)
        disp = np.asarray(displacements_m, dtype=np.float64).reshape(-1, 2)
        if len(ids) != len(disp):
            raise ValueError(f"{len(ids)} track ids but {len(disp)} displacements")
        sizes = np.full(len(ids), np.nan) if sizes is None else np.asarray(sizes, np.float64).reshape(-1)
        if len(sizes) != len(ids):
            raise ValueError(f"{len(ids)} track ids but {len(sizes)} box sizes")
        terms = (
            scale_sigma_frac
            if isinstance(scale_sigma_frac, ScaleTerms)
            else ScaleTerms(
                np.full(len(ids), np.nan) if scale_sigma_frac is None else np.asarray(scale_sigma_frac),
                np.full(len(ids), np.nan),
                np.full(len(ids), np.nan),
            )
        )
        fracs, per_deg, point = (
            np.asarray(a, np.float64).reshape(-1) for a in (terms.frac, terms.per_deg, terms.point)
        )
        if not len(fracs) == len(per_deg) == len(point) == len(ids):
            raise ValueError(f"{len(ids)} track ids but {len(fracs)} scale sigmas")
        self._scale_source = scale_source
        offsets = (
            np.zeros(len(ids)) if row_times_s is None else np.asarray(row_times_s, np.float64).reshape(-1)
        )
        if len(offsets) != len(ids):
            raise ValueError(f"{len(ids)} track ids but {len(offsets)} row times")
        nows = float(timestamp_s) + offsets
        tids = [int(i) for i in ids]
        rows = zip(tids, disp, sizes, nows, zip(fracs, per_deg, point, strict=True), strict=True)
        if len(set(tids)) < len(tids):  # a track twice in one update: each step sees the one before
            out: dict[int, SpeedEstimate] = {}
            for tid, d, size, now, scale_terms in rows:
                st = self._step(tid, float(now), d, float(size))
                st.scale_frac, st.scale_per_deg, st.point_frac = (float(v) for v in scale_terms)
                self._trim(st, float(now))
                if (est := self._estimate(tid, st)) is not None:
                    out[tid] = est
            return out
        tracks = []
        for tid, d, size, now, scale_terms in rows:
            st = self._step(tid, float(now), d, float(size))
            st.scale_frac, st.scale_per_deg, st.point_frac = (float(v) for v in scale_terms)
            self._trim(st, float(now))
            tracks.append((tid, st))
        estimates = self._estimates(tracks)
        return {tid: estimates[tid] for tid in tids if tid in estimates}  # in the order given
