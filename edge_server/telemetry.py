"""Live telemetry: the "telemetry" data-channel message, clock mapping and per-frame interpolation.

Protocol: docs/telemetry-datachannel.md. In short, each message is one JSON object with a
``timestamp`` on the sender's clock (Unix epoch seconds) and the flight state at that instant.
Video frames carry RTP timestamps with a random origin; :class:`ClockSync` maps a frame's media
time onto the sender's clock, and :class:`TelemetryBuffer` interpolates the samples there.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import threading
from collections import deque
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipelines.errors import TelemetryError
from pipelines.telemetry import at_sample, between_samples, validate_telemetry
from pipelines.types import Telemetry

log = logging.getLogger(__name__)

NTP_UNIX_OFFSET_S = 2208988800  # seconds from 1900-01-01 (NTP epoch) to 1970-01-01


class ImplausibleTelemetry(TelemetryError):
    """A well-formed message whose values no flight produces: the buffer gets a hole there."""

    def __init__(self, message: str, timestamp_s: float) -> None:
        super().__init__(message)
        self.timestamp_s = timestamp_s


class TelemetryMessage(BaseModel):
    """One telemetry sample as sent on the "telemetry" data channel (JSON object).

    Strict types: numbers must be JSON numbers (``true`` or ``"50"`` are refused, not read as 1.0
    and 50.0), strings JSON strings.
    """

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    type: Literal["telemetry"] = "telemetry"
    timestamp: float = Field(description="sender's wall clock, Unix epoch seconds (UTC)", gt=0)
    altitude_m: float | None = Field(None, ge=-1000, le=20000, description="height above the filmed ground")
    gimbal_pitch_deg: float | None = Field(None, ge=-180, le=180, description="-90 = straight down")
    gimbal_yaw_deg: float | None = Field(None, ge=-360, le=360)
    focal_length_mm: float | None = Field(None, gt=0, le=2000, description="real focal length")
    focal_length_35mm: float | None = Field(None, gt=0, le=5000, description="35 mm-equivalent focal length")
    digital_zoom: float = Field(1.0, ge=1.0, le=100)
    latitude: float | None = Field(None, ge=-90, le=90)
    longitude: float | None = Field(None, ge=-180, le=180)
    abs_altitude_m: float | None = Field(None, ge=-1000, le=20000)
    camera: str | None = Field(None, max_length=64, description="camera / drone model, e.g. 'DJI Mini 4 Pro'")
    lrf_range_m: float | None = Field(
        None,
        ge=3,
        le=3000,
        description="laser rangefinder's slant range (m) to the point at the image's centre, only while it "
        "measures (DJI H20/H30: 3-1200 m, H30 up to 3000 m); null or absent: no reading",
    )

    def to_telemetry(self) -> Telemetry:
        return Telemetry(
            timestamp_s=self.timestamp,
            altitude_m=self.altitude_m,
            gimbal_pitch_deg=self.gimbal_pitch_deg,
            focal_length_mm=self.focal_length_mm,
            focal_length_35mm=self.focal_length_35mm,
            digital_zoom=self.digital_zoom,
            latitude=self.latitude,
            longitude=self.longitude,
            abs_altitude_m=self.abs_altitude_m,
            gimbal_yaw_deg=self.gimbal_yaw_deg,
            camera=self.camera,
            lrf_range_m=self.lrf_range_m,
        )

    @classmethod
    def from_telemetry(cls, t: Telemetry, timestamp: float) -> TelemetryMessage:
        """Message for sample ``t`` stamped ``timestamp`` on the sender's clock (publisher side)."""
        fields = {
            "timestamp": timestamp,
            "altitude_m": t.altitude_m,
            "gimbal_pitch_deg": t.gimbal_pitch_deg,
            "gimbal_yaw_deg": t.gimbal_yaw_deg,
            "focal_length_mm": t.focal_length_mm,
            "focal_length_35mm": t.focal_length_35mm,
            "digital_zoom": t.digital_zoom or 1.0,
            "latitude": t.latitude,
            "longitude": t.longitude,
            "abs_altitude_m": t.abs_altitude_m,
            "camera": t.camera,
            "lrf_range_m": t.lrf_range_m,
        }
        return cls.model_validate(fields, strict=False)  # numpy scalars from parsed flight logs too


