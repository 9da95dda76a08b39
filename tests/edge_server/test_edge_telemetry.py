"""Telemetry messages, clock mapping and per-frame interpolation; settings; the frame queue."""

from __future__ import annotations

import json
import threading
import time

import pytest

from edge_server.engine_link import IncomingFrame
from edge_server.frame_queue import FrameQueue
from edge_server.settings import ServerSettings, SettingsError
from edge_server.telemetry import (
    NTP_UNIX_OFFSET_S,
    ClockSync,
    ImplausibleTelemetry,
    TelemetryBuffer,
    TelemetryMessage,
    ntp_to_unix,
    parse_message,
)
from pipelines.errors import TelemetryError
from pipelines.telemetry import TelemetryTrack
from pipelines.types import Telemetry

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

GOOD = {
    "type": "telemetry",
    "timestamp": 1748779200.25,
    "altitude_m": 120.5,
    "gimbal_pitch_deg": -90.0,
    "gimbal_yaw_deg": 12.0,
    "focal_length_35mm": 24.0,
    "digital_zoom": 1.0,
    "latitude": 59.3293,
    "longitude": 18.0686,
    "abs_altitude_m": 140.0,
    "camera": "DJI Mini 4 Pro",
    "future_field": "ignored",
}


def test_parse_good_message() -> None:
    t = parse_message(json.dumps(GOOD))
    assert t == Telemetry(
        timestamp_s=1748779200.25,
        altitude_m=120.5,
        gimbal_pitch_deg=-90.0,
        focal_length_35mm=24.0,
        latitude=59.3293,
        longitude=18.0686,
        abs_altitude_m=140.0,
        gimbal_yaw_deg=12.0,
        camera="DJI Mini 4 Pro",
    )
    assert parse_message(b'{"timestamp": 5}').altitude_m is None  # only the timestamp is required
    roundtrip = TelemetryMessage.from_telemetry(t, timestamp=t.timestamp_s).to_telemetry()
    assert roundtrip == t


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ("{", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        ("[]", "JSON object"),
        ("{}", "timestamp"),
        ('{"timestamp": "noon"}', "timestamp"),
        ('{"timestamp": 0}', "timestamp"),
        ('{"timestamp": true}', "timestamp"),  # strict types: not read as 1.0
        ('{"timestamp": "1748779200.5"}', "timestamp"),  # a number, not a numeric string
        ('{"timestamp": [1748779200]}', "timestamp"),
        ('{"timestamp": Infinity}', "timestamp"),
        ('{"timestamp": 1, "altitude_m": true}', "altitude_m"),
        ('{"timestamp": 1, "altitude_m": "50"}', "altitude_m"),
        ('{"timestamp": 1, "latitude": "59.3"}', "latitude"),
        ('{"timestamp": 1, "gimbal_yaw_deg": NaN}', "gimbal_yaw_deg"),
        ('{"timestamp": 1, "digital_zoom": false}', "digital_zoom"),
        ('{"timestamp": 1, "camera": 7}', "camera"),
        ('{"timestamp": 1, "type": "video"}', "type"),
        ('{"timestamp": 1, "altitude_m": 0.1}', "altitude"),  # on the ground: validate_telemetry
        ('{"timestamp": 1, "gimbal_pitch_deg": 45}', "pitch"),
        ('{"timestamp": 1, "latitude": 95}', "latitude"),
        ('{"timestamp": 1, "digital_zoom": 0.5}', "digital_zoom"),
        ('{"timestamp": 1, "altitude_m": NaN}', "altitude"),
        ('{"timestamp": 1, "camera": "' + "x" * 100 + '"}', "camera"),
        ('{"timestamp": 1, "lrf_range_m": "85"}', "lrf_range_m"),
        ('{"timestamp": 1, "lrf_range_m": true}', "lrf_range_m"),
        ('{"timestamp": 1, "lrf_range_m": 2.5}', "lrf_range_m"),  # closer than any rangefinder measures
        ('{"timestamp": 1, "lrf_range_m": 5000}', "lrf_range_m"),  # beyond any (H30: 3000 m)
        ('{"timestamp": 1, "lrf_range_m": Infinity}', "lrf_range_m"),
        ('{"timestamp": 1, "lrf_range_m": NaN}', "lrf_range_m"),
        ('{"timestamp": 1, "pad": "' + "x" * 20000 + '"}', "too large"),
        ("[" * 10_000, "nested too deeply"),  # json.loads would raise RecursionError
        ('{"timestamp": 1, "pad": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
    ],
)
def test_bad_messages_are_rejected_with_a_reason(payload: str | bytes, reason: str) -> None:
    with pytest.raises(TelemetryError) as exc:
        parse_message(payload)
    assert reason in str(exc.value)


