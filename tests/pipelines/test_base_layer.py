"""Base layer: detection filter, mask scheduling / warping / polygon modes."""

from __future__ import annotations

import numpy as np
import pytest
import supervision as sv

from pipelines.base_layer import (
    RoadMaskLayer,
    filter_by_mask,
    homography_displacement_px,
    lower_half_overlap,
    threshold_and_dilate,
)
from pipelines.config import RoadConfig
from pipelines.road_network import (
    ImageSegmenter,
)
from pipelines.types import EgoMotion, Frame

W, H = 160, 120


def translation(dx: float, dy: float) -> np.ndarray:
    return np.array([[1.0, 0.0, dx], [0.0, 1.0, dy], [0.0, 0.0, 1.0]])


def make_frame(index: int, w: int = W, h: int = H, t: float | None = None) -> Frame:
    return Frame(
        index=index, timestamp_s=index / 30.0 if t is None else t, image=np.zeros((h, w, 3), np.uint8)
    )


class FixedSegmenter(ImageSegmenter):
    """Returns a fixed probability map and counts its calls."""

    def __init__(self, prob: np.ndarray) -> None:
        self.prob = prob.astype(np.float32)
        self.calls = 0

    def __call__(self, image_bgr: np.ndarray) -> np.ndarray:
        self.calls += 1
        assert image_bgr.shape[:2] == self.prob.shape
        return self.prob.copy()


class OnesSegmenter(ImageSegmenter):
    """Road everywhere, at whatever size the frame has."""

    def __call__(self, image_bgr: np.ndarray) -> np.ndarray:
        return np.ones(image_bgr.shape[:2], np.float32)


def band(x0: int, x1: int, w: int = W, h: int = H) -> np.ndarray:
    prob = np.zeros((h, w), np.float32)
    prob[:, x0:x1] = 1.0
    return prob


# ------------------------------------------------------------------------------------------
# filter_by_mask
# ------------------------------------------------------------------------------------------

ROAD = np.zeros((100, 100), bool)
ROAD[60:, :] = True  # road: rows 60..99


@pytest.mark.parametrize(
    "box, min_overlap, kept",
    [
        ((10, 70, 30, 90), 0.3, True),  # entirely on the road
        ((10, 20, 30, 40), 0.3, False),  # entirely off
        ((10, 40, 30, 80), 0.3, True),  # lower half rows 60..80: all road
        ((10, 20, 30, 80), 0.3, True),  # lower half rows 50..80: 20 of 30 rows on road
        ((10, 20, 30, 80), 0.7, False),  # ... 0.67 < 0.7
        ((10, 30, 30, 70), 0.5, True),  # lower half rows 50..70: exactly half
        ((10, 30, 30, 70), 0.51, False),
        ((10, 0, 30, 58), 0.3, False),  # upper-half bottom just above the road
        ((90, 70, 130, 90), 0.9, True),  # half outside the image: the clipped part counts
        ((150, 150, 170, 170), 0.1, False),  # completely outside the image
        ((10, 20, 30, 40), 0.0, True),  # min_overlap 0 keeps everything
    ],
)
def test_filter_by_mask_table(box: tuple, min_overlap: float, kept: bool) -> None:
    det = sv.Detections(
        xyxy=np.array([box], float), tracker_id=np.array([7]), data={"class_name": np.array(["car"])}
    )
    out = filter_by_mask(det, ROAD, min_overlap)
    assert len(out) == int(kept)
    if kept:
        assert out.tracker_id.tolist() == [7] and out.data["class_name"].tolist() == ["car"]


def test_filter_by_mask_none_and_empty_are_unchanged() -> None:
    det = sv.Detections(xyxy=np.array([[0, 0, 10, 10]], float))
    assert filter_by_mask(det, None, 0.9) is det
    empty = sv.Detections.empty()
    assert len(filter_by_mask(empty, ROAD, 0.3)) == 0


def test_filter_by_mask_keeps_order_and_data_of_survivors() -> None:
    boxes = np.array([[10, 70, 30, 90], [10, 20, 30, 40], [40, 62, 60, 99]], float)
    det = sv.Detections(
        xyxy=boxes, tracker_id=np.array([1, 2, 3]), data={"class_name": np.array(["a", "b", "c"])}
    )
    out = filter_by_mask(det, ROAD.astype(np.uint8) * 255, 0.5)
    assert out.tracker_id.tolist() == [1, 3]
    assert out.data["class_name"].tolist() == ["a", "c"]


