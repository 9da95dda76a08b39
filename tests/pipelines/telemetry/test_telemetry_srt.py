"""DJI SRT parsing (every shared layout, scaled old firmware, legacy styles) and the writer's round trip."""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path

import pytest
from shared_material import shared_path

from pipelines.errors import TelemetryError
from pipelines.telemetry import load_telemetry, parse_srt, write_srt
from pipelines.telemetry.srt import focal_35mm_from_literal, zoom_from_literal
from pipelines.types import Telemetry

SAMPLES = ("dji_telemetry_samples", "dji_srt_format_samples")


def read_sample(name: str) -> str:
    return shared_path(*SAMPLES, name).read_text(encoding="utf-8")


def srt_block(index: int, start_ms: int, payload: str, end_ms: int | None = None) -> str:
    def ts(ms: int) -> str:
        return f"00:{ms // 60000:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"

    return f"{index}\n{ts(start_ms)} --> {ts(end_ms if end_ms is not None else start_ms + 33)}\n{payload}\n"


# file, blocks, first altitude_m, last altitude_m, first abs_altitude_m, focal_length_35mm,
# gimbal pitch, gimbal yaw, first (lat, lon), last timestamp
SHARED_CASES = [
    ("Avata360_clip.SRT", 5, 5.4, 5.4, -124.744, 28.0, 0.0, -162.8, (53.36508, 6.460739), 0.166),
    ("DJI_sample.SRT", 5, 1.3, 1.5, 132.86, None, None, None, (59.302335, 18.203059), 0.133),
    ("Mini5PRO_clip.SRT", 5, 6.0, 6.0, -122.769, 24.0, None, None, (53.365108, 6.460719), 0.16),
    ("air3S_clip.SRT", 5, 0.0, 0.0, 302.208, 24.0, None, None, (34.270373, -84.17616), 0.066),
    ("air3_clip.SRT", 2, 5.0, 5.1, 105.0, None, None, None, (59.1111, 18.2222), 0.033),
    # legacy GPS(lat, lon, alt) BAROMETER(..): no height over take-off -> altitude unknown
    ("avata2_clip.SRT", 2, None, None, 91.2, None, None, None, (39.906217, 116.391305), 0.033),
    ("mini4pro_clip.SRT", 2, 1.0, 2.0, 100.0, None, None, None, (59.0, 18.0), 0.033),
    ("neo2_clip.SRT", 5, 0.0, 0.1, 113.9, None, None, None, (45.607181, 13.75386), 0.133),
    # latitude/longitude 0.000000 while the GPS had no fix -> None
    ("neo2_clip_nogps.SRT", 6, 0.4, 0.4, 269.099, None, None, None, (None, None), 0.165),
]


@pytest.mark.shared
@pytest.mark.parametrize(
    ("name", "n", "alt0", "alt1", "abs0", "focal35", "pitch", "yaw", "latlon", "t_last"),
    SHARED_CASES,
    ids=[c[0] for c in SHARED_CASES],
)
def test_parse_shared_samples(name, n, alt0, alt1, abs0, focal35, pitch, yaw, latlon, t_last) -> None:
    samples = parse_srt(read_sample(name))
    assert len(samples) == n
    first, last = samples[0], samples[-1]
    assert first.timestamp_s == 0.0
    assert last.timestamp_s == pytest.approx(t_last)
    assert [s.timestamp_s for s in samples] == sorted(s.timestamp_s for s in samples)
    assert (first.altitude_m, last.altitude_m, first.abs_altitude_m) == (alt0, alt1, abs0)
    assert (first.focal_length_35mm, first.gimbal_pitch_deg, first.gimbal_yaw_deg) == (focal35, pitch, yaw)
    assert (first.latitude, first.longitude) == latlon
    assert all(s.digital_zoom == 1.0 and s.camera is None and s.focal_length_mm is None for s in samples)


@pytest.mark.shared
def test_shared_sample_late_gps_fix() -> None:
    samples = parse_srt(read_sample("neo2_clip_nogps.SRT"))
    assert [s.latitude is None for s in samples] == [True, True, True, False, False, False]
    assert (samples[-1].latitude, samples[-1].longitude) == (32.848932, -84.861966)