@pytest.mark.parametrize("lrf_range_m", [3, 85.1, 1200.0, 3000, None])
def test_a_laser_range_rides_along(lrf_range_m: float | None) -> None:
    """The laser rangefinder's slant range to the image centre (DJI enterprise payloads), or none."""
    t = parse_message(json.dumps({**GOOD, "lrf_range_m": lrf_range_m}))
    assert t.lrf_range_m == lrf_range_m and t.altitude_m == 120.5
    assert TelemetryMessage.from_telemetry(t, timestamp=t.timestamp_s).to_telemetry() == t
    assert parse_message(json.dumps(GOOD)).lrf_range_m is None  # absent: no reading


NOW = 1_748_779_200.0  # the server's clock at arrival in the cases below
DAY = 86400.0


@pytest.mark.parametrize(
    ("timestamp", "max_skew_s", "reason"),
    [
        (NOW + 0.2, DAY, None),
        (NOW - 3600, DAY, None),  # an hour off (a wrong time zone): accepted, the clock mapping copes
        (NOW * 1000, DAY, "looks like milliseconds"),  # System.currentTimeMillis() without / 1000
        (NOW - 3 * DAY, DAY, "behind the server's clock"),
        (NOW + 3 * DAY, DAY, "ahead of the server's clock"),
        (12.5, DAY, "Unix epoch seconds"),  # seconds since the app started
        (NOW + 120, 60, "more than 60 s ahead"),
        (12.5, 0, None),  # 0: any clock (aligned by arrival times)
        (NOW * 1000, 0, None),
    ],
)
def test_timestamps_far_from_the_arrival_time_are_rejected(timestamp, max_skew_s, reason) -> None:
    message = json.dumps({"timestamp": timestamp, "altitude_m": 50})
    if reason is None:
        assert parse_message(message, arrival_s=NOW, max_clock_skew_s=max_skew_s).timestamp_s == timestamp
        return
    with pytest.raises(TelemetryError, match=reason):
        parse_message(message, arrival_s=NOW, max_clock_skew_s=max_skew_s)
    assert parse_message(message).timestamp_s == timestamp  # no arrival time given: no check


def _t(ts: float, **kw) -> Telemetry:
    return Telemetry(timestamp_s=ts, **kw)


def test_buffer_interpolates_holds_and_expires() -> None:
    buf = TelemetryBuffer(max_age_s=1.0)
    assert buf.at(5.0) is None
    buf.add(_t(10.0, altitude_m=100.0, gimbal_yaw_deg=350.0, camera="A", latitude=1.0))
    buf.add(_t(11.0, altitude_m=110.0, gimbal_yaw_deg=10.0, camera="B", latitude=None))
    mid = buf.at(10.25)
    assert mid.altitude_m == pytest.approx(102.5)
    assert mid.gimbal_yaw_deg == pytest.approx(-5.0)  # the short way round 360, in [-180, 180] as offline
    assert mid.camera == "A" and buf.at(10.75).camera == "B"
    assert mid.latitude == 1.0  # missing on one side: the nearer sample's value
    assert buf.at(10.75).latitude is None
    assert mid.timestamp_s == 10.25
    assert buf.at(11.5).altitude_m == 110.0  # held
    assert buf.at(9.5).altitude_m == 100.0
    assert buf.at(12.5) is None and buf.at(8.5) is None  # too old / too early
    buf.add(_t(10.5, altitude_m=104.0))  # out of order (unordered channel) lands in place
    assert buf.at(10.5).altitude_m == 104.0
    buf.add(_t(20.0, altitude_m=50.0))  # a 9 s hole: no interpolation across it
    assert buf.at(11.8).altitude_m == 110.0 and buf.at(15.0) is None and buf.at(19.5).altitude_m == 50.0


