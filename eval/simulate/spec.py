"""What defines a simulated flight: the vehicle class tables and :class:`FlightSpec` (validated by
pydantic, read from and written to ``flight.yaml``)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pipelines.camera import get_profile
from pipelines.config import read_yaml_mapping
from pipelines.errors import AirPatrolError
from pipelines.lens import LensError, LensModel

# Canonical class names and the MOT class column used for simulated flights.
SIM_CLASS_IDS: dict[str, int] = {"car": 1, "van": 2, "truck": 3, "bus": 4, "motorcycle": 5}
SIM_CLASS_NAMES: dict[int, str] = {v: k for k, v in SIM_CLASS_IDS.items()}

# Nominal (length, width) in metres (``vehicle_sizes: nominal``); each vehicle varies by a few percent.
VEHICLE_DIMS_M: dict[str, tuple[float, float]] = {
    "car": (4.5, 1.8),
    "van": (5.3, 2.0),
    "truck": (8.5, 2.5),
    "bus": (12.0, 2.55),
    "motorcycle": (2.1, 0.8),
}

# Height (m) of each class drawn as a solid (``vehicle_height``) with nominal sizes.
NOMINAL_HEIGHT_M: dict[str, float] = {"car": 1.5, "van": 2.2, "truck": 3.3, "bus": 3.1, "motorcycle": 1.2}


@dataclass(frozen=True, slots=True)
class BodySize:
    """The sizes of one body type (``vehicle_sizes: realistic``): each of length, width and height
    normal, (mean, sigma) in metres, clipped to ``SIZE_CLIP_SIGMA`` sigma; ``label``: the class the
    ground truth (and the detector) gives it."""

    label: str
    length_m: tuple[float, float]
    width_m: tuple[float, float]
    height_m: tuple[float, float]


SIZE_CLIP_SIGMA = 2.5
# Body types of ``vehicle_sizes: realistic``. Approximate European / US fleet figures (new-car sales
# weighted means and their spread), as found in e.g. the ICCT "European Vehicle Market Statistics"
# pocketbooks and manufacturers' data sheets; rounded, meant for a realistic spread of sizes, not
# for any one market. Width: the body without mirrors. SUVs are labelled car; a share of vans too
# (``FlightSpec.van_as_car_share``), as a detector and a labeller would call a small van.
VEHICLE_BODIES: dict[str, BodySize] = {
    "car": BodySize("car", (4.40, 0.40), (1.80, 0.07), (1.48, 0.07)),  # sedan / hatchback
    "suv": BodySize("car", (4.60, 0.30), (1.88, 0.06), (1.70, 0.08)),
    "van": BodySize("van", (5.20, 0.45), (2.00, 0.06), (2.30, 0.25)),
    "truck": BodySize("truck", (8.5, 1.5), (2.50, 0.05), (3.3, 0.4)),
    "bus": BodySize("bus", (12.0, 0.6), (2.55, 0.02), (3.1, 0.15)),
    "motorcycle": BodySize("motorcycle", (2.1, 0.15), (0.8, 0.1), (1.2, 0.1)),
}

Layout = Literal["straight", "curved", "intersection"]
LAYOUTS: tuple[str, ...] = get_args(Layout)


class SimulationError(AirPatrolError, ValueError):
    """A flight spec that cannot be simulated; the message says what to change."""


class FlightSpec(BaseModel):
    """Everything that defines one simulated flight. Units: metres, seconds, degrees, km/h.

    Frozen and validated: ``FlightSpec(...)``, :meth:`from_dict`, :meth:`from_yaml` and
    :meth:`replace` raise :class:`SimulationError` naming every field at fault (a user error: one
    line, no traceback). ``model_copy(update=...)`` does not validate, so give it only values known
    to be valid.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = 0
    duration_s: float = Field(10.0, gt=0)
    fps: float = Field(30.0, ge=1, le=240)
    width: int = Field(1280, ge=64)  # even (4:2:0 video)
    height: int = Field(720, ge=64)  # even (4:2:0 video)
    camera: str = "dji_mavic_3"
    focal_length_mm: float | None = None  # real focal length; None -> the profile's
    altitude_m: float = Field(100.0, gt=1)
    climb_rate_mps: float = 0.0
    pitch_deg: float = Field(-90.0, ge=-90, le=-20)  # DJI: -90 nadir; the camera looks down
    drift_mps: tuple[float, float] = (1.0, 0.5)  # drone velocity (east, north)
    yaw_deg: float = 0.0  # initial camera heading, compass (0 north, clockwise)
    yaw_rate_dps: float = 1.0
    layout: Layout = "straight"
    road_heading_deg: float | None = None  # compass heading of the main road; None -> random by seed
    # the ground's grade (% rise per horizontal run; issue 39): a plane through the road's point at the
    # middle frame's image centre, where it lies at the take-off level (the altitude is the truth
    # there), rising along ``grade_heading_deg`` (compass; None: the main road's heading). Vehicles
    # drive on it and their true speed is along it. 0 (the default) renders a flight as it always was
    road_grade_pct: float = Field(0.0, ge=-15, le=15)
    grade_heading_deg: float | None = None
    lanes_per_direction: int = Field(2, ge=1, le=4)
    lane_width_m: float = 3.5
    n_vehicles: int = Field(14, ge=0)
    class_mix: tuple[tuple[str, float], ...] = (  # YAML: a mapping class -> weight
        ("car", 0.72),
        ("van", 0.12),
        ("truck", 0.07),
        ("bus", 0.05),
        ("motorcycle", 0.04),
    )
    speed_limit_kmh: float = 50.0
    normal_speed_kmh: tuple[float, float] = (25.0, 45.0)
    speeding_speed_kmh: tuple[float, float] = (58.0, 85.0)
    speeding_fraction: float = Field(0.3, ge=0, le=1)
    # a third band, of clear speeders (near-limit traffic: normal just under the limit, speeding just
    # over it, these well over it); 0 (the default) draws none and leaves a flight as it was
    fast_speed_kmh: tuple[float, float] = (58.0, 75.0)
    fast_fraction: float = Field(0.0, ge=0, le=1)
    accel_sigma_mps2: float = 0.5
    min_violation_s: float = 0.5
    min_visibility: float = 0.5  # for a frame to count towards a ground-truth violation
    sprites_dir: str | None = None  # image + YOLO txt pairs; crops are cut at run time, never stored
    real_sprite_fraction: float = Field(0.6, ge=0, le=1)  # share drawn with real crops (sprites_dir)
    # vehicle sizes: "nominal" (the class's VEHICLE_DIMS_M, a few percent either way) or "realistic"
    # (each body type's normal spread, VEHICLE_BODIES); the defaults draw a flight as it always was
    vehicle_sizes: Literal["nominal", "realistic"] = "nominal"
    suv_share: float = Field(0.3, ge=0, le=1)  # of the "car" class, drawn as SUVs (realistic only)
    van_as_car_share: float = Field(0.0, ge=0, le=1)  # of the vans, labelled "car" (0.3 for benchmarks)
    # vehicles as solids (wheels, body, cabin with the sprite on its roof) seen in perspective, their
    # boxes bounding the whole solid; False: flat sprites on the ground
    vehicle_height: bool = False
    mask_every: int = Field(10, ge=0)  # write the road mask of every N-th frame (0: none)
    noise_sigma: float = 2.0  # sensor noise (grey levels)
    # the lens: OpenCV's (k1, k2, p1, p2, k3) in the frame's normalised coordinates with the flight's
    # intrinsics (pipelines.lens); None (the default) renders the ideal pinhole image as before
    lens_distortion: tuple[float, float, float, float, float] | None = None
    # rolling shutter: row v of frame k is read at t_k + (v / height - 1/2) * readout (0: global)
    readout_ms: float = Field(0.0, ge=0, le=100)
    crf: int = 20
    preset: str = "veryfast"
    latitude: float = 37.3889
    longitude: float = 126.6630
    ground_elevation_m: float = 12.0
    start_time: str = "2025-06-01T10:00:00"  # wall clock of the first frame (SRT date lines)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise SimulationError(_explain(exc)) from exc

    # ---- validators --------------------------------------------------------------------------------

    @field_validator("width", "height")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("must be even (H.264 4:2:0 video)")
        return value

    @field_validator("camera")
    @classmethod
    def _known_camera(cls, value: str) -> str:
        get_profile(value)  # its error names the known profiles
        return value

    @field_validator("normal_speed_kmh", "speeding_speed_kmh", "fast_speed_kmh")
    @classmethod
    def _speed_band(cls, value: tuple[float, float]) -> tuple[float, float]:
        lo, hi = value
        if not 0 < lo <= hi:
            raise ValueError("must be (low, high) with 0 < low <= high")
        return value

    @field_validator("lens_distortion")
    @classmethod
    def _lens_model(
        cls, value: tuple[float, float, float, float, float] | None
    ) -> tuple[float, float, float, float, float] | None:
        if value is not None:
            try:
                LensModel(*value)
            except LensError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("class_mix", mode="before")
    @classmethod
    def _mix_from_mapping(cls, value: Any) -> Any:
        return tuple(value.items()) if isinstance(value, Mapping) else value

    @field_validator("class_mix")
    @classmethod
    def _known_classes(cls, value: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
        for name, weight in value:
            if name not in VEHICLE_DIMS_M:
                raise ValueError(f"unknown class {name!r} (known: {', '.join(VEHICLE_DIMS_M)})")
            if weight < 0:
                raise ValueError(f"negative weight for {name!r}")
        return value

    @field_validator("sprites_dir", mode="before")
    @classmethod
    def _path_as_text(cls, value: Any) -> Any:
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @field_validator("start_time", mode="before")
    @classmethod
    def _iso_start(cls, value: Any) -> Any:
        if isinstance(value, dt.datetime):  # an unquoted YAML timestamp
            return value.isoformat()
        if isinstance(value, str):
            try:
                dt.datetime.fromisoformat(value)
            except ValueError:
                raise ValueError("must be an ISO date and time like 2025-06-01T10:00:00") from None
        return value

    @model_validator(mode="after")
    def _graded_pinhole(self) -> FlightSpec:
        if self.road_grade_pct and (self.lens_distortion is not None or self.readout_ms):
            raise ValueError(
                "road_grade_pct renders through the ideal pinhole only: drop lens_distortion and readout_ms "
                "(the lens and shutter renderer remaps pixels onto flat ground)"
            )
        return self

    @model_validator(mode="after")
    def _fractions(self) -> FlightSpec:
        if self.speeding_fraction + self.fast_fraction > 1.0 + 1e-9:
            raise ValueError(
                f"speeding_fraction + fast_fraction must be at most 1, got "
                f"{self.speeding_fraction:g} + {self.fast_fraction:g}"
            )
        return self

    # ---- derived values ----------------------------------------------------------------------------

    @property
    def n_frames(self) -> int:
        return max(1, int(round(self.duration_s * self.fps)))

    @property
    def fps_fraction(self) -> Fraction:
        return Fraction(self.fps).limit_denominator(1001)

    @property
    def start_datetime(self) -> dt.datetime:
        return dt.datetime.fromisoformat(self.start_time)

    # ---- copies and YAML ---------------------------------------------------------------------------

    def replace(self, **changes: Any) -> FlightSpec:
        """A validated copy with ``changes``; ``None`` values are skipped (unset command-line flags)."""
        return type(self)(**(dict(self) | {k: v for k, v in changes.items() if v is not None}))

    def to_dict(self) -> dict[str, Any]:
        """Plain YAML values: ``class_mix`` as a mapping, pairs as lists."""
        out = dict(self) | {"class_mix": {k: float(w) for k, w in self.class_mix}}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    @classmethod
    def from_dict(cls, data: Mapping[Any, Any]) -> FlightSpec:
        return cls(**{str(k): v for k, v in data.items()})

    @classmethod
    def from_yaml(cls, path: str | Path) -> FlightSpec:
        return cls.from_dict(read_yaml_mapping(path, "flight spec", SimulationError))


def _explain(exc: ValidationError) -> str:
    """One line naming each field at fault and what it must be."""
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"][:1])  # the field, not the tuple index inside it
        if err["type"] == "extra_forbidden":
            what = "unknown key (not a flight spec field)"
        else:
            what = err["msg"].removeprefix("Value error, ")
            if err["type"] != "value_error":
                what += f" (got {err['input']!r})"
        problems.append(f"{where}: {what}" if where else what)
    return "invalid flight spec: " + "; ".join(problems)
