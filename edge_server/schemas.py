"""API and event schemas (pydantic: the edge of the service)."""

from __future__ import annotations

import datetime as dt
import difflib
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    model_validator,
)
from pydantic_core import PydanticCustomError

from edge_server.alerts.schemas import CheckpointOut
from edge_server.evidence.schemas import EvidenceOut, LegalHoldOut
from edge_server.scale_schemas import PitchCheckOut, ScaleCheckOut, ScaleOut, ScaleSource
from edge_server.settings import PLAIN_ID
from edge_server.store import SORTS, SessionRow, TrackRow, ViolationRow, violation_status
from pipelines.config import TicketRule, ToleranceMode
from pipelines.height import SCALE_SOURCES

# Text that reaches a database query: no control characters (PostgreSQL refuses NUL in strings).
PLAIN_TEXT = r"^[^\x00-\x1f\x7f]*$"

# Every REST route of the edge server lives under this prefix (the URLs in payloads name it too).
API_PREFIX = "/api/v1"


class ErrorOut(BaseModel):
    error: str = Field(description="machine-readable code, e.g. not_found, unauthorized, invalid_request")
    detail: Any = Field(description="human-readable explanation (or a list of field problems)")
    problems: list[dict[str, Any]] | None = Field(
        None, description="422 only: each field at fault ({field, message, input})"
    )


