"""DJI Cloud API telemetry: the aircraft's OSD messages over MQTT, mapped to the engine's telemetry.

DJI Pilot 2, connected to a third-party cloud (here: the edge server) through the Cloud API,
publishes the aircraft's state on ``thing/product/{device_sn}/osd`` (DJI's reference: 0.5 Hz),
one JSON object per message::

    {"tid": "...", "bid": "...", "timestamp": 1654070968655, "gateway": "<RC serial>",
     "data": {"latitude": 22.9, "longitude": 113.9, "height": 120.3, "elevation": 60.2,
              "attitude_head": 91.0, "horizontal_speed": 0.1, ...,
              "66-0-0": {"payload_index": "66-0-0", "gimbal_pitch": -90.0, "gimbal_yaw": 91.0,
                         "zoom_factor": 1.0, "measure_target_distance": 85.1,
                         "measure_target_error_state": 0, ...}}}

What the engine uses: ``elevation`` (height above the take-off point) as the camera's height above
the road, like the SRT's ``rel_alt``; the main gimbal's ``gimbal_pitch``/``gimbal_yaw`` (payload
keys are ``{type-subtype-gimbalindex}``; the lowest gimbal index, not e.g. an FPV camera's);
``zoom_factor``; ``latitude``/``longitude``; ``height`` (ellipsoid height) as the absolute altitude;
``timestamp`` (ms, the RC's clock). On enterprise payloads with a laser rangefinder (Zenmuse
H20/H20T/H30, M30 series) the main gimbal's ``measure_target_distance`` (the slant range to the
point at the image's centre) becomes ``lrf_range_m``, only while ``measure_target_error_state`` is
0 (NORMAL; 1 too close, 2 too far, 3 no signal: no reading, though a distance is still sent). The
camera model is not in the OSD: it comes from the stream key's operator values. Each message then
goes through the same checks as a data-channel message
(:func:`edge_server.telemetry.telemetry_from_fields`).

The server is an MQTT client (paho-mqtt) of the broker the pilots' apps connect to: by default a
Mosquitto it starts itself (:class:`edge_server.mosquitto.MosquittoBroker`), or ``mqtt_url``.
"""

from __future__ import annotations

import logging
import re
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edge_server.telemetry import json_object, telemetry_from_fields
from pipelines.errors import TelemetryError
from pipelines.types import Telemetry

log = logging.getLogger(__name__)

OSD_TOPIC = "thing/product/+/osd"
_TOPIC = re.compile(r"^thing/product/([A-Za-z0-9_-]{1,64})/osd$")
_PAYLOAD_KEY = re.compile(r"^\d+-\d+-(\d+)$")
MAX_OSD_BYTES = 65536  # a full aircraft OSD is ~3-6 kB
# measure_target_error_state: 0 NORMAL, 1 TOO_CLOSE, 2 TOO_FAR, 3 NO_SIGNAL; only NORMAL is a range
LRF_STATE_NORMAL, LRF_STATE_NO_SIGNAL = 0, 3


def device_of(topic: str) -> str | None:
    """The device serial of an OSD topic, or None for any other topic."""
    m = _TOPIC.match(topic)
    return m.group(1) if m else None


def osd_fields(message: dict[str, Any]) -> dict[str, Any]:
    """The telemetry fields (:class:`edge_server.telemetry.TelemetryMessage`) of one OSD message;
    TelemetryError when it is no aircraft OSD."""
    data = message.get("data")
    if not isinstance(data, dict):
        raise TelemetryError("not a DJI OSD message: no 'data' object")
    stamp = message.get("timestamp")
    if isinstance(stamp, bool) or not isinstance(stamp, int | float):
        raise TelemetryError("not a DJI OSD message: 'timestamp' (ms) is not a number")
    fields: dict[str, Any] = {"timestamp": stamp / 1000.0}
    for ours, theirs in (("altitude_m", "elevation"), ("abs_altitude_m", "height")):
        if theirs in data:
            fields[ours] = data[theirs]  # as sent: the strict checks refuse a non-number
    lat, lon = data.get("latitude"), data.get("longitude")
    if lat is not None and lon is not None and not (lat == 0 and lon == 0):  # 0, 0: no GPS fix
        fields["latitude"], fields["longitude"] = lat, lon
    gimbal = _main_gimbal(data)
    if gimbal is not None:
        for ours, theirs in (("gimbal_pitch_deg", "gimbal_pitch"), ("gimbal_yaw_deg", "gimbal_yaw")):
            if theirs in gimbal:
                fields[ours] = gimbal[theirs]
        zoom = gimbal.get("zoom_factor")
        if isinstance(zoom, int | float) and not isinstance(zoom, bool) and zoom >= 1:
            fields["digital_zoom"] = float(zoom)
        state = gimbal.get("measure_target_error_state")
        if type(state) is int and state == LRF_STATE_NORMAL and "measure_target_distance" in gimbal:
            # as sent: the strict checks refuse a non-number or a range no rangefinder measures
            fields["lrf_range_m"] = gimbal["measure_target_distance"]
    if "altitude_m" not in fields and "gimbal_pitch_deg" not in fields:
        raise TelemetryError("DJI OSD message without 'elevation' or a gimbal: not an aircraft's OSD")
    return fields


