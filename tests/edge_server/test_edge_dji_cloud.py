"""DJI Cloud API telemetry: OSD messages mapped to the engine's telemetry (table), and a simulated
Pilot 2 - video over RTMP to the server's nginx, OSD over MQTT to the server's Mosquitto - with
hostile messages on the same broker while it streams."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
import paho.mqtt.client as mqtt
import pytest
from edge_helpers import RunningServer, free_port, wait_until
from test_edge_rtmp import NGINX, make_key, rejected, summary

from edge_client.osd_publish import as_reported, lrf_range
from edge_server.child_process import alive
from edge_server.dji_cloud import device_of, osd_fields, osd_message, parse_mqtt_url, parse_osd
from edge_server.mosquitto import MOSQUITTO_CANDIDATES, find_program
from edge_server.telemetry import ImplausibleTelemetry
from pipelines.errors import TelemetryError
from pipelines.types import Telemetry

pytestmark = pytest.mark.timeout(180)


def _mosquitto() -> str | None:
    return find_program("mosquitto", os.environ.get("AIRPATROL_TEST_MOSQUITTO"), MOSQUITTO_CANDIDATES)


MOSQUITTO = _mosquitto()
needs_brokers = pytest.mark.skipif(
    MOSQUITTO is None or NGINX is None,
    reason="Mosquitto or nginx-rtmp is not installed (.ci/mosquitto.sh and .ci/nginx-rtmp.sh install them; CI fails without)",
)
SN = "1581F5BKD225D00A"
PASSWORD = "osd-test-password"

PILOT2_OSD = {
    "tid": "6a7bfe89-c386-4043-b600-b518e10096cc",
    "bid": "42a19f36-5117-4520-bd13-fd61d818d52e",
    "timestamp": 1764075600123,
    "gateway": "4LFCJ1H00100A9",
    "data": {
        "latitude": 48.137154,
        "longitude": 11.576124,
        "height": 598.4,
        "elevation": 60.2,
        "attitude_head": 91.5,
        "attitude_pitch": -2.1,
        "horizontal_speed": 0.3,
        "mode_code": 3,
        "165-0-7": {"payload_index": "165-0-7", "gimbal_pitch": -10.0, "gimbal_yaw": 12.0, "zoom_factor": 1},
        "66-0-0": {"payload_index": "66-0-0", "gimbal_pitch": -89.9, "gimbal_yaw": 91.0, "zoom_factor": 2.0},
    },
}


def _osd(**data) -> dict:
    return {**PILOT2_OSD, "data": {**PILOT2_OSD["data"], **data}}


def test_a_pilot2_osd_becomes_telemetry() -> None:
    t = parse_osd(json.dumps(PILOT2_OSD).encode())
    assert t.timestamp_s == pytest.approx(1764075600.123)
    assert (t.altitude_m, t.abs_altitude_m) == (60.2, 598.4)  # elevation: height above take-off
    # the main gimbal (index 0), not the FPV camera (index 7)
    assert (t.gimbal_pitch_deg, t.gimbal_yaw_deg, t.digital_zoom) == (-89.9, 91.0, 2.0)
    assert (t.latitude, t.longitude) == (48.137154, 11.576124)
    assert t.source == "flight"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (_osd(latitude=0.0, longitude=0.0), {"latitude": None}),  # no GPS fix
        ({**PILOT2_OSD, "data": {"elevation": 80.0}}, {"altitude_m": 80.0, "gimbal_pitch_deg": None}),
        (
            _osd(**{"66-0-0": {"gimbal_pitch": -30.0, "zoom_factor": 0.5}}),
            {"gimbal_pitch_deg": -30.0, "digital_zoom": 1.0},
        ),
    ],
)
def test_osd_fields_that_vary(message: dict, expected: dict) -> None:
    t = parse_osd(json.dumps(message).encode())
    for name, value in expected.items():
        assert getattr(t, name) == value


@pytest.mark.parametrize(
    ("payload", "error", "implausible"),
    [
        (b"\x00garbage", "not JSON", False),
        (b"[1, 2]", "must be a JSON object", False),
        (json.dumps({"timestamp": 1}).encode(), "no 'data' object", False),
        (json.dumps({**PILOT2_OSD, "timestamp": "soon"}).encode(), "timestamp.*is not a number", False),
        (
            json.dumps({**PILOT2_OSD, "data": {"battery": 80}}).encode(),
            "without 'elevation' or a gimbal",
            False,
        ),
        (json.dumps(_osd(elevation="60")).encode(), "altitude_m", False),
        (json.dumps(_osd(elevation=True)).encode(), "altitude_m", False),
        (json.dumps(_osd(elevation=float("nan"))).encode(), "altitude_m", False),
        (json.dumps(_osd(elevation=25000.0)).encode(), "altitude_m", False),  # beyond the message's range
        (json.dumps(_osd(elevation=4000.0)).encode(), "implausible", True),  # no patrol flight goes there
        (b"{" * 100_000, "too large", False),
    ],
)
def test_bad_osd_is_refused_with_a_reason(payload: bytes, error: str, implausible: bool) -> None:
    with pytest.raises(TelemetryError, match=error) as info:
        parse_osd(payload)
    assert isinstance(info.value, ImplausibleTelemetry) == implausible


def _lrf(**gimbal) -> dict:
    """PILOT2_OSD from an LRF payload: its main gimbal with these measure_target_* fields."""
    return _osd(**{"66-0-0": {**PILOT2_OSD["data"]["66-0-0"], **gimbal}})


@pytest.mark.parametrize(
    ("gimbal", "lrf_range_m"),
    [
        ({"measure_target_distance": 85.1, "measure_target_error_state": 0}, 85.1),
        ({"measure_target_distance": 1200, "measure_target_error_state": 0}, 1200.0),  # a JSON int
        ({"measure_target_distance": 591.7, "measure_target_error_state": 1}, None),  # TOO_CLOSE
        ({"measure_target_distance": 591.7, "measure_target_error_state": 2}, None),  # TOO_FAR
        ({"measure_target_distance": 0, "measure_target_error_state": 3}, None),  # NO_SIGNAL
        ({"measure_target_distance": 85.1, "measure_target_error_state": False}, None),  # a bool
        ({"measure_target_distance": 85.1, "measure_target_error_state": 0.0}, None),  # not an int
        ({"measure_target_distance": 85.1, "measure_target_error_state": "0"}, None),
        ({"measure_target_distance": 85.1}, None),  # no state
        ({"measure_target_error_state": 0}, None),  # no distance
        ({"measure_target_distance": None, "measure_target_error_state": 0}, None),
    ],
)
def test_the_laser_range_counts_only_while_it_measures(gimbal: dict, lrf_range_m: float | None) -> None:
    t = parse_osd(json.dumps(_lrf(**gimbal)).encode())
    assert t.lrf_range_m == lrf_range_m
    assert (t.altitude_m, t.gimbal_pitch_deg) == (60.2, -89.9)  # the rest of the message as ever


def test_only_the_main_gimbal_ranges() -> None:
    fpv = {"payload_index": "165-0-7", "measure_target_distance": 85.1, "measure_target_error_state": 0}
    assert parse_osd(json.dumps(_osd(**{"165-0-7": fpv})).encode()).lrf_range_m is None


@pytest.mark.parametrize(
    "distance",
    ["85.1", True, [85.1], 5000.0, 3000.5, 1.0, 2.99, -5.0, float("nan"), float("inf")],
)
def test_an_absurd_laser_range_is_refused(distance) -> None:
    payload = json.dumps(_lrf(measure_target_distance=distance, measure_target_error_state=0)).encode()
    with pytest.raises(TelemetryError, match="lrf_range_m") as info:
        parse_osd(payload)
    assert not isinstance(info.value, ImplausibleTelemetry)  # refused: no hole in the buffer either
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("topic", "sn"),
    [
        (f"thing/product/{SN}/osd", SN),
        (f"thing/product/{SN}/state", None),
        ("thing/product/../osd", None),
        ("thing/product//osd", None),
        (f"sys/product/{SN}/status", None),
    ],
)
def test_only_osd_topics_name_a_device(topic: str, sn: str | None) -> None:
    assert device_of(topic) == sn


def test_the_simulator_writes_what_the_server_reads() -> None:
    t = Telemetry(
        10.0, altitude_m=55.0, gimbal_pitch_deg=-80.0, latitude=48.1, longitude=11.5, gimbal_yaw_deg=30.0
    )
    fields = osd_fields(osd_message(t, 1764075600000, "RC1", 3))
    assert fields == {
        "timestamp": 1764075600.0,
        "altitude_m": 55.0,
        "abs_altitude_m": 55.0,
        "latitude": 48.1,
        "longitude": 11.5,
        "gimbal_pitch_deg": -80.0,
        "gimbal_yaw_deg": 30.0,
        "digital_zoom": 1.0,
    }


@pytest.mark.parametrize("lrf_range_m", [None, 85.1, 3.0, 3000.0])
def test_the_simulator_writes_the_laser_range_the_server_reads(lrf_range_m: float | None) -> None:
    t = Telemetry(10.0, altitude_m=55.0, gimbal_pitch_deg=-40.0, lrf_range_m=lrf_range_m)
    message = osd_message(t, 1764075600000, "RC1", 3)
    gimbal = message["data"]["66-0-0"]
    if lrf_range_m is None:  # no reading: NO_SIGNAL, distance 0, as DJI's payloads send it
        assert (gimbal["measure_target_error_state"], gimbal["measure_target_distance"]) == (3, 0.0)
        assert "lrf_range_m" not in osd_fields(message)
    else:
        assert (gimbal["measure_target_error_state"], gimbal["measure_target_distance"]) == (0, lrf_range_m)
    assert parse_osd(json.dumps(message).encode()).lrf_range_m == lrf_range_m


@pytest.mark.parametrize(
    ("height_m", "pitch_deg", "expected"),
    [
        (50.0, -90.0, 50.0),  # nadir: the height itself
        (50.0, -30.0, 100.0),  # h / sin(30 deg)
        (50.0, -45.0, 50.0 * 2**0.5),
        (50.0, 0.0, None),  # level: the laser hits no ground
        (50.0, 10.0, None),
        (50.0, -1.0, None),  # 2865 m: beyond the H20/H30's 1200 m
        (2.0, -90.0, None),  # closer than 3 m
        (None, -90.0, None),
        (50.0, None, None),
    ],
)
def test_the_simulated_laser_ranges_over_flat_ground(height_m, pitch_deg, expected) -> None:
    r = lrf_range(height_m, pitch_deg)
    assert r == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(
    ("lrf", "below_m", "altitude_m", "lrf_range_m"),
    [
        (False, 0.0, 50.0, None),
        (True, 0.0, 50.0, 100.0),
        (True, 12.0, 62.0, 100.0),  # took off 12 m below the road: elevation 62, the laser still 100
        (False, -5.0, 45.0, None),  # took off above the road
    ],
)
def test_the_simulator_reports_a_flight_as_the_aircraft_does(lrf, below_m, altitude_m, lrf_range_m) -> None:
    true = Telemetry(10.0, altitude_m=50.0, gimbal_pitch_deg=-30.0, abs_altitude_m=600.0)
    reported = as_reported(true, lrf=lrf, takeoff_below_road_m=below_m)
    t = parse_osd(json.dumps(osd_message(reported, 1764075600000, "RC1", 3)).encode())
    assert t.altitude_m == altitude_m and t.abs_altitude_m == 600.0
    assert t.lrf_range_m == (None if lrf_range_m is None else pytest.approx(lrf_range_m))


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        ("mqtt://u:p%40ss@broker:1884", ("broker", 1884, "u", "p@ss")),
        ("mqtt://broker", ("broker", 1883, None, None)),
    ],
)
def test_mqtt_urls(url: str, parts: tuple) -> None:
    target = parse_mqtt_url(url)
    assert (target.host, target.port, target.username, target.password) == parts


@pytest.mark.parametrize("url", ["http://broker", "mqtt://", "broker:1883"])
def test_bad_mqtt_urls(url: str) -> None:
    with pytest.raises(ValueError, match="mqtt://"):
        parse_mqtt_url(url)


def _client(port: int, password: str = PASSWORD) -> tuple[mqtt.Client, list]:
    results: list = []
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"test-{time.monotonic_ns()}")
    client.username_pw_set("airpatrol", password)
    client.on_connect = lambda _c, _u, _f, reason, _p: results.append(reason)
    client.connect("127.0.0.1", port)
    client.loop_start()
    wait_until(lambda: results, 10, "CONNACK")
    return client, results


def start_dji_server(server_factory, app_kwargs: dict | None = None) -> tuple[RunningServer, int]:
    """A server with its nginx-rtmp and Mosquitto (on a free port, returned), its spare pipeline built."""
    port = free_port()
    srv = server_factory(
        app_kwargs,
        rtmp_port=free_port(),
        rtmp_host="127.0.0.1",
        mqtt_port=port,
        mqtt_host="127.0.0.1",
        mqtt_password=PASSWORD,
        mosquitto_path=MOSQUITTO,
        nginx_path=NGINX,
        warm_pipeline=True,
    )
    wait_until(lambda: srv.manager.spare.ready, 60, "spare pipeline built")
    return srv, port


@pytest.fixture
def dji_server(server_factory) -> tuple[RunningServer, int]:
    return start_dji_server(server_factory)


@needs_brokers
def test_pilot2_stream_with_osd_telemetry(dji_server) -> None:
    """Video over RTMP, OSD over MQTT at 2 Hz: the speeds are scaled by the OSD's elevation; garbage
    OSD for the same aircraft is counted on its session, OSD of an aircraft no key names is counted
    by the server, and neither disturbs the stream."""
    srv, port = dji_server
    key = make_key(srv, device_sn=SN, operator={"camera": "DJI Mini 4 Pro"})  # OSD does not name the camera
    cmd = [
        *(sys.executable, "-m", "airpatrol.cli", "publish", "synthetic", "--rtmp", key["url"]),
        *("--mqtt", f"mqtt://airpatrol:{PASSWORD}@127.0.0.1:{port}", "--device-sn", SN),
        *("--max-seconds", "8", "--osd-hz", "2"),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with srv.client() as c:
        sid = wait_until(lambda: c.get("/api/v1/rtmp/keys").json()[0]["live_session_id"], 30, "stream live")
        wait_until(lambda: c.get(f"/api/v1/sessions/{sid}").json()["telemetry_received"] >= 2, 30, "OSD")
    hostile, _ = _client(port)
    now_ms = round(time.time() * 1000)
    for payload in (
        b"not json",
        json.dumps(_osd(elevation="60", timestamp=now_ms)),
        json.dumps(_osd(elevation=4000.0, timestamp=now_ms)),
    ):
        hostile.publish(f"thing/product/{SN}/osd", payload).wait_for_publish(5)
    hostile.publish("thing/product/UNKNOWN0001/osd", json.dumps(PILOT2_OSD)).wait_for_publish(5)
    hostile.disconnect()
    hostile.loop_stop()

    code, result, err = summary(proc)
    assert code == 0, err
    with srv.client() as c:
        wait_until(lambda: c.get(f"/api/v1/sessions/{sid}").json()["status"] == "ended", 30, "session ended")
        session = c.get(f"/api/v1/sessions/{sid}").json()
        violations = c.get("/api/v1/violations", params={"session_id": sid}).json()["items"]
        health = c.get("/healthz").json()
    assert result["osd_sent"] >= 14
    assert session["telemetry_received"] >= result["osd_sent"] - 1
    assert session["telemetry_rejected"] == 3
    reasons = " | ".join(session["info"]["telemetry_reject_reasons"])
    assert "not JSON" in reasons and "altitude_m" in reasons and "implausible" in reasons
    assert session["frames_received"] >= result["frames_sent"] - 3
    assert session["info"]["device_sn"] == SN and session["info"]["clock_sync"]["method"] == "arrival"
    assert violations and {v["scale_source"] for v in violations} == {"flight"}
    assert {v["altitude_m"] for v in violations} == {50.0}  # the synthetic flight's SRT height
    assert rejected(srv).get("unknown device", 0) >= 1
    assert health["mqtt"] == f"connected to 127.0.0.1:{port}"


@needs_brokers
def test_broker_refuses_strangers_and_serves_another_edge(dji_server, server_factory) -> None:
    srv, port = dji_server
    client, results = _client(port, password="wrong")
    assert results[0].is_failure  # not authorised
    client.loop_stop()
    # a second server using the first one's broker (mqtt_url) starts none of its own
    other = server_factory(mqtt_port=None, mqtt_url=f"mqtt://airpatrol:{PASSWORD}@127.0.0.1:{port}")
    assert wait_until(
        lambda: httpx.get(f"{other.url}/healthz").json()["mqtt"].startswith("connected"), 15, "mqtt"
    )
    assert not (other.settings.data_dir / "mqtt").exists()


def test_server_runs_on_without_mosquitto(server_factory) -> None:
    srv = server_factory(mqtt_port=free_port(), mosquitto_path="/nonexistent/mosquitto")
    health = httpx.get(f"{srv.url}/healthz").json()
    assert health["status"] == "ok"
    assert health["mqtt"].startswith("unavailable: DJI Cloud API telemetry needs an MQTT broker")
    assert "apt-get install mosquitto" in health["mqtt"]


@needs_brokers
def test_brokers_left_by_a_killed_server_are_stopped_at_the_next_start(server_factory, tmp_path) -> None:
    """kill -9 of the server leaves nginx and Mosquitto running (their own sessions) on its ports:
    the next server on the same data folder stops them (pid files) and starts its own."""
    ports = {
        "rtmp_port": free_port(),
        "rtmp_host": "127.0.0.1",
        "mqtt_port": free_port(),
        "mqtt_host": "127.0.0.1",
    }
    data = tmp_path / "data"
    first = server_factory(
        data_dir=data, mqtt_password=PASSWORD, nginx_path=NGINX, mosquitto_path=MOSQUITTO, **ports
    )
    pids = [first.manager.rtmp.server.pid, first.app.state.mqtt_broker.pid]
    first.manager.rtmp.server._proc = None  # as if the server died: nothing stops them
    first.app.state.mqtt_broker._proc = None
    first.stop()
    assert all(alive(pid) for pid in pids)
    second = server_factory(
        data_dir=data, mqtt_password=PASSWORD, nginx_path=NGINX, mosquitto_path=MOSQUITTO, **ports
    )
    health = httpx.get(f"{second.url}/healthz").json()
    assert health["rtmp"].startswith("running") and health["mqtt"].startswith("connected"), health
    assert not any(alive(pid) for pid in pids)


@needs_brokers
def test_ports_held_by_another_server_are_refused_not_shared(server_factory, tmp_path) -> None:
    """A second server (its own data folder) on the ports of a running one: its RTMP and MQTT say the
    ports are taken (found by running the image: it took the other's Mosquitto for its own, which
    refused its password), and the first server's brokers carry on."""
    ports = {
        "rtmp_port": free_port(),
        "rtmp_host": "127.0.0.1",
        "mqtt_port": free_port(),
        "mqtt_host": "127.0.0.1",
    }
    brokers = {"nginx_path": NGINX, "mosquitto_path": MOSQUITTO}
    first = server_factory(data_dir=tmp_path / "one", mqtt_password=PASSWORD, **brokers, **ports)
    second = server_factory(data_dir=tmp_path / "two", mqtt_password=PASSWORD + "x", **brokers, **ports)
    health = httpx.get(f"{second.url}/healthz").json()
    for kind in ("rtmp", "mqtt"):
        port = ports[f"{kind}_port"]
        assert health[kind].startswith("unavailable:"), health
        assert f"port {port} is in use by another program" in health[kind], health
    health = httpx.get(f"{first.url}/healthz").json()
    assert health["rtmp"].startswith("running") and health["mqtt"].startswith("connected"), health