@pytest.mark.parametrize("as_uint8", [False, True])  # a bool mask, or a 0/255 image of one
def test_lower_half_overlap_matches_brute_force(as_uint8: bool) -> None:
    rng = np.random.default_rng(3)
    mask = rng.random((90, 130)) > 0.6
    given = mask.astype(np.uint8) * 255 if as_uint8 else mask
    x0 = rng.uniform(-20, 140, 200)
    y0 = rng.uniform(-20, 100, 200)
    boxes = np.column_stack([x0, y0, x0 + rng.uniform(1, 40, 200), y0 + rng.uniform(1, 40, 200)])
    got = lower_half_overlap(boxes, given)
    for (bx0, by0, bx1, by1), g in zip(boxes, got, strict=True):
        xa, xb = int(np.clip(np.floor(bx0), 0, 130)), int(np.clip(np.ceil(bx1), 0, 130))
        ya, yb = int(np.clip(np.floor((by0 + by1) / 2), 0, 90)), int(np.clip(np.ceil(by1), 0, 90))
        patch = mask[ya:yb, xa:xb]
        assert g == pytest.approx(patch.mean() if patch.size else 0.0)


# ------------------------------------------------------------------------------------------
# pure helpers
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "h, expected",
    [
        (np.eye(3), 0.0),
        (translation(3.0, 4.0), 5.0),
        (translation(-90.0, 0.0), 90.0),
        (np.array([[1.1, 0, 0], [0, 1.1, 0], [0, 0, 1]]), 0.1 * np.hypot(W - 1, H - 1)),  # zoom about (0, 0)
    ],
)
def test_homography_displacement_px(h: np.ndarray, expected: float) -> None:
    assert homography_displacement_px(h, W, H) == pytest.approx(expected)


@pytest.mark.parametrize("dilate_px", [0, 1, 3, 6])
def test_threshold_and_dilate(dilate_px: int) -> None:
    prob = np.zeros((31, 31), np.float32)
    prob[15, 15] = 0.9
    prob[0, 0] = 0.4  # below the threshold
    mask = threshold_and_dilate(prob, 0.5, dilate_px)
    d = dilate_px
    assert mask.dtype == np.uint8 and mask[0, 0] == 0
    assert mask[15, 15 + d] == mask[15 - d, 15] == 1  # grown by d along the axes
    assert mask[15, 16 + d] == mask[14 - d, 15] == 0  # ... and no further
    assert d == 0 or mask[15 + d, 15 + d] == 0  # round, not square
    assert int(mask.sum()) <= (2 * d + 1) ** 2


# ------------------------------------------------------------------------------------------
# RoadMaskLayer
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "every_n, indices, motion_px, invalid_at, expected_runs, early_gap",
    [
        (5, range(12), 0.0, (), [0, 5, 10], 1),
        (1, range(4), 0.0, (), [0, 1, 2, 3], 1),
        (100, range(10), 30.0, (), [0, 3, 6, 9], 1),  # 90 px accumulated > 80 px threshold
        (100, range(10), 20.0, (), [0, 5], 1),  # 100 px after 5 frames
        (4, range(10), 30.0, (), [0, 3, 6, 9], 1),  # motion comes before the schedule
        (10, range(8), 0.0, (4,), [0, 4], 1),  # ego-motion lost -> re-segment
        (10, range(9), 0.0, (4, 5, 6, 7, 8), [0, 4, 5, 6, 7, 8], 1),  # ... on every frame it stays lost
        (10, range(9), 0.0, (4, 5, 6, 7, 8), [0, 4, 7], 3),  # ... unless early runs are spaced
        (100, range(10), 30.0, (), [0, 4, 8], 4),  # motion too
        (5, [0, 2, 4, 7, 9, 11, 12], 0.0, (), [0, 7, 12], 1),  # dropped frames: by frame index
    ],
)
def test_mask_schedule(
    every_n: int, indices, motion_px: float, invalid_at: tuple, expected_runs: list[int], early_gap: int
) -> None:
    seg = FixedSegmenter(band(40, 80))
    cfg = RoadConfig(every_n_frames=every_n, motion_threshold_px=80.0, dilate_px=0, lag_frames=0)
    layer = RoadMaskLayer(cfg, seg, min_early_gap_frames=early_gap)
    runs = []
    for i in indices:
        ego = EgoMotion(translation(motion_px, 0.0), valid=i not in invalid_at)
        mask = layer.update(make_frame(i), ego)
        assert mask is not None and mask.shape == (H, W) and mask.dtype == bool
        if layer.last_run_frame == i and (not runs or runs[-1] != i):
            runs.append(i)
    assert runs == expected_runs
    assert seg.calls == len(expected_runs) == layer.n_runs
    assert layer.status == f"unet every {every_n} frames"


