"""CSV flight logs: the Songdo per-frame log and common flight-log layouts (AirData, Litchi, frame-indexed)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from shared_material import shared_path

from pipelines.errors import TelemetryError
from pipelines.telemetry import load_telemetry, parse_flightlog_csv
from pipelines.telemetry.flightlog import split_header


def songdo() -> Path:
    return shared_path("dji_telemetry_samples", "songdo_U_video_cut_flightlog.csv")


@pytest.mark.shared
def test_songdo_flightlog() -> None:
    samples = parse_flightlog_csv(songdo())
    assert len(samples) == 151
    assert [s.timestamp_s for s in samples[:4]] == [0.0, 0.033, 0.066, 0.1]
    assert samples[-1].timestamp_s == 5.004  # 17:52:13.500 -> 17:52:18.504, exact
    assert {s.altitude_m for s in samples} == {146.0}
    assert {s.focal_length_35mm for s in samples} == {24.0}
    first = samples[0]
    assert (first.latitude, first.longitude, first.abs_altitude_m) == (37.38892, 126.66295, 94.465)
    assert (first.gimbal_pitch_deg, first.focal_length_mm, first.camera) == (None, None, None)


@pytest.mark.shared
def test_songdo_with_camera_and_fps() -> None:
    track = load_telemetry(songdo(), camera="mavic 3", fps=29.97)
    assert len(track) == 151
    assert (track.start_s, track.end_s) == (0.0, 5.004)  # frame 0 first: no offset
    t = track.at(2.5)
    assert (t.altitude_m, t.focal_length_mm, t.camera) == (146.0, pytest.approx(12.29), "dji_mavic_3")


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("rel_alt", ("rel_alt", "")),
        ("Height_Above_Takeoff(feet)", ("height_above_takeoff", "feet")),
        (" time(millisecond) ", ("time", "millisecond")),
        ("OSD.height [ft]", ("osd_height", "ft")),
        ("\ufeffGimbal.Pitch", ("gimbal_pitch", "")),
        ("datetime(utc)", ("datetime", "utc")),
    ],
)
def test_split_header(header: str, expected: tuple[str, str]) -> None:
    assert split_header(header) == expected


def write_csv(tmp_path: Path, text: str, name: str = "log.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_airdata_style(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path,
        "time(millisecond),datetime(utc),latitude,longitude,height_above_takeoff(feet),"
        "altitude_above_seaLevel(feet),pitch(degrees),gimbal_heading(degrees),gimbal_pitch(degrees),isVideo\n"
        "100,2024-05-01 10:00:00,47.1,8.5,300,1500,-5,10,-90,0\n"
        "200,2024-05-01 10:00:00,47.1,8.5,328.084,1528.084,-5,10,-90,1\n"
        "300,2024-05-01 10:00:00,47.1,8.5,330,1530,-5,12,-89.5,1\n"
        "400,2024-05-01 10:00:00,47.1,8.5,331,1531,-5,14,-89,1\n"
        "500,2024-05-01 10:00:00,47.1,8.5,332,1532,-5,16,-88,0\n",
    )
    samples = parse_flightlog_csv(path)
    assert [s.timestamp_s for s in samples] == [0.0, 0.1, 0.2]  # only the filming rows
    assert samples[0].altitude_m == pytest.approx(100.0)  # 328.084 ft
    assert samples[0].abs_altitude_m == pytest.approx(1528.084 * 0.3048)
    assert [s.gimbal_pitch_deg for s in samples] == [-90.0, -89.5, -89.0]  # not the aircraft's pitch
    assert [s.gimbal_yaw_deg for s in samples] == [10.0, 12.0, 14.0]


@pytest.mark.parametrize(
    ("text", "fps", "times", "alts"),
    [
        # Litchi-like: "altitude" is over the take-off point; BOM; an empty cell
        (
            "\ufefflatitude,longitude,altitude(m),gimbal_pitch,time(millisecond)\n1,2,80,-60,1000\n1,2,,-60,1500\n",
            None,
            [0.0, 0.5],
            [80.0, None],
        ),
        # frame-indexed log without a time column: frame / fps
        (
            "frame,rel_alt,gb_pitch,gb_yaw\n10,50,-90,0\n11,51,-90,0\n12,52,-90,0\n",
            25.0,
            [0.4, 0.44, 0.48],
            [50.0, 51.0, 52.0],
        ),
        # time column plus frame + fps: aligned to the video (first row is frame 30 at 30 fps)
        ("frame,timestamp,height\n30,12.0,40\n31,12.5,41\n", 30.0, [1.0, 1.5], [40.0, 41.0]),
        # milliseconds named in the column, not in brackets
        ("time_ms,rel_alt\n1000,40\n1250,41\n", None, [0.0, 0.25], [40.0, 41.0]),
        # time of day only
        ("time,rel_alt\n17:52:13.500,40\n17:52:14.000,41\n", None, [0.0, 0.5], [40.0, 41.0]),
        # seconds, a garbage row (skipped) and an ISO date-time with a zone
        ("time_s,height\n0.0,40\nabc,41\n0.25,42\n", None, [0.0, 0.25], [40.0, 42.0]),
        (
            "timestamp,rel_alt\n2024-05-01T10:00:00+02:00,40\n2024-05-01T08:00:01.25Z,41\n",
            None,
            [0.0, 1.25],
            [40.0, 41.0],
        ),
    ],
)
def test_flightlog_layouts(tmp_path: Path, text: str, fps, times, alts) -> None:
    samples = parse_flightlog_csv(write_csv(tmp_path, text), fps=fps)
    assert [s.timestamp_s for s in samples] == pytest.approx(times)
    assert [s.altitude_m for s in samples] == alts


def test_scaled_focal_and_zoom_in_csv(tmp_path: Path) -> None:
    path = write_csv(tmp_path, "time,rel_alt,focal_len,dzoom_ratio\n0,50,240,10000\n1,50,24.00,2.00\n")
    samples = parse_flightlog_csv(path, camera="mavic 3")
    assert [(s.focal_length_35mm, s.digital_zoom) for s in samples] == [(24.0, 1.0), (24.0, 2.0)]
    assert samples[0].focal_length_mm == pytest.approx(12.29)


def test_absolute_altitude_only_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_csv(tmp_path, "time,abs_alt\n0,140\n1,141\n")
    with caplog.at_level(logging.WARNING, logger="pipelines.telemetry"):
        samples = parse_flightlog_csv(path)
    assert [(s.altitude_m, s.abs_altitude_m) for s in samples] == [(None, 140.0), (None, 141.0)]
    assert sum("take-off" in r.getMessage() for r in caplog.records) == 1


def test_garbage_rows_are_counted(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write_csv(tmp_path, "time,rel_alt\n0,50\n1,fifty\n2,52\n3\n")
    with caplog.at_level(logging.WARNING, logger="pipelines.telemetry"):
        samples = parse_flightlog_csv(path)
    assert [s.altitude_m for s in samples] == [50.0, 52.0, None]
    assert any("skipped 1 of 4 rows" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("text", "fps", "match"),
    [
        ("frame,rel_alt\n0,50\n", None, "no time column"),
        ("rel_alt,abs_alt\n50,60\n", 30.0, "no time column"),
        ("time,height(km)\n0,0.1\n", None, "unsupported unit"),
        ("time(fortnight),height\n0,10\n", None, "unsupported unit"),
        ("time,rel_alt\n", None, "no data rows"),
        ("", None, "no data rows"),
    ],
)
def test_flightlog_errors_name_the_file(tmp_path: Path, text: str, fps, match: str) -> None:
    path = write_csv(tmp_path, text, "flight_042.csv")
    with pytest.raises(TelemetryError, match=match) as info:
        parse_flightlog_csv(path, fps=fps)
    assert "flight_042.csv" in str(info.value)


@pytest.mark.parametrize(
    ("header", "cells", "ranges"),
    [
        ("measure_target_distance", ("61.3", "", "62"), [61.3, None, 62.0]),
        ("laser_range(feet)", ("200", "", ""), [pytest.approx(60.96), None, None]),
    ],
)
def test_a_laser_range_column(tmp_path: Path, header: str, cells: tuple, ranges: list) -> None:
    rows = "".join(f"{t},60,-90,{c}\n" for t, c in zip((0, 1, 2), cells, strict=True))
    samples = parse_flightlog_csv(write_csv(tmp_path, f"time_s,rel_alt,gimbal_pitch,{header}\n{rows}"))
    assert [s.lrf_range_m for s in samples] == ranges