_FLOAT_FIELDS = tuple(
    name for name, f in TelemetryMessage.model_fields.items() if f.annotation in (float, float | None)
)


def parse_message(
    data: str | bytes,
    max_bytes: int = 16384,
    *,
    arrival_s: float | None = None,
    max_clock_skew_s: float = 0.0,
) -> Telemetry:
    """Decode and validate one data-channel message; raises TelemetryError with the reason.

    With ``arrival_s`` (the server's Unix time at arrival) and ``max_clock_skew_s`` > 0, a
    timestamp further than that from the arrival time is refused: a sample in milliseconds, or
    from a clock that is not the wall clock, cannot be matched to any frame.
    """
    return telemetry_from_fields(
        json_object(data, max_bytes), arrival_s=arrival_s, max_clock_skew_s=max_clock_skew_s
    )


def json_object(data: str | bytes, max_bytes: int) -> dict[str, Any]:
    """One JSON object of at most ``max_bytes``; TelemetryError says what it is instead."""
    if len(data) > max_bytes:
        raise TelemetryError(f"message too large ({len(data)} bytes > {max_bytes})")
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TelemetryError(f"not JSON: {exc}") from exc
    except RecursionError as exc:  # e.g. "[[[[...": the decoder recurses once per level
        raise TelemetryError("not JSON: nested too deeply") from exc
    if not isinstance(obj, dict):
        raise TelemetryError("a telemetry message must be a JSON object")
    return obj


def telemetry_from_fields(
    obj: dict[str, Any], *, arrival_s: float | None = None, max_clock_skew_s: float = 0.0
) -> Telemetry:
    """The checks every live telemetry path shares (data channel, DJI Cloud API OSD): the fields of
    :class:`TelemetryMessage` (strict types, ranges, finite), the flight's plausibility
    (:func:`pipelines.telemetry.validate_telemetry`: ImplausibleTelemetry) and the clock skew."""
    try:
        msg = TelemetryMessage.model_validate(obj)
    except ValidationError as exc:
        reasons = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'message'}: {e['msg']}" for e in exc.errors())
        raise TelemetryError(f"invalid telemetry: {reasons}") from exc
    for name in _FLOAT_FIELDS:  # json.loads reads NaN and Infinity
        v = getattr(msg, name)
        if v is not None and not math.isfinite(v):
            raise TelemetryError(f"invalid telemetry: {name} is not finite")
    try:
        telemetry = validate_telemetry(msg.to_telemetry())
    except TelemetryError as exc:
        raise ImplausibleTelemetry(str(exc), msg.timestamp) from exc
    if arrival_s is not None and max_clock_skew_s > 0:
        check_timestamp(msg.timestamp, arrival_s, max_clock_skew_s)
    return telemetry


def check_timestamp(timestamp: float, arrival_s: float, max_clock_skew_s: float) -> None:
    """TelemetryError when ``timestamp`` is implausibly far from the arrival time ``arrival_s``.

    The message holds no numbers that change from one message to the next, so the session's
    reject-reason counts stay few however long a sender keeps getting it wrong.
    """
    skew = timestamp - arrival_s
    if abs(skew) <= max_clock_skew_s:
        return
    if abs(timestamp / 1000.0 - arrival_s) <= max_clock_skew_s:
        raise TelemetryError(
            "invalid telemetry: timestamp looks like milliseconds: send Unix epoch seconds, "
            "e.g. System.currentTimeMillis() / 1000.0"
        )
    raise TelemetryError(
        f"invalid telemetry: timestamp more than {max_clock_skew_s:g} s "
        f"{'ahead of' if skew > 0 else 'behind'} the server's clock (telemetry_max_clock_skew_s): "
        "send Unix epoch seconds (UTC) from the sender's wall clock"
    )


