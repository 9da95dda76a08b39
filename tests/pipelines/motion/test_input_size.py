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
    VehicleSizeProbe,
    probe_gsd,
    size_for_gsd,
    size_for_vehicle_px,
    vehicle_lengths,
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


def _cars(lengths, names=None) -> sv.Detections:
    """Boxes ``lengths`` px long (and half as wide), class names ``names`` (default: all cars)."""
    lengths = np.asarray(lengths, float)
    xyxy = np.zeros((len(lengths), 4))
    xyxy[:, 0] = np.arange(len(lengths)) * 200.0
    xyxy[:, 2] = xyxy[:, 0] + lengths
    xyxy[:, 3] = lengths / 2
    names = ["car"] * len(lengths) if names is None else names
    return sv.Detections(xyxy=xyxy, data={"class_name": np.array(names, dtype="<U10")})


@pytest.mark.parametrize(
    ("detections", "expected"),
    [
        (sv.Detections.empty(), []),
        (_cars([50, 60]), [50, 60]),
        (_cars([50, 60, 150, 20], ["car", "van", "bus", "motorcycle"]), [50, 60]),  # car-sized only
        (sv.Detections(xyxy=np.array([[0.0, 0.0, 10.0, 40.0]])), [40]),  # unnamed: every box, long side
    ],
)
def test_vehicle_lengths(detections, expected) -> None:
    assert vehicle_lengths(detections).tolist() == expected


@pytest.mark.parametrize(
    ("vehicle_px", "long_side", "expected"),
    [
        (100.0, 1920, 640),  # 30 px at the input needs 576
        (60.0, 1920, 960),  # needs 960
        (50.0, 1920, 1280),  # needs 1152
        (49.0, 1024, 640),  # UAVDT M1303: needs 627
        (10.0, 1024, 1024),  # never above the frame
    ],
)
def test_size_for_vehicle_px(vehicle_px, long_side, expected) -> None:
    assert size_for_vehicle_px(vehicle_px, long_side, CFG) == expected


def test_size_for_gsd_is_the_vehicle_rule_at_four_and_a_half_metres() -> None:
    gsd = mavic3_gsd(100)
    assert size_for_gsd(gsd, 1920, CFG) == size_for_vehicle_px(VEHICLE_LENGTH_M / gsd, 1920, CFG)


def test_vehicle_probe_measures_until_enough_cars_then_every_reprobe_s() -> None:
    cfg = AutoSizeConfig(min_vehicles=10, reprobe_s=5.0, vehicle_memory_s=30.0, vehicle_quantile=0.25)
    probe = VehicleSizeProbe(cfg)
    assert probe.due(0.0) and probe.length_px() is None
    probe.add(0.0, _cars([40, 40, 40, 40, 40, 40]))  # 6 of 10
    assert probe.due(1 / 30) and probe.length_px() is None
    probe.add(1 / 30, _cars([80, 80, 80, 80]))  # 10: a measure
    assert probe.length_px() == pytest.approx(40.0)
    assert not probe.due(2 / 30) and not probe.due(4.99)
    assert probe.due(5.04)  # reprobe_s after the last probe
    probe.add(5.04, _cars([60] * 10))
    assert probe.measured == 20 and probe.length_px() == pytest.approx(40.0)  # 6 x 40, 10 x 60, 4 x 80
    assert probe.due(34.0) and probe.measured == 10  # the first two probes are over 30 s old
    assert probe.length_px() == pytest.approx(60.0)
    assert probe.due(1.0) and probe.measured == 0  # time went back: a new stream, measured anew


class _CarsAtSize:
    """A detector that finds cars ``length`` px long, only at input sizes >= ``min_size`` (a
    smaller input misses them, as a real one misses far small cars)."""

    def __init__(self, length: float, count: int = 12, min_size: int = 0) -> None:
        self.length, self.count, self.min_size = length, count, min_size
        self.sizes: list[int] = []

    def detect_at(self, frame: Frame, imgsz: int) -> sv.Detections:
        self.sizes.append(imgsz)
        return _cars([self.length] * self.count) if imgsz >= self.min_size else sv.Detections.empty()


def _untimed_frames(n: int, fps: float = 30.0, size=(1920, 1080)):
    for i in range(n):
        yield Frame(index=i, timestamp_s=i / fps, image=np.zeros((size[1], size[0], 3), np.uint8))


