"""annotate(): same-size copy, mask tint, speed-coloured boxes, violations, labels and HUD text."""

from __future__ import annotations

import math

import numpy as np
import pytest
import supervision as sv

from pipelines.annotate import (
    AMBER,
    GREEN,
    GREY,
    PALETTE,
    RED,
    annotate,
    format_hud,
    format_label,
    speed_colour,
)
from pipelines.types import EgoMotion, Frame, FrameResult, Violation

W, H = 320, 200
BOX = (100.0, 80.0, 160.0, 130.0)  # x1, y1, x2, y2: away from the HUD in the top-left corner


def detections(
    boxes: list[tuple[float, ...]], speeds: list[float], ids: list[int] | None = None
) -> sv.Detections:
    n = len(boxes)
    if n == 0:
        return sv.Detections.empty()
    return sv.Detections(
        xyxy=np.array(boxes, dtype=np.float32),
        confidence=np.full(n, 0.9, np.float32),
        class_id=np.zeros(n, int),
        tracker_id=np.array(ids if ids is not None else range(1, n + 1)),
        data={
            "class_name": np.array(["car"] * n),
            "speed_kmh": np.array(speeds, dtype=float),
            "speed_sigma_kmh": np.full(n, 2.0),
            "ground_xy_m": np.zeros((n, 2)),
        },
    )


def result(
    det: sv.Detections,
    mask: np.ndarray | None = None,
    violations: tuple[Violation, ...] = (),
    image: np.ndarray | None = None,
) -> FrameResult:
    image = np.full((H, W, 3), 128, np.uint8) if image is None else image
    return FrameResult(
        frame=Frame(index=7, timestamp_s=0.25, image=image),
        detections=det,
        road_mask=mask,
        ego=EgoMotion.identity(),
        gsd_m_per_px=0.04,
        speeds={},
        violations=violations,
    )