class ShiftingSegmenter:
    """Each run finds the road band 10 px further right than the run before (from 40)."""

    def __init__(self) -> None:
        self.frames: list[int] = []

    def segment(self, frame) -> np.ndarray:
        left = 40 + 10 * len(self.frames)
        self.frames.append(frame.index)
        prob = np.zeros((frame.height, frame.width), np.float32)
        prob[:, left : left + 20] = 1.0
        return prob


@pytest.mark.parametrize("keyframes_only", [False, True])
def test_a_background_run_is_taken_lag_frames_later_warped_by_the_motion_since(keyframes_only) -> None:
    """road.lag_frames: the first run is in line; later ones run on a thread and their mask is
    taken exactly lag_frames frames later (not when the thread happens to finish), moved by the
    camera motion since the frame it was computed on. Frames without a mask (keyframes) count."""
    seg = ShiftingSegmenter()
    cfg = RoadConfig(every_n_frames=4, motion_threshold_px=1000.0, dilate_px=0, lag_frames=2)
    layer = RoadMaskLayer(cfg, seg)
    left_cols = {}
    for i in range(12):
        ego = EgoMotion(translation(1.0, 0.0))  # the camera: the ground moves 1 px right a frame
        if keyframes_only and i % 2:
            layer.advance(ego)  # a frame without detection: no mask asked for
            continue
        left_cols[i] = int(np.flatnonzero(layer.update(make_frame(i), ego)[0])[0])
    layer.stop()
    assert seg.frames == [0, 4, 8]  # a run at most every every_n_frames, none while one is pending
    assert layer.n_runs == 3  # 0 in line; 4 taken at 6, 8 taken at 10
    # run 0 (band at 40) moves with the ground; frame 6 takes run 1 (50 on frame 4, +2 px since),
    # frame 10 run 2 (60 on frame 8, +2)
    expected = {i: 40 + i for i in range(6)} | {6: 52, 7: 53, 8: 54, 9: 55, 10: 62, 11: 63}
    assert left_cols == {i: expected[i] for i in left_cols}


class FailingSegmenter(ShiftingSegmenter):
    """A :class:`ShiftingSegmenter` whose runs on the frames in ``fail_on`` raise."""

    def __init__(self, fail_on: set[int]) -> None:
        super().__init__()
        self.fail_on = fail_on

    def segment(self, frame) -> np.ndarray:
        prob = super().segment(frame)
        if frame.index in self.fail_on:
            raise RuntimeError(f"the network failed on frame {frame.index}")
        return prob


@pytest.mark.parametrize("lag", [0, 2])
def test_a_failed_run_loses_its_mask_and_the_last_one_serves(lag, caplog) -> None:
    """A run after the first that fails (on its thread or in line) is logged and lost: the last mask,
    warped, serves until the next run is due, which is taken as usual; the stream never sees it."""
    seg = FailingSegmenter({4})
    cfg = RoadConfig(every_n_frames=4, motion_threshold_px=1000.0, dilate_px=0, lag_frames=lag)
    layer = RoadMaskLayer(cfg, seg)
    left_cols = {}
    with caplog.at_level("ERROR", logger="pipelines.lagged"):
        for i in range(12):
            mask = layer.update(make_frame(i), EgoMotion(translation(1.0, 0.0)))
            left_cols[i] = int(np.flatnonzero(mask[0])[0])
    layer.stop()
    assert seg.frames == [0, 4, 8]
    assert layer.n_runs == 2 and layer.runs_lost == 1
    assert "a background step failed" in caplog.text and "the network failed on frame 4" in caplog.text
    # run 0's band (40) moves with the ground until run 2 (60 on frame 8) is taken lag frames later
    taken = 8 + lag
    assert left_cols == {i: 40 + i if i < taken else 60 + i - 8 for i in range(12)}


@pytest.mark.parametrize("lag", [0, 2])
def test_a_failed_first_run_raises(lag) -> None:
    """The first run has no mask to fall back on: it runs in line and its failure is the frame's."""
    layer = RoadMaskLayer(RoadConfig(every_n_frames=4, lag_frames=lag), FailingSegmenter({0}))
    with pytest.raises(RuntimeError, match="the network failed on frame 0"):
        layer.update(make_frame(0), EgoMotion.identity())
    assert layer.n_runs == 0