@pytest.mark.shared
@pytest.mark.parametrize(
    ("name", "camera", "focal_mm"),
    [("Mini5PRO_clip.SRT", "mini 5 pro", 8.8), ("air3S_clip.SRT", "Mavic 3", 12.29)],
)
def test_camera_gives_real_focal_length(name: str, camera: str, focal_mm: float) -> None:
    samples = parse_srt(read_sample(name), camera=camera)
    assert samples[0].focal_length_mm == pytest.approx(focal_mm)
    assert samples[0].camera.startswith("dji_")


@pytest.mark.shared
def test_barometer_only_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="pipelines.telemetry"):
        samples = parse_srt(read_sample("avata2_clip.SRT"), source="avata2")
    assert all(s.altitude_m is None for s in samples)
    warnings = [r for r in caplog.records if "rel_alt" in r.getMessage()]
    assert len(warnings) == 1
    assert "avata2" in warnings[0].getMessage()


# file -> number of plausible samples, or None when load_telemetry must refuse it
# (these format fixtures were recorded on the ground: rel_alt <= 0.5 m is rejected)
LOAD_CASES = [
    ("Avata360_clip.SRT", 5),
    ("DJI_sample.SRT", 5),
    ("Mini5PRO_clip.SRT", 5),
    ("air3S_clip.SRT", None),
    ("air3_clip.SRT", 2),
    ("avata2_clip.SRT", 2),
    ("mini4pro_clip.SRT", 2),
    ("neo2_clip.SRT", None),
    ("neo2_clip_nogps.SRT", None),
]


@pytest.mark.shared
@pytest.mark.parametrize(("name", "n"), LOAD_CASES, ids=[c[0] for c in LOAD_CASES])
def test_load_shared_samples(name: str, n: int | None) -> None:
    path = shared_path(*SAMPLES, name)
    if n is None:
        with pytest.raises(TelemetryError, match=re.escape(name)):
            load_telemetry(path)
    else:
        track = load_telemetry(path, camera="mavic 3")
        assert len(track) == n
        assert track.at(track.start_s).camera == "dji_mavic_3"


# ----------------------------------------------------------------------------- scaled values


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        ("24.00", 24.0),
        ("24", 24.0),
        ("240", 24.0),
        ("280", 28.0),
        ("480", 48.0),
        ("166.00", 166.0),
        ("70", 70.0),
    ],
)
def test_focal_len_scaling(literal: str, expected: float) -> None:
    assert focal_35mm_from_literal(literal) == expected


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        ("1.00", 1.0),
        ("2.5", 2.5),
        ("3", 3.0),
        ("10000", 1.0),
        ("25000", 2.5),
        ("100", 1.0),
        ("200", 2.0),
        ("150.0", 150.0),
        ("10000.0", 1.0),
    ],
)
def test_dzoom_ratio_scaling(literal: str, expected: float) -> None:
    assert zoom_from_literal(literal) == expected


@pytest.mark.parametrize(
    ("payload", "focal35", "zoom"),
    [
        # Mavic 2 / Mavic Air era <font> layout: x10 focal, x10000 zoom with delta, "longtitude" typo
        (
            '<font size="36">SrtCnt : 1, DiffTime : 33ms\n2019-10-19 15:03:03,385,137\n'
            "[iso : 100] [shutter : 1/320.0] [fnum : 280] [ev : 0] [ct : 5500] [color_md : default] "
            "[focal_len : 240] [dzoom_ratio: 10000, delta:0],[latitude: 47.3769] [longtitude: 8.5417] "
            "[rel_alt: 52.300 abs_alt: 460.100] </font>",
            24.0,
            1.0,
        ),
        (
            "[focal_len : 480] [dzoom_ratio: 200] [latitude: 47.3769] [longitude: 8.5417] [rel_alt: 52.3 abs_alt: 460.1]",
            48.0,
            2.0,
        ),
        (
            "[focal_len: 24.00] [dzoom_ratio: 1.50] [latitude: 47.3769] [longitude: 8.5417] [rel_alt: 52.3 abs_alt: 460.1]",
            24.0,
            1.5,
        ),
    ],
)
def test_scaled_firmware_values(tmp_path: Path, payload: str, focal35: float, zoom: float) -> None:
    path = tmp_path / "DJI_0001.SRT"
    path.write_text(srt_block(1, 0, payload) + "\n" + srt_block(2, 33, payload))
    samples = load_telemetry(path, camera="mavic 3").samples
    assert len(samples) == 2
    s = samples[0]
    assert (s.focal_length_35mm, s.digital_zoom) == (focal35, zoom)
    assert s.focal_length_mm == pytest.approx(focal35 * 12.29 / 24.0)
    assert (s.latitude, s.longitude, s.altitude_m, s.abs_altitude_m) == (47.3769, 8.5417, 52.3, 460.1)


