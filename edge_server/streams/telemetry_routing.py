"""Telemetry into the streams, and events out to their publishers: :class:`TelemetryRouter` takes
the "telemetry" data channel's messages (docs/telemetry-datachannel.md) and DJI Cloud API OSD over
MQTT (routed by the aircraft's serial number) into each session's buffer and clock mapping, counts
and answers rejected ones, and forwards a stream's events to its "events" data channel."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from edge_server.dji_cloud import parse_osd
from edge_server.events import dumps
from edge_server.telemetry import ImplausibleTelemetry, parse_message
from pipelines.errors import TelemetryError

if TYPE_CHECKING:
    from edge_server.streams.host import StreamHost
    from edge_server.streams.session import StreamSession
    from pipelines.types import Telemetry

log = logging.getLogger(__name__)


class TelemetryRouter:
    """Runs on the media loop; :meth:`on_osd` and :meth:`to_events_channel` hand over to it."""

    def __init__(self, host: StreamHost) -> None:
        self.host = host
        self.settings = host.settings
        self.metrics = host.metrics
        self._unknown_devices: dict[str, float] = {}  # OSD senders no stream names: last logged

    def on_datachannel(self, sess: StreamSession, message: str | bytes) -> None:
        """A "telemetry" data-channel message (docs/telemetry-datachannel.md)."""
        arrival = time.time()
        skew = self.settings.telemetry_max_clock_skew_s
        limit = self.settings.max_telemetry_message_bytes
        self._take(
            sess, arrival, lambda: parse_message(message, limit, arrival_s=arrival, max_clock_skew_s=skew)
        )

    def on_osd(self, device_sn: str, payload: bytes, arrival_s: float) -> None:
        """A DJI Cloud API OSD message (MQTT client's thread): handled on the media loop."""
        loop = self.host.media.loop if self.host.media is not None else self.host.loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._on_osd, device_sn, payload, arrival_s)

    def _on_osd(self, device_sn: str, payload: bytes, arrival: float) -> None:
        targets = [s for s in self.host.sessions.values() if s.device_sn == device_sn and not s.closing]
        if not targets:
            self.metrics.ingest_rejected.labels("mqtt", "unknown device").inc()
            now = time.monotonic()
            if now - self._unknown_devices.get(device_sn, -1e9) >= 60.0:  # once a minute per device
                if len(self._unknown_devices) > 1000:
                    self._unknown_devices.clear()
                self._unknown_devices[device_sn] = now
                log.info("OSD from aircraft %s, which no live stream's key names: ignored", device_sn[:64])
            return
        skew = self.settings.telemetry_max_clock_skew_s
        for sess in targets:
            self._take(sess, arrival, lambda: parse_osd(payload, arrival_s=arrival, max_clock_skew_s=skew))

    def _take(self, sess: StreamSession, arrival: float, parse: Callable[[], Telemetry]) -> None:
        """One telemetry message for ``sess``, whichever way it came: into the session's buffer and
        clock mapping, or counted as rejected (with a hole where its values were absurd)."""
        try:
            t = parse()
        except (TelemetryError, ValueError) as exc:
            if isinstance(exc, ImplausibleTelemetry):
                sess.telemetry.add_hole(exc.timestamp_s)  # frames around it get no telemetry
            self._reject(sess, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - a message must never end the stream
            log.warning("session %s: telemetry message could not be read", sess.id, exc_info=True)
            self._reject(sess, f"unreadable message ({type(exc).__name__})")
            return
        sess.telemetry.add(t)
        sess.clock.on_telemetry(t.timestamp_s, arrival)
        sess.stats.telemetry_received += 1
        sess.stats.last_telemetry_perf = time.perf_counter()
        self.metrics.telemetry_messages.labels("accepted").inc()

    def _reject(self, sess: StreamSession, reason: str) -> None:
        """Count a rejected message by reason and tell the sender (at most once a second)."""
        sess.stats.telemetry_rejected += 1
        sess.stats.telemetry_reject_reasons[reason[:120]] += 1
        self.metrics.telemetry_messages.labels("rejected").inc()
        log.debug("session %s: telemetry rejected: %s", sess.id, reason)
        now = time.monotonic()
        if now - sess.last_reject_notice >= 1.0:
            sess.last_reject_notice = now
            self.send_event(
                sess,
                {
                    "type": "telemetry.rejected",
                    "session_id": sess.id,
                    "reason": reason[:500],
                    "rejected_total": sess.stats.telemetry_rejected,
                },
            )

    def to_events_channel(self, sess: StreamSession, event: dict[str, Any]) -> None:
        """Bus listener (on the web server's loop): the event goes out on the media loop."""
        loop = self.host.loop
        if event.get("session_id") == sess.id and loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the media loop stopped (shutdown)
                loop.call_soon_threadsafe(self.send_event, sess, event)

    @staticmethod
    def send_event(sess: StreamSession, event: dict[str, Any]) -> None:
        ch = sess.events_channel
        if ch is not None and ch.readyState == "open":
            try:
                ch.send(dumps(event))
            except Exception:  # noqa: BLE001 - channel closing under us
                log.debug("event not sent on data channel", exc_info=True)


__all__ = ["TelemetryRouter"]