def _main_gimbal(data: dict[str, Any]) -> dict[str, Any] | None:
    """The payload on the lowest gimbal index (the main camera)."""
    payloads = sorted(
        (int(m.group(1)), key)
        for key in data
        if (m := _PAYLOAD_KEY.match(key)) and isinstance(data[key], dict)
    )
    return data[payloads[0][1]] if payloads else None


def parse_osd(payload: bytes, *, arrival_s: float | None = None, max_clock_skew_s: float = 0.0) -> Telemetry:
    """One OSD message as the engine's telemetry; TelemetryError (ImplausibleTelemetry for absurd
    values) says why not."""
    return telemetry_from_fields(
        osd_fields(json_object(payload, MAX_OSD_BYTES)),
        arrival_s=arrival_s,
        max_clock_skew_s=max_clock_skew_s,
    )


def osd_message(t: Telemetry, timestamp_ms: int, gateway: str, seq: int) -> dict[str, Any]:
    """An aircraft OSD message for sample ``t`` (the simulated Pilot 2's side), DJI's schema."""
    data: dict[str, Any] = {
        "elevation": t.altitude_m,
        "height": t.abs_altitude_m if t.abs_altitude_m is not None else t.altitude_m,
        "latitude": t.latitude or 0.0,
        "longitude": t.longitude or 0.0,
        "attitude_head": t.gimbal_yaw_deg or 0.0,
        "mode_code": 3,
        "66-0-0": {  # the camera on gimbal 0 (66: Mavic 3 Enterprise; one with an LRF: e.g. 52, M30)
            "payload_index": "66-0-0",
            "gimbal_pitch": t.gimbal_pitch_deg,
            "gimbal_roll": 0.0,
            "gimbal_yaw": t.gimbal_yaw_deg or 0.0,
            "zoom_factor": t.digital_zoom or 1.0,
            # no reading: DJI's payloads send state NO_SIGNAL with distance 0
            "measure_target_distance": t.lrf_range_m if t.lrf_range_m is not None else 0.0,
            "measure_target_error_state": LRF_STATE_NORMAL
            if t.lrf_range_m is not None
            else LRF_STATE_NO_SIGNAL,
        },
    }
    return {
        "tid": f"{seq:08x}-0000-4000-8000-{seq:012x}",
        "bid": f"{seq:08x}-0000-4000-8000-{seq:012x}",
        "timestamp": timestamp_ms,
        "gateway": gateway,
        "data": {k: v for k, v in data.items() if v is not None},
    }


@dataclass(frozen=True)
class MqttTarget:
    host: str
    port: int
    username: str | None
    password: str | None


def parse_mqtt_url(url: str) -> MqttTarget:
    """``mqtt://[user:password@]host[:port]`` -> its parts; ValueError says what is wrong."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "mqtt" or not parts.hostname:
        raise ValueError(f"an MQTT URL looks like mqtt://user:password@host:1883, got {url!r}")
    user = urllib.parse.unquote(parts.username) if parts.username else None
    password = urllib.parse.unquote(parts.password) if parts.password else None
    return MqttTarget(parts.hostname, parts.port or 1883, user, password)


class OsdSubscriber:
    """The server's MQTT client: subscribes to every aircraft's OSD and hands each message, with its
    arrival time, to ``on_osd(device_sn, payload, arrival_s)`` (from paho's network thread)."""

    def __init__(
        self, target: MqttTarget, on_osd: Callable[[str, bytes, float], None], client_id: str
    ) -> None:
        import paho.mqtt.client as mqtt

        self.target = target
        self._on_osd = on_osd
        self.connected = False
        self.last_error: str | None = None
        self._client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id)
        if target.username:
            self._client.username_pw_set(target.username, target.password)
        self._client.on_connect = self._connected
        self._client.on_disconnect = self._disconnected
        self._client.on_message = self._message
        self._client.reconnect_delay_set(1, 10)

    def start(self, timeout_s: float = 10.0) -> bool:
        """Connect (paho reconnects by itself after a drop); True once subscribed."""
        self._client.connect_async(self.target.host, self.target.port, keepalive=30)
        self._client.loop_start()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.connected:
            time.sleep(0.02)
        return self.connected

    def stop(self) -> None:
        self._client.disconnect()
        self._client.loop_stop()

    def _connected(self, client: Any, _userdata: Any, _flags: Any, reason: Any, _props: Any = None) -> None:
        if reason.is_failure:
            self.last_error = f"broker refused the connection: {reason}"
            log.warning("MQTT: %s", self.last_error)
            return
        client.subscribe(OSD_TOPIC, qos=0)
        self.connected, self.last_error = True, None
        log.info("MQTT: subscribed to %s on %s:%d", OSD_TOPIC, self.target.host, self.target.port)

    def _disconnected(
        self, _client: Any, _userdata: Any, _flags: Any, reason: Any, _props: Any = None
    ) -> None:
        self.connected = False
        if reason.is_failure:
            self.last_error = f"disconnected: {reason}"
            log.warning("MQTT: %s (reconnecting)", self.last_error)

    def _message(self, _client: Any, _userdata: Any, msg: Any) -> None:
        arrival = time.time()
        sn = device_of(msg.topic)
        if sn is not None:
            self._on_osd(sn, bytes(msg.payload), arrival)


__all__ = [
    "LRF_STATE_NORMAL",
    "LRF_STATE_NO_SIGNAL",
    "OSD_TOPIC",
    "MqttTarget",
    "OsdSubscriber",
    "device_of",
    "osd_fields",
    "osd_message",
    "parse_mqtt_url",
    "parse_osd",
]