@pytest.mark.parametrize(
    ("payload", "alt", "abs_alt", "latlon", "extra"),
    [
        # Phantom 4 / Mavic Pro: HOME(lon,lat) date, GPS(lon,lat,satellites) BAROMETER:height
        (
            "HOME(-81.3563,28.5394) 2017.05.26 10:54:16\nGPS(-81.3563,28.5394,15) BAROMETER:47.5\n"
            "ISO:100 Shutter:500 EV:0 Fnum:F2.8",
            None,
            47.5,
            (28.5394, -81.3563),
            {},
        ),
        # longitude beyond 90 decides the order
        ("GPS(149.0251,-20.2533,16) BAROMETER:31.4M", None, 31.4, (-20.2533, 149.0251), {}),
        # old firmware's lone [altitude: ..] is absolute, not the height over take-off
        ("[latitude : 47.3769] [longtitude : 8.5417] [altitude: 459.3]", None, 459.3, (47.3769, 8.5417), {}),
        # DJI FPV / Avata / O3: H = height over the home point
        (
            "F/2.8, SS 320.61, ISO 100, EV 0, DZOOM 1.250, GPS (8.6242, 49.4106, 19), D 24.19m, H 6.20m, "
            "H.S 0.00m/s, V.S 0.00m/s",
            6.2,
            None,
            (49.4106, 8.6242),
            {"digital_zoom": 1.25},
        ),
        # gimbal angles spelled out, keys in another case
        (
            "[Latitude: 1.5] [Longitude: 2.5] [REL_ALT: 80.0 ABS_ALT: 120.0] [Gimbal Pitch: -45.5] [gimbal yaw: 12.0]",
            80.0,
            120.0,
            (1.5, 2.5),
            {"gimbal_pitch_deg": -45.5, "gimbal_yaw_deg": 12.0},
        ),
        # modern gimbal field and no GPS fix
        (
            "[latitude: 0.000000] [longitude: 0.000000] [rel_alt: 95.000 abs_alt: 130.0] "
            "[gb_yaw: 91.3 gb_pitch: -89.9 gb_roll: 0.0]",
            95.0,
            130.0,
            (None, None),
            {"gimbal_pitch_deg": -89.9, "gimbal_yaw_deg": 91.3},
        ),
    ],
)
def test_other_layouts(payload: str, alt, abs_alt, latlon, extra: dict) -> None:
    (s,) = parse_srt(srt_block(1, 1000, payload, 2000))
    assert s.timestamp_s == 1.0
    assert (s.altitude_m, s.abs_altitude_m, (s.latitude, s.longitude)) == (alt, abs_alt, latlon)
    for field, value in extra.items():
        assert getattr(s, field) == value


def test_bom_crlf_and_garbage_blocks(caplog: pytest.LogCaptureFixture) -> None:
    good = "[latitude: 10.0] [longitude: 20.0] [rel_alt: 50.0 abs_alt: 60.0]"
    text = "\ufeff" + "\n".join(
        [
            srt_block(1, 0, good),
            "this is not a subtitle at all",
            "",
            srt_block(2, 33, "[iso: 100] [shutter: 1/100.0]"),  # timing but no telemetry
            srt_block(3, 66, "<font size='36'>" + good.replace("50.0", "51.0") + "</font>"),
            "  \t",
            "42",
            "",
            srt_block(4, 100, good.replace("50.0", "52.0")),
        ]
    )
    text = text.replace("\n", "\r\n")
    with caplog.at_level(logging.WARNING, logger="pipelines.telemetry"):
        samples = parse_srt(text)
    assert [(s.timestamp_s, s.altitude_m) for s in samples] == [(0.0, 50.0), (0.066, 51.0), (0.1, 52.0)]
    assert any("skipped 3 of 6 SRT blocks" in r.getMessage() for r in caplog.records)


