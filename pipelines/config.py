"""Pipeline configuration (pydantic: config is an edge of the engine).

A site YAML file maps onto :class:`PipelineConfig`; command-line overrides are applied on top
with :func:`PipelineConfig.with_overrides`. ``build_pipeline(config)`` is the only consumer.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pipelines.config_camera import (  # noqa: F401 (re-exported)
    CameraConfig,
    HeightReferenceConfig,
    LensConfig,
    RangefinderConfig,
    TerrainConfig,
    _Section,
)
from pipelines.errors import AirPatrolError
from pipelines.vehicle_height import (
    MAX_POINT_HEIGHT_M,
    POINT_HEIGHT_M,
    POINT_HEIGHT_SIGMA_FRAC,
    POINT_SIZE_BOUNDS_M,
)

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

# the tolerance at a speed: a fixed km/h, a share of the speed, or the larger of both (OIML R 91)
ToleranceMode = Literal["kmh", "percent", "max"]
TicketRule = Literal["tolerance", "tolerance_and_sigma", "lower_bound"]

Point = tuple[float, float]

REPO_ROOT = Path(__file__).resolve().parent.parent


def shipped_weights_dir() -> Path:
    """Where the shipped models are: ``weights/`` of a checkout (or an editable install), else the
    installed package ``airpatrol_weights`` (a wheel: setup.py maps it onto ``weights/``)."""
    checkout = REPO_ROOT / "weights"
    if checkout.is_dir():
        return checkout
    try:
        import importlib.resources

        return Path(str(importlib.resources.files("airpatrol_weights")))
    except ModuleNotFoundError:
        return checkout  # none installed: the builder says what is missing where


DEFAULT_WEIGHTS_DIR = shipped_weights_dir()
DEFAULT_ROAD_INPUT_SIZE = (512, 288)
DEFAULT_ROAD_THRESHOLD = 0.5


class AutoSizeConfig(_Section):
    """``detector.imgsz: auto``: the input size from each frame's GSD (pipelines.motion.input_size)."""

    target_px: float = Field(30.0, gt=0)  # pixels a 4.5 m vehicle should span at the network input
    ladder: tuple[int, ...] = (640, 800, 960, 1120, 1280)  # the sizes it picks from (multiples of 32)
    fallback: int = Field(960, ge=32, le=4096)  # no GSD known (no telemetry, still images)
    probe_row: float = Field(1 / 3, ge=0.0, le=1.0)  # where the GSD is read: share of the height from the top
    hold_frames: int = Field(15, ge=1)  # frames a new size must be wanted before the switch
    # No GSD known: size from the cars the detector finds at the fallback size (every frame until
    # there are min_vehicles, then one frame each reprobe_s), the vehicle_quantile of their box
    # lengths standing for the far car (0.1: never a smaller size than the GSD's on the altitude-band
    # flights; 0.25 chose 640 on UAVDT M1303, HOTA 0.452 -> 0.400); off: the fallback size throughout.
    from_vehicles: bool = True
    vehicle_quantile: float = Field(0.1, gt=0.0, lt=1.0)
    min_vehicles: int = Field(10, ge=1)
    reprobe_s: float = Field(5.0, gt=0.0)
    vehicle_memory_s: float = Field(30.0, gt=0.0)  # probes older than this are forgotten

    @field_validator("ladder")
    @classmethod
    def _ladder(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if not v or any(s < 32 or s % 32 for s in v):
            raise ValueError("ladder needs sizes that are multiples of 32 (>= 32)")
        return tuple(sorted(set(v)))


class DetectorConfig(_Section):
    # Path to any format ultralytics loads (.pt, .onnx, OpenVINO dir, .engine). None -> the
    # default shipped under weights/ when it exists; the builder says clearly when nothing is there.
    weights: Path | None = None
    # Input size: "auto" picks it per frame from the GSD (see auto_size); a number fixes it
    # (rounded up to the model's stride, 32, by ultralytics).
    imgsz: Annotated[int, Field(ge=32, le=4096)] | Literal["auto"] = "auto"
    auto_size: AutoSizeConfig = AutoSizeConfig()
    conf: float = Field(0.25, ge=0.0, le=1.0)
    iou: float = Field(0.5, ge=0.0, le=1.0)
    # NMS across classes: one box per vehicle even when the model scores it as two classes (car and
    # van); per-class NMS made duplicate tracks and false violations (weights/airpatrol_vehicles_n.md)
    agnostic_nms: bool = True
    # Drop a box with this share of its area inside a box 1.5x larger or more that scores at least
    # as high: a part of that vehicle boxed again (the front of a bus, a truck's cab), which NMS
    # keeps and which becomes a second track (pipelines.motion.detector.contained_boxes). Off by
    # default: at 0.8 simulated flights' MOTA gained (demo +1.2, bands +1.3 points), VisDrone AP50
    # -0.2, and violations went the other way (docs/lab/2026-11-26-issue-9-detector-v4.md)
    drop_contained: float | None = Field(None, gt=0, le=1)
    # "auto": the first CUDA GPU torch sees (the .pt checkpoint, fp16), else the CPU (the int8
    # OpenVINO export) - pipelines.devices; or "cpu", "cuda", "cuda:0", "intel:cpu" (OpenVINO)
    device: str = "auto"
    half: bool | None = None  # fp16; None: on CUDA devices, not on the CPU
    # Class mapping: name of a built-in table ("coco", "visdrone", "uavdt", "aerial", "auair")
    # or an explicit {model_class_id: canonical_name} dict. Unmapped classes are dropped.
    classes: str | dict[int, str] = "auto"
    max_det: int = 300
    # CPU threads of an OpenVINO detector (None: OpenVINO's own choice, every core of the process).
    # Set it where several pipelines share the cores, e.g. batch workers (``--threads-per-task``).
    threads: int | None = Field(None, ge=1)


class KeyframeConfig(_Section):
    """Detection on keyframes, optical-flow propagation in between (pipelines.motion.keyframes)."""

    enabled: bool = False  # False: the detector runs on every frame
    interval: int = Field(3, ge=1)  # detect at least every N frames
    max_interval: int = Field(6, ge=1)  # ... stretched to this while frames wait (live server behind)
    min_gap: int = Field(2, ge=1)  # frames since the last detection before a trigger counts
    # detect when the flow failed for more than this share of the moving vehicles
    lost_share: float = Field(0.25, ge=0.0, le=1.0)
    ego_shift_px: float = Field(40.0, gt=0)  # detect when the camera moved more than this (px per frame)
    # the band along the border watched for vehicles entering (share of the shorter side); 0: off
    border_frac: float = Field(0.06, ge=0.0, le=0.5)
    # a changed blob of this share of the band's area counts as something entering
    entry_area_frac: float = Field(0.002, gt=0.0, le=1.0)
    # On a keyframe, run the detector on a thread of its own while ego-motion runs (its corners then
    # kept off the predicted boxes rather than the detections): the two overlap on two cores.
    overlap: bool = True

    @field_validator("max_interval")
    @classmethod
    def _max_interval(cls, v: int, info: Any) -> int:
        interval = info.data.get("interval", 1)
        if v < interval:
            raise ValueError(f"max_interval must be >= interval ({interval})")
        return v


class RoadConfig(_Section):
    enabled: bool = True
    # smp U-Net checkpoint / state dict; None -> the shipped model under weights/ when present,
    # else the mask is disabled (logged and in the run metadata).
    weights: Path | None = None
    # None (default): what the checkpoint says - its encoder, its training input size, its
    # recommended threshold - else resnet18 (guessed from the shapes), (512, 288), 0.5.
    encoder: str | None = None
    input_size: tuple[int, int] | None = None  # (width, height) fed to the network
    threshold: float | None = Field(None, ge=0.0, le=1.0)
    every_n_frames: int = Field(30, ge=1)
    # Re-segment early when accumulated camera motion since the last run exceeds this (px).
    motion_threshold_px: float = Field(80.0, gt=0)
    dilate_px: int = Field(9, ge=0)  # grow the mask so vehicles on its border survive
    polygon: list[Point] | None = None  # site polygon in image pixels
    polygon_mode: Literal["override", "union", "intersect"] = "union"
    # A detection is kept when this share of its box bottom area lies inside the mask.
    min_overlap: float = Field(0.3, ge=0.0, le=1.0)
    device: str = (
        "auto"  # "auto": CUDA where torch sees a GPU, else the CPU (pipelines.devices); "cpu", "cuda:0"
    )
    # CPU threads for torch inference. On a 2-core edge box torch's default (all cores) makes the
    # U-Net 3-20x slower whenever the detector or the decoder holds the other core; 1 is best there.
    torch_threads: int | None = Field(1, ge=1)
    # Inference engine for the U-Net on the CPU: OpenVINO (converted in memory at start-up) or torch.
    backend: Literal["openvino", "torch"] = "openvino"
    # Fewest frames between two early (motion-triggered) network runs, so that a stretch of
    # unreliable ego-motion cannot make the network run on every frame.
    min_early_gap_frames: int = Field(5, ge=1)
    # A run after the first goes to a thread of its own and its mask is taken this many frames
    # later (warped by the camera motion since; the previous mask serves meanwhile, and serves on
    # where a run fails), so the 20-40 ms of the network never stall a frame. 0: the frame waits
    # for the network (pipelines.lagged).
    lag_frames: int = Field(3, ge=0, le=30)

    def resolved(
        self, input_size: tuple[int, int] | None = None, threshold: float | None = None
    ) -> RoadConfig:
        """This config with its unset model settings filled: from the checkpoint's values when
        given, else the generic defaults."""
        return self.model_copy(
            update={
                "input_size": self.input_size or input_size or DEFAULT_ROAD_INPUT_SIZE,
                "threshold": self.threshold
                if self.threshold is not None
                else (threshold if threshold is not None else DEFAULT_ROAD_THRESHOLD),
            }
        )


class EgoMotionConfig(_Section):
    enabled: bool = True
    max_features: int = Field(600, ge=16)
    scale: float = Field(0.5, gt=0, le=1.0)  # work on a downscaled grey frame
    # ... at most this wide (None: no cap): 1920 px frames work at 640 (1/3), 1280 px ones at 1/2
    max_width: int | None = Field(None, ge=64)
    ransac_reproj_px: float = Field(2.0, gt=0)
    min_inliers: int = Field(12, ge=4)
    refresh_every: int = Field(5, ge=1)  # re-detect corners every N frames
    # "global": goodFeaturesToTrack over the frame (quality relative to its strongest corner; the
    # estimator before issue 10); "grid": the strongest corners of each cell of a grid_cols-wide grid
    # (quality relative to the cell); "fill": the global corners, plus grid corners in the cells the
    # global ones leave empty, so plain ground (30 m nadir: asphalt, grass) still gives spread points
    # while textured ground keeps the strong corners on and along the road.
    corners: Literal["grid", "global", "fill"] = "fill"
    grid_cols: int = Field(16, ge=1, le=64)  # rows follow the aspect ratio
    # Corners whose gradient structure tensor has lambda_min / lambda_max below this are edges
    # (lane lines, kerbs, field borders): LK cannot see motion along them (the aperture problem)
    # and their along-edge motion stays where the previous frame's motion seeded it, which biased
    # the homography up to 0.08 px/frame at 30 m (pipelines.motion.egomotion.corner_ratios); 0: off.
    min_corner_ratio: float = Field(0.1, ge=0, le=1)
    # Causal trend fit over the last N frame-to-frame motions (a drone moves smoothly); a motion
    # further than smooth_gate_px (full-res px, any reference point) from the trend's prediction
    # restarts it, so a real pan is followed at once. 0 or 1: no smoothing.
    smooth_window: int = Field(6, ge=0, le=64)
    smooth_gate_px: float = Field(0.3, gt=0)


class TrackerConfig(_Section):
    track_activation_threshold: float = 0.25
    lost_track_buffer: int = 30
    minimum_matching_threshold: float = 0.8
    minimum_consecutive_frames: int = 1
    frame_rate: float = 30.0
    refine_with_flow: bool = True  # optical flow inside each box refines its displacement
    # frames skipped or dropped (a slow box): association compares boxes grown by this share of
    # their size on each side per missing frame, at most gap_buffer_max (buffered IoU, C-BIoU); a
    # new track has no velocity yet and its vehicle moved that many frames' worth. 0: plain IoU
    gap_buffer_per_frame: float = Field(0.15, ge=0)
    gap_buffer_max: float = Field(0.6, ge=0)
    # a track born where a track lost at most relink_max_gap_s ago would be now (its last ground
    # position carried by its fitted velocity; within relink_along_m along its motion and
    # relink_across_m across) continues that track's id (pipelines.motion.relink); 0: off
    relink_along_m: float = Field(5.0, ge=0)
    relink_across_m: float = Field(1.5, gt=0)
    relink_max_gap_s: float = Field(1.0, ge=0)


class SpeedConfig(_Section):
    window_s: float = Field(1.0, gt=0)  # robust fit over this trailing window
    # a track's window grows to this (s) where the longer window's speed agrees with the window_s
    # one within window_agree_sigma x the sum of their scatters' sigmas (the intersection of
    # confidence intervals): noisy boxes on a steady drive take the longer fit; a change of speed
    # the carry did not follow, or a box cut by the border, keep window_s (pipelines.speed.estimator).
    # Realistic grid, 36 cells: MAE 0.81 -> 0.785, p95 2.41 -> 2.33 km/h; the six baseline flights
    # 0.65 -> 0.61, p95 2.02 -> 1.83 (agree 3: 0.782 and 0.60, but exact boxes 6-7 % worse at nadir
    # and flying forward; docs/lab/2026-11-30-issue-39-speed-window.md). None: off
    window_max_s: float | None = Field(1.5, gt=0)
    window_agree_sigma: float = Field(2.0, gt=0)
    # the acceleration that carries the window's speed to its last frame is estimated over this
    # longer history (pipelines.speed.velocity_now_many); at most window_s: no carry (the window
    # middle's speed, half a window late for a vehicle that speeds up or brakes)
    accel_window_s: float = Field(3.0, ge=0)
    # how long box errors last: a shorter history sees them as motion, not scatter, so its sigma
    # is widened by sqrt(1 + (this / history)^2) (pipelines.speed.velocity_now_many); 0: off
    error_correlation_s: float = Field(1.0, ge=0)
    # traffic's RMS acceleration (m/s^2): a velocity fitted over a window is the speed of its
    # middle; a track younger than its window has no history to carry it to its last frame, and
    # that lag is in its sigma with this prior (pipelines.speed.velocity_now_many); 0: none
    accel_sigma_mps2: float = Field(0.5, ge=0)
    min_track_age_s: float = Field(0.5, ge=0)
    # a younger track's speed is reported once its measurement sigma (the fit's, without the
    # altitude term) is at most this: low over the road a vehicle crosses the frame in 2 s, and
    # a quarter-second of it already measures its speed well (1.5 before the sigma held a young
    # track's lag; 2.5 since: coverage +1-3.5 points at 30 m, MAE +0.00-0.04 km/h; 3.0 with
    # min_samples 4: docs/lab/2026-11-26-issue-10-speed-grid-v4.md); None: never before min_track_age_s
    early_max_sigma_kmh: float | None = Field(3.0, gt=0)
    # the fewest samples in the window for a speed; the sigma gates a young track's first ones (4
    # instead of 6: the speed grid's 30 m nadir cells 0.835 / 0.843 -> 0.856 / 0.854 coverage)
    min_samples: int = Field(4, ge=2)
    max_plausible_kmh: float = Field(250.0, gt=0)
    altitude_sigma_frac: float = Field(0.02, ge=0)  # relative altitude uncertainty -> speed sigma
    anchor: Literal["center", "bottom"] = "center"  # nadir: center; oblique: bottom (ground contact)
    # A step that lands farther than this (metres) from where the track's fitted velocity puts the
    # vehicle is a box that jumped (to a neighbouring vehicle, or to part of one): the track's
    # speed is untrusted while the jump is in its window. Lanes are ~3.5 m
    # apart, cars ~4.5 m long; box jitter moves an anchor by centimetres to a few decimetres.
    max_step_jump_m: float = Field(1.5, gt=0)
    # Box size on the ground (sqrt of the area x local GSD) varying more than this share within the
    # window: a partial or merged box, whose anchor slides along the vehicle; the speed is untrusted.
    max_box_size_change: float = Field(0.3, gt=0)
    # Vehicles have height: the box and the flow inside it move as a point above the road, whose
    # step a flat projection overstates by H / (H - h) (a car's 0.75 m at 30 m: +2.6 %). Each step is
    # scaled by 1 - h / H, h by class (m; "vehicle": a box without a class), and the speed's sigma
    # carries point_height_sigma_frac of h (pipelines.vehicle_height; measured on solid vehicles:
    # docs/lab/2026-11-28-issue-39-vehicle-height.md). All 0: vehicles flat on the road.
    point_height_m: dict[str, float] = Field(default_factory=lambda: dict(POINT_HEIGHT_M))
    point_height_sigma_frac: float = Field(POINT_HEIGHT_SIGMA_FRAC, ge=0, le=1)
    # a box's size on the ground bounds its class's point (m; sqrt of the box's area): smaller than the
    # first, no higher than a van's point; at least the second, no lower than a truck's (a car the
    # detector calls a bus reads 5 % slow at 30 m, a box truck called a car fast). null: the class alone
    point_size_bounds_m: tuple[float, float] | None = POINT_SIZE_BOUNDS_M

    @field_validator("point_height_m")
    @classmethod
    def _point_heights(cls, value: dict[str, float]) -> dict[str, float]:
        bad = {k: v for k, v in value.items() if not (0.0 <= v <= MAX_POINT_HEIGHT_M)}
        if bad:
            raise ValueError(
                f"each class's point height must be within 0..{MAX_POINT_HEIGHT_M:g} m, got {bad}"
            )
        return value

    @field_validator("point_size_bounds_m")
    @classmethod
    def _point_size_bounds(cls, value: tuple[float, float] | None) -> tuple[float, float] | None:
        if value is not None and not (0.0 < value[0] <= value[1] <= 50.0):
            raise ValueError(f"point_size_bounds_m must be two sizes 0 < small <= large <= 50 m, got {value}")
        return value


class ZoneConfig(_Section):
    name: str
    polygon: list[Point]  # image pixels
    speed_limit_kmh: float = Field(gt=0)
    # this zone's tolerance (None: the site's, RulesConfig.tolerance_*)
    tolerance_kmh: float | None = Field(None, ge=0)
    tolerance_percent: float | None = Field(None, ge=0, le=50)
    tolerance_mode: ToleranceMode | None = None


class RulesConfig(_Section):
    """When a vehicle speeds, and when that is a ticket (pipelines.rules, pipelines.ticket).

    A track whose trusted per-frame speeds stay above its zone's limit for ``min_duration_s``
    becomes a candidate; when it leaves the zone (or is lost) its speed is measured over a base of
    its trusted ground positions there (at least ``base_min_s`` and ``base_min_m``), and a candidate
    measured over the limit is a violation. The ticket rule then says whether it is enforceable:

    * ``tolerance`` (default): valid when k sigma (k from ``confidence``, one-sided) is within the
      tolerance at that speed, enforceable when valid and speed - tolerance > limit;
    * ``tolerance_and_sigma`` (stricter): valid the same way, enforceable when
      speed - tolerance - k sigma > limit;
    * ``lower_bound``: no validity test, enforceable when speed - k sigma > limit + tolerance (set the
      tolerance to 0 to test the sigma alone).

    The tolerance at a speed: ``tolerance_kmh`` (mode ``kmh``), ``tolerance_percent`` of the speed
    (``percent``) or the larger of both (``max``, the default: with 3 km/h and 3 %, OIML R 91's
    maximum permissible error of a traffic speed meter - 3 km/h up to 100 km/h, 3 % above).
    """

    speed_limit_kmh: float | None = Field(50.0, gt=0)  # global limit; None -> zones only
    zones: list[ZoneConfig] = []
    min_duration_s: float = Field(0.5, ge=0)
    tolerance_kmh: float = Field(3.0, ge=0)
    tolerance_percent: float = Field(3.0, ge=0, le=50)
    tolerance_mode: ToleranceMode = "max"
    ticket_rule: TicketRule = "tolerance"
    confidence: float = Field(0.95, gt=0.5, lt=1.0)  # one-sided; k = 1.645 at 0.95
    # the measuring base: a contiguous run of trusted ground positions in the zone, at least this
    # long in time and distance and with this many positions
    base_min_s: float = Field(1.0, gt=0)
    base_min_m: float = Field(15.0, ge=0)
    base_min_samples: int = Field(5, ge=3)
    # an accelerating vehicle: the run split into up to this many non-overlapping bases (each of
    # the minimum length), the highest reported with its confidence factor raised for their number
    # (Sidak); 1: the whole run is the base
    max_bases: int = Field(1, ge=1, le=6)
    # the scale sources a ticket may rest on (pipelines.height): the drone's altitude over ground
    # of unknown level (flight, operator) is not one - its error has no honest bound (a road 15 m
    # above the take-off point is +20 % on every speed: the error budget's wrong tickets)
    enforceable_scale_sources: tuple[
        Literal["flight", "operator", "site", "measured_base", "lrf", "terrain", "vehicles"], ...
    ] = (
        "site",
        "measured_base",
        "lrf",
    )
    # Only trusted speeds count towards a violation (an untrusted one neither opens, extends nor
    # ends an episode: SpeedEstimate.trusted, set by the speed stage when a box jumped or changed
    # size); a measuring base holds trusted positions only, whatever this says.
    require_trusted: bool = True
    # the scale check's statuses (pipelines.scale_session) whose sessions' tickets are held for
    # review (not enforceable, the check named in the reason)
    hold_scale_check: tuple[Literal["suspect", "unverified"], ...] = ("suspect",)
    # the pitch check's statuses (pipelines.pitch_check: the gimbal's pitch against the traffic)
    # whose sessions' tickets are held for review the same way
    hold_pitch_check: tuple[Literal["suspect", "unverified"], ...] = ("suspect",)
    snapshot_margin_px: int = 24
    # One vehicle, one violation: a new track that lies where a track with a violation in the same
    # zone, seen within same_vehicle_gap_s, is now (by its ground velocity; within this far along its
    # travel and across it) is that vehicle's track broken in two, and reports nothing new
    # (pipelines.rules). along 0: off
    same_vehicle_along_m: float = Field(5.0, ge=0)
    same_vehicle_across_m: float = Field(1.5, ge=0)
    same_vehicle_gap_s: float = Field(2.0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _lower_bound_flag(cls, data: Any) -> Any:
        """``use_lower_bound: true`` (before the ticket rule) is ``ticket_rule: lower_bound``."""
        if isinstance(data, dict) and "use_lower_bound" in data:
            data = dict(data)
            if data.pop("use_lower_bound"):
                logger.warning("rules.use_lower_bound is deprecated: ticket_rule: lower_bound")
                data.setdefault("ticket_rule", "lower_bound")
        return data


class VehiclePriorConfig(_Section):
    """A label's vehicle sizes (m, mean and one sd), as the detector boxes them (pipelines.scale_check)."""

    length_m: float = Field(gt=1, le=20)
    length_sd_m: float = Field(gt=0, le=5)
    width_m: float = Field(gt=0.5, le=4)
    width_sd_m: float = Field(gt=0, le=1)
    height_m: float = Field(gt=0.5, le=5)
    height_sd_m: float = Field(gt=0, le=2)


class ScaleCheckConfig(_Section):
    """The scale check from the vehicles on the road (pipelines.scale_check, pipelines.scale_session):
    the telemetry's scale against the sizes of cars. ``suspect`` when the ratio is off by more than
    ``tolerance`` beyond ``z`` standard errors, ``ok`` when within it z included, else unverified."""

    enabled: bool = True
    classes: tuple[str, ...] = ("car",)  # the labels measured against the prior
    region: Literal["eu", "us"] = "eu"  # the built-in car prior (pipelines.scale_check.CAR_PRIORS)
    prior: VehiclePriorConfig | None = None  # a region's own figures instead
    min_vehicles: int = Field(10, ge=2)  # tracks before the check says anything
    min_observations: int = Field(3, ge=1)  # observations (every third frame) before a track counts
    min_speed_kmh: float = Field(8.0, ge=0)  # slower: its heading is not known well enough
    min_box_px: float = Field(10.0, ge=2)  # a box's shorter side; smaller boxes are not compared
    # what the detector adds to each side of a vehicle's box (px): the shipped detector's boxes
    # are 1.2-1.7 px a side looser than VisDrone-DET's and aerial-cars' labels at every size
    # (python -m eval.box_bias: +14 % on 17 px cars, +3 % on 81 px)
    box_margin_px: float = Field(1.4, ge=-10, le=10)
    # how well that margin is known for a session (px): it moves from clip to clip with the light,
    # the shadows, the blur (sd 0.58 px over 55 VisDrone-DET and aerial-cars clips, 0.5-2.3 px at
    # the 5th and 95th percentiles). The same on every box of a session, it bounds how small a car
    # can still judge the scale (0.6 px a side on a 40 px car is 3 %)
    box_margin_sigma_px: float = Field(0.6, ge=0, le=10)
    # a box edge's noise (px, one sigma): from frame to frame, and from vehicle to vehicle (the same
    # on every frame of one: its shadow, its colour against the road); together the 1.4-1.6 px a side
    # the shipped detector's boxes scatter about VisDrone's and aerial-cars' labels
    box_sigma_px: float = Field(1.1, gt=0, le=20)
    box_vehicle_sigma_px: float = Field(1.0, ge=0, le=20)
    tolerance: float = Field(0.05, gt=0, lt=0.5)  # the share the scale may be off and still be ok
    # the share beyond which (z standard errors included) it is suspect; None: the tolerance. With the
    # site's lanes measured (lane_width_sigma_m 0.05: the lanes +-1.75 %) and the detector's margin
    # measured, 0.03 calls a 10 % error suspect within a minute in 0.87-1.00 of simulated sessions
    # (0.52-1.00 at 0.05), right ones in 0-6.7 % (0-1.7 %), and still says ok within the tolerance; a
    # margin 1.7 px off made 50 % of right sessions suspect at 100 m; lanes surveyed to 0.02 m call
    # every 10 % error at the tolerance alone (docs/calibration.md)
    suspect_tolerance: float | None = Field(None, gt=0, lt=0.5)
    z: float = Field(2.5, gt=0, le=10)
    max_spread: float = Field(2.5, gt=0)  # tracks' scatter over the prior's: beyond it, unverified
    # the lanes as a second ruler (pipelines.lane_ruler): the distance between the painted lane lines
    # inside the road mask against the width the site's lanes are built to. Its sigma: 0.2 m for a
    # region's standard (3.25-3.75 m on most European roads, 3.6 m / 12 ft on US highways), about
    # 0.05 m for the site's own lanes measured on a survey or a map
    lanes: bool = True
    lane_width_m: float = Field(3.5, ge=2.0, le=6.0)
    lane_width_sigma_m: float = Field(0.2, gt=0, le=1.0)
    lane_every: int = Field(60, ge=1)  # frames between two lane measurements (30-125 ms each at 1080p)
    min_lane_frames: int = Field(5, ge=1)  # measured frames before the lanes count
    # the lane frames and the pitch's refits (no pitch known) run on a thread of their own, their
    # results taken this many frames processed later (waited for then if late, so the results do not
    # depend on the box's speed); 0: in line, the frame waits for them
    lag_frames: int = Field(10, ge=0, le=60)
    # Without an altitude (no telemetry and no camera.altitude_m: a dataset, a phone without metadata)
    # the scale is the rulers' own (pipelines.ground's "vehicles" source): the camera's height above
    # the road that makes the cars their fleet's size and the lanes their width, at the telemetry's,
    # the configured or the default pitch. Measured at derive_start_m until the rulers give a
    # height; speeds from the moment it is known to derive_max_sigma (relative), marked
    # scale_source "vehicles", never a ticket's by default (rules.enforceable_scale_sources).
    # fleet_sigma: how well a site's car fleet's mean size is known (its mix of small cars, SUVs and
    # vans), in that scale's sigma with the rulers' own. Off (or the check off): no altitude, no speed
    derive: bool = True
    derive_start_m: float = Field(60.0, gt=1, le=1500)
    derive_max_sigma: float = Field(0.06, gt=0, lt=0.5)
    fleet_sigma: float = Field(0.03, ge=0, lt=0.5)

    @property
    def suspect_share(self) -> float:
        """The share beyond which a scale is suspect: ``suspect_tolerance``, else ``tolerance``."""
        return self.tolerance if self.suspect_tolerance is None else self.suspect_tolerance


class PitchCheckConfig(_Section):
    """The gimbal's pitch checked against the traffic's speeds (pipelines.pitch_check): tracks of at
    least ``min_samples`` speeds that saw ``min_spread`` of the view's change per degree, ``ok`` /
    ``suspect`` against ``tolerance_deg`` with ``z`` standard errors; ``correct``: its estimate moves
    the pitch (and, where a measured base or the laser ties them, the height) the speeds use."""

    enabled: bool = True
    min_vehicles: int = Field(10, ge=2)
    min_samples: int = Field(20, ge=4)
    min_spread: float = Field(0.002, gt=0)  # rms change of per_deg (share a degree) a track must see
    tolerance_deg: float = Field(1.0, gt=0, le=10)
    z: float = Field(2.5, gt=0, le=10)
    # in quadrature (deg): what every track of a flight shares and their scatter cannot show (a lens's
    # residual distortion, the vehicles' height, the shutter); on the realistic grid the scatter's
    # sigma alone was 1.3 times narrow (rms z 1.34 over 34 flights), with 0.25 deg 1.04
    sigma_floor_deg: float = Field(0.25, ge=0, le=5)
    # weigh the traffic's pitch into the scale from then on (pipelines.height.with_pitch_observed: the
    # gimbal's prior and the check's estimate, by their sigmas); False: a check only
    correct: bool = True


class CheckpointConfig(_Section):
    name: str = Field(min_length=1, max_length=64)
    lat: float = Field(ge=-90, le=90)
    lon: float = Field(ge=-180, le=180)


class AlertsConfig(_Section):
    """What the stop team's alert says beyond the violation (pipelines.checkpoints): the next of
    these named points ahead of the vehicle (within ``max_off_heading_deg`` of its direction of
    travel) and when it gets there at the ticket speed."""

    checkpoints: list[CheckpointConfig] = []
    max_off_heading_deg: float = Field(60.0, gt=0, le=180)


class PipelineConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    detector: DetectorConfig = DetectorConfig()
    keyframes: KeyframeConfig = KeyframeConfig()
    road: RoadConfig = RoadConfig()
    egomotion: EgoMotionConfig = EgoMotionConfig()
    tracker: TrackerConfig = TrackerConfig()
    speed: SpeedConfig = SpeedConfig()
    rules: RulesConfig = RulesConfig()
    camera: CameraConfig = CameraConfig()
    scale_check: ScaleCheckConfig = ScaleCheckConfig()
    pitch_check: PitchCheckConfig = PitchCheckConfig()
    alerts: AlertsConfig = AlertsConfig()

    @field_validator("*", mode="before")
    @classmethod
    def _none_is_default(cls, v: Any) -> Any:
        return {} if v is None else v

    @classmethod
    def from_yaml(cls, path: str | Path) -> PipelineConfig:
        return cls.from_dict(read_yaml_mapping(path, "config file", ConfigError), source=str(path))

    @classmethod
    def from_dict(cls, data: dict, source: str = "config") -> PipelineConfig:
        from pydantic import ValidationError

        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"invalid {source}: {validation_summary(exc)}") from exc

    def with_overrides(self, **sections: dict[str, Any]) -> PipelineConfig:
        """Return a copy with some fields replaced, e.g. ``with_overrides(camera={"altitude_m": 80})``.

        ``None`` values are ignored so CLI flags that were not given change nothing.
        """
        data = self.model_dump()
        for section, values in sections.items():
            for key, value in values.items():
                if value is not None:
                    data[section][key] = value
        return type(self).from_dict(data, source="overrides")


def validation_summary(exc: Any) -> str:
    """A pydantic ValidationError on one line: ``camera.altitude_m: must be > 0.5 (got 0); ...``."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or "value"
        msg = str(err.get("msg", "invalid")).replace("Input should be", "must be")
        got = f" (got {err['input']!r})" if "input" in err and not isinstance(err["input"], dict) else ""
        parts.append(f"{where}: {msg}{got}")
    return "; ".join(parts)


class ConfigError(AirPatrolError, ValueError):
    """A configuration that cannot be used; the message says what to fix."""


def read_yaml_mapping(path: str | Path, what: str, error: type[Exception] = ConfigError) -> dict:
    """Read a YAML file that must hold a mapping; every problem is an ``error`` naming ``what``."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError as exc:
        raise error(f"{what} not found: {path}") from exc
    except yaml.YAMLError as exc:
        raise error(f"{what} {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise error(f"{what} {path} must hold a mapping at the top level")
    return data
