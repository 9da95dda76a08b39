"""``detector.imgsz: auto``: the input size from the GSD (pure rule, hysteresis, the wrapper)."""

from __future__ import annotations

import numpy as np
import pytest
import supervision as sv

from pipelines.config import AutoSizeConfig, CameraConfig, DetectorConfig
from pipelines.ground import GroundModel
from pipelines.motion.input_size import (
    VEHICLE_LENGTH_M,
    AutoSizedDetector,
    InputSizeChooser,
    probe_gsd,
    size_for_gsd,
)
from pipelines.types import Frame, Telemetry

CFG = AutoSizeConfig()  # target 30 px, ladder 640..1280, fallback 960


def mavic3_gsd(altitude_m: float, width_px: int = 1920) -> float:
    return altitude_m * 17.3 / (12.29 * width_px)  # DJI Mavic 3: 17.3 mm sensor, 12.29 mm lens


@pytest.mark.parametrize(
    ("gsd", "long_side", "expected"),
    [
        (mavic3_gsd(30), 1920, 640),  # a car spans ~110 px of the frame: the smallest size
        (mavic3_gsd(60), 1920, 640),  # ~100 px of the frame -> 34 px at 640
        (mavic3_gsd(100), 1920, 960),  # 4.5 m / 7.3 cm = 61 px; 30 px needs 944 -> 960
        (mavic3_gsd(150), 1920, 1280),  # needs 1416: the top of the ladder
        (mavic3_gsd(150, 1024), 1024, 1024),  # never above the frame's own long side
        (mavic3_gsd(150, 600), 600, 640),  # ... but never below the bottom of the ladder
        (None, 1920, 960),  # no GSD: the fallback
        (None, 1024, 960),
        (None, 800, 800),  # fallback capped at the frame
        (float("nan"), 1920, 960),
        (0.0, 1920, 960),
    ],
)
def test_size_for_gsd(gsd, long_side, expected) -> None:
    assert size_for_gsd(gsd, long_side, CFG) == expected


def test_sixty_metres_row_is_what_the_rule_says() -> None:
    # 60 m: a car spans 4.5 / 4.4 cm = 102 px of a 1920 frame; 30 px at the input needs 565 -> 640
    needed = CFG.target_px * 1920 / (VEHICLE_LENGTH_M / mavic3_gsd(60))
    assert needed < 640
    assert size_for_gsd(mavic3_gsd(60), 1920, CFG) == 640


@pytest.mark.parametrize("target", [20.0, 30.0, 45.0])
def test_vehicle_spans_at_least_the_target_unless_capped(target) -> None:
    cfg = AutoSizeConfig(target_px=target)
    for alt in range(30, 151, 5):
        gsd = mavic3_gsd(alt)
        size = size_for_gsd(gsd, 1920, cfg)
        spans = VEHICLE_LENGTH_M / gsd * size / 1920
        assert spans >= target - 1e-6 or size == max(cfg.ladder), (alt, size, spans)
        smaller = [s for s in cfg.ladder if s < size]
        if smaller:  # and the next smaller step would not have been enough
            assert VEHICLE_LENGTH_M / gsd * smaller[-1] / 1920 < target


def test_ladder_must_be_multiples_of_the_stride() -> None:
    with pytest.raises(ValueError, match="multiples of 32"):
        AutoSizeConfig(ladder=(640, 700))
    assert AutoSizeConfig(ladder=(1280, 640, 640)).ladder == (640, 1280)


def test_detector_imgsz_defaults_to_auto_and_accepts_numbers() -> None:
    assert DetectorConfig().imgsz == "auto"
    assert DetectorConfig(imgsz=1024).imgsz == 1024
    with pytest.raises(ValueError):
        DetectorConfig(imgsz=16)
    with pytest.raises(ValueError):
        DetectorConfig(imgsz="big")


def test_chooser_switches_only_after_hold_frames() -> None:
    chooser = InputSizeChooser(AutoSizeConfig(hold_frames=3))
    low, high = mavic3_gsd(40), mavic3_gsd(100)
    assert chooser.choose(low, 1920) == 640  # the first frame decides at once
    assert [chooser.choose(high, 1920) for _ in range(3)] == [640, 640, 960]
    # a GSD flickering across a step boundary does not flip the size
    seq = [chooser.choose(g, 1920) for g in (low, high, low, high, low, high)]
    assert seq == [960] * 6
    assert [chooser.choose(low, 1920) for _ in range(3)] == [960, 960, 640]


def _frame(altitude: float | None, pitch: float = -90.0, size=(1920, 1080)) -> Frame:
    tel = None
    if altitude is not None:
        tel = Telemetry(0.0, altitude_m=altitude, gimbal_pitch_deg=pitch, focal_length_mm=12.29)
    image = np.zeros((size[1], size[0], 3), np.uint8)
    return Frame(index=0, timestamp_s=0.0, image=image, telemetry=tel)


def test_probe_gsd_reads_the_far_third_of_an_oblique_view() -> None:
    ground = GroundModel(CameraConfig(name="dji_mavic_3"))
    nadir = probe_gsd(ground.projector(_frame(100.0)), 1920, 1080, 1 / 3)
    oblique = probe_gsd(ground.projector(_frame(100.0, -45.0)), 1920, 1080, 1 / 3)
    centre = probe_gsd(ground.projector(_frame(100.0, -45.0)), 1920, 1080, 0.5)
    assert nadir == pytest.approx(100.0 / 1920 * 17.3 / 12.29, rel=0.02)
    assert oblique > centre > nadir  # farther ground, coarser pixels
    assert probe_gsd(None, 1920, 1080, 1 / 3) is None


class _SizeRecorder:
    def __init__(self) -> None:
        self.sizes: list[int] = []

    def detect_at(self, frame: Frame, imgsz: int) -> sv.Detections:
        self.sizes.append(imgsz)
        return sv.Detections.empty()


@pytest.mark.parametrize(
    ("altitude", "pitch", "expected"),
    [
        (40.0, -90.0, 640),
        (100.0, -90.0, 960),
        (150.0, -90.0, 1280),
        (100.0, -45.0, 1280),  # the far third of an oblique view is coarser than the nadir centre
        (None, -90.0, 960),  # no telemetry: the fallback
    ],
)
def test_auto_sized_detector_runs_the_inner_model_at_the_chosen_size(altitude, pitch, expected) -> None:
    inner = _SizeRecorder()
    det = AutoSizedDetector(inner, GroundModel(CameraConfig(name="dji_mavic_3")), CFG)
    for _ in range(3):
        det.detect(_frame(altitude, pitch))
    assert inner.sizes == [expected] * 3
    assert det.imgsz == expected
    assert dict(det.frames_at) == {expected: 3}