def test_blocks_without_blank_lines_between_them() -> None:
    text = "".join(srt_block(i + 1, 33 * i, f"[rel_alt: {50 + i}.0 abs_alt: 90.0]") for i in range(3))
    assert [(s.timestamp_s, s.altitude_m) for s in parse_srt(text)] == [
        (0.0, 50.0),
        (0.033, 51.0),
        (0.066, 52.0),
    ]


def test_empty_and_garbage_text() -> None:
    assert parse_srt("") == []
    assert parse_srt("\ufeff\r\n\r\n") == []
    assert parse_srt("WEBVTT\n\nhello\n") == []


# ----------------------------------------------------------------------------- writing


def make_samples(camera: str | None) -> list[Telemetry]:
    from pipelines.camera import get_profile, real_focal_from_35mm

    profile = get_profile(camera) if camera else None
    out = []
    for k in range(40):
        f35 = 24.0 if k < 20 else 24.0 + 0.37 * (k - 20)
        out.append(
            Telemetry(
                timestamp_s=(k * 33 + (1 if k > 30 else 0)) / 1000,  # whole milliseconds
                altitude_m=120.123456789 + 0.1 * k,
                gimbal_pitch_deg=-89.99999 + k / 7,
                focal_length_mm=real_focal_from_35mm(f35, profile) if profile else None,
                focal_length_35mm=f35,
                digital_zoom=1.0 if k % 3 else 1.0 + k / 13,
                latitude=None if k == 5 else 37.388921234567 + k * 1e-7,
                longitude=None if k == 5 else 126.66295 - k * 3.3e-7,
                abs_altitude_m=None if k == 7 else 94.465 - k / 3,
                gimbal_yaw_deg=None if k == 9 else (179.9 + k * 0.05 + 180.0) % 360.0 - 180.0,
                camera=get_profile(camera).name if camera else None,
            )
        )
    out[11] = Telemetry(
        timestamp_s=out[11].timestamp_s, altitude_m=99.5, camera=out[11].camera
    )  # mostly empty
    return out


@pytest.mark.parametrize("camera", [None, "mavic 3", "mini 4 pro"])
def test_write_srt_round_trips_exactly(tmp_path: Path, camera: str | None) -> None:
    samples = make_samples(camera)
    path = write_srt(samples, tmp_path / "sim.SRT")
    assert parse_srt(path.read_text(encoding="utf-8"), camera=camera) == samples
    track = load_telemetry(path, camera=camera)
    assert len(track) == len(samples)


def test_write_srt_layout_is_modern_dji(tmp_path: Path) -> None:
    samples = [
        Telemetry(
            0.0,
            altitude_m=100.0,
            gimbal_pitch_deg=-90.0,
            focal_length_35mm=24.0,
            latitude=1.5,
            longitude=2.5,
            abs_altitude_m=140.0,
            gimbal_yaw_deg=-10.0,
        ),
        Telemetry(
            0.033,
            altitude_m=100.5,
            gimbal_pitch_deg=-90.0,
            focal_length_35mm=24.0,
            latitude=1.5,
            longitude=2.5,
            abs_altitude_m=140.5,
            gimbal_yaw_deg=-10.0,
        ),
    ]
    lines = write_srt(samples, tmp_path / "a.SRT").read_text().splitlines()
    assert lines[:4] == [
        "1",
        "00:00:00,000 --> 00:00:00,033",
        '<font size="28">FrameCnt: 1, DiffTime: 33ms',
        "2000-01-01 00:00:00.000",
    ]
    assert lines[4] == (
        "[focal_len: 24.0] [dzoom_ratio: 1.0] [latitude: 1.5] [longitude: 2.5] [rel_alt: 100.0 abs_alt: 140.0] "
        "[gb_yaw: -10.0 gb_pitch: -90.0 gb_roll: 0.0] </font>"
    )
    assert lines[6:10] == [
        "2",
        "00:00:00,033 --> 00:00:00,066",
        '<font size="28">FrameCnt: 2, DiffTime: 33ms',
        "2000-01-01 00:00:00.033",
    ]