def _live(ts: float, alt: float | None = 60.0, pitch: float | None = -60.0) -> Telemetry:
    return Telemetry(timestamp_s=ts, altitude_m=alt, gimbal_pitch_deg=pitch, focal_length_35mm=24.0)


@pytest.mark.parametrize(
    ("samples", "holes", "refused"),
    [
        ([_live(0), _live(0.1), _live(0.2, 600.0), _live(0.3), _live(0.4)], [], {0.15, 0.2, 0.25}),
        ([_live(0), _live(0.1), _live(0.2, pitch=None), _live(0.3), _live(0.4)], [], {0.15, 0.2, 0.25}),
        ([_live(0), _live(0.1), _live(0.3), _live(0.4)], [0.2], {0.15, 0.2, 0.25}),  # a rejected NaN message
        ([_live(0), _live(0.1), _live(0.2, 60.5), _live(0.3), _live(0.4)], [], set()),
    ],
)
def test_buffer_refuses_what_the_offline_track_refuses(samples, holes, refused) -> None:
    """Live and offline interpolate through one function: the same frames get no telemetry."""
    buf = TelemetryBuffer(max_age_s=1.0)
    for s in samples:
        buf.add(s)
    for h in holes:
        buf.add_hole(h)
    track = TelemetryTrack([*samples, *(_live(h, float("nan")) for h in holes)])
    for t in (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35):
        live = buf.at(t)
        if t in refused:
            assert live is None
            with pytest.raises(TelemetryError):
                track.at(t)
        else:
            assert live == track.at(t)
    assert buf.refused == len(refused)


def test_implausible_message_says_when_for_the_buffer_hole() -> None:
    message = json.dumps({"timestamp": NOW, "altitude_m": 5000.0})
    with pytest.raises(ImplausibleTelemetry, match="altitude") as err:
        parse_message(message)
    assert err.value.timestamp_s == NOW


def test_full_buffer_takes_an_out_of_order_sample() -> None:
    buf = TelemetryBuffer(max_age_s=1.0, capacity=4)
    for k in (0, 2, 3, 4):
        buf.add(_live(k / 10))
    buf.add(_live(0.1))  # unordered channel, buffer full: the oldest goes, nothing raises
    buf.add(_live(-1.0))  # older than everything kept: ignored
    assert len(buf) == 4 and buf.at(0.1) == _live(0.1) and buf.at(0.0) is not None
    for k in range(6):
        buf.add_hole(1.0 - k / 10)


def test_clock_sync_prefers_consistent_sender_reports() -> None:
    sync = ClockSync()
    assert sync.to_sender_time(1.0) is None
    sender_epoch = 1_700_000_000.0  # sender clock at media time 0
    skew = 3.0  # receiver clock minus sender clock
    for k in range(50):
        media = k / 30
        sync.on_frame(media, sender_epoch + media + skew + 0.080 + (0.03 if k % 3 else 0))  # video: 80 ms min
    for k in range(10):
        ts = sender_epoch + k / 10
        sync.on_telemetry(ts, ts + skew + 0.002 + (0.01 if k % 2 else 0))  # data channel: 2 ms min
    arrival = sync.to_sender_time(1.0)
    assert sync.method == "arrival"
    assert arrival == pytest.approx(sender_epoch + 1.0 + 0.078, abs=1e-6)  # off by the delay difference
    sync.on_sender_report(sender_epoch + 2.0 + 0.010, 2.0)  # SR: NTP time when rtp(2.0 s) was sent
    assert sync.to_sender_time(1.0) == pytest.approx(sender_epoch + 1.010)
    assert sync.method == "rtcp"
    assert sync.describe()["rtcp_minus_arrival_s"] == pytest.approx(-0.068, abs=1e-6)
    # a sender whose telemetry is not on its RTCP (NTP) clock: reports are ignored
    sync.on_sender_report(sender_epoch + 3600.0, 2.0)
    assert sync.to_sender_time(1.0) == pytest.approx(arrival)
    assert sync.method == "arrival"


