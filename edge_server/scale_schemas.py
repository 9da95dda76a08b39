"""API schemas of the scale a speed rests on (issue 39, "height above the road"): a violation's
scale (:class:`ScaleOut`, ``pipelines.height.ScaleInfo.to_dict()``), and a live session's height
reference (``/api/v1/sessions/{id}/height-reference``): what an operator sends
(:class:`HeightReferenceIn`: a site value or a measured base) and what the server answers
(:class:`HeightStateOut`).

A drone reports its altitude above its take-off point, not above the road it films; every speed
scales with the height above the road. Imported by :mod:`edge_server.schemas` (the violation's
fields) and the height-reference route; it imports pydantic and the engine's constants only.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pipelines.calibrate import MAX_LINES
from pipelines.height import REFERENCE_SOURCES, SCALE_SOURCES
from pipelines.types import SCALE_CHECK_STATUSES

log = logging.getLogger(__name__)

# where a speed's scale came from: the drone's altitude over unknown ground (flight), an operator's
# typed altitude (operator), the take-off point's height above the road for the site or session
# (site), lines of known length on the road (measured_base), the laser rangefinder's readings (lrf),
# a terrain model of the site (terrain)
ScaleSource = Literal[SCALE_SOURCES]  # type: ignore[valid-type]
# the height reference in effect: an operator's (site, measured_base) or the engine's (lrf, terrain)
ReferenceSource = Literal[REFERENCE_SOURCES]  # type: ignore[valid-type]

# who set a reference: a name or badge number, printable, at least one visible character
SET_BY_PATTERN = r"^[^\x00-\x1f\x7f]*[^\x00-\x20\x7f][^\x00-\x1f\x7f]*$"
Coordinate = Annotated[float, Field(allow_inf_nan=False)]  # pixels: checked against the frame by the solve


class HeightReferenceOut(BaseModel):
    """What turns the drone's altitude reading (above take-off) into its height above the road
    (``pipelines.height.HeightReference.to_dict()``)."""

    source: ReferenceSource = Field(
        description="site (a take-off height above the road) | measured_base | lrf (the laser "
        "rangefinder's readings, made by the engine) | terrain (a terrain model of the site, made by the engine)"
    )
    takeoff_above_road_m: float = Field(
        description="the take-off point's height above the road, added to every altitude reading"
    )
    sigma_m: float = Field(description="its one sigma (m)")
    pitch_bias_deg: float = Field(0.0, description="added to every reported gimbal pitch")
    pitch_sigma_deg: float | None = Field(None, description="null: the configuration's gimbal prior")
    height_pitch_corr: float = Field(
        0.0,
        description="the correlation of the height's and the pitch bias's errors (a measured base solves both)",
    )
    at_time_s: float | None = Field(
        None, description="stream time it was measured at (the barometer drifts from then on); null: take-off"
    )
    set_by: str = ""
    set_at: str = Field("", description="ISO 8601 UTC")
    detail: str = ""
    provisional: bool = Field(
        False,
        description="on fewer laser readings than a reference needs: speeds use it, no ticket rests on it",
    )


class ScaleOut(BaseModel):
    """The scale a speed (a violation's ticket, a frame) rests on (``ScaleInfo.to_dict()``)."""

    source: ScaleSource = Field(
        description="flight | operator | site | measured_base | lrf | terrain | vehicles"
    )
    height_above_road_m: float = Field(description="the camera's height above the road (m)")
    height_sigma_m: float = Field(description="its one sigma (m)")
    pitch_deg: float = Field(
        description="the gimbal pitch used (the reported one plus any measured bias and the traffic's move)"
    )
    pitch_sigma_deg: float = Field(description="its one sigma (deg)")
    pitch_from_traffic_deg: float = Field(
        0.0, description="how far the traffic's speeds moved the pitch (deg; pitch_check.correct)"
    )
    height_pitch_cov: float = Field(
        0.0,
        description="the covariance of the height's and the pitch's errors (m deg): a measured base's or the "
        "laser's, whose height rests on the pitch (0: independent)",
    )
    sigma_pct: float | None = Field(
        None, description="the relative sigma the scale gives the speed, % (a violation's, over its base)"
    )
    reference: HeightReferenceOut | None = Field(None, description="who set the height reference, when, how")

    @classmethod
    def from_stored(cls, data: dict[str, Any] | None) -> ScaleOut | None:
        """A stored scale dict; None when there is none or it no longer reads as one (logged)."""
        if not data:
            return None
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            log.warning(
                "a stored violation scale does not read as one (%s); shown as none", exc.error_count()
            )
            return None


class RulerOut(BaseModel):
    """One ruler's own reading of the scale (``RulerReading.to_dict()``)."""

    ruler: Literal["cars", "lanes"] = Field(
        description="cars: the tracked cars' sizes; lanes: the painted lane lines' spacing"
    )
    ratio: float = Field(description="the telemetry's scale over the one this ruler implies")
    sigma: float = Field(description="its one standard deviation")
    n: int = Field(0, description="the vehicles (cars) or the measured frames (lanes) behind it")


CheckOut = TypeVar("CheckOut", bound=BaseModel)


def _stored_check(cls: type[CheckOut], data: dict[str, Any] | None, what: str) -> CheckOut | None:
    """A check stored as JSON, as the API shows it; None when there is none or it no longer reads
    as one (logged)."""
    if not data:
        return None
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        log.warning("a stored %s does not read as one (%s); shown as none", what, exc.error_count())
        return None


class ScaleCheckOut(BaseModel):
    """The scale check from the vehicles and the lanes on the road (issue 40;
    ``ScaleCheckResult.to_dict()``): the telemetry's scale against the sizes of the cars the session
    saw and the width of its lanes."""

    status: Literal[SCALE_CHECK_STATUSES] = Field(  # type: ignore[valid-type]
        description="unverified (reason says why: too few vehicles yet, no usable view, ...) | ok (within "
        "the tolerance) | suspect (off by more than the tolerance beyond its uncertainty)"
    )
    ratio: float | None = Field(
        None,
        description="the telemetry's scale over the one the cars and the lanes imply: 1.10 means every "
        "distance and speed measured 10 % too large; null until enough vehicles or lane frames",
    )
    sigma: float | None = Field(None, description="its one standard deviation")
    n: int = Field(0, description="the vehicles (tracks) behind it")
    reason: str = Field("", description="why it is unverified or suspect; empty when ok")
    rulers: list[RulerOut] = Field(
        [],
        description="each ruler's own reading (cars, lanes); the ratio is their inverse-variance mean, "
        "null when they disagree beyond their uncertainty",
    )

    @classmethod
    def from_stored(cls, data: dict[str, Any] | None) -> ScaleCheckOut | None:
        """A stored check; None when there is none or it no longer reads as one (logged)."""
        return _stored_check(cls, data, "scale check")


class PitchCheckOut(BaseModel):
    """The gimbal's pitch checked against the traffic (issue 39; ``PitchCheckResult.to_dict()``):
    vehicles that hold their speed across an oblique view read faster or slower as they go where the
    pitch used is off."""

    status: Literal[SCALE_CHECK_STATUSES] = Field(  # type: ignore[valid-type]
        description="unverified (reason says why: too few vehicles yet, not yet determined) | ok (within "
        "the tolerance) | suspect (off by more than the tolerance beyond its uncertainty)"
    )
    pitch_error_deg: float | None = Field(
        None, description="the pitch used minus the one the traffic's speeds give (deg); null until enough"
    )
    sigma_deg: float | None = Field(None, description="its one standard deviation (deg)")
    vehicles: int = Field(0, description="the tracks behind it")
    reason: str = Field("", description="why it is unverified or suspect; empty when ok")

    @classmethod
    def from_stored(cls, data: dict[str, Any] | None) -> PitchCheckOut | None:
        """A stored check; None when there is none or it no longer reads as one (logged)."""
        return _stored_check(cls, data, "pitch check")


class BaseLineIn(BaseModel):
    """A line drawn on the session's video between two road marks, in the pixels of its frames."""

    model_config = ConfigDict(extra="forbid", strict=True)
    p1: list[Coordinate] = Field(min_length=2, max_length=2, description="[u, v] pixels")
    p2: list[Coordinate] = Field(min_length=2, max_length=2, description="[u, v] pixels")
    length_m: float = Field(
        allow_inf_nan=False, description="its length on the road (m), measured or from a map"
    )
    length_sigma_m: float | None = Field(
        None, allow_inf_nan=False, description="its one sigma (m); null: 0.5 % of the length"
    )


class HeightReferenceIn(BaseModel):
    """A session's height reference: either the take-off point's height above the road
    (``takeoff_above_road_m``, ``sigma_m``), or a measured base (``lines`` drawn on the session's
    latest frame, solved by the server). ``set_by``: who sets it (recorded on every violation).
    The kind follows from the fields given: an operator cannot send a source, so never the engine's
    own ``lrf``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    takeoff_above_road_m: float | None = Field(
        None,
        ge=-500,
        le=500,
        description="site value: the take-off point's height above the road (m; + above it, - below it)",
    )
    sigma_m: float | None = Field(
        None, gt=0, le=100, description="site value: its one sigma (m); null: the configuration's"
    )
    lines: list[BaseLineIn] | None = Field(
        None,
        max_length=MAX_LINES,
        description="measured base: lines between road marks, with their lengths, on the frame "
        "frame_index (else the latest frame)",
    )
    frame_index: int | None = Field(
        None,
        ge=0,
        description="measured base: the frozen frame the lines were drawn on (POST .../frames); null: "
        "the stream's latest frame (the drone should then hover while the lines are drawn)",
    )
    set_by: str = Field(min_length=1, max_length=80, pattern=SET_BY_PATTERN, description="who sets it")

    @model_validator(mode="after")
    def _one_kind(self) -> HeightReferenceIn:
        if (self.takeoff_above_road_m is None) == (self.lines is None):
            raise ValueError("give either takeoff_above_road_m (a site value) or lines (a measured base)")
        if self.lines is not None and self.sigma_m is not None:
            raise ValueError("sigma_m goes with takeoff_above_road_m; a measured base's sigma is solved")
        if self.lines is None and self.frame_index is not None:
            raise ValueError("frame_index goes with lines: the frame a measured base was drawn on")
        return self


class BaseLineOut(BaseModel):
    p1: list[float]
    p2: list[float]
    length_m: float
    length_sigma_m: float | None = None


class BaseSolutionOut(BaseModel):
    """A measured base's solution (``pipelines.calibrate.BaseSolution.to_dict()``) and where it was
    drawn: the frame's stream time and each line's share on the road mask."""

    height_above_road_m: float
    height_sigma_m: float
    pitch_bias_deg: float
    pitch_sigma_deg: float
    pitch_solved: bool = Field(description="the lines ran in directions that determine the pitch bias")
    height_pitch_corr: float = Field(0.0, description="the correlation of the two solved values' errors")
    takeoff_above_road_m: float
    altitude_reading_m: float = Field(
        description="the drone's altitude reading on that frame (above take-off)"
    )
    pitch_reading_deg: float = Field(description="its reported gimbal pitch")
    residuals_m: list[float] = Field(description="each line's solved minus typed length")
    lines: list[BaseLineOut]
    summary: str
    frame_time_s: float = Field(description="stream time of the frame the lines were solved on")
    frame_index: int | None = Field(None, description="that frame's index in the stream")
    road_share: list[float] | None = Field(
        None, description="each line's share on the road mask; null: the stream has no road mask"
    )


class FrameOut(BaseModel):
    """The latest processed frame of the stream: what a measured base is solved on."""

    time_s: float = Field(description="stream time")
    width: int
    height: int
    altitude_m: float | None = Field(None, description="the drone's altitude reading (above take-off)")
    gimbal_pitch_deg: float | None = None


class FrozenFrameOut(FrameOut):
    """A frame frozen to draw a measured base on: kept by the server until the base is solved on it
    (the stream keeps its last few), its image at ``image``."""

    frame_index: int = Field(description="the frame's index in the stream: PUT's frame_index")
    taken_at: str = Field(description="when it was frozen (ISO UTC)")
    image: str = Field(description="the frame as processed, without drawings: GET it (JPEG)")


class HeightStateOut(BaseModel):
    """A live session's height reference and the scale of its latest frame."""

    session_id: str
    origin: Literal["session", "configuration", "none"] = Field(
        description="session: set for this stream (PUT); configuration: the site's; none: the road's "
        "level is unknown (the drone's altitude over unknown ground)"
    )
    reference: HeightReferenceOut | None = Field(
        None, description="the reference in effect (a new one from the stream's next frame)"
    )
    solution: BaseSolutionOut | None = Field(
        None, description="the measured base behind the session's reference"
    )
    scale: ScaleOut | None = Field(None, description="the latest frame's scale; null: no speeds on it")
    frame: FrameOut | None = Field(None, description="the latest processed frame; null: none yet")


__all__ = [
    "BaseLineIn",
    "BaseSolutionOut",
    "FrameOut",
    "FrozenFrameOut",
    "HeightReferenceIn",
    "HeightReferenceOut",
    "HeightStateOut",
    "ReferenceSource",
    "ScaleOut",
    "ScaleSource",
]