class SdpIn(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sdp: str = Field(min_length=1, max_length=200_000)
    type: Literal["offer"] = "offer"


class SdpOut(BaseModel):
    sdp: str
    type: Literal["answer"] = "answer"
    session_id: str
    events_url: str
    session_url: str


class ViewerOut(BaseModel):
    sdp: str
    type: Literal["answer"] = "answer"
    session_id: str
    viewer_id: str = Field(description="DELETE .../viewers/{viewer_id} ends the viewing")


class StopOut(BaseModel):
    session_id: str
    status: Literal["ended", "closing"] = Field(
        description="ended: flushed and stored; closing: stopped, still being stored (session.ended follows)"
    )
    detail: str | None = Field(None, description="closing only: what happens next")


# A violation's one status (derived: edge_server.store.violation_status): "enforceable" (a ticket may
# be issued), "not_enforceable" (over the limit by its measurement, not to be ticketed:
# status_reason says why), "dismissed" (an officer marked it a false positive), "legacy" (stored
# before the ticket speed: the peak is its only speed)
ViolationStatus = Literal["enforceable", "not_enforceable", "dismissed", "legacy"]
VIOLATION_STATUSES: tuple[str, ...] = ViolationStatus.__args__  # type: ignore[attr-defined]
LEGACY_REASON = "stored before the ticket speed: peak only (informative), no speed to ticket"


class MeasuringBaseOut(BaseModel):
    """The stretch of the track the ticket speed was measured over."""

    start_time_s: float = Field(description="stream time (s since the first frame)")
    end_time_s: float
    duration_s: float
    start_frame: int = Field(description="frame numbers from 1, like every AirPatrol output")
    end_frame: int
    distance_m: float = Field(description="ground distance the vehicle travelled over the base")
    n_samples: int = Field(description="ground positions measured in it")
    index: int = Field(1, description="which of `of` non-overlapping bases the run was split into")
    of: int = Field(1, description="how many (an accelerating vehicle); the highest is reported")
    snapshot_frame: int | None = Field(
        None, description="the frame of the base the box and snapshot are from"
    )
    snapshot_time_s: float | None = Field(None, description="... and its stream time")
    track_id: int | None = Field(
        None,
        description="the track it was measured on, where not the violation's own: another track of the "
        "same vehicle (its box split, or the tracker restarted it) that followed it longer",
    )

    @classmethod
    def from_stored(cls, data: dict[str, Any] | None) -> MeasuringBaseOut | None:
        if not data:
            return None
        duration = data.get("duration_s", data["end_time_s"] - data["start_time_s"])
        return cls.model_validate({**data, "duration_s": duration})


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


class ViolationOut(BaseModel):
    id: int
    session_id: str
    occurred_at: dt.datetime
    track_id: int
    class_name: str
    zone: str
    speed_limit_kmh: float
    ticket_speed_kmh: float | None = Field(
        None,
        description="the speed on the ticket, measured over `base`; null when the track had no "
        "measuring base of the minimum length, and on legacy rows",
    )
    ticket_sigma_kmh: float | None = Field(None, description="one standard deviation of the ticket speed")
    tolerance_kmh: float | None = Field(None, description="the tolerance applied at the ticket speed")
    confidence_k: float | None = Field(None, description="the one-sided confidence factor k (sigmas)")
    base: MeasuringBaseOut | None = Field(None, description="the measuring base; null without one")
    status: ViolationStatus = Field(
        description="enforceable | not_enforceable (status_reason says why) | dismissed (marked a "
        "false positive) | legacy (stored before the ticket speed: peak only)"
    )
    status_reason: str = Field("", description="why it is not enforceable (or legacy); empty otherwise")
    peak_speed_kmh: float = Field(
        description="highest per-frame estimate (informative, not the ticket speed)"
    )
    mean_speed_kmh: float = Field(description="mean per-frame estimate while over the limit (informative)")
    sigma_kmh: float = Field(description="one sigma of the per-frame estimate (informative)")
    start_time_s: float
    end_time_s: float
    start_frame: int
    end_frame: int
    bbox_xyxy: list[float] | None = None
    ground_xy_m: list[float] | None = Field(
        None, description="stabilised ground position (m) on a frame of the measuring base"
    )
    latitude: float | None = Field(None, description="vehicle position, when the engine could compute it")
    longitude: float | None = None
    drone_latitude: float | None = Field(None, description="drone position from telemetry at the violation")
    drone_longitude: float | None = None
    altitude_m: float | None = None
    scale_source: ScaleSource | None = Field(
        None, description="the scale's source: flight, operator, site, measured_base, lrf (see `scale`)"
    )
    false_positive: bool
    snapshot_url: str | None = None
    clip_url: str | None = None
    server_id: str | None = Field(
        None, description="the edge server that recorded it (a fleet on one database)"
    )
    # the scale the ticket rests on (issue 39): null on rows stored before it, and without one
    height_above_road_m: float | None = Field(None, description="the camera's height above the road (m)")
    height_sigma_m: float | None = Field(None, description="its one sigma (m)")
    scale_sigma_pct: float | None = Field(None, description="the speed's relative sigma from the scale (%)")
    scale: ScaleOut | None = Field(None, description="source, height, pitch, sigmas, reference")
    # the session's scale check from the vehicles when it closed (issue 40): null before it, and off
    scale_check: ScaleCheckOut | None = Field(
        None, description="the scale against the cars' sizes: status, ratio, its sigma, vehicles, reason"
    )
    # the session's pitch check against the traffic (issue 39): null before it, and off
    pitch_check: PitchCheckOut | None = Field(
        None,
        description="the gimbal's pitch against the traffic's speeds: status, error (deg), sigma, reason",
    )
    evidence: EvidenceOut | None = Field(None, description="the signed evidence pack; null: none made yet")
    legal_hold: LegalHoldOut | None = Field(None, description="kept whatever the retention; null: none")
    media_purged_at: dt.datetime | None = Field(None, description="when retention removed its media")
    heading_deg: float | None = Field(
        None, description="direction of travel, compass bearing (0 north, 90 east)"
    )
    next_checkpoint: CheckpointOut | None = Field(None, description="the next checkpoint ahead, with its ETA")

    @classmethod
    def from_row(cls, row: ViolationRow, prefix: str = API_PREFIX) -> ViolationOut:
        ground = None
        if row.ground_x_m is not None and row.ground_y_m is not None:
            ground = [row.ground_x_m, row.ground_y_m]
        status = violation_status(bool(row.false_positive), row.ticket_status)
        reason = row.status_reason or ""
        if row.ticket_status is None and not reason:
            reason = LEGACY_REASON
        return cls(
            id=row.id,
            session_id=row.session_id,
            occurred_at=row.occurred_at,
            track_id=row.track_id,
            class_name=row.class_name,
            zone=row.zone,
            speed_limit_kmh=round(row.speed_limit_kmh, 2),
            ticket_speed_kmh=_round(row.ticket_speed_kmh),
            ticket_sigma_kmh=_round(row.ticket_sigma_kmh),
            tolerance_kmh=_round(row.tolerance_kmh),
            confidence_k=_round(row.confidence_k, 3),
            base=MeasuringBaseOut.from_stored(row.base),
            status=status,
            status_reason=reason,
            peak_speed_kmh=round(row.peak_speed_kmh, 2),
            mean_speed_kmh=round(row.mean_speed_kmh, 2),
            sigma_kmh=round(row.sigma_kmh or 0.0, 2),
            start_time_s=row.start_time_s,
            end_time_s=row.end_time_s,
            start_frame=row.start_frame,
            end_frame=row.end_frame,
            bbox_xyxy=row.bbox_xyxy,
            ground_xy_m=ground,
            latitude=row.latitude,
            longitude=row.longitude,
            drone_latitude=row.drone_latitude,
            drone_longitude=row.drone_longitude,
            altitude_m=row.altitude_m,
            scale_source=row.scale_source if row.scale_source in SCALE_SOURCES else None,
            false_positive=bool(row.false_positive),
            snapshot_url=f"{prefix}/violations/{row.id}/snapshot.jpg" if row.snapshot_path else None,
            clip_url=f"{prefix}/violations/{row.id}/clip.mp4" if row.clip_path else None,
            server_id=row.server_id,
            height_above_road_m=row.height_above_road_m,
            height_sigma_m=row.height_sigma_m,
            scale_sigma_pct=row.scale_sigma_pct,
            scale=ScaleOut.from_stored(row.scale),
            scale_check=ScaleCheckOut.from_stored(row.scale_check),
            pitch_check=PitchCheckOut.from_stored(getattr(row, "pitch_check", None)),
            evidence=EvidenceOut.from_row(row, f"{prefix}/violations/{row.id}/evidence.zip"),
            legal_hold=LegalHoldOut.from_row(row),
            media_purged_at=getattr(row, "media_purged_at", None),
            heading_deg=getattr(row, "heading_deg", None),
            next_checkpoint=CheckpointOut.from_stored(getattr(row, "next_checkpoint", None)),
        )


class ViolationPage(BaseModel):
    items: list[ViolationOut]
    next_cursor: str | None = Field(
        None, description="pass as ?cursor= to get the next page; null on the last"
    )


class FalsePositiveIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # JSON true or false, as documented: not 0, 1 or "true", which pydantic would otherwise take
    false_positive: StrictBool


class TrackOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    track_id: int
    class_name: str
    first_time_s: float
    last_time_s: float
    frames: int
    peak_speed_kmh: float | None
    mean_speed_kmh: float | None
    violated: bool


class SessionOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: str
    kind: str
    server_id: str | None = None
    status: str
    end_reason: str | None
    remote: str | None
    started_at: dt.datetime
    ended_at: dt.datetime | None
    width: int | None
    height: int | None
    camera: str | None
    frames_received: int
    frames_processed: int
    frames_dropped: int
    telemetry_received: int
    telemetry_rejected: int
    violations_count: int
    processed_fps: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None

    @classmethod
    def from_row(cls, row: SessionRow, live: dict[str, Any] | None = None) -> SessionOut:
        out = cls.model_validate(row)
        if live:  # an active stream: counters from memory, the row is written at the end
            out = out.model_copy(update={k: v for k, v in live.items() if k in cls.model_fields})
        return out


class SessionDetail(SessionOut):
    info: dict[str, Any] | None = None
    tracks: list[TrackOut] = []

    @classmethod
    def from_row_full(
        cls, row: SessionRow, tracks: list[TrackRow], live: dict[str, Any] | None = None
    ) -> SessionDetail:
        base = SessionOut.from_row(row, live)
        return cls(**base.model_dump(), info=row.info, tracks=[TrackOut.model_validate(t) for t in tracks])


class SessionPage(BaseModel):
    items: list[SessionOut]
    next_cursor: str | None = None


# ------------------------------------------------------------------------------------------------
# query parameters of the list endpoints


def _not_a_number(value: Any) -> Any:
    """A date-time parameter is ISO 8601 text, as documented (``format: date-time``): pydantic would
    also read a number as Unix seconds, so ``since=2025`` would silently mean 1970-01-01T00:33:45Z."""
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return value
    elif not isinstance(value, int | float):
        return value
    raise ValueError("expected an ISO 8601 date-time such as 2025-06-01T12:00:00Z, not a number")


IsoDateTime = Annotated[dt.datetime, BeforeValidator(_not_a_number)]

SortName = Literal[
    "-occurred_at",
    "occurred_at",
    "-ticket_speed_kmh",
    "ticket_speed_kmh",
    "-peak_speed_kmh",
    "peak_speed_kmh",
    "-id",
    "id",
]
assert set(SortName.__args__) == set(SORTS)  # type: ignore[attr-defined]

_STATUS = "(" + "|".join(VIOLATION_STATUSES) + ")"
STATUS_LIST = rf"^{_STATUS}(,{_STATUS})*$"


def _status_list(value: str) -> str:
    """``status=``: one status or several separated by commas (any of them matches)."""
    unknown = [s for s in value.split(",") if s not in VIOLATION_STATUSES]
    if unknown:
        raise ValueError(
            f"unknown status {unknown[0]!r}: give one of {', '.join(VIOLATION_STATUSES)}, "
            "or several separated by commas"
        )
    return value


StatusList = Annotated[
    str, Field(max_length=100, json_schema_extra={"pattern": STATUS_LIST}), AfterValidator(_status_list)
]


class StrictQuery(BaseModel):
    """Query parameters of an endpoint. An unknown name is an error naming it: a typo such as
    ``min_sped=80`` must not silently drop a filter and answer with everything."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _known_names_only(cls, data: Any) -> Any:
        if isinstance(data, dict):
            known = list(cls.model_fields)
            unknown = {str(k)[:100]: unknown_parameter_message(str(k), known) for k in data if k not in known}
            if unknown:
                raise PydanticCustomError(
                    "unknown_parameter",
                    "{summary}",
                    {"summary": "; ".join(f"{k!r}: {m}" for k, m in unknown.items()), "unknown": unknown},
                )
        return data


def unknown_parameter_message(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"unknown query parameter (did you mean {close[0]!r}?)"
    return f"unknown query parameter; this endpoint takes {', '.join(known)}"


class SessionQuery(StrictQuery):
    status: Literal["active", "ended", "failed"] | None = Field(None, description="filter by status")
    server_id: str | None = Field(
        None, max_length=64, pattern=PLAIN_ID, description="one server of the fleet"
    )
    limit: int = Field(50, ge=1, le=500)
    cursor: str | None = Field(None, max_length=512, description="next_cursor of the previous page")


class ViolationFilterQuery(StrictQuery):
    """What selects violations: the list and the CSV export take the same filters."""

    session_id: str | None = Field(None, max_length=64, pattern=PLAIN_TEXT)
    since: IsoDateTime | None = Field(None, description="occurred_at >= since (ISO 8601, naive = UTC)")
    until: IsoDateTime | None = Field(None, description="occurred_at < until (ISO 8601, naive = UTC)")
    min_speed_kmh: float | None = Field(
        None,
        ge=0,
        le=1000,
        description="ticket speed at least (violations without a ticket speed are left out)",
    )
    max_speed_kmh: float | None = Field(
        None,
        ge=0,
        le=1000,
        description="ticket speed at most (violations without a ticket speed are left out)",
    )
    zone: str | None = Field(None, max_length=64, pattern=PLAIN_TEXT)
    class_name: str | None = Field(None, max_length=64, pattern=PLAIN_TEXT, description="e.g. car, truck")
    server_id: str | None = Field(
        None, max_length=64, pattern=PLAIN_ID, description="one server of the fleet"
    )
    false_positive: bool | None = Field(None, description="only (un)marked ones")
    status: StatusList | None = Field(
        None, description="one status or a comma list: enforceable, not_enforceable, dismissed, legacy"
    )
    sort: SortName = Field(
        "-occurred_at",
        description="field, '-' for descending; ticket_speed_kmh: violations without one come last",
    )

    @property
    def statuses(self) -> tuple[str, ...] | None:
        return tuple(self.status.split(",")) if self.status else None


class ViolationQuery(ViolationFilterQuery):
    limit: int = Field(50, ge=1, le=500)
    cursor: str | None = Field(None, max_length=512, description="next_cursor of the previous page")


# ------------------------------------------------------------------------------------------------
# a live stream's rules


FiniteCoordinate = Annotated[float, Field(ge=-100_000, le=100_000)]
ImagePoint = Annotated[list[FiniteCoordinate], Field(min_length=2, max_length=2, description="[x, y]")]


class ZoneIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field(min_length=1, max_length=64, pattern=r"^[^\x00-\x1f\x7f]*$")
    polygon: list[ImagePoint] = Field(
        min_length=3, max_length=64, description="corners in the stream's image pixels, in order"
    )
    speed_limit_kmh: float = Field(gt=0, le=300)


class RulesIn(BaseModel):
    """A live stream's limits and zones, from its next frame on. ``speed_limit_kmh`` is required
    (null: only the zones have limits); the other fields, left out, keep their current values."""

    model_config = ConfigDict(extra="forbid", strict=True)
    speed_limit_kmh: float | None = Field(..., gt=0, le=300, description="global limit; null: zones only")
    zones: list[ZoneIn] | None = Field(None, max_length=32, description="first match wins; null: unchanged")
    tolerance_kmh: float | None = Field(
        None, ge=0, le=50, description="tolerance in km/h (tolerance_mode kmh, and max)"
    )
    tolerance_percent: float | None = Field(
        None, ge=0, le=50, description="tolerance in % of the speed (tolerance_mode percent, and max)"
    )
    tolerance_mode: ToleranceMode | None = Field(
        None, description="kmh, percent, or max: the larger of both (OIML R 91 with 3 km/h and 3 %)"
    )
    ticket_rule: TicketRule | None = Field(
        None,
        description="when a violation is enforceable: tolerance (k sigma within the tolerance, "
        "speed - tolerance > limit), tolerance_and_sigma (speed - tolerance - k sigma > limit), "
        "lower_bound (speed - k sigma > limit + tolerance)",
    )
    confidence: float | None = Field(
        None, gt=0.5, lt=1.0, description="one-sided confidence of k sigma (0.95: k = 1.645)"
    )
    min_duration_s: float | None = Field(None, ge=0, le=10, description="how long above it counts")

    @model_validator(mode="after")
    def _unique_zone_names(self) -> RulesIn:
        names = [z.name for z in self.zones or []]
        if len(set(names)) != len(names) or "global" in names:
            raise ValueError("zone names must be unique and not 'global' (the global limit's name)")
        return self


class RulesOut(BaseModel):
    speed_limit_kmh: float | None
    zones: list[ZoneIn]
    tolerance_kmh: float
    tolerance_percent: float
    tolerance_mode: ToleranceMode
    ticket_rule: TicketRule
    confidence: float
    min_duration_s: float


# ------------------------------------------------------------------------------------------------
# RTMP keys, RTSP pull, operator telemetry


class OperatorTelemetryIn(BaseModel):
    """Flight values the operator sets for a stream: the scale of one that carries no telemetry
    (DJI Fly's RTMP, a camera pulled over RTSP), or what its telemetry lacks (the camera model: DJI
    Cloud API OSD does not name it). A stream scaled by the operator's altitude or pitch records it
    on its violations (``scale_source: operator``)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    altitude_m: float | None = Field(
        None, gt=0, le=1000, description="camera height above the filmed road, m"
    )
    gimbal_pitch_deg: float | None = Field(
        None, ge=-90, le=0, description="-90 = straight down, 0 = the horizon"
    )
    camera: str | None = Field(
        None,
        max_length=64,
        pattern=PLAIN_TEXT,
        description="camera profile, e.g. 'DJI Mini 4 Pro' (see docs)",
    )
    focal_length_35mm: float | None = Field(None, gt=0, le=2000, description="35 mm-equivalent focal length")

    @model_validator(mode="after")
    def _something(self) -> OperatorTelemetryIn:
        if all(value is None for value in self.model_dump().values()):
            raise ValueError("give at least one of altitude_m, gimbal_pitch_deg, camera, focal_length_35mm")
        return self


class RtmpKeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, max_length=100, pattern=PLAIN_TEXT, description="e.g. the pilot or drone")
    device_sn: str | None = Field(
        None,
        max_length=64,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="the aircraft's serial number: its DJI Cloud API telemetry (MQTT OSD) goes to this key's streams",
    )
    operator: OperatorTelemetryIn | None = Field(
        None, description="for streams of this key without telemetry"
    )


class RtmpKeyOut(BaseModel):
    id: str
    name: str | None
    device_sn: str | None
    operator: dict[str, Any] | None
    created_at: dt.datetime
    last_used_at: dt.datetime | None
    live_session_id: str | None = Field(None, description="the stream publishing with this key now")


class RtmpKeyCreated(RtmpKeyOut):
    key: str = Field(description="the stream key: shown this once, only its hash is kept")
    url: str = Field(description="what the pilot enters in the DJI app: rtmp://<edge>:<port>/live/<key>")


class RtspIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        min_length=8,
        max_length=2000,
        pattern=r"^rtsps?://[^\s\x00-\x1f\x7f]+$",
        description="rtsp://[user:password@]host[:port]/path (DJI Dock, a fixed camera)",
    )
    operator: OperatorTelemetryIn | None = None
    device_sn: str | None = Field(
        None,
        max_length=64,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="the aircraft whose DJI Cloud API telemetry (MQTT OSD) belongs to this stream",
    )


class StreamStartedOut(BaseModel):
    session_id: str
    kind: str
    events_url: str
    session_url: str