@pytest.mark.parametrize(
    ("report", "media_s", "arrival_s", "delay_s"),
    [
        (None, 1.0, 1000.5, None),  # no Sender Report yet: unknown
        ((1000.0, 2.0), 3.0, 1001.25, 0.25),  # captured at 1001.0 on the sender's clock
        ((1000.0, 2.0), 2.5, 1000.52, 0.02),
    ],
)
def test_a_frames_receive_delay_is_counted_from_its_capture_on_the_senders_clock(
    report, media_s, arrival_s, delay_s
) -> None:
    sync = ClockSync()
    if report is not None:
        sync.on_sender_report(*report)
    got = sync.receive_delay(media_s, arrival_s)
    assert got == (None if delay_s is None else pytest.approx(delay_s))


def _feed(sync: ClockSync, start: float, seconds: float, skew: float, sender_step: float = 0.0) -> None:
    """``seconds`` of a stream from ``start``: 30 fps video (80 ms + jitter) and 10 Hz telemetry
    (2 ms + jitter); the receiver's clock is ``skew`` ahead of the sender's, whose clock shows
    ``sender_step`` more than it should (a stepped clock)."""
    for k in range(int(seconds * 30)):
        t = start + k / 30
        sync.on_frame(t, 1_700_000_000.0 + t + skew + 0.080 + (0.03 if k % 3 else 0))
        if k % 3 == 0:
            ts = 1_700_000_000.0 + t + sender_step
            sync.on_telemetry(ts, ts - sender_step + skew + 0.002 + (0.01 if k % 2 else 0))


@pytest.mark.parametrize(
    "outlier_s",
    [
        1000.0,  # a timestamp in milliseconds (accepted when the skew check is off)
        3600.0,  # an hour ahead: passes the one-day skew check
        5.0,
        -3600.0,  # behind: a late sample never made the minimum, it must not now either
    ],
)
def test_clock_sync_survives_one_outlier(outlier_s: float) -> None:
    """One message stamped far off does not move the mapping (an all-time minimum kept it forever)."""
    sync = ClockSync()
    _feed(sync, 0.0, 3.0, skew=3.0)
    before = sync.to_sender_time(2.0)
    assert before == pytest.approx(1_700_000_000.0 + 2.0 + 0.078, abs=1e-6)
    arrival = 1_700_000_000.0 + 3.0 + 3.0
    ts = arrival * 1000 if outlier_s == 1000.0 else arrival - 3.0 + outlier_s
    sync.on_telemetry(ts, arrival)
    assert sync.to_sender_time(2.0) == pytest.approx(before, abs=1e-6)
    _feed(sync, 3.0, 2.0, skew=3.0)
    assert sync.to_sender_time(4.0) == pytest.approx(1_700_000_000.0 + 4.0 + 0.078, abs=1e-6)
    assert sync.describe()["telemetry_outliers_in_window"] == (0 if outlier_s < 0 else 1)


def test_clock_sync_follows_a_stepped_sender_clock() -> None:
    """The sender's clock is stepped 5 s ahead mid-flight: within one window the mapping follows."""
    sync = ClockSync(window_s=10.0)
    _feed(sync, 0.0, 10.0, skew=3.0)
    assert sync.to_sender_time(9.0) == pytest.approx(1_700_000_000.0 + 9.0 + 0.078, abs=1e-6)
    _feed(sync, 10.0, 12.0, skew=3.0, sender_step=5.0)
    assert sync.to_sender_time(21.0) == pytest.approx(1_700_000_000.0 + 21.0 + 5.0 + 0.078, abs=1e-6)
    assert sync.describe()["telemetry_outliers_in_window"] == 0


def test_ntp_to_unix() -> None:
    unix = 1748779200.5
    ntp = (int(unix) + NTP_UNIX_OFFSET_S) << 32 | int(0.5 * 2**32)
    assert ntp_to_unix(ntp) == pytest.approx(unix)


