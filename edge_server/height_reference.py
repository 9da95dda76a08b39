"""A live stream's height reference (issue 39): what turns the drone's altitude reading, above its
take-off point, into its height above the road, on which every speed's scale rests.

An operator sets it for a session while it streams (``PUT /api/v1/sessions/{id}/height-reference``):
either the take-off point's height above the road (:func:`site_reference`), or a measured base,
lines drawn on a frame the operator froze (:meth:`SessionHeight.freeze`; else the stream's latest
frame) between road marks of known distance
(:func:`measure_base`: ``pipelines.calibrate.solve_base_on_frame``, the same solve as ``airpatrol
calibrate``, against the frame's raw altitude reading and reported gimbal pitch; then each line on
the road mask). Bad input raises
:class:`HeightReferenceError` with the HTTP status, a code and one line saying what to change;
nothing is changed then.

:class:`SessionHeight` holds one stream's: the reference the operator set, handed to the worker,
which applies it at its next frame (``Pipeline.set_height_reference``), like the rules; the measured
base behind it; a log of every change (kept in the session's info); the latest processed frame
(:class:`LatestFrame`), which the worker replaces at every frame with one reference swap, so the
API's thread reads one frame's telemetry, size, road mask and scale together; and the frames frozen
to draw on (:class:`Still`), so that a base is solved on the very frame drawn on, with its altitude
reading and pitch, however the drone moved while the officer drew.

Imported by the worker and the height-reference route; it imports the engine's height, calibration
and ground model (numpy only), never the web framework or the store.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipelines.calibrate import (
    BaseError,
    BaseLine,
    BaseSolution,
    FrameScaleError,
    share_on_mask,
    solve_base_on_frame,
)
from pipelines.config import CameraConfig
from pipelines.ground import reference_from_config
from pipelines.height import HeightReference, ScaleInfo
from pipelines.types import Frame

log = logging.getLogger(__name__)

ROAD_SHARE_MIN = 0.8  # of each line's length on the road mask of the frame drawn on
LOG_LENGTH = 50  # changes kept in the session's info
# frozen frames a stream keeps for measured bases (each its image and road mask: ~8 MB at 1080p)
STILLS_KEPT = 3


@dataclass(frozen=True)
class LatestFrame:
    """The latest processed frame of a stream: its telemetry (the raw altitude reading and gimbal
    pitch), size and time; its road mask (None: the stream has none); its scale (None: no speeds)."""

    frame: Frame
    road_mask: np.ndarray | None
    scale: ScaleInfo | None

    def to_dict(self) -> dict[str, Any]:
        tel = self.frame.telemetry
        return {
            "time_s": round(self.frame.timestamp_s, 4),
            "width": self.frame.width,
            "height": self.frame.height,
            "altitude_m": None if tel is None else tel.altitude_m,
            "gimbal_pitch_deg": None if tel is None else tel.gimbal_pitch_deg,
        }


@dataclass(frozen=True)
class Still:
    """A frame an officer froze to draw a measured base on (``POST .../height-reference/frames``):
    the frame as processed (its image, telemetry, road mask), kept until the base is solved on it,
    however the drone has moved since."""

    latest: LatestFrame
    taken_at: str  # ISO UTC

    @property
    def frame_index(self) -> int:
        return self.latest.frame.index

    def to_dict(self) -> dict[str, Any]:
        return {"frame_index": self.frame_index, **self.latest.to_dict(), "taken_at": self.taken_at}


class HeightReferenceError(Exception):
    """A height reference that cannot be set: the HTTP status, a code and one line."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def utc_now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def site_reference(
    takeoff_above_road_m: float, sigma_m: float | None, set_by: str, camera: CameraConfig, set_at: str
) -> HeightReference:
    """The take-off point's height above the road for this session, known to ``sigma_m`` (None:
    the configuration's ``camera.takeoff_above_road_sigma_m``)."""
    sigma = camera.takeoff_above_road_sigma_m if sigma_m is None else sigma_m
    try:
        return HeightReference(
            source="site",
            takeoff_above_road_m=float(takeoff_above_road_m),
            sigma_m=float(sigma),
            set_by=set_by,
            set_at=set_at,
            detail=f"take-off {takeoff_above_road_m:+.2f} +- {sigma:.2f} m above the road (session value)",
        )
    except ValueError as exc:
        raise HeightReferenceError(400, "invalid_reference", str(exc)) from exc


def road_shares(latest: LatestFrame, lines: Sequence[BaseLine]) -> list[float] | None:
    """Each line's share on the latest road mask (None: no mask); a line inside the frame with less
    than :data:`ROAD_SHARE_MIN` on it is refused (one outside the frame is the solve's to refuse)."""
    mask = latest.road_mask
    if mask is None:
        return None
    width, height = latest.frame.width, latest.frame.height
    sx, sy = mask.shape[1] / width, mask.shape[0] / height
    shares = []
    for i, ln in enumerate(lines, start=1):
        inside = all(0 <= u <= width and 0 <= v <= height for u, v in (ln.p1, ln.p2))
        if not inside:
            shares.append(0.0)
            continue
        share = share_on_mask(mask, (ln.p1[0] * sx, ln.p1[1] * sy), (ln.p2[0] * sx, ln.p2[1] * sy))
        if share < ROAD_SHARE_MIN:
            raise HeightReferenceError(
                400,
                "off_the_road",
                f"line {i} is off the road: {share:.0%} of it on the road mask, at least {ROAD_SHARE_MIN:.0%} needed",
            )
        shares.append(round(share, 3))
    return shares


