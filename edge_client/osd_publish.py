"""The telemetry half of a simulated DJI Pilot 2: the flight's samples as DJI Cloud API OSD
messages over MQTT (``thing/product/{device_sn}/osd``), at DJI's documented 0.5 Hz by default.

Each message is stamped (``timestamp``, ms) with the wall clock at the moment the video frame of
the same instant is sent, as the RC stamps its OSD with its own clock; the server aligns the two
streams by their arrival times (docs/dji-apps.md).

Two options model an enterprise flight: ``lrf`` adds a laser rangefinder's reading to every message
(:func:`lrf_range`: the slant range to the image centre over flat ground), and
``takeoff_below_road_m`` a take-off point that far below the road: the reported ``elevation``
(height above take-off) is that much higher than the flight's true height above the road, which
the rangefinder still measures.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable

from edge_client.tracks import PublishError
from edge_server.dji_cloud import osd_message, parse_mqtt_url
from pipelines.types import Telemetry

log = logging.getLogger(__name__)

DJI_OSD_HZ = 0.5  # DJI's Cloud API reference: "stable frequency data ... 0.5 Hz"
LRF_MIN_M, LRF_MAX_M = 3.0, 1200.0  # DJI Zenmuse H20/H30's laser rangefinder range


def lrf_range(height_m: float | None, pitch_deg: float | None) -> float | None:
    """The laser's slant range to the image centre over flat ground ``height_m`` below the camera:
    ``h / sin(depression)``, depression = -pitch (nadir -90: ``h``); None where the rangefinder gets
    no echo (no height or pitch, the camera level or up, a range outside 3-1200 m)."""
    if height_m is None or pitch_deg is None or pitch_deg >= 0:
        return None
    r = height_m / math.sin(math.radians(-pitch_deg))
    return r if LRF_MIN_M <= r <= LRF_MAX_M else None


def as_reported(t: Telemetry, *, lrf: bool = False, takeoff_below_road_m: float = 0.0) -> Telemetry:
    """Flight sample ``t`` (its ``altitude_m`` the true height above the road) as the aircraft
    reports it: with ``lrf`` its rangefinder's range, and ``elevation`` measured from a take-off
    point ``takeoff_below_road_m`` below the road."""
    changes: dict[str, float | None] = {}
    if lrf:
        changes["lrf_range_m"] = lrf_range(t.altitude_m, t.gimbal_pitch_deg)
    if takeoff_below_road_m and t.altitude_m is not None:
        changes["altitude_m"] = t.altitude_m + takeoff_below_road_m
    return dataclasses.replace(t, **changes) if changes else t


class OsdPublisher:
    def __init__(
        self,
        mqtt_url: str,
        device_sn: str,
        telemetry: Callable[[float], Telemetry | None],
        *,
        hz: float = DJI_OSD_HZ,
        gateway_sn: str | None = None,
        lrf: bool = False,
        takeoff_below_road_m: float = 0.0,
    ) -> None:
        import paho.mqtt.client as mqtt

        try:
            target = parse_mqtt_url(mqtt_url)
        except ValueError as exc:
            raise PublishError(str(exc)) from exc
        if hz <= 0:
            raise PublishError(f"--osd-hz must be positive, got {hz}")
        if not math.isfinite(takeoff_below_road_m) or abs(takeoff_below_road_m) > 500:
            raise PublishError(f"--takeoff-below-road must be within +-500 m, got {takeoff_below_road_m}")
        self.lrf = lrf
        self.takeoff_below_road_m = takeoff_below_road_m
        self.topic = f"thing/product/{device_sn}/osd"
        self.gateway = gateway_sn or f"{device_sn}-RC"
        self.interval_s = 1.0 / hz
        self.telemetry = telemetry
        self.sent = 0
        self._last = -1e9
        self._client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"pilot2-sim-{device_sn}"[:64])
        if target.username:
            self._client.username_pw_set(target.username, target.password)
        try:
            self._client.connect(target.host, target.port, keepalive=30)
        except OSError as exc:
            raise PublishError(f"cannot reach the MQTT broker at {target.host}:{target.port}: {exc}") from exc
        self._client.loop_start()

    def on_frame(self, video_t: float, wall: float) -> None:
        """Called as each video frame is sent; publishes when an OSD message is due."""
        if wall - self._last < self.interval_s:
            return
        sample = self.telemetry(video_t)
        if sample is None:
            return
        self._last = wall
        sample = as_reported(sample, lrf=self.lrf, takeoff_below_road_m=self.takeoff_below_road_m)
        message = osd_message(sample, round(wall * 1000), self.gateway, self.sent)
        self._client.publish(self.topic, json.dumps(message), qos=0)
        self.sent += 1

    def close(self) -> None:
        time.sleep(0.1)  # let the last message leave
        self._client.disconnect()
        self._client.loop_stop()


__all__ = ["DJI_OSD_HZ", "OsdPublisher", "as_reported", "lrf_range"]