@pytest.mark.parametrize(
    ("length", "chosen"),
    [(100.0, 640), (60.0, 960), (50.0, 1280)],
)
def test_no_gsd_sizes_from_the_cars_seen_at_the_fallback(length, chosen) -> None:
    """No telemetry: the first frame runs at the fallback (960) and measures the cars, the next
    frames at the size they ask for, one frame every 5 s at 960 again to keep measuring."""
    inner = _CarsAtSize(length, min_size=960 if chosen == 640 else 0)  # a smaller input sees none
    det = AutoSizedDetector(inner, GroundModel(CameraConfig(name="dji_mavic_3")), CFG)
    for frame in _untimed_frames(360):  # 12 s at 30 fps
        det.detect(frame)
    probes = [0, 150, 300]  # t = 0, 5, 10 s
    assert [i for i, s in enumerate(inner.sizes) if s == 960 and chosen != 960] == (
        probes if chosen != 960 else []
    )
    assert det.imgsz == chosen
    expected = {960: 360} if chosen == 960 else {960: 3, chosen: 357}
    assert dict(det.frames_at) == expected


def test_no_gsd_and_too_few_cars_stays_at_the_fallback() -> None:
    inner = _CarsAtSize(100.0, count=0)
    det = AutoSizedDetector(inner, GroundModel(CameraConfig(name="dji_mavic_3")), CFG)
    for frame in _untimed_frames(60):
        det.detect(frame)
    assert set(inner.sizes) == {960}


def test_no_gsd_from_vehicles_off_keeps_the_fallback() -> None:
    inner = _CarsAtSize(100.0)
    cfg = AutoSizeConfig(from_vehicles=False)
    det = AutoSizedDetector(inner, GroundModel(CameraConfig(name="dji_mavic_3")), cfg)
    for frame in _untimed_frames(30):
        det.detect(frame)
    assert set(inner.sizes) == {960}


def test_a_gsd_wins_over_the_measured_cars() -> None:
    inner = _CarsAtSize(50.0)  # cars alone would ask for 1280
    det = AutoSizedDetector(inner, GroundModel(CameraConfig(name="dji_mavic_3")), CFG)
    for _ in range(3):
        det.detect(_frame(40.0))
    assert inner.sizes == [640] * 3


@pytest.mark.shared
@pytest.mark.parametrize(("altitude", "expected"), [(30.0, 640), (150.0, 1280)])
def test_real_vehicles_without_telemetry_get_the_size_their_gsd_would(tmp_path, altitude, expected) -> None:
    """1080p nadir frames drawn with real vehicle crops (the held-out aerial-cars video DJI-00760)
    and run with no telemetry: the size measured from the shipped detector's cars is the one the
    exact GSD gives (cars ~200 px long at 30 m: 640; ~40 px at 150 m: 1280)."""
    from shared_material import shared_path

    from eval.simulate.flight import iter_frames
    from eval.simulate.spec import FlightSpec
    from pipelines.builder import build_detector_model
    from pipelines.config import PipelineConfig

    sprites = tmp_path / "sprites"
    sprites.mkdir()
    for f in shared_path("aerial_cars_dji_frames", "dji_video_frames").glob("DJI-00760-*"):
        (sprites / f.name).symlink_to(f)
    spec = FlightSpec(
        seed=7, duration_s=4 / 30, width=1920, height=1080, altitude_m=altitude, pitch_deg=-90.0,
        n_vehicles=24, sprites_dir=str(sprites), real_sprite_fraction=1.0, mask_every=0,
    )  # fmt: skip
    cfg = PipelineConfig()
    assert size_for_gsd(mavic3_gsd(altitude), 1920, cfg.detector.auto_size) == expected
    det = AutoSizedDetector(
        build_detector_model(cfg.detector), GroundModel(cfg.camera), cfg.detector.auto_size
    )
    for k, (image, _rows) in enumerate(iter_frames(spec)):
        det.detect(Frame(index=k, timestamp_s=k / 30, image=image))
    assert det.vehicles.measured >= cfg.detector.auto_size.min_vehicles
    assert det.imgsz == expected, det.vehicles.length_px()
