"""The telemetry half of a simulated DJI Pilot 2: the flight's samples as DJI Cloud API OSD
messages over MQTT (``thing/product/{device_sn}/osd``), at DJI's documented 0.5 Hz by default.

Each message is stamped (``timestamp``, ms) with the wall clock at the moment the video frame of
the same instant is sent, as the RC stamps its OSD with its own clock; the server aligns the two
streams by their arrival times (docs/dji-apps.md).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from edge_client.tracks import PublishError
from edge_server.dji_cloud import osd_message, parse_mqtt_url
from pipelines.types import Telemetry

log = logging.getLogger(__name__)

DJI_OSD_HZ = 0.5  # DJI's Cloud API reference: "stable frequency data ... 0.5 Hz"


class OsdPublisher:
    def __init__(
        self,
        mqtt_url: str,
        device_sn: str,
        telemetry: Callable[[float], Telemetry | None],
        *,
        hz: float = DJI_OSD_HZ,
        gateway_sn: str | None = None,
    ) -> None:
        import paho.mqtt.client as mqtt

        try:
            target = parse_mqtt_url(mqtt_url)
        except ValueError as exc:
            raise PublishError(str(exc)) from exc
        if hz <= 0:
            raise PublishError(f"--osd-hz must be positive, got {hz}")
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
        message = osd_message(sample, round(wall * 1000), self.gateway, self.sent)
        self._client.publish(self.topic, json.dumps(message), qos=0)
        self.sent += 1

    def close(self) -> None:
        time.sleep(0.1)  # let the last message leave
        self._client.disconnect()
        self._client.loop_stop()


__all__ = ["DJI_OSD_HZ", "OsdPublisher"]