def lower_half_mask(shape: tuple[int, int] = (H, W)) -> np.ndarray:
    mask = np.zeros(shape, bool)
    mask[shape[0] // 2 :, :] = True
    return mask


def violation(track_id: int) -> Violation:
    return Violation(
        track_id=track_id,
        zone="global",
        speed_limit_kmh=50.0,
        peak_speed_kmh=64.0,
        mean_speed_kmh=60.0,
        sigma_kmh=2.0,
        start_frame=1,
        end_frame=7,
        start_time_s=0.0,
        end_time_s=0.25,
        bbox_xyxy=BOX,
    )


def left_edge_pixel(image: np.ndarray) -> tuple[int, ...]:
    x1, y1, _, y2 = (int(v) for v in BOX)
    return tuple(int(c) for c in image[(y1 + y2) // 2, x1])


def test_same_size_copy_with_pixels_changed_inside_boxes() -> None:
    res = result(detections([BOX], [40.0]))
    before = res.frame.image.copy()
    out = annotate(res, speed_limit_kmh=50)
    assert out.shape == before.shape and out.dtype == np.uint8
    np.testing.assert_array_equal(res.frame.image, before)  # the frame is not drawn on
    x1, y1, x2, y2 = (int(v) for v in BOX)
    assert np.any(out[y1 : y2 + 1, x1 : x2 + 1] != before[y1 : y2 + 1, x1 : x2 + 1])
    assert np.array_equal(out[150:, 250:], before[150:, 250:])  # far from boxes and HUD: untouched


@pytest.mark.parametrize(
    ("speed", "limit", "track_id", "colour"),
    [
        (70.0, 50.0, 1, RED),
        (30.0, 50.0, 1, GREEN),
        (47.0, 50.0, 1, AMBER),
        (math.nan, 50.0, 1, GREY),
        (70.0, None, 3, PALETTE[3]),
        (math.nan, None, 13, PALETTE[3]),
    ],
)
def test_box_colour_follows_speed_and_limit(
    speed: float, limit: float | None, track_id: int, colour: tuple[int, int, int]
) -> None:
    assert speed_colour(speed, limit, track_id) == colour
    out = annotate(result(detections([BOX], [speed], [track_id])), speed_limit_kmh=limit)
    assert left_edge_pixel(out) == colour


def test_violations_are_drawn_red_even_below_the_limit() -> None:
    det = detections([BOX, (200.0, 120.0, 240.0, 160.0)], [30.0, 30.0], [5, 6])
    out = annotate(result(det, violations=(violation(5),)), speed_limit_kmh=50)
    assert left_edge_pixel(out) == RED
    assert tuple(int(c) for c in out[140, 200]) == GREEN  # the other track keeps its colour
    thin = annotate(result(det), speed_limit_kmh=50)
    x1, y1, _, y2 = (int(v) for v in BOX)
    drawn_wide = np.any(out[(y1 + y2) // 2, x1 - 2 : x1 + 3] != thin[(y1 + y2) // 2, x1 - 2 : x1 + 3])
    assert drawn_wide  # thicker outline


@pytest.mark.parametrize("mask_shape", [(H, W), (H // 2, W // 2)])  # a smaller mask is resized
def test_mask_tints_only_the_masked_area(mask_shape: tuple[int, int]) -> None:
    base = result(sv.Detections.empty(), mask=lower_half_mask(mask_shape))
    out = annotate(base)
    plain = annotate(base, draw_mask=False)
    inside, outside = (slice(160, 190), slice(20, 300)), (slice(60, 90), slice(20, 300))
    assert np.abs(out[inside].astype(int) - plain[inside]).sum(axis=2).min() > 0  # every pixel tinted
    np.testing.assert_array_equal(out[outside], plain[outside])
    np.testing.assert_array_equal(plain[inside], base.frame.image[inside])


def test_uint8_mask_and_no_detections() -> None:
    mask = lower_half_mask().astype(np.uint8) * 255
    out = annotate(result(sv.Detections.empty(), mask=mask))
    assert out.shape == (H, W, 3)
    assert np.any(out[170] != 128)


@pytest.mark.parametrize(
    ("args", "label"),
    [
        ((12, "car", 57.4, 2.6), "#12 car 57 km/h \u00b13"),
        ((12, "truck", math.nan, math.nan), "#12 truck"),
        ((3, "car", 88.0, math.nan), "#3 car 88 km/h"),
        ((None, "", 10.0, 1.0), "#? 10 km/h \u00b11"),
        ((12, "car", 57.4, 2.6, False), "#12 car 57? km/h \u00b13"),  # the speed stage doubts it
        ((12, "car", math.nan, math.nan, False), "#12 car"),
    ],
)
def test_format_label(args: tuple, label: str) -> None:
    assert format_label(*args) == label


@pytest.mark.parametrize(
    ("args", "hud"),
    [
        ((7, 0.25, 0.04, 14.23, 3), "frame 7 | t 0.25 s | GSD 4.0 cm/px | 14.2 fps | 3 tracks"),
        ((0, 0.0, None, None, 0), "frame 0 | t 0.00 s | GSD ? | 0 tracks"),
    ],
)
def test_format_hud(args: tuple, hud: str) -> None:
    assert format_hud(*args) == hud


def test_hud_and_labels_stay_inside_small_images() -> None:
    image = np.full((40, 60, 3), 50, np.uint8)
    det = detections([(0.0, 0.0, 20.0, 15.0), (50.0, 30.0, 60.0, 40.0)], [99.0, 10.0])
    out = annotate(result(det, image=image), speed_limit_kmh=50, fps=3.0)
    assert out.shape == (40, 60, 3)


@pytest.mark.parametrize("max_width", [160, 100, W, 2 * W])
def test_drawn_at_a_smaller_width_like_the_full_frame_scaled(max_width: int) -> None:
    res = result(detections([BOX], [70.0]), mask=lower_half_mask())
    out = annotate(res, speed_limit_kmh=50, max_width=max_width)
    width = min(max_width, W)
    assert out.shape == (round(H * width / W), width, 3)
    s = width / W
    x1, y1, _, y2 = (round(v * s) for v in BOX)
    assert tuple(int(c) for c in out[(y1 + y2) // 2, x1]) == RED  # the box where it is in the frame
