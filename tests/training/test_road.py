"""Road U-Net training on tiny pairs, checkpoint format, and pseudo-labels from tracks."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from training import road


def _pairs(tmp_path, n=4):
    img_dir, mask_dir = tmp_path / "images", tmp_path / "masks"
    img_dir.mkdir()
    mask_dir.mkdir()
    rng = np.random.default_rng(0)
    for k in range(n):
        img = rng.integers(60, 160, (96, 128, 3), dtype=np.uint8)
        mask = np.zeros((96, 128), np.uint8)
        y = 20 + 15 * k
        mask[y : y + 20] = 255
        img[mask > 0] = (40, 40, 40)
        cv2.imwrite(str(img_dir / f"tile{k}.png"), img)
        cv2.imwrite(str(mask_dir / f"tile{k}.png"), mask)
    return road.pairs_from_folders(img_dir, mask_dir)


def test_tiny_road_train_and_checkpoint(tmp_path):
    pairs = _pairs(tmp_path)
    settings = road.RoadTrainSettings(
        encoder="tu-mobilenetv3_small_100",
        decoder_channels=(16, 16, 8, 8, 8),
        input_size=(64, 64),
        epochs=2,
        steps_per_epoch=2,
        batch=2,
        dilate_px=0,
    )
    ckpt = road.train_road(pairs, tmp_path / "road.pt", settings, val_fraction=0.25)
    model, raw = road.load_road_model(ckpt)
    assert raw.encoder == "tu-mobilenetv3_small_100"
    assert raw.decoder_channels == (16, 16, 8, 8, 8) and raw.input_size == (64, 64)
    assert "history" in raw.extra and len(raw.extra["history"]) == 2
    assert next(iter(raw.state_dict.values())).dtype.itemsize == 2  # stored in half
    prob = road.predict_prob(model, cv2.imread(str(pairs[0].image)), (64, 64))
    assert prob.shape == (96, 128) and 0 <= prob.min() <= prob.max() <= 1
    onnx_path = road.export_road_onnx(ckpt, tmp_path / "road.onnx")
    import onnxruntime as ort

    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    out = sess.run(None, {"images": np.zeros((1, 3, 64, 64), np.float32)})[0]
    assert out.shape == (1, 1, 64, 64)


def test_checkpoint_loads_in_the_engine(tmp_path):
    """A trained checkpoint with a reduced decoder runs in the engine unchanged: same logits."""
    import torch

    from pipelines import base_layer

    model = road.build_road_model("tu-mobilenetv3_small_100", (16, 16, 8, 8, 8)).eval()
    path = road.save_road_checkpoint(
        tmp_path / "r.pt", model, "tu-mobilenetv3_small_100", (16, 16, 8, 8, 8), (64, 64), half=False
    )
    loaded, ckpt = base_layer.load_road_model(path)  # encoder and decoder from the file
    assert ckpt.encoder == "tu-mobilenetv3_small_100" and ckpt.decoder_channels == (16, 16, 8, 8, 8)
    x = torch.rand(1, 3, 64, 64)
    with torch.inference_mode():
        assert torch.allclose(loaded(x), model(x))


def test_keep_rate_and_iou():
    mask = np.zeros((100, 100), np.uint8)
    mask[40:60] = 1
    boxes = np.array([[10, 35, 30, 55], [50, 0, 60, 10]], float)
    assert road.vehicle_keep_rate(mask, boxes) == (1, 2)
    assert road.mask_iou(mask, mask) == 1.0


def _band_segmenter(image):
    """Road probability 0.9 on rows 40-59, 0.25 on rows 60-69, 0 elsewhere."""
    prob = np.zeros(image.shape[:2], np.float32)
    prob[40:60] = 0.9
    prob[60:70] = 0.25
    return prob


@pytest.mark.parametrize(
    ("threshold", "dilate_px", "kept", "coverage"),
    [
        (0.5, 0, 1, 0.20),  # only the 0.9 band: the box below it (rows 62-70) is dropped
        (0.2, 0, 2, 0.30),  # the 0.25 band joins: both kept, 30 % of the frame
        (0.5, 8, 2, 0.36),  # dilated 8 rows each way: half of the second box's lower half is on it
        (0.95, 0, 0, 0.0),  # nothing passes
    ],
)
def test_mask_keep_sweep_operating_points(threshold, dilate_px, kept, coverage):
    frames = [(np.zeros((100, 100, 3), np.uint8), np.array([[10, 35, 30, 55], [50, 62, 60, 70]], float))] * 2
    points, ms = road.mask_keep_sweep(_band_segmenter, frames, [threshold], [dilate_px])
    (p,) = points
    assert (p.threshold, p.dilate_px, p.kept, p.vehicles) == (threshold, dilate_px, 2 * kept, 4)
    assert p.coverage == pytest.approx(coverage)  # full-width bands: dilation adds exact rows
    assert p.keep_rate == kept / 2 and len(ms) == 2


def test_pseudo_mask_from_panning_tracks_keeps_every_vehicle(tmp_path):
    """Two lanes of traffic seen by a camera panning right 3 px/frame: the accumulated footprint
    mask, warped back into each frame, keeps every ground-truth vehicle and covers little else."""
    w, h, n = 320, 180, 40
    pan = 3.0
    tracks, ego, truth = {}, {}, []
    for f in range(n):
        ego[f] = np.array([[1, 0, -pan], [0, 1, 0], [0, 0, 1]], float)  # previous -> current
        boxes = {}
        for tid, (lane_y, x0, v) in enumerate([(60, 0, 6), (110, 300, -5), (60, 150, 4)]):
            x_world = x0 + v * f
            x = x_world - pan * f  # image x
            if 0 <= x <= w - 20:
                boxes[tid] = np.array([x, lane_y, x + 20, lane_y + 10], float)
                truth.append((f, boxes[tid]))
        tracks[f] = boxes
    # plus a one-frame false positive that must be ignored
    tracks[5][99] = np.array([10, 150, 30, 160], float)
    mask_ref = road.pseudo_mask_from_tracks(tracks, (w, h), ego, min_track_frames=5, close_px=5, dilate_px=3)
    assert mask_ref[155, 20] == 0
    kept = total = 0
    for f, box in truth:
        m = road.warp_mask_to_frame(mask_ref, f, ego, tracks.keys())
        k, t = road.vehicle_keep_rate(m > 0, box[None])
        kept, total = kept + k, total + t
    assert kept / total >= 0.99
    assert (mask_ref > 0).mean() < 0.35


def test_pseudo_mask_from_mot_file(tmp_path):
    lines = [f"{f + 1},1,{10 + 5 * f},50,20,10,1,-1,-1,-1" for f in range(10)]
    (tmp_path / "tracks.txt").write_text("\n".join(lines) + "\n")
    mask = road.pseudo_mask_from_mot(
        tmp_path / "tracks.txt", (200, 100), min_track_frames=3, close_px=3, dilate_px=0
    )
    assert mask.shape == (100, 200) and mask[55, 40] == 255 and mask[90, 40] == 0


def test_write_pseudo_pairs_registers_frames_of_a_video(tmp_path):
    """Two frames of one hovering flight, the second shifted by 12 px: both get the union mask."""
    from training.datasets import Sample

    rng = np.random.default_rng(1)
    scene = cv2.GaussianBlur(rng.integers(0, 255, (260, 380, 3), dtype=np.uint8), (5, 5), 0)
    frames = [scene[10:250, 10:370], scene[10:250, 22 : 382 - 10]]  # camera moved 12 px right
    samples = []
    for k, (img, box) in enumerate(zip(frames, ([40, 100, 80, 120], [200, 100, 240, 120]), strict=True)):
        path = tmp_path / f"vid-{k:04d}.png"
        cv2.imwrite(str(path), np.ascontiguousarray(img))
        samples.append(Sample(path, np.array([[0, *box]], np.float32), "vid"))
    pairs = road.write_pseudo_pairs(samples, tmp_path / "out", close_px=3, dilate_px=0)
    assert len(pairs) == 2
    m0 = cv2.imread(str(pairs[0].mask), cv2.IMREAD_GRAYSCALE)
    assert m0[110, 60] == 255  # its own box
    assert m0[110, 232] == 255  # frame 1's box, 12 px to the right in frame 0 coordinates
    assert m0[200, 60] == 0
