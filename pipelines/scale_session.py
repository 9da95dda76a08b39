"""A session's scale check, updated frame by frame: :class:`ScaleCheck` (the measurement is
:mod:`pipelines.scale_check`).

Each frame, the tracked vehicles labelled as cars that the detector boxed on this frame (not carried
by optical flow), whole in the image, large enough and moving (their heading is their ground
velocity's) are compared with the prior's car. A track counts once it has ``min_observations``
frames (its median), and the session's ratio is the biweight mean over tracks. Its status:

* ``unverified``, with the reason: no usable view, too few cars yet, the vehicles stand still (a jam,
  a car park), only other classes, sizes scattered far beyond a car fleet's (false or partial boxes),
  or not yet determined to the tolerance;
* ``ok``: the ratio is within ``tolerance`` of 1, ``z`` standard errors included;
* ``suspect``: it is off by more than ``tolerance`` beyond ``z`` standard errors.

The check starts again when the scale's source, the height reference, the camera or its zoom
changes: it checks the scale in use, not a mixture.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import supervision as sv

from pipelines.config import ScaleCheckConfig
from pipelines.displacement import touches_border
from pipelines.geometry import GroundProjector
from pipelines.height import reference_key
from pipelines.scale_check import (
    CAR_PRIORS,
    OK,
    SUSPECT,
    UNVERIFIED,
    ScaleCheckResult,
    VehiclePrior,
    observe,
    robust_ratio,
)
from pipelines.types import EXTRAPOLATED_KEY, PROPAGATED_KEY, Frame, ScaleInfo

MAX_OBSERVATIONS = 90  # per track: its median is settled long before
# a track whose box sizes scatter (robust sd of its log ratios) beyond this many times the pixel
# noise, and beyond STEADY_FLOOR, is not a whole vehicle's: a false or partial box
STEADY_SIGMAS, STEADY_FLOOR = 3.0, 0.08


@dataclass
class _Track:
    log_ratios: list[float] = field(default_factory=list)
    var: list[float] = field(default_factory=list)
    var_prior: list[float] = field(default_factory=list)
    labels: Counter = field(default_factory=Counter)

    def value(self) -> tuple[float, float, bool]:
        """(median log ratio, its sd, whether its boxes hold their size): the vehicle's own size part
        of the sd does not average out over frames, the pixel noise does. A vehicle's box keeps its
        size from frame to frame within the pixel noise; a false or partial box does not."""
        x = np.asarray(self.log_ratios)
        var, var_prior = np.asarray(self.var), np.asarray(self.var_prior)
        prior = float(np.median(var_prior))
        noise = float(np.median(np.clip(var - var_prior, 0.0, None)))
        mid = float(np.median(x))
        within = 1.4826 * float(np.median(np.abs(x - mid)))
        steady = within <= max(STEADY_SIGMAS * math.sqrt(noise), STEADY_FLOOR)
        return mid, math.sqrt(prior + noise / len(x) * math.pi / 2), steady  # a median's efficiency


def prior_of(cfg: ScaleCheckConfig) -> VehiclePrior:
    """The configured car prior: ``prior`` when given, else the region's (pipelines.scale_check)."""
    if cfg.prior is not None:
        return VehiclePrior(**cfg.prior.model_dump())
    return CAR_PRIORS[cfg.region]


def session_key(frame: Frame, scale: ScaleInfo | None) -> tuple:
    """What the check must start again on: the scale's source and reference, the camera, its zoom."""
    tel = frame.telemetry
    return (
        None if scale is None else scale.source,
        None if scale is None else reference_key(scale.reference),
        None if tel is None else tel.camera,
        None if tel is None or tel.focal_length_mm is None else round(tel.focal_length_mm, 2),
        None if tel is None else round(tel.digital_zoom, 3),
    )