# ------------------------------------------------------------------------------------------------
# clock mapping


def ntp_to_unix(ntp: int) -> float:
    return (ntp >> 32) - NTP_UNIX_OFFSET_S + (ntp & 0xFFFFFFFF) / 2**32


class OffsetEstimator:
    """The least-delayed ``arrival - sender time`` of recent samples, robust to outliers.

    Transport delays are positive and noisy, so the smallest offset of a stream is its
    least-delayed sample - the best alignment of the two clocks. Two guards keep one bad sample
    from ruining it for the rest of the stream (an all-time minimum would keep it forever):

    * only samples that arrived within the last ``window_s`` count (clocks drift, and a sender's
      clock may be stepped: after a step the estimate follows within half a window);
    * a sample more than ``outlier_s`` below the window's median is ignored: one message stamped
      seconds or hours ahead (a wrong unit, a bad clock) would otherwise be the minimum.
    """

    def __init__(self, window_s: float = 30.0, outlier_s: float = 1.0, capacity: int = 2048) -> None:
        self.window_s = window_s
        self.outlier_s = outlier_s
        self._samples: deque[tuple[float, float]] = deque(maxlen=capacity)  # (arrival, offset)
        self._value: float | None = None
        self._dirty = False
        self.ignored = 0  # samples of the window left out as outliers (at the last estimate)

    def __len__(self) -> int:
        return len(self._samples)

    def add(self, offset: float, arrival_s: float) -> None:
        self._samples.append((arrival_s, offset))
        while self._samples and arrival_s - self._samples[0][0] > self.window_s:
            self._samples.popleft()
        self._dirty = True

    @property
    def value(self) -> float | None:
        if self._dirty and self._samples:
            offsets = np.fromiter((o for _, o in self._samples), float, len(self._samples))
            kept = offsets[offsets >= float(np.median(offsets)) - self.outlier_s]
            self._value = float(kept.min())
            self.ignored = len(offsets) - len(kept)
            self._dirty = False
        return self._value


