"""Camera profiles, 35 mm conversion and intrinsics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from pipelines.camera import (
    FULL_FRAME_DIAGONAL_MM,
    PROFILES,
    UnknownCameraError,
    crop_factor,
    equivalent_35mm,
    get_profile,
    intrinsics_for,
    real_focal_from_35mm,
)

MAVIC3 = get_profile("dji_mavic_3")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("dji_mavic_3", "dji_mavic_3"),
        ("Mavic 3", "dji_mavic_3"),
        ("DJI MAVIC-3", "dji_mavic_3"),
        ("mavic3", "dji_mavic_3"),
        ("L2D-20c", "dji_mavic_3"),
        ("FC3582", "dji_mini_3_pro"),
        ("mini 4 pro", "dji_mini_4_pro"),
        ("Air 2S", "dji_air_2s"),
        ("p4p", "dji_phantom_4_pro"),
        ("Parrot Bebop 2", "parrot_bebop_2"),
    ],
)
def test_get_profile_by_name_or_alias(name: str, expected: str) -> None:
    assert get_profile(name).name == expected


def test_unknown_camera_lists_known_profiles() -> None:
    with pytest.raises(UnknownCameraError, match="dji_mavic_3"):
        get_profile("mavic 9 ultra")


def test_mavic3_35mm_conversion_uses_the_manufacturers_ratio() -> None:
    # DJI: 12.29 mm real <-> 24 mm equivalent (the diagonal ratio would give 12.00 mm).
    assert crop_factor(MAVIC3) == pytest.approx(24.0 / 12.29)
    assert real_focal_from_35mm(24.0, MAVIC3) == pytest.approx(12.29)
    assert real_focal_from_35mm(48.0, MAVIC3) == pytest.approx(24.58)
    assert equivalent_35mm(12.29, MAVIC3) == pytest.approx(24.0)


def test_profile_without_stated_equivalent_uses_the_diagonal_ratio() -> None:
    bebop = get_profile("bebop 2")
    assert bebop.focal_length_35mm is None
    expected = math.hypot(36.0, 24.0) / math.hypot(6.17, 3.47)  # 43.27 / 7.08 = 6.11
    assert crop_factor(bebop) == pytest.approx(expected)
    assert real_focal_from_35mm(22.48, bebop) == pytest.approx(22.48 / expected)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_profile_data_is_self_consistent(profile) -> None:
    # Square pixels: the sensor's aspect equals the native image's (within 3 %).
    pitch_x = profile.sensor_width_mm / profile.native_width_px
    pitch_y = profile.sensor_height_mm / profile.native_height_px
    assert pitch_x == pytest.approx(pitch_y, rel=0.03)
    # The stated 35 mm equivalent is close to the sensor-diagonal one (within 6 %).
    diagonal_ratio = FULL_FRAME_DIAGONAL_MM / math.hypot(profile.sensor_width_mm, profile.sensor_height_mm)
    assert crop_factor(profile) == pytest.approx(diagonal_ratio, rel=0.06)
    for f35 in (12.0, 24.0, 70.0):
        assert equivalent_35mm(real_focal_from_35mm(f35, profile), profile) == pytest.approx(f35)


@pytest.mark.parametrize(
    ("width", "height", "focal", "zoom", "fx"),
    [
        (3840, 2160, None, 1.0, 12.29 * 3840 / 17.3),  # 2727.9 px
        (1920, 1080, None, 1.0, 12.29 * 1920 / 17.3),
        (3840, 2160, 24.58, 1.0, 24.58 * 3840 / 17.3),
        (3840, 2160, None, 2.0, 2 * 12.29 * 3840 / 17.3),
        (5280, 3956, 12.29, 1.0, 12.29 * 5280 / 17.3),  # native stills: 3750.7 px
    ],
)
def test_intrinsics_mavic3(width: int, height: int, focal: float | None, zoom: float, fx: float) -> None:
    k = intrinsics_for(MAVIC3, width, height, focal_length_mm=focal, digital_zoom=zoom)
    assert k.fx == pytest.approx(fx)
    assert k.fy == pytest.approx(fx)  # square pixels
    assert (k.cx, k.cy, k.width, k.height) == (width / 2, height / 2, width, height)
    assert k.matrix.tolist() == [[k.fx, 0.0, k.cx], [0.0, k.fy, k.cy], [0.0, 0.0, 1.0]]


def test_intrinsics_horizontal_field_of_view() -> None:
    # 2 atan(17.3 / (2 * 12.29)) = 70.28 deg, whatever the video width.
    for width in (1280, 3840):
        k = intrinsics_for(MAVIC3, width, width * 9 // 16)
        assert math.degrees(2 * math.atan(width / 2 / k.fx)) == pytest.approx(70.28, abs=0.01)


@pytest.mark.parametrize(
    ("width", "height", "focal", "zoom"),
    [(0, 1080, None, 1.0), (1920, -1, None, 1.0), (1920, 1080, 0.0, 1.0), (1920, 1080, None, 0.5)],
)
def test_intrinsics_rejects_bad_inputs(width: int, height: int, focal: float | None, zoom: float) -> None:
    with pytest.raises(ValueError):
        intrinsics_for(MAVIC3, width, height, focal_length_mm=focal, digital_zoom=zoom)