class ScaleCheck:
    """The scale check of one stream (offline or live): :meth:`update` every frame, :attr:`result`."""

    def __init__(self, cfg: ScaleCheckConfig) -> None:
        self.cfg = cfg
        self.prior = prior_of(cfg)
        self._key: tuple | None = None
        self.resets = 0  # times the check started again (session_key changed)
        self.reset()

    def reset(self, why: str = "") -> None:
        self._tracks: dict[int, _Track] = {}
        self._skipped: Counter = Counter()  # why boxes were not compared, over the session
        self._dirty = False
        self._restarted = why
        self.resets += 1 if why else 0
        self._result = ScaleCheckResult(UNVERIFIED, reason=why or "no vehicles yet")

    @property
    def result(self) -> ScaleCheckResult:
        if self._dirty:
            self._result = self._evaluate()
            self._dirty = False
        return self._result

    def no_view(self, reason: str) -> None:
        """A frame without a ground projection: until the check has tracks, that is the reason."""
        if not self._tracks:
            self._result = ScaleCheckResult(UNVERIFIED, reason=f"no usable view: {reason}")

    def update(
        self,
        frame: Frame,
        proj: GroundProjector,
        scale: ScaleInfo | None,
        tracked: sv.Detections,
        ids: np.ndarray,
        velocity: Callable[[int], np.ndarray | None],
    ) -> None:
        """Compare this frame's usable boxes with the prior (``velocity(track id)``: its ground
        velocity in m/s, None while unknown)."""
        if not self.cfg.enabled:
            return
        key = session_key(frame, scale)
        if self._key is not None and key != self._key:
            self.reset(why=_change(self._key, key))
        self._key = key
        use = self._usable(frame, tracked, ids, velocity)
        if not use:
            self._dirty |= not self._tracks  # the reason nothing is measured may have changed
            return
        rows = np.array([i for i, _ in use])
        headings = np.array([h for _, h in use])
        obs = observe(
            proj,
            tracked.xyxy[rows],
            headings,
            self.prior,
            margin_px=self.cfg.box_margin_px,
            sigma_px=self.cfg.box_sigma_px,
        )
        labels = tracked.data.get("class_name")
        for j, i in enumerate(rows):
            if not np.isfinite(obs.log_ratio[j]):
                continue
            tr = self._tracks.setdefault(int(ids[i]), _Track())
            tr.labels[str(labels[i]) if labels is not None else "vehicle"] += 1
            if len(tr.log_ratios) < MAX_OBSERVATIONS:
                tr.log_ratios.append(float(obs.log_ratio[j]))
                tr.var.append(float(obs.var[j]))
                tr.var_prior.append(float(obs.var_prior[j]))
                self._dirty = True

    def _usable(
        self,
        frame: Frame,
        tracked: sv.Detections,
        ids: np.ndarray,
        velocity: Callable[[int], np.ndarray | None],
    ) -> list[tuple[int, np.ndarray]]:
        """(row, unit ground heading) of the boxes to compare; the others counted by why."""
        cfg, n = self.cfg, len(tracked)
        if not n:
            return []
        xyxy = tracked.xyxy
        labels = tracked.data.get("class_name")
        carried = np.zeros(n, bool)
        for key in (PROPAGATED_KEY, EXTRAPOLATED_KEY):
            if key in tracked.data:
                carried |= np.asarray(tracked.data[key], dtype=bool)
        border = touches_border(xyxy, frame.width, frame.height)
        small = np.minimum(xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]) < cfg.min_box_px
        out = []
        for i in range(n):
            label = str(labels[i]) if labels is not None else "vehicle"
            why = (
                "carried"
                if carried[i]
                else "other class"
                if label not in cfg.classes
                else "cut by the border"
                if border[i]
                else "too small"
                if small[i]
                else ""
            )
            v = None if why else velocity(int(ids[i]))
            if not why and (v is None or not np.all(np.isfinite(v))):
                why = "no heading yet"
            elif not why and float(np.hypot(*v)) * 3.6 < cfg.min_speed_kmh:
                why = "standing"
            if why:
                self._skipped[why] += 1
                continue
            out.append((i, np.asarray(v, float) / float(np.hypot(*v))))
        return out

    def _evaluate(self) -> ScaleCheckResult:
        cfg = self.cfg
        done = [
            t.value()
            for t in self._tracks.values()
            if len(t.log_ratios) >= cfg.min_observations and t.labels.most_common(1)[0][0] in cfg.classes
        ]
        steady = np.array([(m, sd) for m, sd, ok in done if ok]).reshape(-1, 2)
        if len(done) >= cfg.min_vehicles and len(steady) < len(done) / 2:
            return ScaleCheckResult(
                UNVERIFIED,
                n=len(steady),
                reason=f"{len(done) - len(steady)} of {len(done)} vehicles' boxes change size from frame to "
                "frame: false or partial boxes, no ruler",
            )
        if len(steady) < cfg.min_vehicles:
            return ScaleCheckResult(UNVERIFIED, n=len(steady), reason=self._too_few(len(steady)))
        est = robust_ratio(steady[:, 0], steady[:, 1])
        if est is None or not math.isfinite(est.se):
            return ScaleCheckResult(UNVERIFIED, n=len(steady), reason="the vehicles' sizes disagree")
        ratio = math.exp(est.mu)
        sigma = ratio * est.se
        base = ScaleCheckResult(UNVERIFIED, ratio, sigma, est.n)
        if est.spread > cfg.max_spread:
            return _with(
                base,
                UNVERIFIED,
                f"the vehicles' sizes scatter {est.spread:.1f} times more than cars' do: too many false, "
                "partial or mislabelled boxes to judge the scale",
            )
        off, tol, z = abs(est.mu), math.log1p(cfg.tolerance), cfg.z
        if off > tol + z * est.se:
            way = "large" if est.mu > 0 else "small"
            return _with(
                base,
                SUSPECT,
                f"the cars measure {ratio:.2f} times their usual size through the telemetry: its scale "
                f"looks {abs(ratio - 1) * 100:.0f} % too {way} (every speed as much too "
                f"{'high' if est.mu > 0 else 'low'})",
            )
        if off + z * est.se <= tol:
            return _with(base, OK, "")
        return _with(base, UNVERIFIED, f"not yet determined to {cfg.tolerance:.0%}")

    def _too_few(self, n: int) -> str:
        skipped = self._skipped
        if not self._tracks and skipped:
            top = skipped.most_common(1)[0][0]
            return {
                "standing": "the vehicles are standing (a jam or a car park): no heading to measure along",
                "other class": f"no {' or '.join(self.cfg.classes)} yet (only other classes)",
                "too small": f"the vehicles are too small in the image (under {self.cfg.min_box_px:g} px)",
                "cut by the border": "the vehicles are cut by the image border",
            }.get(top, "no vehicle measured yet")
        text = f"too few vehicles yet ({n} of {self.cfg.min_vehicles})"
        if skipped:
            top, count = skipped.most_common(1)[0]
            text += f"; boxes left out most: {top} ({count})"
        return f"{self._restarted}; {text}" if self._restarted else text

    def summary(self) -> dict[str, object]:
        """The check for summary.json and a live session's info: its result, the prior, what was left out."""
        out = self.result.to_dict()
        out["prior"] = {
            "length_m": self.prior.length_m,
            "width_m": self.prior.width_m,
            "height_m": self.prior.height_m,
        }
        out["tolerance"] = self.cfg.tolerance
        out["skipped"] = dict(self._skipped)
        out["restarts"] = self.resets
        return out


def _with(base: ScaleCheckResult, status: str, reason: str) -> ScaleCheckResult:
    return ScaleCheckResult(status, base.ratio, base.sigma, base.n, reason)


def _change(old: tuple, new: tuple) -> str:
    names = ("scale source", "height reference", "camera", "focal length", "zoom")
    what = [n for n, a, b in zip(names, old, new, strict=True) if a != b]
    return f"restarted: the {', '.join(what)} changed"


__all__ = ["ScaleCheck", "prior_of", "session_key"]