class ClockSync:
    """Maps a video frame's media time onto the telemetry sender's clock.

    Two estimates, the better one used:

    * ``rtcp``: the sender's RTCP Sender Reports pair an NTP wall-clock time with an RTP
      timestamp (RFC 3550 6.4.1). When the telemetry timestamps are on the same wall clock
      (Unix epoch, as the protocol asks), a frame's sender time is
      ``sr_unix + (frame_rtp - sr_rtp) / 90000`` - exact up to the sender's encoder delay.
    * ``arrival``: for senders whose telemetry clock is something else, both streams are aligned
      by their least-delayed recent arrivals (:class:`OffsetEstimator`): ``arrival - media_time``
      for video and ``arrival - timestamp`` for telemetry. Error = the difference of the two
      minimum transport delays (video's includes encode + jitter buffer + decode, typically
      20-100 ms).

    The RTCP estimate is used once a Sender Report has arrived and agrees with the arrival
    estimate within ``max_disagreement_s`` (i.e. the sender really uses one clock for both).
    Fed on the event loop, read by the stream's worker thread: a lock guards the estimators.
    """

    def __init__(
        self, clock_rate: int = 90000, max_disagreement_s: float = 2.0, window_s: float = 30.0
    ) -> None:
        self.clock_rate = clock_rate
        self.max_disagreement_s = max_disagreement_s
        self._video = OffsetEstimator(window_s)  # arrival - media_time
        self._telemetry = OffsetEstimator(window_s)  # arrival - sender timestamp
        self._lock = threading.Lock()
        self._sr: tuple[float, float] | None = None  # (sender unix time, media time in s)
        self.method = "none"
        self.disagreement_s: float | None = None  # rtcp - arrival estimate at the last mapping

    def on_frame(self, media_time_s: float, arrival_s: float) -> None:
        with self._lock:
            self._video.add(arrival_s - media_time_s, arrival_s)

    def on_telemetry(self, sender_ts: float, arrival_s: float) -> None:
        with self._lock:
            self._telemetry.add(arrival_s - sender_ts, arrival_s)

    def on_sender_report(self, sender_unix_s: float, media_time_s: float) -> None:
        self._sr = (sender_unix_s, media_time_s)

    def arrival_estimate(self, media_time_s: float) -> float | None:
        with self._lock:
            video, telemetry = self._video.value, self._telemetry.value
        if video is None or telemetry is None:
            return None
        return media_time_s + video - telemetry

    def rtcp_estimate(self, media_time_s: float) -> float | None:
        if self._sr is None:
            return None
        sr_unix, sr_media = self._sr
        return sr_unix + (media_time_s - sr_media)

    def receive_delay(self, media_time_s: float, arrival_s: float) -> float | None:
        """Seconds from a frame's capture, on the sender's clock (its RTCP Sender Reports), to its
        arrival here decoded (``arrival_s``, this machine's wall clock): the network, the jitter
        buffer, the decoder and the server's own backlog in receiving. None before a Sender Report.
        Exact where sender and server share a clock (one box: serve-bench); between two machines it
        also holds their clocks' offset (NTP-synced phones: tens of ms)."""
        sender = self.rtcp_estimate(media_time_s)
        return None if sender is None else arrival_s - sender

    def to_sender_time(self, media_time_s: float) -> float | None:
        """The frame's capture time on the telemetry clock, or None while unknown."""
        arrival = self.arrival_estimate(media_time_s)
        rtcp = self.rtcp_estimate(media_time_s)
        if rtcp is not None and arrival is not None:
            self.disagreement_s = rtcp - arrival
        if rtcp is not None and arrival is not None and abs(rtcp - arrival) <= self.max_disagreement_s:
            self.method = "rtcp"
            return rtcp
        self.method = "arrival" if arrival is not None else "none"
        return arrival

    def describe(self) -> dict[str, Any]:
        with self._lock:
            video, telemetry = self._video.value, self._telemetry.value
            ignored = self._telemetry.ignored
        return {
            "method": self.method,
            "video_offset_s": video,
            "telemetry_offset_s": telemetry,
            "telemetry_outliers_in_window": ignored,
            "sender_report": self._sr,
            "rtcp_minus_arrival_s": self.disagreement_s,
        }


def install_sender_report_hook(receiver: Any, sync: ClockSync) -> bool:
    """Feed the RTCP Sender Reports of an aiortc ``RTCRtpReceiver`` (video) into ``sync``.

    aiortc keeps the RTP->media-time mapping private (``TimestampMapper``); this hook reads it to
    express the report's RTP timestamp in the same zero-based media time as the decoded frames'
    ``pts``. Returns False (arrival alignment only) when this aiortc version lays it out otherwise.
    """
    from aiortc.rtp import RtcpSrPacket

    mapper = getattr(receiver, "_RTCRtpReceiver__timestamp_mapper", None)
    original = getattr(receiver, "_handle_rtcp_packet", None)
    if mapper is None or original is None or not hasattr(mapper, "_origin"):
        log.info("aiortc internals differ: telemetry aligned by arrival time only")
        return False

    async def handle(packet: Any) -> None:
        if isinstance(packet, RtcpSrPacket):
            try:
                last, origin = mapper._last, mapper._origin
                if last is not None and origin is not None:
                    rtp = packet.sender_info.rtp_timestamp
                    diff = ((rtp - last + 2**31) % 2**32) - 2**31  # signed 32-bit distance
                    media_time = (last - origin + diff) / sync.clock_rate
                    sync.on_sender_report(ntp_to_unix(packet.sender_info.ntp_timestamp), media_time)
            except Exception:  # noqa: BLE001 - never break RTCP handling
                log.debug("sender report not usable", exc_info=True)
        await original(packet)

    receiver._handle_rtcp_packet = handle
    return True


