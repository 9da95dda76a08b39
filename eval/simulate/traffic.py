"""Traffic of a flight: vehicles placed on lanes with known speeds and accelerations, never
colliding, each visible for a while; and the ground-truth speeding events they make."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eval.simulate.camera import CameraPath
from eval.simulate.geometry import Polyline, Road
from eval.simulate.spec import (
    NOMINAL_HEIGHT_M,
    SIM_CLASS_IDS,
    SIZE_CLIP_SIGMA,
    VEHICLE_BODIES,
    VEHICLE_DIMS_M,
    FlightSpec,
)
from eval.simulate.sprites import Sprite

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, eq=False)
class Vehicle:
    """One vehicle of a flight. ``class_name`` is its label (ground truth, MOT files); ``body`` its
    true body type (``VEHICLE_BODIES``: an SUV or a van may be labelled car; empty: the label) and
    ``height_m`` its height (0: drawn flat, as a sprite on the ground)."""

    id: int
    class_name: str
    length_m: float
    width_m: float
    road: int
    lane: int
    s0: float
    v0_mps: float
    accel_mps2: float
    v_lo_mps: float
    v_hi_mps: float
    speeding: bool
    sprite: Sprite
    positions: np.ndarray = field(repr=False)  # (n_frames, 2) world metres
    headings: np.ndarray = field(repr=False)  # (n_frames, 2) unit forward vectors
    speeds_mps: np.ndarray = field(repr=False)  # (n_frames,)
    body: str = ""
    height_m: float = 0.0

    def __post_init__(self) -> None:
        if not self.body:
            object.__setattr__(self, "body", self.class_name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "class_name": self.class_name,
            "class_id": SIM_CLASS_IDS[self.class_name],
            "length_m": round(self.length_m, 3),
            "width_m": round(self.width_m, 3),
            "road": self.road,
            "lane": self.lane,
            "initial_speed_kmh": round(self.v0_mps * 3.6, 3),
            "accel_mps2": round(self.accel_mps2, 4),
            "speed_band_kmh": [round(self.v_lo_mps * 3.6, 2), round(self.v_hi_mps * 3.6, 2)],
            "speeding": self.speeding,
            "real_sprite": self.sprite.real,
            "body": self.body,
            "height_m": round(self.height_m, 3),
        }


def kinematics(
    v0: float, accel: float, t: np.ndarray, v_lo: float, v_hi: float
) -> tuple[np.ndarray, np.ndarray]:
    """Distance and speed at times ``t`` for constant acceleration, speed clamped to [v_lo, v_hi]."""
    t = np.asarray(t, dtype=np.float64)
    if accel == 0 or (accel > 0 and v0 >= v_hi) or (accel < 0 and v0 <= v_lo):
        v_end = v0
        return v_end * t, np.full_like(t, v_end)
    v_sat = v_hi if accel > 0 else v_lo
    t_sat = (v_sat - v0) / accel
    s_sat = v0 * t_sat + 0.5 * accel * t_sat**2
    before = t < t_sat
    s = np.where(before, v0 * t + 0.5 * accel * t**2, s_sat + v_sat * (t - t_sat))
    v = np.where(before, v0 + accel * t, v_sat)
    return s, v


def speed_band(spec: FlightSpec, u: float) -> str:
    """The speed band of a vehicle drawn ``u`` (uniform in [0, 1)): ``"fast"`` below
    ``fast_fraction``, then ``"speeding"`` for ``speeding_fraction``, else ``"normal"`` (the spec's
    ``<band>_speed_kmh``). One draw whatever the fractions: a spec without fast vehicles draws as
    it always did."""
    if u < spec.fast_fraction:
        return "fast"
    if u < spec.fast_fraction + spec.speeding_fraction:
        return "speeding"
    return "normal"


class _VehicleSampler:
    """Draws random vehicles for a flight; every draw of one vehicle comes in a fixed order."""

    def __init__(
        self,
        spec: FlightSpec,
        roads: Sequence[Road],
        camera: CameraPath,
        procedural: dict[str, list[Sprite]],
        real: Sequence[Sprite],
    ):
        self.spec = spec
        self.camera = camera
        self.lanes: list[tuple[int, int, Polyline]] = [
            (ri, li, lane) for ri, road in enumerate(roads) for li, lane in enumerate(road.lanes())
        ]
        mix = spec.class_mix
        real_classes = {sp.class_name for sp in real}
        if real_classes and spec.real_sprite_fraction >= 1.0:  # real crops only: no procedural vehicle
            dropped = [c for c, _ in mix if c not in real_classes]
            mix = tuple((c, w) for c, w in mix if c in real_classes)
            if dropped:
                log.info("real sprites only: no crops of %s, left out of the class mix", ", ".join(dropped))
        self.classes = [c for c, _ in mix]
        weights = np.array([w for _, w in mix], float)
        n = len(self.classes)
        self.weights = weights / weights.sum() if weights.sum() > 0 else np.ones(n) / n
        self.procedural = procedural
        self.real_by_class: dict[str, list[Sprite]] = {}
        for sp in real:
            self.real_by_class.setdefault(sp.class_name, []).append(sp)

    def _sprite(self, cls: str, rng: np.random.Generator) -> Sprite:
        real = self.real_by_class.get(cls)
        if real and rng.random() < self.spec.real_sprite_fraction:
            return real[int(rng.integers(len(real)))]
        return self.procedural[cls][int(rng.integers(len(self.procedural[cls])))]

    def draw(self, vid: int, rng: np.random.Generator) -> Vehicle | None:
        """A vehicle that is in view at some random instant; None when it would drive off its lane."""
        spec, times = self.spec, self.camera.times
        cls = str(self.classes[rng.choice(len(self.classes), p=self.weights)])
        band = speed_band(spec, float(rng.random()))
        speeding = band != "normal"
        lo_kmh, hi_kmh = getattr(spec, f"{band}_speed_kmh")
        if cls in ("truck", "bus"):
            hi_kmh = max(lo_kmh, hi_kmh - 10.0)
        v_lo, v_hi = lo_kmh / 3.6, hi_kmh / 3.6
        v0 = float(rng.uniform(v_lo, v_hi))
        accel = float(np.clip(rng.normal(0.0, spec.accel_sigma_mps2), -2.5, 2.5))
        ri, li, lane = self.lanes[int(rng.integers(len(self.lanes)))]
        body, label = self._body(cls, rng)
        sprite = self._sprite("car" if body == "suv" else body, rng)
        length, width, height = self._size(body, sprite, rng)
        dist, speeds = kinematics(v0, accel, times, v_lo, v_hi)
        # start so that the vehicle is in the visible area at some random instant
        k_vis = int(rng.integers(len(times)))
        nearest = np.argmin(np.linalg.norm(lane.points - self.camera.frame_centre(k_vis), axis=1))
        s0 = float(lane.cum[nearest]) - dist[k_vis] + float(rng.uniform(-40.0, 40.0))
        s = s0 + dist
        if s.min() < 0 or s.max() > lane.length:
            return None
        pos, tang = lane.at(s)
        if self.camera.surface is not None:  # driven along a graded road: the true speed is along it
            speeds = speeds * self.camera.surface.slope_factor(tang)
        return Vehicle(
            id=vid,
            class_name=label,
            length_m=length,
            width_m=width,
            road=ri,
            lane=li,
            s0=s0,
            v0_mps=v0,
            accel_mps2=accel,
            v_lo_mps=v_lo,
            v_hi_mps=v_hi,
            speeding=speeding,
            sprite=sprite,
            positions=pos,
            headings=tang,
            speeds_mps=speeds,
            body=body,
            height_m=height,
        )

    def _body(self, cls: str, rng: np.random.Generator) -> tuple[str, str]:
        """The body type and the label of a vehicle of class ``cls``: with realistic sizes a share
        ``suv_share`` of the cars are SUVs, and a share ``van_as_car_share`` of the vans is labelled
        car. Draws nothing when neither can happen (a flight with the defaults draws as it did)."""
        spec = self.spec
        if spec.vehicle_sizes == "nominal" and spec.van_as_car_share == 0:
            return cls, cls
        u = float(rng.random())
        if cls == "car" and spec.vehicle_sizes == "realistic" and u < spec.suv_share:
            return "suv", VEHICLE_BODIES["suv"].label
        if cls == "van" and u < spec.van_as_car_share:
            return "van", "car"
        return cls, cls

    def _size(self, body: str, sprite: Sprite, rng: np.random.Generator) -> tuple[float, float, float]:
        """Length, width and height (m) of a vehicle of body type ``body``. Realistic: each normal
        (``VEHICLE_BODIES``), clipped to ``SIZE_CLIP_SIGMA``. Nominal: the class's length +-8 %, its
        width +-5 % (a real crop's: from its aspect), the class's nominal height only when the flight
        draws solids (``vehicle_height``; else 0)."""
        spec = self.spec
        if spec.vehicle_sizes == "realistic":
            dims = VEHICLE_BODIES[body]
            length, width, height = (
                float(np.clip(rng.normal(m, s), m - SIZE_CLIP_SIGMA * s, m + SIZE_CLIP_SIGMA * s))
                for m, s in (dims.length_m, dims.width_m, dims.height_m)
            )
            return length, width, height
        length = VEHICLE_DIMS_M[body][0] * float(rng.uniform(0.92, 1.08))
        if sprite.real:
            width = float(np.clip(length * sprite.aspect, 0.33 * length, 0.6 * length))
        else:
            width = VEHICLE_DIMS_M[body][1] * float(rng.uniform(0.95, 1.05))
        return length, width, NOMINAL_HEIGHT_M[body] if spec.vehicle_height else 0.0


def place_traffic(
    spec: FlightSpec,
    roads: Sequence[Road],
    camera: CameraPath,
    rng: np.random.Generator,
    procedural: dict[str, list[Sprite]],
    real: Sequence[Sprite],
) -> list[Vehicle]:
    """Up to ``spec.n_vehicles`` vehicles, each visible for at least 1.2 s (or 3 frames), none
    colliding; ids 1, 2, ... in the order they were accepted."""
    sampler = _VehicleSampler(spec, roads, camera, procedural, real)
    n_times = len(camera.times)
    min_visible = min(n_times, max(3, int(1.2 * spec.fps)))
    accepted: list[Vehicle] = []
    tries = 0
    while len(accepted) < spec.n_vehicles and tries < 60 * max(1, spec.n_vehicles):
        tries += 1
        v = sampler.draw(len(accepted) + 1, rng)
        if v is None or camera.visible_frames(v.positions).sum() < min_visible:
            continue
        if _no_conflict(v, accepted):
            accepted.append(v)
    if len(accepted) < spec.n_vehicles:
        log.warning("placed %d of %d vehicles (no room without collisions)", len(accepted), spec.n_vehicles)
    return accepted


def _no_conflict(v: Vehicle, others: list[Vehicle]) -> bool:
    """Same lane: keep a following gap; other roads: never overlap (at crossings)."""
    for o in others:
        if o.road == v.road and o.lane != v.lane:
            continue
        margin = 2.5 if o.road == v.road else 1.0
        d = np.linalg.norm(v.positions - o.positions, axis=1)
        if (d < (v.length_m + o.length_m) / 2 + margin).any():
            return False
    return True


def speeding_events(
    spec: FlightSpec, vehicles: Sequence[Vehicle], times: np.ndarray, visible: dict[int, np.ndarray]
) -> list[dict[str, Any]]:
    """Ground-truth violations: per vehicle, its longest run of frames above the speed limit while
    visible (``visible[id]``, one flag per frame), when it lasts at least ``min_violation_s``."""
    limit = spec.speed_limit_kmh
    out = []
    for v in vehicles:
        over = (v.speeds_mps * 3.6 > limit) & visible[v.id]
        best = None
        for a, b in _runs(over):
            dur = times[b] - times[a]
            if dur + 1e-9 >= spec.min_violation_s and (best is None or dur > best[2]):
                best = (a, b, dur)
        if best is None:
            continue
        a, b, _ = best
        sp = v.speeds_mps[a : b + 1] * 3.6
        out.append(
            {
                "id": v.id,
                "class_name": v.class_name,
                "speed_limit_kmh": limit,
                "start_frame": a + 1,
                "end_frame": b + 1,
                "start_time_s": round(float(times[a]), 4),
                "end_time_s": round(float(times[b]), 4),
                "duration_s": round(float(times[b] - times[a]), 4),
                "peak_speed_kmh": round(float(sp.max()), 3),
                "mean_speed_kmh": round(float(sp.mean()), 3),
            }
        )
    return out


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Inclusive (start, end) index pairs of the True runs of a boolean array."""
    out = []
    start = None
    for i, m in enumerate(mask):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((start, i - 1))
            start = None
    if start is not None:
        out.append((start, len(mask) - 1))
    return out