def test_mask_is_warped_by_accumulated_homography_without_rounding_drift() -> None:
    seg = FixedSegmenter(band(40, 60))
    layer = RoadMaskLayer(RoadConfig(every_n_frames=1000, motion_threshold_px=1000.0, dilate_px=0), seg)
    first = layer.update(make_frame(0), EgoMotion.identity())
    assert np.array_equal(np.flatnonzero(first[0]), np.arange(40, 60))
    # 0.4 px per frame: one nearest warp per frame would never move; the accumulated one moves 2 px after 5
    for i in range(1, 6):
        mask = layer.update(make_frame(i), EgoMotion(translation(0.4, 0.0)))
    assert np.array_equal(np.flatnonzero(mask[0]), np.arange(42, 62))
    for i in range(6, 11):
        mask = layer.update(make_frame(i), EgoMotion(translation(-3.0, 2.0)))
    rows = np.flatnonzero(mask.any(axis=1))
    assert np.array_equal(np.flatnonzero(mask[H - 1]), np.arange(27, 47))
    assert rows.min() == 10  # the 10 rows scrolled in at the top were never segmented
    assert seg.calls == 1


def test_mask_layer_threshold_and_dilation_applied() -> None:
    prob = np.zeros((H, W), np.float32)
    prob[60, 80] = 0.8
    prob[10, 10] = 0.3
    layer = RoadMaskLayer(RoadConfig(threshold=0.5, dilate_px=2), FixedSegmenter(prob))
    mask = layer.update(make_frame(0), EgoMotion.identity())
    assert mask[60, 80] and mask[62, 80] and not mask[63, 80] and not mask[10, 10]


def test_mask_layer_reruns_when_frame_size_changes() -> None:
    layer = RoadMaskLayer(RoadConfig(every_n_frames=100), OnesSegmenter())
    assert layer.update(make_frame(0), EgoMotion.identity()).shape == (H, W)
    assert layer.update(make_frame(1, w=80, h=60), EgoMotion.identity()).shape == (60, 80)
    assert layer.n_runs == 2


LEFT = np.zeros((H, W), np.float32)
LEFT[:, : W // 2] = 1.0
POLY_TOP = [(0.0, 0.0), (W - 1.0, 0.0), (W - 1.0, H / 2 - 1), (0.0, H / 2 - 1)]
TOP_M = np.zeros((H, W), bool)
TOP_M[: H // 2, :] = True
LEFT_M = LEFT > 0


@pytest.mark.parametrize(
    "polygon, mode, with_segmenter, enabled, expected, status, calls",
    [
        (POLY_TOP, "override", True, True, TOP_M, "polygon only", 0),
        (POLY_TOP, "union", True, True, TOP_M | LEFT_M, "unet every 30 frames, union polygon", 1),
        (POLY_TOP, "intersect", True, True, TOP_M & LEFT_M, "unet every 30 frames, intersect polygon", 1),
        (None, "union", True, True, LEFT_M, "unet every 30 frames", 1),
        (POLY_TOP, "union", False, True, TOP_M, "polygon only", 0),
        (POLY_TOP, "intersect", False, True, TOP_M, "polygon only", 0),
        (None, "union", False, True, None, "disabled: no road weights", 0),
        (POLY_TOP, "union", True, False, None, "disabled in config", 0),
    ],
)
def test_polygon_modes(polygon, mode, with_segmenter, enabled, expected, status, calls) -> None:
    seg = FixedSegmenter(LEFT)
    cfg = RoadConfig(polygon=polygon, polygon_mode=mode, dilate_px=0, enabled=enabled)
    layer = RoadMaskLayer(cfg, seg if with_segmenter else None)
    assert layer.status == status
    mask = layer.update(make_frame(0), EgoMotion.identity())
    if expected is None:
        assert mask is None and not layer.enabled
    else:
        assert mask.dtype == bool and np.array_equal(mask, expected)
    assert seg.calls == calls


def test_the_pipeline_summary_counts_the_road_runs_taken_and_lost() -> None:
    """A stream's summary (its session record) says how often the road network ran and how many of
    its runs were lost: a network that fails in the background shows there, not only in the log."""
    from edge_client.synthetic import BrightBlobDetector, SyntheticScene
    from pipelines.builder import build_pipeline
    from pipelines.config import PipelineConfig

    class FailsAfterTheFirst:
        def __init__(self) -> None:
            self.calls = 0

        def segment(self, frame) -> np.ndarray:
            self.calls += 1
            if self.calls > 1:
                raise RuntimeError("the road network is gone")
            return np.ones((frame.height, frame.width), np.float32)

    scene = SyntheticScene()
    cfg = PipelineConfig().with_overrides(road={"lag_frames": 2, "every_n_frames": 5})
    pipeline = build_pipeline(cfg, detector=BrightBlobDetector(), segmenter=FailsAfterTheFirst())
    for i in range(14):
        result = pipeline.process(Frame(i, i / 30, scene.render(i / 30)))
        assert result.road_mask is not None and result.road_mask.any()  # the first mask serves on
    assert pipeline.summary()["road"] == {"runs": 1, "runs_lost": 2}  # runs on 5 and 10 lost
    pipeline.close()