def measure_base(
    latest: LatestFrame | None, camera: CameraConfig, lines: Sequence[BaseLine], set_by: str, set_at: str
) -> tuple[BaseSolution, HeightReference, dict[str, Any]]:
    """Solve a measured base on a frame (a frozen one, or the latest): (the solution, the reference
    it makes from that frame's time on, the solution as the API shows it)."""
    if latest is None:
        raise HeightReferenceError(
            409, "no_frame", "no frame of this stream processed yet; try again in a moment"
        )
    try:
        solution, reference = solve_base_on_frame(latest.frame, lines, camera, set_by, set_at)
    except FrameScaleError as exc:
        raise HeightReferenceError(409, exc.code, str(exc)) from exc
    except (BaseError, ValueError) as exc:
        raise HeightReferenceError(400, "invalid_base", str(exc)) from exc
    shares = road_shares(latest, lines)
    shown = {
        **solution.to_dict(),
        "frame_time_s": round(latest.frame.timestamp_s, 4),
        "frame_index": latest.frame.index,
        "road_share": shares,
    }
    return solution, reference, shown


def _origin(own: HeightReference | None, reference: HeightReference | None) -> str:
    if own is not None:
        return "session"
    return "configuration" if reference is not None else "none"


class SessionHeight:
    """One stream's height reference: set from the API's thread, applied by the worker's."""

    def __init__(self, session_id: str, camera: CameraConfig) -> None:
        self.session_id = session_id
        self.camera = camera
        self._lock = threading.Lock()
        self._pending: tuple[HeightReference | None] | None = None  # for the worker's next frame
        self._own: HeightReference | None = None  # the session's; None: the configuration's
        self._solution: dict[str, Any] | None = None
        self._log: list[dict[str, Any]] = []
        self.latest: LatestFrame | None = None  # the worker's latest frame (one reference swap)
        self._stills: list[Still] = []  # frozen for measured bases, the last STILLS_KEPT

    # -- the API's thread -----------------------------------------------------------------------

    def set(
        self, reference: HeightReference | None, solution: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Use ``reference`` from the stream's next frame (None: back to the configuration's);
        returns the log entry."""
        entry = {
            "at": reference.set_at if reference is not None else utc_now_iso(),
            "action": "set" if reference is not None else "cleared",
            "reference": None if reference is None else reference.to_dict(),
            "solution": solution,
        }
        with self._lock:
            self._pending = (reference,)
            self._own = reference
            self._solution = solution if reference is not None else None
            self._log = [*self._log, entry][-LOG_LENGTH:]
        return entry

    def freeze(self) -> Still:
        """Keep the latest processed frame to draw a measured base on (the last :data:`STILLS_KEPT`
        frozen are kept); the same frame frozen again is the same still."""
        latest = self.latest
        if latest is None:
            raise HeightReferenceError(
                409, "no_frame", "no frame of this stream processed yet; try again in a moment"
            )
        with self._lock:
            for still in self._stills:
                if still.frame_index == latest.frame.index:
                    return still
            still = Still(latest, utc_now_iso())
            self._stills = [*self._stills, still][-STILLS_KEPT:]
        return still

    def frame_for(self, frame_index: int | None) -> LatestFrame | None:
        """The frame a measured base is solved on: the frozen frame ``frame_index`` (refused when it
        is not kept), or the latest processed one (None: no frame yet)."""
        if frame_index is None:
            return self.latest
        return self.still(frame_index).latest

    def still(self, frame_index: int) -> Still:
        """A frozen frame; 409 ``frame_gone`` when it is not (or no longer) kept."""
        with self._lock:
            stills = list(self._stills)
        for still in stills:
            if still.frame_index == frame_index:
                return still
        kept = ", ".join(str(s.frame_index) for s in stills) or "none"
        raise HeightReferenceError(
            409,
            "frame_gone",
            f"frame {frame_index} is not kept (the stream keeps the last {STILLS_KEPT} frames frozen: "
            f"{kept}); freeze the video again and draw on that frame",
        )

    def release(self) -> None:
        """The stream ended: its latest and frozen frames (their images and masks) are let go."""
        with self._lock:
            self._stills = []
        self.latest = None

    @property
    def reference(self) -> HeightReference | None:
        """The reference in effect (from the next frame on, when just set)."""
        own = self._own
        return own if own is not None else reference_from_config(self.camera)

    def state(self) -> dict[str, Any]:
        """What ``GET .../height-reference`` answers (``HeightStateOut``'s fields)."""
        with self._lock:
            own, solution = self._own, self._solution
        latest = self.latest
        reference = own if own is not None else reference_from_config(self.camera)
        return {
            "session_id": self.session_id,
            "origin": _origin(own, reference),
            "reference": None if reference is None else reference.to_dict(),
            "solution": solution,
            "scale": None if latest is None or latest.scale is None else latest.scale.to_dict(),
            "frame": None if latest is None else latest.to_dict(),
        }

    def info(self) -> dict[str, Any]:
        """What the session's stored info keeps: the reference in effect and every change."""
        with self._lock:
            own, solution, changes = self._own, self._solution, list(self._log)
        reference = own if own is not None else reference_from_config(self.camera)
        return {
            "height_reference": {
                "origin": _origin(own, reference),
                "reference": None if reference is None else reference.to_dict(),
                "solution": solution,
            },
            "height_reference_log": changes,
        }

    # -- the worker's thread --------------------------------------------------------------------

    def take_pending(self) -> tuple[bool, HeightReference | None]:
        """(whether the operator changed the reference since the last call, the new one)."""
        with self._lock:
            pending, self._pending = self._pending, None
        return (False, None) if pending is None else (True, pending[0])


__all__ = [
    "HeightReferenceError",
    "LatestFrame",
    "SessionHeight",
    "Still",
    "measure_base",
    "road_shares",
    "site_reference",
    "utc_now_iso",
]
