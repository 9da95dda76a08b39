"""The models committed under weights/ load and still do what their model cards say."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from shared_material import REPO, shared_path

from training.datasets import read_aerial_cars
from training.samples import CLASSES

WEIGHTS = REPO / "weights"
DETECTORS = [
    WEIGHTS / "airpatrol_vehicles_n_int8_openvino_model",  # the engine's default
    WEIGHTS / "airpatrol_vehicles_n_openvino_model",
    WEIGHTS / "airpatrol_vehicles_n.pt",  # fp16 checkpoint: the next fine-tuning's start
]
ROAD = WEIGHTS / "airpatrol_road_unet_mnv3s.pt"


@pytest.mark.shared
@pytest.mark.parametrize("weights", DETECTORS, ids=lambda p: Path(p).name)
def test_shipped_detector_on_held_out_video(weights):
    if not weights.exists():
        pytest.skip(f"{weights} not shipped")
    from training.evaluate import evaluate_detector

    root = shared_path("aerial_cars_dji_frames", "dji_video_frames")
    held = [s for s in read_aerial_cars(root) if s.group == "DJI-00760"][:3]  # never trained on
    m = evaluate_detector(str(weights), held, imgsz="auto")  # the engine's default: 960 for stills
    assert m.imgsz == 960 and m.recall >= 0.85 and m.ap50 >= 0.85, m


@pytest.mark.parametrize("weights", DETECTORS, ids=lambda p: Path(p).name)
def test_shipped_detector_metadata(weights):
    if not weights.exists():
        pytest.skip(f"{weights} not shipped")
    from training.evaluate import load_model

    model = load_model(weights)
    assert model.names == dict(enumerate(CLASSES))
    r = model.predict(np.zeros((540, 1024, 3), np.uint8), imgsz=640, verbose=False)[0]
    assert len(r.boxes) == 0


# Floors a little under the card's held-out scoreboard (imgsz auto -> 960 for stills, conf 0.25,
# class-agnostic NMS and matching, IoU 0.5; v4 int8 with its first convolution in float: all 0.612,
# oblique 0.576, night 0.483, nadir 0.829; AU-AIR 0.257; v3 after chunk 3 scored 0.565 / 0.525 /
# 0.422 / 0.800 and 0.256). Night is 6 images of one clip: v4's exports ranged 0.458-0.498 there.
# The v1 detector scored 0.275 / 0.178 / 0.088 / 0.732 and 0.060 here.
VISDRONE_FLOORS = {"all": 0.59, "oblique": 0.55, "night": 0.42, "nadir": 0.80}


@pytest.mark.shared
def test_default_detector_held_out_views(tmp_path):
    """The engine's default detector on the committed VisDrone-DET held-out clips (oblique + nadir,
    day + night, 14 cities; `@visdrone-det`) and on AU-AIR (low oblique, never trained on)."""
    import json

    from airpatrol.cli import main
    from pipelines.motion.detector import find_default_weights

    weights = find_default_weights(WEIGHTS)
    if weights is None:
        pytest.skip("no detector shipped")
    visdrone = shared_path("visdrone_det")
    out = tmp_path / "visdrone.json"
    rc = main(["train", "eval-detector", "--weights", str(weights), "--imgsz", "auto",
               "--dataset", f"visdrone-det={visdrone}", "--groups", "@visdrone-det",
               "--json", str(out)])  # fmt: skip
    assert rc == 0
    (views,) = json.loads(out.read_text()).values()
    assert views["all"]["images"] == 123 and views["all"]["imgsz"] == 960
    scores = {view: round(views[view]["ap50"], 3) for view in VISDRONE_FLOORS}
    assert all(scores[v] >= floor for v, floor in VISDRONE_FLOORS.items()), scores

    auair = shared_path("auair_subset")
    rc = main(["train", "eval-detector", "--weights", str(weights), "--imgsz", "auto",
               "--dataset", f"auair={auair}", "--json", str(out)])  # fmt: skip
    assert rc == 0
    (views,) = json.loads(out.read_text()).values()
    assert views["all"]["ap50"] >= 0.22, views["all"]


def test_shipped_road_model_loads():
    if not ROAD.exists():
        pytest.skip("no road model shipped")
    from training.road_model import load_road_model, predict_prob

    model, raw = load_road_model(ROAD)
    assert raw.encoder == "tu-mobilenetv3_small_100" and raw.threshold == 0.2
    assert ROAD.stat().st_size < 6_000_000
    prob = predict_prob(model, np.zeros((540, 1024, 3), np.uint8), raw.input_size)
    assert prob.shape == (540, 1024)


@pytest.mark.shared
def test_shipped_road_model_keeps_held_out_vehicles(tmp_path):
    """The card's operating point, measured by `airpatrol train eval-road` through the engine's
    own segmenter: >= 99 % of the held-out video's vehicles kept, well under the whole frame."""
    import json

    from airpatrol.cli import main

    if not ROAD.exists():
        pytest.skip("no road model shipped")
    root = shared_path("aerial_cars_dji_frames", "dji_video_frames")
    out = tmp_path / "road.json"
    rc = main(["train", "eval-road", "--dataset", f"aerial-cars={root}", "--groups", "DJI-00760",
               "--json", str(out)])  # fmt: skip
    assert rc == 0
    result = json.loads(out.read_text())
    (ds_result,) = result["datasets"].values()
    (point,) = ds_result["operating_points"]  # the checkpoint's threshold, the engine's dilation
    assert (point["threshold"], point["dilate_px"], point["vehicles"]) == (0.2, 9, 280)
    assert point["keep_rate"] >= 0.99 and point["coverage"] < 0.7, point
