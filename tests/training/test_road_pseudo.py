"""Road pseudo-labels from vehicle tracks, MOT files and registered frames of a hovering flight."""

from __future__ import annotations

import cv2
import numpy as np

from training.road_metrics import vehicle_keep_rate
from training.road_pseudo import (
    pseudo_mask_from_mot,
    pseudo_mask_from_tracks,
    warp_mask_to_frame,
    write_pseudo_pairs,
)
from training.samples import Sample


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
    mask_ref = pseudo_mask_from_tracks(tracks, (w, h), ego, min_track_frames=5, close_px=5, dilate_px=3)
    assert mask_ref[155, 20] == 0
    kept = total = 0
    for f, box in truth:
        m = warp_mask_to_frame(mask_ref, f, ego, tracks.keys())
        k, t = vehicle_keep_rate(m > 0, box[None])
        kept, total = kept + k, total + t
    assert kept / total >= 0.99
    assert (mask_ref > 0).mean() < 0.35


def test_pseudo_mask_from_mot_file(tmp_path):
    lines = [f"{f + 1},1,{10 + 5 * f},50,20,10,1,-1,-1,-1" for f in range(10)]
    (tmp_path / "tracks.txt").write_text("\n".join(lines) + "\n")
    mask = pseudo_mask_from_mot(
        tmp_path / "tracks.txt", (200, 100), min_track_frames=3, close_px=3, dilate_px=0
    )
    assert mask.shape == (100, 200) and mask[55, 40] == 255 and mask[90, 40] == 0


def test_write_pseudo_pairs_registers_frames_of_a_video(tmp_path):
    """Two frames of one hovering flight, the second shifted by 12 px: both get the union mask."""
    rng = np.random.default_rng(1)
    scene = cv2.GaussianBlur(rng.integers(0, 255, (260, 380, 3), dtype=np.uint8), (5, 5), 0)
    frames = [scene[10:250, 10:370], scene[10:250, 22 : 382 - 10]]  # camera moved 12 px right
    samples = []
    for k, (img, box) in enumerate(zip(frames, ([40, 100, 80, 120], [200, 100, 240, 120]), strict=True)):
        path = tmp_path / f"vid-{k:04d}.png"
        cv2.imwrite(str(path), np.ascontiguousarray(img))
        samples.append(Sample(path, np.array([[0, *box]], np.float32), "vid"))
    pairs = write_pseudo_pairs(samples, tmp_path / "out", close_px=3, dilate_px=0)
    assert len(pairs) == 2
    m0 = cv2.imread(str(pairs[0].mask), cv2.IMREAD_GRAYSCALE)
    assert m0[110, 60] == 255  # its own box
    assert m0[110, 232] == 255  # frame 1's box, 12 px to the right in frame 0 coordinates
    assert m0[200, 60] == 0
