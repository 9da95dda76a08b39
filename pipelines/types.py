"""Domain types shared by every stage of the engine.

Small frozen dataclasses; detections travel between stages as ``supervision.Detections``.
Data flows one way: source -> Frame -> base layer -> motion layer -> speed -> violations -> sinks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import supervision as sv

# the checks' results, kept in their own module (re-exported: every user imports them from here)
from pipelines.checks import (  # noqa: F401
    OK,
    SCALE_CHECK_STATUSES,
    SUSPECT,
    UNVERIFIED,
    PitchCheckResult,
    RulerReading,
    ScaleCheckResult,
)

# ``Detections.data`` key: True for a box carried forward by optical flow on a frame the detector
# did not run on (pipelines.motion.keyframes), False for a box the detector found.
PROPAGATED_KEY = "propagated"
# ... and True for a propagated box moved by its vehicle's last motion (its flow failed) or carried
# from a box clipped by the border, on this frame or since the last detection: shown, tracked, but
# no speed is measured from it.
EXTRAPOLATED_KEY = "extrapolated"


@dataclass(frozen=True, slots=True)
class Telemetry:
    """Flight state at one instant (already validated; units are SI / degrees).

    ``altitude_m`` is the camera's height above the ground being filmed (DJI ``rel_alt``
    when flying over the take-off level). ``gimbal_pitch_deg`` follows DJI: -90 is nadir
    (straight down), 0 is the horizon.
    """

    timestamp_s: float
    altitude_m: float | None = None
    gimbal_pitch_deg: float | None = None
    focal_length_mm: float | None = None  # real (not 35 mm-equivalent) focal length
    focal_length_35mm: float | None = None
    digital_zoom: float = 1.0
    latitude: float | None = None
    longitude: float | None = None
    abs_altitude_m: float | None = None
    gimbal_yaw_deg: float | None = None
    camera: str | None = None
    # the laser rangefinder's slant range to the point at the image's centre (m; DJI enterprise
    # payloads: Cloud API OSD measure_target_distance, only while its state is NORMAL), None: none
    lrf_range_m: float | None = None
    # the time of the sample that reading came with (a frame between samples carries the earlier
    # one's: each reading counts once), None: timestamp_s
    lrf_time_s: float | None = None
    # where the scale came from: "flight" (the drone's telemetry: SRT, data channel, DJI OSD) or
    # "operator" (altitude and gimbal pitch typed in for a stream that carries no telemetry)
    source: str = "flight"


@dataclass(frozen=True, slots=True, eq=False)
class Frame:
    """One decoded video frame. ``timestamp_s`` comes from the container pts where it exists.

    ``index`` is 0-based (a position in the stream, for the engine's bookkeeping); every output
    names a frame by its 1-based :attr:`number` instead (MOTChallenge's convention, and the one
    ``tracks.txt``, ``speeds.csv``, violations and the database share).
    """

    index: int
    timestamp_s: float
    image: np.ndarray  # H x W x 3, BGR, uint8
    telemetry: Telemetry | None = None

    @property
    def number(self) -> int:
        """1-based frame number: the one every output file, event and table uses."""
        return self.index + 1

    @property
    def height(self) -> int:
        return int(self.image.shape[0])

    @property
    def width(self) -> int:
        return int(self.image.shape[1])


@dataclass(frozen=True, slots=True)
class CameraProfile:
    """Physical camera: sensor size, real focal length and native still resolution."""

    name: str
    sensor_width_mm: float
    sensor_height_mm: float
    focal_length_mm: float
    native_width_px: int
    native_height_px: int
    aliases: tuple[str, ...] = ()
    # The manufacturer's stated 35 mm-equivalent of focal_length_mm. DJI writes this figure in
    # its telemetry, and it differs from the diagonal crop factor by a few per cent on some
    # models (Mavic 3: 24 mm for 12.29 mm, diagonal ratio 2.0), so conversions use this ratio.
    focal_length_35mm: float | None = None
    # The video's lens distortion (OpenCV's k1, k2, p1, p2, k3 in the frame's normalised
    # coordinates: pipelines.lens) and the sensor's rolling-shutter readout time, where a source
    # gives them, and that source or why there is none (pipelines.camera): None means not known, so
    # not corrected unless the configuration gives them (camera.lens, camera.readout_ms).
    distortion: tuple[float, float, float, float, float] | None = None
    readout_ms: float | None = None
    lens_note: str = ""


@dataclass(frozen=True, slots=True)
class Intrinsics:
    """Pinhole intrinsics for one image size (pixels)."""

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    @property
    def matrix(self) -> np.ndarray:
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])


@dataclass(frozen=True, slots=True, eq=False)
class EgoMotion:
    """Camera motion between the previous and the current frame.

    ``homography`` maps pixel coordinates of the previous frame onto the current frame for
    points on the (static) ground.
    """

    homography: np.ndarray  # 3x3, prev -> current
    inlier_ratio: float = 1.0
    n_points: int = 0
    magnitude_px: float = 0.0  # median displacement of background points
    valid: bool = True
    # (M, 4) the fit's inlier point pairs (x0, y0, x1, y1: previous, current full-resolution pixels)
    # for a fit of the camera's motion in the sensor's ideal image (pipelines.motion.sensor_motion);
    # None where the estimate has none (identity, a fake)
    pairs: np.ndarray | None = None

    @staticmethod
    def identity() -> EgoMotion:
        return EgoMotion(np.eye(3), 1.0, 0, 0.0, True)


@dataclass(frozen=True, slots=True)
class SpeedEstimate:
    track_id: int
    speed_kmh: float
    sigma_kmh: float  # one standard deviation
    n_samples: int
    window_s: float
    # False when the speed stage cannot stand behind the figure (``doubt`` says why: a box that
    # jumped, e.g. to a neighbouring vehicle, or whose size changed, e.g. a partial box)
    trusted: bool = True
    doubt: str = ""
    # the track's last measured ground position (m, in the ego-motion-stabilised ground frame the
    # speed stage integrates displacements in) and its time; positions of one ``segment`` are one
    # continuous measurement (a new segment begins where the integration restarted, or a position
    # was carried instead of measured): the measuring base of a ticket (pipelines.ticket) lies in one
    position_m: tuple[float, float] | None = None
    position_t: float | None = None
    segment: int = -1
    # the scale's share of the sigma: its relative sigma (height above the road, pitch: in
    # sigma_kmh in quadrature with the fit's) and where it came from (pipelines.height.SCALE_SOURCES)
    scale_sigma_frac: float = float("nan")
    scale_source: str = ""
    # what the scale's sigma is made of at its position (pipelines.height.ScaleTerms): the signed
    # relative change of its displacement per degree of pitch, its measured point's height's sigma
    scale_per_deg: float = float("nan")
    point_sigma_frac: float = float("nan")
    # on a segment's first estimate: the segment's positions before ``position_m`` (time, x, y) that its
    # window held and no estimate carried (a young track's, before it was old enough to report): the
    # measuring base may begin there (pipelines.rules); their trust is this estimate's
    earlier: tuple[tuple[float, float, float], ...] = ()


# where a speed's scale came from (Violation.scale.source, SpeedEstimate.scale_source, the store's
# scale_source column)
# "vehicles": no altitude at all (a dataset, a phone without metadata): the height the cars on the road
# (and the lanes) imply (pipelines.scale_session's derived height, pipelines.ground), never a ticket's
# by default
SCALE_SOURCES = ("flight", "operator", "site", "measured_base", "lrf", "terrain", "vehicles")
# the ones a HeightReference can carry: an operator sets site or measured_base; the engine makes lrf
# from the laser rangefinder's readings (pipelines.rangefinder) and terrain from a terrain model of
# the site (pipelines.terrain)
REFERENCE_SOURCES = ("site", "measured_base", "lrf", "terrain")


@dataclass(frozen=True, slots=True)
class HeightReference:
    """What turns the drone's altitude reading (above take-off) into its height above the road.

    ``takeoff_above_road_m`` is added to every reading (the take-off point's height above the road:
    positive when the pilot took off above it); ``pitch_bias_deg`` to every reported gimbal pitch.
    ``sigma_m`` and ``pitch_sigma_deg`` (None: the configuration's gimbal prior) are one standard
    deviation. ``at_time_s``: the stream time it was measured at (a measured base: the barometer
    drifts from then on; None: from take-off). ``set_by`` / ``set_at`` (ISO UTC) / ``detail``:
    who set it, when and how (recorded on every violation measured with it)."""

    source: str
    takeoff_above_road_m: float
    sigma_m: float
    pitch_bias_deg: float = 0.0
    pitch_sigma_deg: float | None = None
    at_time_s: float | None = None
    set_by: str = ""
    set_at: str = ""
    detail: str = ""
    # the correlation of the height's and the pitch bias's errors (a measured base solves both
    # from the same lines: along them their errors cancel, pipelines.height.scale_sigma_frac)
    height_pitch_corr: float = 0.0
    # on fewer readings than a reference needs (the laser's first: pipelines.rangefinder): speeds may
    # use it, no ticket rests on it (pipelines.height.scale_status)
    provisional: bool = False

    def __post_init__(self) -> None:
        if self.source not in REFERENCE_SOURCES:
            raise ValueError(
                f"height reference source must be one of {REFERENCE_SOURCES}, got {self.source!r}"
            )
        if not (math.isfinite(self.takeoff_above_road_m) and abs(self.takeoff_above_road_m) <= 500):
            raise ValueError(
                f"take-off height above the road must be within +-500 m, got {self.takeoff_above_road_m}"
            )
        if not (math.isfinite(self.sigma_m) and 0 < self.sigma_m <= 100):
            raise ValueError(f"the height's sigma must be in (0, 100] m, got {self.sigma_m}")
        if not (math.isfinite(self.pitch_bias_deg) and abs(self.pitch_bias_deg) <= 15):
            raise ValueError(f"pitch bias must be within +-15 deg, got {self.pitch_bias_deg}")
        if not (math.isfinite(self.height_pitch_corr) and abs(self.height_pitch_corr) <= 1):
            raise ValueError(f"height-pitch correlation must be in [-1, 1], got {self.height_pitch_corr}")
        if self.pitch_sigma_deg is not None and not (0 <= self.pitch_sigma_deg <= 15):
            raise ValueError(f"pitch sigma must be in [0, 15] deg, got {self.pitch_sigma_deg}")

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "takeoff_above_road_m": round(self.takeoff_above_road_m, 3),
            "sigma_m": round(self.sigma_m, 3),
            "pitch_bias_deg": round(self.pitch_bias_deg, 3),
            "pitch_sigma_deg": None if self.pitch_sigma_deg is None else round(self.pitch_sigma_deg, 3),
            "height_pitch_corr": round(self.height_pitch_corr, 4),
            "at_time_s": self.at_time_s,
            "set_by": self.set_by,
            "set_at": self.set_at,
            "detail": self.detail,
            "provisional": self.provisional,
        }


@dataclass(frozen=True, slots=True)
class ScaleInfo:
    """The scale a speed (or a violation's ticket) rests on: its source, the camera's height above
    the road and its sigma, the gimbal pitch used and its sigma, and ``sigma_frac``, the relative
    sigma this gives the speed (for a violation: over its measuring base)."""

    source: str
    height_m: float
    height_sigma_m: float
    pitch_deg: float
    pitch_sigma_deg: float
    sigma_frac: float = math.nan
    reference: HeightReference | None = None
    # the covariance of the height's and the pitch's errors (m deg: a measured base's, else 0)
    height_pitch_cov: float = 0.0
    # how far the traffic's speeds moved the pitch (deg; in pitch_deg: pipelines.height.with_pitch_observed)
    # and the scale's sigmas before they narrowed it (None: unmoved), which a ticket's margin keeps
    pitch_from_traffic_deg: float = 0.0
    unmoved: ScaleInfo | None = None

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "height_above_road_m": round(self.height_m, 3),
            "height_sigma_m": round(self.height_sigma_m, 3),
            "pitch_deg": round(self.pitch_deg, 3),
            "pitch_sigma_deg": round(self.pitch_sigma_deg, 3),
            "pitch_from_traffic_deg": round(self.pitch_from_traffic_deg, 3),
            "height_pitch_cov": round(self.height_pitch_cov, 4),
            "sigma_pct": None if not math.isfinite(self.sigma_frac) else round(100.0 * self.sigma_frac, 3),
            "reference": None if self.reference is None else self.reference.to_dict(),
        }

    def describe(self) -> str:
        """One line for a reason or a log: the source and what it is worth."""
        names = {
            "flight": "the drone's take-off altitude over unknown ground",
            "operator": "an operator's altitude over unknown ground",
            "site": "the site's take-off height above the road",
            "measured_base": "a measured base",
            "lrf": "the laser rangefinder",
            "terrain": "a terrain model of the site",
            "vehicles": "the vehicles' sizes (no altitude)",
        }
        pct = f", {100.0 * self.sigma_frac:.1f} % of the speed" if math.isfinite(self.sigma_frac) else ""
        moved = (
            f" ({self.pitch_from_traffic_deg:+.1f} from the traffic)" if self.pitch_from_traffic_deg else ""
        )
        return (
            f"scale from {names.get(self.source, self.source)}: {self.height_m:.1f} +- "
            f"{self.height_sigma_m:.1f} m above the road, pitch +- {self.pitch_sigma_deg:.1f} deg{moved}{pct}"
        )


# Violation.status: a ticket may be issued on an "enforceable" one only; "not_enforceable" is over
# the limit by its measurement but not to be ticketed (status_reason says why: uncertainty, a base
# too short, the limit changed, ...); "dismissed": an officer marked it a false positive; "legacy":
# stored before the ticket speed existed (peak only)
ENGINE_STATUSES = ENFORCEABLE, NOT_ENFORCEABLE = ("enforceable", "not_enforceable")  # the engine's
VIOLATION_STATUSES = (*ENGINE_STATUSES, "dismissed", "legacy")


@dataclass(frozen=True, slots=True)
class MeasuringBase:
    """The stretch of a track a ticket speed was measured over: a contiguous run of trusted ground
    positions in the zone, chosen by time and distance (never by which per-frame speeds exceeded
    the limit). ``index`` of ``of``: which of the non-overlapping bases the track's run was split
    into (an accelerating vehicle: the highest is reported, its confidence factor raised for
    ``of``)."""

    start_time_s: float
    end_time_s: float
    start_frame: int  # 1-based frame numbers
    end_frame: int
    distance_m: float  # ground distance travelled over the base
    n_samples: int  # positions measured in it
    index: int = 1
    of: int = 1
    # the frame of the base the violation's box and snapshot were taken from (its number and time)
    snapshot_frame: int | None = None
    snapshot_time_s: float | None = None
    # the track it was measured on where that is not the violation's own: another track of the same
    # vehicle (its box split, or the tracker restarted it) that followed it longer
    track_id: int | None = None

    @property
    def duration_s(self) -> float:
        return self.end_time_s - self.start_time_s

    def to_dict(self) -> dict:
        return {
            "start_time_s": round(self.start_time_s, 4),
            "end_time_s": round(self.end_time_s, 4),
            "duration_s": round(self.duration_s, 4),
            "start_frame": self.start_frame,
            "end_frame": self.end_frame,
            "distance_m": round(self.distance_m, 2),
            "n_samples": self.n_samples,
            "index": self.index,
            "of": self.of,
            "snapshot_frame": self.snapshot_frame,
            "snapshot_time_s": None if self.snapshot_time_s is None else round(self.snapshot_time_s, 4),
            "track_id": self.track_id,
        }


@dataclass(frozen=True, slots=True)
class TrackPoint:
    """One measured ground position of a violation's track, as the engine had it (the record an
    evidence pack lists): stabilised position (m), box, position below the drone, per-frame speed
    and sigma, the local ground size of a pixel, whether it lay in the ticket's measuring base, and
    the frame's telemetry."""

    t: float
    frame: int  # 1-based
    x_m: float
    y_m: float
    segment: int
    trusted: bool
    zone: str | None
    bbox_xyxy: tuple[float, float, float, float]
    ground_xy_m: tuple[float, float] | None
    speed_kmh: float
    sigma_kmh: float
    gsd_m_per_px: float  # NaN: no ground projection
    in_base: bool
    telemetry: Telemetry | None = None


@dataclass(frozen=True, slots=True, eq=False)
class Violation:
    """One speeding event: one per track and zone.

    The number a ticket carries is ``ticket_speed_kmh`` (with ``ticket_sigma_kmh``), measured over
    ``base``; ``status`` says whether it is enforceable (``status_reason``: why not).
    ``peak_speed_kmh`` is the highest per-frame estimate while over the limit and ``mean_speed_kmh``
    their mean: informative only (the largest of many noisy estimates is biased upward).
    """

    track_id: int
    zone: str
    speed_limit_kmh: float
    peak_speed_kmh: float
    mean_speed_kmh: float
    sigma_kmh: float
    start_frame: int  # 1-based frame numbers (Frame.number)
    end_frame: int
    start_time_s: float
    end_time_s: float
    class_name: str = "vehicle"
    # box, ground position and snapshot: on a frame of the measuring base (of the per-frame peak
    # when there is no base); ground: metres from the point below the drone (x to the image's right,
    # y along the camera heading); latitude/longitude: the vehicle's, when GPS and heading are known
    bbox_xyxy: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    ground_xy_m: tuple[float, float] | None = None
    latitude: float | None = None
    longitude: float | None = None
    snapshot: np.ndarray | None = field(default=None, repr=False)  # BGR crop around the vehicle
    # the ticket (pipelines.ticket): speed over the measuring base and its sigma (None: no base of
    # the minimum length), the tolerance applied at that speed, the confidence factor k
    ticket_speed_kmh: float | None = None
    ticket_sigma_kmh: float | None = None
    tolerance_kmh: float | None = None
    confidence_k: float | None = None
    base: MeasuringBase | None = None
    status: str = "not_enforceable"
    status_reason: str = ""
    # the scale the ticket rests on (pipelines.height): its source, the height above the road and
    # the pitch with their sigmas, and its relative sigma over the base (in ticket_sigma_kmh)
    scale: ScaleInfo | None = None
    # the session's scale check from the vehicles when it closed (pipelines.scale_session)
    scale_check: ScaleCheckResult | None = None
    # the session's pitch check against the traffic when it closed, or when it held the violation
    # (pipelines.pitch_check)
    pitch_check: PitchCheckResult | None = None
    # the track's measured positions the engine had when it measured the ticket (oldest first)
    trace: tuple[TrackPoint, ...] = field(default=(), repr=False)

    @property
    def duration_s(self) -> float:
        return self.end_time_s - self.start_time_s

    @property
    def enforceable(self) -> bool:
        return self.status == ENFORCEABLE

    def to_dict(self) -> dict:
        """JSON-friendly view (without the snapshot pixels)."""
        return {
            "track_id": self.track_id,
            "zone": self.zone,
            "class_name": self.class_name,
            "speed_limit_kmh": round(self.speed_limit_kmh, 2),
            "peak_speed_kmh": round(self.peak_speed_kmh, 2),
            "mean_speed_kmh": round(self.mean_speed_kmh, 2),
            "sigma_kmh": round(self.sigma_kmh, 2),
            "start_frame": self.start_frame,
            "end_frame": self.end_frame,
            "start_time_s": round(self.start_time_s, 4),
            "end_time_s": round(self.end_time_s, 4),
            "duration_s": round(self.duration_s, 4),
            "bbox_xyxy": [round(v, 1) for v in self.bbox_xyxy],
            "ground_xy_m": None if self.ground_xy_m is None else [round(v, 3) for v in self.ground_xy_m],
            "latitude": self.latitude,
            "longitude": self.longitude,
            "ticket_speed_kmh": _round(self.ticket_speed_kmh),
            "ticket_sigma_kmh": _round(self.ticket_sigma_kmh),
            "tolerance_kmh": _round(self.tolerance_kmh),
            "confidence_k": _round(self.confidence_k, 3),
            "base": None if self.base is None else self.base.to_dict(),
            "status": self.status,
            "status_reason": self.status_reason,
            "scale": None if self.scale is None else self.scale.to_dict(),
            "scale_check": None if self.scale_check is None else self.scale_check.to_dict(),
            "pitch_check": None if self.pitch_check is None else self.pitch_check.to_dict(),
        }


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True, slots=True, eq=False)
class FrameResult:
    """Everything the engine knows about one frame, handed to the sinks.

    ``detections`` are the tracked vehicles of this frame (``tracker_id`` set) with
    ``data`` keys: ``class_name`` (str), ``speed_kmh`` and ``speed_sigma_kmh`` (float, NaN while
    unknown), ``speed_scale_frac`` (float: the scale's relative sigma in ``speed_sigma_kmh``,
    :attr:`SpeedEstimate.scale_sigma_frac`), ``speed_trusted`` (bool, :attr:`SpeedEstimate.trusted`), ``propagated`` (bool,
    :data:`PROPAGATED_KEY`: carried by optical flow, not detected, on this frame; such rows also have
    ``extrapolated``, :data:`EXTRAPOLATED_KEY`), ``ground_xy_m`` (N x 2, ground position in metres from the point below the drone in
    this frame, NaN when unknown).
    """

    frame: Frame
    detections: sv.Detections
    # H x W bool; None when the base layer is disabled. On a frame without detection (keyframes on)
    # it is the last keyframe's mask: nothing is filtered by it there.
    road_mask: np.ndarray | None
    ego: EgoMotion
    gsd_m_per_px: float | None  # at the image centre; None when the ground scale is unknown
    speeds: dict[int, SpeedEstimate]
    violations: tuple[Violation, ...] = ()  # violations closed during this frame
    timings_ms: dict[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    keyframe: bool = True  # the detector ran on this frame (False: boxes propagated by optical flow)
    scale: ScaleInfo | None = None  # the frame's scale (None: speeds disabled on it)
    scale_check: ScaleCheckResult | None = None  # the session's scale check (None: disabled)
    # the session's pitch check (None: disabled), pooled at most once a second (Pipeline)
    pitch_check: PitchCheckResult | None = None