class TelemetryBuffer:
    """Recent telemetry samples ordered by sender time; ``at(t)`` interpolates them through the
    offline track's function (:func:`pipelines.telemetry.between_samples`), so a flight gets the
    same telemetry, and the same refusals (a jump in height, a field missing on one side, a
    rejected sample in between), live and offline.

    What is live-only is the hold/gap policy: before the first or after the last sample the
    nearest one is held for at most ``max_age_s``; across a gap longer than ``2 * max_age_s`` the
    nearer side is held if it is that fresh. Otherwise (and where the telemetry is refused) ``at``
    returns None: the frame gets no telemetry, and the pipeline says so and measures no speed.
    """

    def __init__(self, max_age_s: float = 2.0, capacity: int = 4096) -> None:
        self.max_age_s = max_age_s
        self._times: deque[float] = deque(maxlen=capacity)
        self._samples: deque[Telemetry] = deque(maxlen=capacity)
        self._holes: deque[float] = deque(maxlen=capacity)  # sorted times of rejected samples
        self._lock = threading.Lock()  # written on the event loop, read by the worker thread
        self.refused = 0  # at() calls refused for a discontinuity or a rejected sample

    def __len__(self) -> int:
        return len(self._samples)

    def add(self, t: Telemetry) -> None:
        with self._lock:
            self._add(t)

    def add_hole(self, timestamp_s: float) -> None:
        """A sample at ``timestamp_s`` was rejected (implausible): never interpolate across it."""
        if not math.isfinite(timestamp_s):
            return
        with self._lock:
            if not self._holes or timestamp_s >= self._holes[-1]:
                self._holes.append(timestamp_s)
                return
            if len(self._holes) == self._holes.maxlen:
                self._holes.popleft()  # deque.insert refuses a full deque
            bisect.insort(self._holes, timestamp_s)

    def at(self, ts: float) -> Telemetry | None:
        with self._lock:
            try:
                return self._at(ts)
            except TelemetryError as exc:
                self.refused += 1
                log.debug("telemetry refused: %s", exc)
                return None

    def _add(self, t: Telemetry) -> None:
        ts = t.timestamp_s
        if not self._times or ts >= self._times[-1]:
            if self._times and ts == self._times[-1]:
                self._samples[-1] = t  # same instant: newest wins
                return
            self._times.append(ts)
            self._samples.append(t)
            return
        # out of order (unordered channel): insert in place
        times = list(self._times)
        i = bisect.bisect_left(times, ts)
        if i < len(times) and times[i] == ts:
            self._samples[i] = t
            return
        if len(self._times) == self._times.maxlen:  # deque.insert refuses a full deque
            if i == 0:
                return  # older than everything kept: the oldest would be dropped at once
            self._times.popleft()
            self._samples.popleft()
            i -= 1
        self._times.insert(i, ts)
        self._samples.insert(i, t)

    def _at(self, ts: float) -> Telemetry | None:
        if not self._times:
            return None
        times, samples = self._times, self._samples
        if ts <= times[0]:
            return at_sample(samples, 0, ts) if times[0] - ts <= self.max_age_s else None
        if ts >= times[-1]:
            return at_sample(samples, len(times) - 1, ts) if ts - times[-1] <= self.max_age_s else None
        i = bisect.bisect_right(times, ts)  # times[i-1] <= ts < times[i]
        t0, t1 = times[i - 1], times[i]
        if t1 - t0 > 2 * self.max_age_s:  # a hole in the telemetry: use the nearer side if fresh
            if ts - t0 <= self.max_age_s:
                return at_sample(samples, i - 1, ts)
            if t1 - ts <= self.max_age_s:
                return at_sample(samples, i, ts)
            return None
        return between_samples(samples, i, ts, holes=self._holes)