@pytest.mark.parametrize(
    ("capacity", "dropped", "taken"),
    [
        (1, [None, 0, 1, 2, 3], [4]),  # a latest-frame slot
        (2, [None, None, 0, 1, 2], [3, 4]),
        (3, [None, None, None, 0, 1], [2, 3, 4]),
        (8, [None] * 5, [0, 1, 2, 3, 4]),
    ],
)
def test_frame_queue_drops_the_oldest_beyond_its_capacity(capacity, dropped, taken) -> None:
    queue = FrameQueue(capacity)
    frames = [IncomingFrame(None, i / 30, time.perf_counter(), time.time(), i) for i in range(5)]
    assert [d.index if d else None for d in (queue.put(f) for f in frames)] == dropped
    assert queue.waiting == len(taken)
    got = []
    while (item := queue.take(0.01)) is not None:
        got.append(item.index)
        assert queue.waiting == len(taken) - len(got)  # what the pipeline sees as its backlog
    assert got == taken


def test_frame_queue_wakes_its_consumer_and_closes() -> None:
    queue = FrameQueue(2)
    frames = [IncomingFrame(None, i / 30, time.perf_counter(), time.time(), i) for i in range(3)]
    got: list = []
    consumer = threading.Thread(target=lambda: got.append(queue.take(5.0)))
    consumer.start()
    time.sleep(0.05)
    queue.put(frames[0])
    consumer.join(2)
    assert got and got[0].index == 0
    queue.put(frames[1])
    assert [f.index for f in queue.close()] == [1]
    assert queue.put(frames[2]) is None and queue.take(0.01) is None and queue.closed


def test_settings_env_over_yaml_over_defaults(tmp_path, monkeypatch) -> None:
    yaml_file = tmp_path / "server.yaml"
    yaml_file.write_text(
        "max_streams: 2\nport: 9000\napi_token: from-yaml\nice_servers: ['stun:stun.example.org']\n"
    )
    monkeypatch.setenv("AIRPATROL_PORT", "9100")
    s = ServerSettings.load(yaml_file, data_dir=tmp_path)
    assert (s.max_streams, s.port, s.resolve_api_token(), s.ice_servers) == (
        2,
        9100,
        "from-yaml",
        ["stun:stun.example.org"],
    )
    assert s.resolved_database_url == f"sqlite:///{(tmp_path / 'airpatrol.db').resolve()}"
    assert ServerSettings.load(yaml_file, max_streams=7).max_streams == 7  # flags win
    yaml_file.write_text("max_stream: 2\n")
    with pytest.raises(SettingsError, match="max_stream"):
        ServerSettings.load(yaml_file)
    with pytest.raises(SettingsError, match="not found"):
        ServerSettings.load(tmp_path / "missing.yaml")
    monkeypatch.delenv("AIRPATROL_PORT")
    generated = ServerSettings.load(data_dir=tmp_path / "d")
    token = generated.resolve_api_token()
    assert len(token) > 30 and generated.resolve_api_token() == token  # kept in data_dir/api_token
    assert (tmp_path / "d" / "api_token").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (None, "settings file not found"),
        ("max_streams: [2", "is not valid YAML"),
        ("- max_streams", "must hold a mapping at the top level"),
    ],
)
def test_bad_settings_file_is_a_clear_error(tmp_path, body, needle) -> None:
    path = tmp_path / "settings.yaml"
    if body is not None:
        path.write_text(body)
    with pytest.raises(SettingsError, match=needle):
        ServerSettings.load(path)


@pytest.mark.parametrize(
    ("site_yaml", "setting", "enabled", "interval"),
    [
        ("", True, True, 3),  # live streams detect on keyframes by default
        ("", False, False, 3),  # the server setting turns them off
        ("keyframes: {interval: 5, max_interval: 8}\n", True, True, 5),  # the site's parameters kept
        ("keyframes: {enabled: false}\n", True, False, 3),  # a site YAML that says so wins
        ("keyframes: {enabled: true}\n", False, True, 3),
    ],
)
def test_live_pipeline_config_runs_keyframes(tmp_path, site_yaml, setting, enabled, interval) -> None:
    from edge_server.app import live_config
    from pipelines.config import PipelineConfig

    path = tmp_path / "site.yaml"
    path.write_text(site_yaml or "{}\n")
    cfg = live_config(PipelineConfig.from_yaml(path), ServerSettings(data_dir=tmp_path, keyframes=setting))
    assert (cfg.keyframes.enabled, cfg.keyframes.interval) == (enabled, interval)
