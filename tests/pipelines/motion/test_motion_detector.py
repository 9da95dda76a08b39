"""Detector: class tables, result conversion, weights errors, and a real run on a UAVDT frame."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from pipelines.config import ConfigError, DetectorConfig
from pipelines.errors import WeightsError
from pipelines.motion import detector as det_mod
from pipelines.motion.detector import (
    CANONICAL_CLASSES,
    YoloDetector,
    detections_from_result,
    resolve_class_map,
    resolve_weights,
)
from pipelines.types import Frame

COCO_NAMES = {
    0: "person",
    1: "bicycle",
    2: "car",
    3: "motorcycle",
    4: "airplane",
    5: "bus",
    6: "train",
    7: "truck",
}
VISDRONE_NAMES = [
    "pedestrian",
    "people",
    "bicycle",
    "car",
    "van",
    "truck",
    "tricycle",
    "awning-tricycle",
    "bus",
    "motor",
]
AERIAL_NAMES = ["car", "truck", "bus", "minibus", "cyclist"]
AUAIR_NAMES = ["Human", "Car", "Truck", "Van", "Motorbike", "Bicycle", "Bus", "Trailer"]
UAVDT_NAMES = ["car", "truck", "bus"]


def fake_result(cls_ids: list[int]) -> SimpleNamespace:
    """Stand-in for an ultralytics ``Results``: ``boxes.{xyxy, conf, cls}`` as numpy arrays."""
    n = len(cls_ids)
    xyxy = np.array([[10.0 * i, 5.0, 10.0 * i + 8, 9.0] for i in range(n)], dtype=np.float64).reshape(-1, 4)
    boxes = SimpleNamespace(
        xyxy=xyxy, conf=np.linspace(0.9, 0.5, n, dtype=np.float64), cls=np.array(cls_ids, dtype=np.float64)
    )
    return SimpleNamespace(boxes=boxes, names={})


# model class ids in the result, table, expected canonical names (in order, unmapped dropped)
TABLE_CASES = [
    ("coco", [0, 2, 3, 5, 7, 9], ["car", "motorcycle", "bus", "truck"]),
    ("visdrone", list(range(10)), ["car", "van", "truck", "bus", "motorcycle"]),
    ("uavdt", [0, 1, 2], ["car", "truck", "bus"]),
    ("aerial", [0, 1, 2, 3, 4], ["car", "truck", "bus", "van"]),
    ("auair", list(range(8)), ["car", "truck", "van", "motorcycle", "bus"]),
    ({4: "minibus", 7: "truck"}, [4, 5, 7], ["van", "truck"]),
]


@pytest.mark.parametrize(("table", "cls_ids", "expected"), TABLE_CASES)
def test_class_tables_map_fake_result(table, cls_ids, expected) -> None:
    class_map = resolve_class_map(table)
    det = detections_from_result(fake_result(cls_ids), class_map)
    assert list(det.data["class_name"]) == expected
    assert [CANONICAL_CLASSES[c] for c in det.class_id] == expected
    assert det.xyxy.dtype == np.float32 and det.xyxy.shape == (len(expected), 4)
    assert det.confidence is not None and det.confidence.dtype == np.float32
    kept = [c for c in cls_ids if c in class_map]
    assert list(det.data["source_class_id"]) == kept


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (COCO_NAMES, {2: "car", 3: "motorcycle", 5: "bus", 7: "truck"}),
        (VISDRONE_NAMES, {3: "car", 4: "van", 5: "truck", 8: "bus", 9: "motorcycle"}),
        (AERIAL_NAMES, {0: "car", 1: "truck", 2: "bus", 3: "van"}),
        (AUAIR_NAMES, {1: "car", 2: "truck", 3: "van", 4: "motorcycle", 6: "bus"}),
        (UAVDT_NAMES, {0: "car", 1: "truck", 2: "bus"}),
    ],
)
def test_auto_table_from_model_names(names, expected) -> None:
    assert resolve_class_map("auto", names) == expected


@pytest.mark.parametrize(
    ("table", "names"), [("visdrone", VISDRONE_NAMES), ("aerial", AERIAL_NAMES), ("auair", AUAIR_NAMES)]
)
def test_builtin_table_agrees_with_auto(table, names) -> None:
    assert resolve_class_map(table, names) == resolve_class_map("auto", names)


def test_wrong_table_is_logged(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="pipelines.motion.detector"):
        resolve_class_map("visdrone", COCO_NAMES)
    assert "does not match" in caplog.text


@pytest.mark.parametrize(
    ("spec", "names", "message"),
    [
        ("kitti", COCO_NAMES, "unknown detector class table"),
        ({0: "pedestrian"}, None, "not a vehicle class"),
        ({}, None, "empty"),
        ("auto", {0: "person", 1: "dog"}, "none of the model's classes"),
        ("auto", None, "carries no class names"),
    ],
)
def test_class_map_errors(spec, names, message) -> None:
    with pytest.raises(ConfigError, match=message):
        resolve_class_map(spec, names)


def test_empty_and_all_dropped_results() -> None:
    cmap = resolve_class_map("coco")
    for res in (fake_result([]), fake_result([0, 1, 9]), SimpleNamespace(boxes=None)):
        det = detections_from_result(res, cmap)
        assert len(det) == 0 and det.xyxy.shape == (0, 4)
        assert "class_name" in det.data


# --------------------------------------------------------------------------------------------
# weights
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["missing_file", "folder_without_xml", "none_and_empty_dir"])
def test_missing_weights_error_names_path_and_fix(tmp_path: Path, kind: str) -> None:
    weights_dir = tmp_path / "weights"
    weights_dir.mkdir()
    path: Path | None
    if kind == "missing_file":
        path = tmp_path / "nope.pt"
    elif kind == "folder_without_xml":
        path = tmp_path / "x_openvino_model"
        path.mkdir()
    else:
        path = None
    with pytest.raises(WeightsError) as err:
        YoloDetector.from_config(DetectorConfig(weights=path), weights_dir=weights_dir)
    msg = str(err.value)
    assert str(path if path is not None else weights_dir) in msg
    assert "--detector PATH" in msg and "weights" in msg
    assert isinstance(err.value, FileNotFoundError)  # the CLI shows it as a user error


@pytest.mark.parametrize("suffix", [".onnx", ".pt"])
def test_unloadable_weights_raise_weights_error(tmp_path: Path, suffix: str) -> None:
    bad = tmp_path / f"broken{suffix}"
    bad.write_bytes(b"definitely not a model" * 8)
    with pytest.raises(WeightsError, match="could not load detector weights"):
        YoloDetector(bad)


@pytest.mark.parametrize(
    ("present", "expected"),
    [
        (
            ["a.onnx", "airpatrol_vehicles_n.pt", "airpatrol_vehicles_n_openvino_model/m.xml"],
            "airpatrol_vehicles_n_openvino_model",
        ),
        (
            ["airpatrol_vehicles_n_openvino_model/m.xml", "airpatrol_vehicles_n_int8_openvino_model/m.xml"],
            "airpatrol_vehicles_n_int8_openvino_model",
        ),
        (["b.onnx", "a.pt", "notes.txt"], "a.pt"),
        (["x_openvino_model/m.xml", "z.engine"], "x_openvino_model"),
    ],
)
def test_default_weights_found_under_weights_dir(tmp_path: Path, present: list[str], expected: str) -> None:
    for rel in present:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    assert resolve_weights(None, tmp_path) == tmp_path / expected


class FakeYOLO:
    """Records the predict() arguments; returns one fake result."""

    def __init__(self) -> None:
        self.names = COCO_NAMES
        self.calls: list[dict] = []
        self.predictor = SimpleNamespace(imgsz=[640, 640])

    def predict(self, image, **kwargs):
        self.calls.append(kwargs)
        return [fake_result([2, 0, 7])]


def test_adapter_restricts_classes_and_ignores_half_on_cpu(tmp_path: Path, monkeypatch) -> None:
    weights = tmp_path / "model.pt"
    weights.write_bytes(b"x")
    fake = FakeYOLO()
    monkeypatch.setattr(det_mod.YoloDetector, "_load", lambda self, path: fake)
    det = YoloDetector(weights, classes="auto", imgsz=640, half=True, device="cpu", conf=0.3, max_det=50)
    out = det(np.zeros((32, 32, 3), dtype=np.uint8))
    call = fake.calls[-1]
    assert call["classes"] == [2, 3, 5, 7]
    assert "half" not in call and "quantize" not in call  # the default precision: nothing passed
    assert call["conf"] == 0.3 and call["max_det"] == 50
    assert list(out.data["class_name"]) == ["car", "truck"]


def test_the_shipped_detector_logs_nothing_per_frame() -> None:
    """ultralytics 8.4 logs "'half' is deprecated" on every call that passes ``half``: 447 warnings
    in a 20 s four-stream serve-bench run, whose engine processes had ultralytics verbose. Even
    verbose (``YOLO_VERBOSE=true``, a user's choice), frames are detected without a word."""
    from pipelines.config import DEFAULT_WEIGHTS_DIR

    detector = YoloDetector(DEFAULT_WEIGHTS_DIR / "airpatrol_vehicles_n_int8_openvino_model", imgsz=320)
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append  # type: ignore[method-assign]
    ultra = logging.getLogger("ultralytics")
    level = ultra.level
    ultra.addHandler(handler)
    ultra.setLevel(logging.INFO)
    try:
        image = np.random.default_rng(1).integers(0, 255, (240, 320, 3), dtype=np.uint8)
        for _ in range(3):
            detector(image)
        detector.detect_many([image, image])
    finally:
        ultra.removeHandler(handler)
        ultra.setLevel(level)
    assert [r.getMessage() for r in records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize(("section", "expected"), [({}, True), ({"agnostic_nms": False}, False)])
def test_nms_is_class_agnostic_by_default(tmp_path: Path, monkeypatch, section, expected) -> None:
    """One box per vehicle: a model that scores one vehicle as car and as van must not give two
    tracks (per-class NMS did; measured in weights/airpatrol_vehicles_n.md)."""
    weights = tmp_path / "model.pt"
    weights.write_bytes(b"x")
    fake = FakeYOLO()
    monkeypatch.setattr(det_mod.YoloDetector, "_load", lambda self, path: fake)
    det = YoloDetector.from_config(DetectorConfig(weights=weights, imgsz=640, **section))
    det(np.zeros((32, 32, 3), dtype=np.uint8))
    assert fake.calls[-1]["agnostic_nms"] is expected


@pytest.mark.parametrize(
    ("weights", "threads", "expected"),
    [
        ("airpatrol_vehicles_n_int8_openvino_model", 1, 1),
        ("airpatrol_vehicles_n_int8_openvino_model", None, None),  # OpenVINO's own choice
        ("airpatrol_vehicles_n.pt", 1, None),  # torch: threads set per process (batch.jobs)
    ],
)
def test_openvino_detector_threads(weights: str, threads: int | None, expected: int | None) -> None:
    """``detector.threads`` recompiles the shipped OpenVINO model on that many threads (what a batch
    worker sharing the cores asks for) and it still detects the same."""
    from pipelines.config import DEFAULT_WEIGHTS_DIR

    path = DEFAULT_WEIGHTS_DIR / weights
    limited = YoloDetector(path, threads=threads)
    assert limited.threads == expected
    backend = limited._model.predictor.model.backend
    if expected is not None:
        assert backend.ov_compiled_model.get_property("INFERENCE_NUM_THREADS") == expected
        assert (
            str(backend.ov_compiled_model.get_property("PERFORMANCE_HINT")) == "LATENCY"
        )  # ultralytics' kept
        image = np.random.default_rng(0).integers(0, 255, (360, 640, 3), dtype=np.uint8)
        a, b = limited(image), YoloDetector(path)(image)
        np.testing.assert_allclose(a.xyxy, b.xyxy, atol=0.5)


@pytest.mark.parametrize(
    "weights", ["airpatrol_vehicles_n_int8_openvino_model", "airpatrol_vehicles_n_openvino_model"]
)
@pytest.mark.parametrize("imgsz", [640, 960, 1280])
def test_the_shipped_openvino_models_run_at_the_size_asked_for(weights: str, imgsz: int) -> None:
    """``detector.imgsz: auto`` asks for 960 or 1280 for far vehicles: the exports are dynamic, and
    run at that size on every CPU. On a CPU with AMX ultralytics ran the int8 one at 640 whatever
    was asked (VisDrone held-out AP50 0.612 -> 0.501) until honour_input_size."""
    from pipelines.config import DEFAULT_WEIGHTS_DIR

    det = YoloDetector(DEFAULT_WEIGHTS_DIR / weights)
    det.detect_at(Frame(index=0, timestamp_s=0.0, image=np.zeros((540, 960, 3), np.uint8)), imgsz)
    assert max(det._model.predictor.imgsz) == imgsz


def _backend(read_model, dynamic: bool, exported_dynamic: bool | None) -> SimpleNamespace:
    backend = SimpleNamespace(read_model=read_model, dynamic=dynamic, metadata={"dynamic": exported_dynamic})
    return SimpleNamespace(predictor=SimpleNamespace(model=SimpleNamespace(backend=backend)))


@pytest.mark.parametrize(
    ("read_model", "dynamic", "exported_dynamic", "changed"),
    [
        (object(), False, True, True),  # ultralytics' per-shape compile on an AMX CPU: dynamic again
        (None, False, True, False),  # elsewhere ultralytics keeps the dynamic model as it is
        (object(), True, True, False),  # already dynamic
        (object(), False, False, False),  # a fixed-size export runs at its size
        (object(), False, None, False),
    ],
)
def test_honour_input_size(read_model, dynamic: bool, exported_dynamic, changed: bool) -> None:
    model = _backend(read_model, dynamic, exported_dynamic)
    assert det_mod.honour_input_size(model) is changed
    assert model.predictor.model.backend.dynamic is (dynamic or changed)


def test_honour_input_size_leaves_other_models_alone() -> None:
    assert det_mod.honour_input_size(SimpleNamespace()) is False
    assert (
        det_mod.honour_input_size(SimpleNamespace(predictor=SimpleNamespace(model=SimpleNamespace())))
        is False
    )


BUS = [100.0, 100.0, 220.0, 140.0]  # 120 x 40 px


@pytest.mark.parametrize(
    ("confidence", "dropped"),
    [
        (None, [False, True]),
        ([0.6, 0.4], [False, True]),  # the bus surer than its front
        ([0.6, 0.6], [False, True]),
        ([0.3, 0.7], [False, False]),  # an oversized box, less sure than the vehicle inside it
    ],
)
def test_contained_boxes_only_for_a_surer_container(confidence, dropped) -> None:
    from pipelines.motion.detector import contained_boxes

    got = contained_boxes(np.array([BUS, [180.0, 102.0, 218.0, 138.0]]), 0.8, confidence=confidence)
    assert got.tolist() == dropped


@pytest.mark.parametrize(
    ("boxes", "containers", "dropped"),
    [
        ([BUS, [180.0, 102.0, 218.0, 138.0]], None, [False, True]),  # the front of the bus boxed again
        ([BUS, [200.0, 100.0, 240.0, 140.0]], None, [False, False]),  # half of it outside: a car beside
        ([BUS, [100.0, 100.0, 200.0, 140.0]], None, [False, False]),  # inside but not 1.5x smaller: NMS's
        ([[0, 0, 30, 20], [40, 0, 70, 20]], None, [False, False]),  # apart
        ([BUS, [180.0, 102.0, 218.0, 138.0]], [False, True], [False, False]),  # the bus may not contain
        ([BUS], None, [False]),
        (np.zeros((0, 4)), None, []),
    ],
)
def test_contained_boxes(boxes, containers, dropped) -> None:
    from pipelines.motion.detector import contained_boxes

    got = contained_boxes(np.asarray(boxes, dtype=float), 0.8, containers=containers)
    assert got.tolist() == dropped


class _FakeYOLOWithParts(FakeYOLO):
    def predict(self, image, **kwargs):
        self.calls.append(kwargs)
        xyxy = np.array([BUS, [180.0, 102.0, 218.0, 138.0], [300.0, 100.0, 340.0, 120.0]])
        boxes = SimpleNamespace(xyxy=xyxy, conf=np.array([0.6, 0.4, 0.5]), cls=np.array([5, 5, 2]))
        return [SimpleNamespace(boxes=boxes)]


@pytest.mark.parametrize(("section", "n_out"), [({}, 3), ({"drop_contained": 0.8}, 2)])
def test_a_part_of_a_vehicle_boxed_again_is_dropped(tmp_path: Path, monkeypatch, section, n_out) -> None:
    weights = tmp_path / "model.pt"
    weights.write_bytes(b"x")
    monkeypatch.setattr(det_mod.YoloDetector, "_load", lambda self, path: _FakeYOLOWithParts())
    det = YoloDetector.from_config(DetectorConfig(weights=weights, imgsz=640, **section))
    out = det(np.zeros((400, 400, 3), dtype=np.uint8))
    assert len(out) == n_out and out.xyxy[0].tolist() == BUS
    frame = Frame(index=0, timestamp_s=0.0, image=np.zeros((400, 400, 3), np.uint8))
    assert len(det.detect_at(frame, 640)) == n_out
