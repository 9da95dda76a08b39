"""Camera profiles and per-frame intrinsics.

Focal lengths in DJI telemetry are 35 mm-equivalent; the profile's sensor converts them to the
real focal length. Video is usually a crop of the sensor: DJI records 16:9 video from the full
sensor width (4:3 sensors lose rows), so the horizontal field of view is the sensor's and pixels
are square.
"""

from __future__ import annotations

import math
import re

from pipelines.types import CameraProfile, Intrinsics

FULL_FRAME_DIAGONAL_MM = math.hypot(36.0, 24.0)  # 43.27 mm

# Real focal lengths and sensor sizes from the manufacturers' specifications.
# Bebop 2 records a de-warped crop of a fisheye: its numbers are an effective pinhole for the
# 1920x1080 video (about 80 degrees horizontal field of view).
PROFILES: tuple[CameraProfile, ...] = (
    CameraProfile(
        "dji_mavic_3",
        17.3,
        13.0,
        12.29,
        5280,
        3956,
        ("mavic 3", "mavic3", "l2d-20c", "m3e", "mavic 3 enterprise"),
        focal_length_35mm=24.0,
    ),
    CameraProfile(
        "dji_mini_3_pro",
        9.7,
        7.3,
        6.72,
        4032,
        3024,
        ("mini 3 pro", "mini3pro", "fc3582"),
        focal_length_35mm=24.0,
    ),
    CameraProfile(
        "dji_mini_4_pro",
        9.7,
        7.3,
        6.72,
        4032,
        3024,
        ("mini 4 pro", "mini4pro", "fc8482"),
        focal_length_35mm=24.0,
    ),
    CameraProfile(
        "dji_mini_5_pro", 13.2, 9.9, 8.8, 8192, 6144, ("mini 5 pro", "mini5pro"), focal_length_35mm=24.0
    ),
    CameraProfile(
        "dji_air_2s", 13.2, 8.8, 8.38, 5472, 3648, ("air 2s", "air2s", "fc3411"), focal_length_35mm=22.0
    ),
    CameraProfile(
        "dji_air_3", 9.7, 7.3, 6.72, 4032, 3024, ("air 3", "air3", "fc8282"), focal_length_35mm=24.0
    ),
    CameraProfile("dji_air_3s", 13.2, 8.8, 8.8, 8192, 5460, ("air 3s", "air3s"), focal_length_35mm=24.0),
    CameraProfile(
        "dji_phantom_4_pro",
        13.2,
        8.8,
        8.8,
        5472,
        3648,
        ("phantom 4 pro", "p4p", "fc6310", "phantom4pro"),
        focal_length_35mm=24.0,
    ),
    CameraProfile(
        "dji_m30", 6.4, 4.8, 4.5, 4000, 3000, ("m30", "m30t", "matrice 30"), focal_length_35mm=24.0
    ),
    CameraProfile(
        "dji_mavic_pro",
        6.17,
        4.55,
        4.73,
        4000,
        3000,
        ("mavic pro", "fc220", "mavicpro"),
        focal_length_35mm=26.0,
    ),
    CameraProfile("dji_avata_2", 6.4, 4.8, 2.34, 4000, 3000, ("avata 2", "avata2"), focal_length_35mm=12.0),
    CameraProfile(
        "parrot_bebop_2",
        6.17,
        3.47,
        3.68,
        1920,
        1080,
        ("bebop 2", "bebop2", "parrot bebop 2"),
        distortion=(0.0, 0.0, 0.0, 0.0, 0.0),
        lens_note="the drone records a de-warped crop of its fisheye: the video is a pinhole image",
    ),
)

# What no profile above has: DJI publishes neither its video's distortion nor its sensors' readout
# times. A still's XMP carries the lens's calibration (drone-dji:DewarpData: camera.lens.dewarp_data)
# for the full sensor; a video recorded with DJI's distortion correction on has none left. Readout:
# measure it (docs/calibration.md) and give camera.readout_ms.
UNKNOWN_LENS_NOTE = (
    "not published: give camera.lens (a still's DewarpData, or a calibration) unless the video is "
    "corrected in the camera, and camera.readout_ms"
)


def lens_note(profile: CameraProfile) -> str:
    """Where a profile's lens and shutter figures come from, or why it has none."""
    return profile.lens_note or UNKNOWN_LENS_NOTE


_BY_KEY: dict[str, CameraProfile] = {}
for _p in PROFILES:
    for _key in (_p.name, *_p.aliases):
        _BY_KEY[re.sub(r"[^a-z0-9]", "", _key.lower())] = _p


class UnknownCameraError(ValueError):
    pass


def get_profile(name: str) -> CameraProfile:
    """Look a profile up by name or alias, ignoring case, spaces and punctuation."""
    key = re.sub(r"[^a-z0-9]", "", name.lower()).removeprefix("dji")
    for candidate in (key, "dji" + key):
        if candidate in _BY_KEY:
            return _BY_KEY[candidate]
    known = ", ".join(p.name for p in PROFILES)
    raise UnknownCameraError(f"unknown camera {name!r}; known profiles: {known}")


def crop_factor(profile: CameraProfile) -> float:
    """35 mm-equivalent / real focal length: the manufacturer's stated ratio where known,
    else the ratio of the sensor diagonals."""
    if profile.focal_length_35mm:
        return profile.focal_length_35mm / profile.focal_length_mm
    return FULL_FRAME_DIAGONAL_MM / math.hypot(profile.sensor_width_mm, profile.sensor_height_mm)


def real_focal_from_35mm(focal_35mm: float, profile: CameraProfile) -> float:
    """35 mm-equivalent focal length -> real focal length on this sensor (mm)."""
    return focal_35mm / crop_factor(profile)


def equivalent_35mm(focal_mm: float, profile: CameraProfile) -> float:
    return focal_mm * crop_factor(profile)


def intrinsics_for(
    profile: CameraProfile,
    width: int,
    height: int,
    focal_length_mm: float | None = None,
    digital_zoom: float = 1.0,
) -> Intrinsics:
    """Pinhole intrinsics of a ``width`` x ``height`` video from this camera.

    The video spans the full sensor width (square pixels, centred principal point);
    ``digital_zoom`` > 1 narrows the field of view by that factor.
    """
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    f_mm = profile.focal_length_mm if focal_length_mm is None else focal_length_mm
    if not (f_mm > 0):
        raise ValueError(f"focal length must be positive, got {f_mm}")
    if not (digital_zoom >= 1.0):
        raise ValueError(f"digital zoom must be >= 1, got {digital_zoom}")
    fx = f_mm * width / profile.sensor_width_mm * digital_zoom
    return Intrinsics(fx=fx, fy=fx, cx=width / 2.0, cy=height / 2.0, width=width, height=height)
