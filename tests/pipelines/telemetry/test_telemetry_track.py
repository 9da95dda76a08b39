"""TelemetryTrack: sorting, dropping absurd samples, interpolation, holding at the ends; load_telemetry errors."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import pytest

from pipelines.errors import TelemetryError
from pipelines.telemetry import TelemetryTrack, load_telemetry, write_srt
from pipelines.telemetry.track import lerp_angle_deg
from pipelines.types import Telemetry

A = Telemetry(
    timestamp_s=0.0,
    altitude_m=100.0,
    gimbal_pitch_deg=-90.0,
    focal_length_mm=12.29,
    focal_length_35mm=24.0,
    digital_zoom=1.0,
    latitude=10.0,
    longitude=179.9,
    abs_altitude_m=200.0,
    gimbal_yaw_deg=170.0,
    camera="dji_mavic_3",
)
B = Telemetry(
    timestamp_s=1.0,
    altitude_m=110.0,
    gimbal_pitch_deg=-80.0,
    focal_length_mm=24.58,
    focal_length_35mm=48.0,
    digital_zoom=3.0,
    latitude=10.001,
    longitude=-179.9,
    abs_altitude_m=210.0,
    gimbal_yaw_deg=-170.0,
    camera="dji_mavic_3",
)


@pytest.mark.parametrize(
    ("a", "b", "f", "expected"),
    [
        (170.0, -170.0, 0.25, 175.0),
        (170.0, -170.0, 0.5, 180.0),
        (170.0, -170.0, 0.75, -175.0),
        (-170.0, 170.0, 0.75, 175.0),
        (10.0, 50.0, 0.5, 30.0),
        (-90.0, 80.0, 0.5, -5.0),
        (0.0, 179.0, 0.5, 89.5),
        (0.0, -179.0, 0.5, -89.5),
        (180.0, 180.0, 0.0, 180.0),
    ],
)
def test_lerp_angle(a: float, b: float, f: float, expected: float) -> None:
    assert lerp_angle_deg(a, b, f) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("t", "alt", "pitch", "zoom", "yaw", "lon"),
    [
        (0.0, 100.0, -90.0, 1.0, 170.0, 179.9),
        (0.25, 102.5, -87.5, 1.5, 175.0, 179.95),
        (0.5, 105.0, -85.0, 2.0, 180.0, 180.0),
        (0.75, 107.5, -82.5, 2.5, -175.0, -179.95),
        (1.0, 110.0, -80.0, 3.0, -170.0, -179.9),
    ],
)
def test_linear_and_wrapped_interpolation(
    t: float, alt: float, pitch: float, zoom: float, yaw: float, lon: float
) -> None:
    s = TelemetryTrack([B, A]).at(t)
    assert s.timestamp_s == t
    assert (s.altitude_m, s.gimbal_pitch_deg, s.digital_zoom) == pytest.approx((alt, pitch, zoom))
    assert abs((s.gimbal_yaw_deg - yaw + 180.0) % 360.0 - 180.0) < 1e-9
    assert abs((s.longitude - lon + 180.0) % 360.0 - 180.0) < 1e-9
    assert s.latitude == pytest.approx(10.0 + 0.001 * t)
    assert s.focal_length_35mm == pytest.approx(24.0 + 24.0 * t)
    assert s.camera == "dji_mavic_3"


def test_exact_sample_times_return_the_samples() -> None:
    track = TelemetryTrack([A, B])
    assert track.at(0.0) == A
    assert track.at(1.0) == B


def test_missing_position_takes_the_nearer_sample() -> None:
    a = Telemetry(0.0, altitude_m=50.0, latitude=None, camera="x")
    b = Telemetry(1.0, altitude_m=60.0, latitude=59.3, camera="y")
    track = TelemetryTrack([a, b])
    near_a, near_b = track.at(0.3), track.at(0.7)
    assert (near_a.altitude_m, near_a.latitude, near_a.camera) == (pytest.approx(53.0), None, "x")
    assert (near_b.altitude_m, near_b.latitude, near_b.camera) == (pytest.approx(57.0), 59.3, "y")


# Telemetry sanity: a jump in height, a ground field missing on one side, a NaN sample. Frames
# there get no telemetry (the pipeline measures no speed), never an interpolated guess.
def _flight(altitudes, pitch=-60.0, focal=24.0, dt=1 / 30):
    return [
        Telemetry(i * dt, altitude_m=a, gimbal_pitch_deg=pitch, focal_length_35mm=focal)
        for i, a in enumerate(altitudes)
    ]


SPIKE = _flight([60, 60, 600, 60, 60])
STEP = _flight([60, 60, 600, 600, 600])
NAN = _flight([60, 60, float("nan"), 60, 60])
NO_PITCH = [
    *_flight([60] * 5)[:2],
    Telemetry(2 / 30, altitude_m=60.0, focal_length_35mm=24.0),
    *_flight([60] * 5)[3:],
]
NO_FOCAL = [
    *_flight([60] * 5)[:2],
    Telemetry(2 / 30, altitude_m=60.0, gimbal_pitch_deg=-60.0),
    *_flight([60] * 5)[3:],
]
CLIMB = _flight([60, 60.2, 60.4, 60.6, 60.8])  # 6 m/s: a real climb


@pytest.mark.parametrize(
    ("samples", "refused"),
    [
        (SPIKE, {1.5, 2.0, 2.5}),  # the spike and both intervals beside it
        (STEP, {1.5}),  # a step: only across the jump; the new level holds after it
        (NAN, {1.5, 2.0, 2.5}),  # never interpolated across the dropped sample
        (NO_PITCH, {1.5, 2.0, 2.5}),
        (NO_FOCAL, {1.5, 2.0, 2.5}),
        (CLIMB, set()),
    ],
)
def test_telemetry_sanity_refuses_frames_not_guesses(samples, refused) -> None:
    track = TelemetryTrack(samples)
    for k in (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0):
        t = k / 30
        if k in refused:
            with pytest.raises(TelemetryError, match="no telemetry"):
                track.at(t)
        else:
            got = track.at(t)
            assert got.altitude_m in (60.0, 600.0) or 60.0 <= got.altitude_m <= 60.8, k
            assert got.gimbal_pitch_deg == -60.0 and got.focal_length_35mm == 24.0


def test_telemetry_sanity_fixed_altitude_is_not_checked() -> None:
    track = TelemetryTrack(SPIKE, ignore=("altitude_m",))
    assert track.at(2.5 / 30).altitude_m == pytest.approx(
        330.0
    )  # as logged; the ground model uses --altitude


@pytest.mark.parametrize(
    ("t", "expected_alt"),
    [
        (-0.5, 100.0),
        (-1.0, 100.0),
        (1.5, 110.0),
        (2.0, 110.0),
        (-1.01, None),
        (2.01, None),
        (math.nan, None),
        (math.inf, None),
    ],
)
def test_hold_within_max_gap_then_error(t: float, expected_alt: float | None) -> None:
    track = TelemetryTrack([A, B], max_gap_s=1.0)
    if expected_alt is None:
        with pytest.raises(TelemetryError, match="no telemetry at t="):
            track.at(t)
    else:
        held = track.at(t)
        assert (held.timestamp_s, held.altitude_m) == (t, expected_alt)


def test_sorting_duplicates_and_properties() -> None:
    samples = [Telemetry(float(t), altitude_m=50.0 + t) for t in (3, 1, 2, 0, 2)]
    track = TelemetryTrack(samples, max_gap_s=0.0)
    assert len(track) == 4
    assert (track.start_s, track.end_s) == (0.0, 3.0)
    assert [s.timestamp_s for s in track.samples] == [0.0, 1.0, 2.0, 3.0]
    assert track.at(2.5).altitude_m == pytest.approx(52.5)
    with pytest.raises(TelemetryError):
        track.at(3.0001)


def test_absurd_samples_are_dropped_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    samples = [
        Telemetry(0.0, altitude_m=0.0),  # on the ground
        Telemetry(0.1, altitude_m=80.0),
        Telemetry(0.2, altitude_m=80.0, gimbal_pitch_deg=95.0),
        Telemetry(0.3, altitude_m=81.0),
        Telemetry(0.4, altitude_m=math.nan),
    ]
    with caplog.at_level(logging.WARNING, logger="pipelines.telemetry"):
        track = TelemetryTrack(samples)
    assert [s.timestamp_s for s in track.samples] == [0.1, 0.3]
    assert any("dropped 3 of 5" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("samples", "match"),
    [
        ([], "no telemetry samples"),
        ([Telemetry(0.0, altitude_m=0.1), Telemetry(1.0, altitude_m=-4.0)], "none of the 2"),
    ],
)
def test_no_plausible_sample_is_an_error(samples: list[Telemetry], match: str) -> None:
    with pytest.raises(TelemetryError, match=match):
        TelemetryTrack(samples)


def test_per_frame_lookup_is_cheap() -> None:
    # 10 minutes of 30 Hz telemetry queried at 30 fps: one call must cost microseconds.
    samples = [
        Telemetry(
            k / 30.0,
            altitude_m=100.0 + (k % 7) / 10,
            gimbal_pitch_deg=-60.0,
            gimbal_yaw_deg=(k % 360) - 180.0,
        )
        for k in range(18000)
    ]
    track = TelemetryTrack(samples)
    queries = [k / 29.97 + 0.004 for k in range(0, 17000)]
    started = time.perf_counter()
    for t in queries:
        track.at(t)
    per_call = (time.perf_counter() - started) / len(queries)
    assert per_call < 100e-6, f"{per_call * 1e6:.1f} us per call"


# ----------------------------------------------------------------------------- load_telemetry


def test_load_dispatches_on_suffix(tmp_path: Path) -> None:
    samples = [
        Telemetry(k / 10, altitude_m=60.0, gimbal_pitch_deg=-70.0, focal_length_35mm=24.0) for k in range(5)
    ]
    upper = write_srt(samples, tmp_path / "DJI_0042.SRT")
    lower = write_srt(samples, tmp_path / "dji_0042.srt")
    csv_path = tmp_path / "log.csv"
    csv_path.write_text("time,rel_alt,gb_pitch\n0,60,-70\n0.1,61,-70\n")
    assert len(load_telemetry(upper)) == len(load_telemetry(lower)) == 5
    assert load_telemetry(csv_path, max_gap_s=0.5).at(0.05).altitude_m == pytest.approx(60.5)


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("missing.srt", None, "not found"),
        ("flight.txt", "1\n00:00:00,000 --> 00:00:00,033\n[rel_alt: 5.0 abs_alt: 9.0]\n", "unsupported"),
        ("empty.SRT", "", "no telemetry found"),
        ("garbage.srt", "\x00\x01 not a subtitle\n\nat all", "no telemetry found"),
        ("ground.srt", "1\n00:00:00,000 --> 00:00:00,033\n[rel_alt: 0.0 abs_alt: 9.0]\n", "none of the 1"),
        ("nolog.csv", "a,b\n1,2\n", "no time column"),
    ],
)
def test_load_errors_name_the_file(tmp_path: Path, name: str, content: str | None, match: str) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(TelemetryError, match=match) as info:
        load_telemetry(path)
    assert name in str(info.value)


def test_load_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "dir.srt").mkdir()
    with pytest.raises(TelemetryError, match="dir.srt"):
        load_telemetry(tmp_path / "dir.srt")


@pytest.mark.parametrize(
    ("ignore", "loads"),
    [
        ((), False),  # the log's own rel_alt (9e4 m): no plausible sample, an error
        (("altitude_m",), True),  # --altitude fixes it: the log's value is not checked
    ],
)
def test_fixed_fields_are_not_checked(tmp_path: Path, ignore, loads) -> None:
    srt = tmp_path / "roof.SRT"
    srt.write_text(
        "".join(
            f'{i + 1}\n00:00:0{i},000 --> 00:00:0{i},033\n<font size="28">FrameCnt: {i + 1}\n'
            f"[focal_len: 24.00] [latitude: 37.1] [longitude: 126.1] [rel_alt: 90000.000 abs_alt: 90010.000]"
            " </font>\n\n"
            for i in range(3)
        )
    )
    if not loads:
        with pytest.raises(TelemetryError, match="altitude"):
            load_telemetry(srt, ignore=ignore)
    else:
        track = load_telemetry(srt, ignore=ignore)
        # kept as logged: the ground model, not the loader, applies the fixed value (once)
        assert len(track) == 3 and track.at(1.0).altitude_m == 90000.0


def test_a_laser_reading_is_carried_with_its_own_time_never_interpolated() -> None:
    """Every frame carries the latest laser range at or before it, with that sample's time (each
    reading counts once, pipelines.rangefinder), for up to LASER_HOLD_S; never interpolated. A reading
    whose next sample comes before the next frame still reaches that frame."""
    samples = [
        Telemetry(0.0, altitude_m=60.0, gimbal_pitch_deg=-90.0, lrf_range_m=61.0),
        Telemetry(2.0, altitude_m=62.0, gimbal_pitch_deg=-90.0, lrf_range_m=63.0),
        Telemetry(2.01, altitude_m=62.0, gimbal_pitch_deg=-90.0),
        Telemetry(4.0, altitude_m=62.0, gimbal_pitch_deg=-90.0),
        Telemetry(9.0, altitude_m=62.0, gimbal_pitch_deg=-90.0),
    ]
    track = TelemetryTrack(samples, max_gap_s=1.0)
    times = (0.0, 0.5, 1.9, 2.0, 2.01, 3.0, 6.9, 7.1)
    got = [(t.lrf_range_m, t.lrf_time_s) for t in map(track.at, times)]
    assert got == [
        (61.0, 0.0),
        (61.0, 0.0),
        (61.0, 0.0),
        (63.0, 2.0),
        (63.0, 2.0),
        (63.0, 2.0),
        (63.0, 2.0),
        (None, None),
    ]
    assert track.at(0.5).altitude_m == 60.5