def test_write_srt_rounds_timestamps_to_milliseconds(tmp_path: Path) -> None:
    samples = [Telemetry(k / 30.0, altitude_m=80.0) for k in range(4)]
    back = parse_srt(write_srt(samples, tmp_path / "b.srt").read_text())
    assert [s.timestamp_s for s in back] == [0.0, 0.033, 0.067, 0.1]
    assert all(
        math.isclose(a.timestamp_s, b.timestamp_s, abs_tol=5e-4) for a, b in zip(samples, back, strict=True)
    )


@pytest.mark.parametrize(
    "times",
    [[0.0, 0.0], [0.1, 0.05], [0.0, 0.0004], [-0.1, 0.0], [0.0, float("nan")]],
)
def test_write_srt_rejects_bad_timestamps(tmp_path: Path, times: list[float]) -> None:
    with pytest.raises(TelemetryError):
        write_srt([Telemetry(t, altitude_m=50.0) for t in times], tmp_path / "c.srt")


def _srt_with_altitudes(literals: list[str]) -> str:
    return "".join(
        f"{i + 1}\n00:00:00,{i * 33:03d} --> 00:00:00,{i * 33 + 33:03d}\n"
        f"[focal_len: 24.00] [latitude: 47.3769] [longitude: 8.5417] [rel_alt: {alt} abs_alt: 460.1] "
        "[gb_yaw: 10.0 gb_pitch: -60.0]\n\n"
        for i, alt in enumerate(literals)
    )


@pytest.mark.parametrize(
    ("literals", "dropped"),
    [
        (["52.3", "nan", "52.3", "52.3"], 1),
        (["52.3", "NaN", "-inf", "52.4"], 2),
        (["52.3", "inf", "Infinity", "52.3"], 2),
    ],
)
def test_nan_altitude_is_named_not_mistaken_for_a_missing_rel_alt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, literals: list[str], dropped: int
) -> None:
    path = tmp_path / "nan.SRT"
    path.write_text(_srt_with_altitudes(literals))
    with caplog.at_level(logging.WARNING, logger="pipelines.telemetry"):
        track = load_telemetry(path, camera="mavic 3")
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "only a barometric/absolute altitude" not in messages
    assert f"dropped {dropped} of 4 implausible" in messages and "altitude_m=" in messages
    assert len(track) == 4 - dropped
    with pytest.raises(TelemetryError, match="rejected sample"):  # never interpolated across
        track.at(0.05)


def test_all_nan_altitudes_say_so(tmp_path: Path) -> None:
    path = tmp_path / "nan.SRT"
    path.write_text(_srt_with_altitudes(["nan"] * 3))
    with pytest.raises(TelemetryError, match="altitude_m=nan is not a finite number"):
        load_telemetry(path)
    assert len(load_telemetry(path, ignore=("altitude_m",))) == 3  # --altitude rescues the flight


def test_a_laser_range_round_trips_through_an_srt(tmp_path: Path) -> None:
    """airpatrol's simulator writes a laser range as Cloud API OSD names it; only the samples that
    carry one get one back."""
    samples = [
        Telemetry(0.0, altitude_m=60.0, gimbal_pitch_deg=-90.0, lrf_range_m=61.3),
        Telemetry(1 / 30, altitude_m=60.0, gimbal_pitch_deg=-90.0),
    ]
    path = tmp_path / "lrf.SRT"
    write_srt(samples, path)
    assert "[measure_target_distance: 61.3]" in path.read_text()
    assert [t.lrf_range_m for t in parse_srt(path.read_text())] == [61.3, None]
