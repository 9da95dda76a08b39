"""Road-mask model training (smp U-Net) and road pseudo-labels from vehicle tracks.

Training data are image / mask pairs: folders with the same file names (e.g. Massachusetts
Roads), simulated flights (``eval.simulate``: ``video.mp4`` + exact ``road_mask/NNNNNN.png``), or
pseudo-labels made by :func:`pseudo_mask_from_tracks` from the footprints of tracked vehicles.

The checkpoint is written in the engine's format (:func:`pipelines.base_layer.save_checkpoint`)
plus a top-level ``decoder_channels`` entry (also in ``extra``): the small models shipped here use
a reduced U-Net decoder, so the loader must build ``smp.Unet(encoder, decoder_channels=...)``.

The metric that matters for the engine is not IoU but how many vehicles the mask keeps:
:func:`vehicle_keep_rate` gives the share of ground-truth boxes that survive
``pipelines.base_layer.filter_by_mask`` (after the same threshold and dilation) and the share of
the frame the mask covers.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import cv2
import numpy as np

from training.defaults import ROAD_DECODER_CHANNELS as DEFAULT_DECODER_CHANNELS
from training.defaults import ROAD_ENCODER as DEFAULT_ENCODER

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------- data


@dataclass
class RoadPair:
    image: Path  # an image, or a video when ``frame`` is set
    mask: Path  # single-channel PNG, > 127 = road
    group: str  # flight / tile id: the unit of splitting
    frame: int | None = None
    boxes: np.ndarray | None = None  # optional (N,4) ground-truth vehicle boxes for the keep-rate metric


def pairs_from_folders(images_dir: str | Path, masks_dir: str | Path) -> list[RoadPair]:
    """Images and masks with the same stem (any image extension); the group is the video id of
    the name (``DJI-00760-00001`` -> ``DJI-00760``, see :func:`training.datasets.video_group`)."""
    from training.datasets import video_group

    images_dir, masks_dir = Path(images_dir), Path(masks_dir)
    masks = {
        p.stem: p
        for p in masks_dir.iterdir()
        if p.suffix.lower() in (".png", ".tif", ".tiff", ".jpg", ".bmp")
    }
    pairs = [
        RoadPair(p, masks[p.stem], video_group(p.stem))
        for p in sorted(images_dir.iterdir())
        if p.stem in masks and p.suffix.lower() in (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp")
    ]
    log.info("%d image/mask pairs in %s", len(pairs), images_dir)
    return pairs


def pairs_from_flight(flight_dir: str | Path) -> list[RoadPair]:
    """A simulated flight: ``road_mask/NNNNNN.png`` (0-based frame index) + ``video.mp4`` + ``gt/gt.txt``."""
    flight_dir = Path(flight_dir)
    video = flight_dir / "video.mp4"
    boxes: dict[int, list] = defaultdict(list)
    gt = flight_dir / "gt" / "gt.txt"
    if gt.exists():
        for line in gt.read_text().splitlines():
            p = line.split(",")
            if len(p) >= 6:
                f, x, y, w, h = int(p[0]) - 1, *(float(v) for v in p[2:6])
                boxes[f].append((x, y, x + w, y + h))
    pairs = []
    for m in sorted((flight_dir / "road_mask").glob("*.png")):
        k = int(m.stem)
        pairs.append(
            RoadPair(
                video,
                m,
                flight_dir.name,
                frame=k,
                boxes=np.asarray(boxes.get(k, []), np.float32).reshape(-1, 4),
            )
        )
    log.info("%d mask frames in flight %s", len(pairs), flight_dir)
    return pairs


def collect_pairs(pair_specs: Sequence[str] = (), flights: Sequence[str] = ()) -> list[RoadPair]:
    """``IMAGES_DIR:MASKS_DIR`` specs and simulated flight folders -> pairs."""
    from pipelines.config import ConfigError

    pairs: list[RoadPair] = []
    for spec in pair_specs:
        images, sep, masks = spec.rpartition(":")
        if not sep:
            raise ConfigError(f"--pairs expects IMAGES_DIR:MASKS_DIR, got {spec!r}")
        pairs += pairs_from_folders(images, masks)
    for flight in flights:
        pairs += pairs_from_flight(flight)
    if not pairs:
        raise ConfigError("no road training pairs: give --pairs IMAGES:MASKS and/or --flights DIR")
    return pairs


def load_pairs(pairs: Sequence[RoadPair], max_side: int = 1024) -> list[tuple[np.ndarray, np.ndarray]]:
    """Decode pairs into memory (BGR uint8, mask uint8 {0,1}), downscaled to ``max_side``."""
    by_video: dict[Path, list[RoadPair]] = defaultdict(list)
    out: list[tuple[np.ndarray, np.ndarray]] = []
    images: dict[int, np.ndarray] = {}
    for i, p in enumerate(pairs):
        if p.frame is None:
            images[i] = cv2.imread(str(p.image), cv2.IMREAD_COLOR)
        else:
            by_video[p.image].append(p)
    frames: dict[tuple[Path, int], np.ndarray] = {}
    for video, ps in by_video.items():
        from training.datasets import _read_video_frames

        for k, img in _read_video_frames(video, [p.frame for p in ps]).items():
            frames[(video, k)] = img
    for i, p in enumerate(pairs):
        img = images[i] if p.frame is None else frames[(p.image, p.frame)]
        mask = cv2.imread(str(p.mask), cv2.IMREAD_GRAYSCALE)
        if img is None or mask is None:
            raise OSError(f"cannot read {p.image} / {p.mask}")
        if mask.shape != img.shape[:2]:
            mask = cv2.resize(mask, (img.shape[1], img.shape[0]), interpolation=cv2.INTER_NEAREST)
        s = min(1.0, max_side / max(img.shape[:2]))
        if s < 1.0:
            img = cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
            mask = cv2.resize(mask, (img.shape[1], img.shape[0]), interpolation=cv2.INTER_NEAREST)
        out.append((img, (mask > 127).astype(np.uint8)))
    return out


def augment(
    img: np.ndarray, mask: np.ndarray, size: tuple[int, int], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random crop (scale 0.5-1 of the shorter side, any aspect near the target), resize to
    ``size`` (w, h), dihedral rotations (nadir), brightness / contrast / colour jitter."""
    tw, th = size
    h, w = img.shape[:2]
    if rng.random() < 0.5:  # rot90 / transpose: roads run in any direction in nadir views
        img, mask = np.ascontiguousarray(img.transpose(1, 0, 2)), np.ascontiguousarray(mask.T)
        h, w = w, h
    aspect = tw / th
    scale = rng.uniform(0.45, 1.0)
    ch = int(min(h, w / aspect) * scale)
    cw = int(ch * aspect)
    ch, cw = max(ch, 8), max(cw, 8)
    y0 = int(rng.integers(0, max(1, h - ch + 1)))
    x0 = int(rng.integers(0, max(1, w - cw + 1)))
    img = cv2.resize(img[y0 : y0 + ch, x0 : x0 + cw], (tw, th), interpolation=cv2.INTER_AREA)
    mask = cv2.resize(mask[y0 : y0 + ch, x0 : x0 + cw], (tw, th), interpolation=cv2.INTER_NEAREST)
    if rng.random() < 0.5:
        img, mask = img[:, ::-1], mask[:, ::-1]
    if rng.random() < 0.5:
        img, mask = img[::-1], mask[::-1]
    f = img.astype(np.float32)
    f = f * rng.uniform(0.75, 1.25) + rng.uniform(-25, 25)
    f = f * rng.uniform(0.9, 1.1, size=3)[None, None, :]
    if rng.random() < 0.3:
        k = int(rng.choice([3, 5]))
        f = cv2.GaussianBlur(f, (k, k), 0)
    return np.clip(f, 0, 255).astype(np.uint8), np.ascontiguousarray(mask)


def to_tensor_batch(images: Sequence[np.ndarray]) -> np.ndarray:
    """BGR uint8 images -> N x 3 x H x W float32, RGB, ImageNet-normalised (as the engine does)."""
    from pipelines.base_layer import IMAGENET_MEAN_RGB, IMAGENET_STD_RGB

    x = (
        np.stack([cv2.cvtColor(np.ascontiguousarray(i), cv2.COLOR_BGR2RGB) for i in images]).astype(
            np.float32
        )
        / 255.0
    )
    x = (x - IMAGENET_MEAN_RGB) / IMAGENET_STD_RGB
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


# ------------------------------------------------------------------------------------------ model


def build_road_model(
    encoder: str = DEFAULT_ENCODER, decoder_channels: Sequence[int] = DEFAULT_DECODER_CHANNELS
):
    from pipelines.base_layer import build_unet

    return build_unet(encoder, decoder_channels=decoder_channels)


def save_road_checkpoint(
    path: str | Path,
    model,
    encoder: str,
    decoder_channels: Sequence[int],
    input_size: tuple[int, int],
    extra: Mapping | None = None,
    half: bool = True,
) -> Path:
    """The engine's checkpoint format with the decoder it was built with; fp16 by default."""
    from pipelines.base_layer import save_checkpoint

    return save_checkpoint(
        path, model, encoder, input_size, extra, decoder_channels=decoder_channels, half=half
    )


def load_road_model(path: str | Path):
    """``(model, RoadCheckpoint)``: exactly what the engine loads (:func:`pipelines.base_layer.load_road_model`)."""
    from pipelines.base_layer import load_road_model as engine_load

    return engine_load(path)


def export_road_onnx(
    ckpt_path: str | Path, out: str | Path, input_size: tuple[int, int] | None = None
) -> Path:
    """ONNX (opset 17, fixed input size) of a road checkpoint: 1x3xHxW normalised RGB -> logits."""
    import torch

    model, ckpt = load_road_model(ckpt_path)
    w, h = input_size or ckpt.input_size or (512, 288)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy exporter: no onnxscript needed
        torch.onnx.export(
            model,
            torch.zeros(1, 3, h, w),
            str(out),
            input_names=["images"],
            output_names=["logits"],
            opset_version=17,
            dynamo=False,
        )
    log.info("road model exported to %s", out)
    return Path(out)


# ---------------------------------------------------------------------------------------- metrics


def mask_iou(pred: np.ndarray, gt: np.ndarray) -> float:
    pred, gt = pred.astype(bool), gt.astype(bool)
    union = (pred | gt).sum()
    return float((pred & gt).sum() / union) if union else 1.0


def vehicle_keep_rate(mask: np.ndarray, boxes: np.ndarray, min_overlap: float = 0.3) -> tuple[int, int]:
    """(kept, total): ground-truth boxes whose lower half lies on ``mask`` for >= ``min_overlap``
    (the engine's ``filter_by_mask`` rule)."""
    from pipelines.base_layer import lower_half_overlap

    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    if len(boxes) == 0:
        return 0, 0
    frac = lower_half_overlap(boxes, mask.astype(bool))
    return int((frac >= min_overlap).sum()), len(boxes)


@dataclass(frozen=True)
class KeepRate:
    """One operating point of a road mask on annotated frames."""

    threshold: float
    dilate_px: int
    kept: int  # ground-truth vehicles the engine keeps (``filter_by_mask`` rule)
    vehicles: int
    coverage: float  # mean share of the frame the mask covers

    @property
    def keep_rate(self) -> float | None:
        return self.kept / self.vehicles if self.vehicles else None

    def as_dict(self) -> dict:
        return {
            "threshold": self.threshold,
            "dilate_px": self.dilate_px,
            "kept": self.kept,
            "vehicles": self.vehicles,
            "keep_rate": self.keep_rate,
            "coverage": self.coverage,
        }


def mask_keep_sweep(
    segmenter,
    images: Iterable[tuple[np.ndarray, np.ndarray]],
    thresholds: Sequence[float],
    dilates: Sequence[int],
    min_overlap: float = 0.3,
) -> tuple[list[KeepRate], list[float]]:
    """The metric that matters for the pipeline: for each (threshold, dilation), the share of
    ground-truth vehicles the mask keeps against the share of the frame it covers.

    ``images`` yields (BGR frame, (N, 4) x1 y1 x2 y2 vehicle boxes); ``segmenter`` is the engine's
    (``pipelines.builder.build_road_segmenter``), so this measures what the pipeline does. The
    network runs once per frame; returns the operating points and the per-frame network ms."""
    from pipelines.base_layer import threshold_and_dilate

    grid = [(float(t), int(d)) for t in thresholds for d in dilates]
    kept = dict.fromkeys(grid, 0)
    cover: dict[tuple[float, int], list[float]] = {g: [] for g in grid}
    total, ms = 0, []
    for image, boxes in images:
        t0 = time.perf_counter()
        prob = segmenter(image)
        ms.append((time.perf_counter() - t0) * 1e3)
        total += len(boxes)
        for g in grid:
            mask = threshold_and_dilate(prob, *g)
            cover[g].append(float(mask.mean()))
            kept[g] += vehicle_keep_rate(mask, boxes, min_overlap)[0]
    points = [
        KeepRate(t, d, kept[(t, d)], total, float(np.mean(cover[(t, d)])) if cover[(t, d)] else 0.0)
        for t, d in grid
    ]
    return points, ms


# ---------------------------------------------------------------------------------------- training


@dataclass(frozen=True)
class RoadTrainSettings:
    encoder: str = DEFAULT_ENCODER
    decoder_channels: tuple[int, ...] = DEFAULT_DECODER_CHANNELS
    input_size: tuple[int, int] = (512, 288)  # (width, height), multiples of 32
    epochs: int = 20
    steps_per_epoch: int | None = None  # default: one pass over the training images
    batch: int = 8
    lr: float = 2e-3
    weight_decay: float = 1e-4
    seed: int = 0
    time_s: float | None = None  # stop early after this many seconds
    threshold: float = 0.5
    dilate_px: int = 9  # the engine's road.dilate_px, for the keep-rate metric
    max_side: int = 1024


@dataclass
class RoadMetrics:
    iou: float = 0.0
    keep_rate: float | None = None  # share of GT vehicles kept by the (dilated) mask
    coverage: float = 0.0  # share of the frame the (dilated) mask covers
    images: int = 0
    vehicles: int = 0
    history: list = field(default_factory=list)


def predict_prob(model, image_bgr: np.ndarray, input_size: tuple[int, int]) -> np.ndarray:
    import torch

    x = to_tensor_batch([cv2.resize(image_bgr, input_size, interpolation=cv2.INTER_AREA)])
    with torch.inference_mode():
        logits = model(torch.from_numpy(x)).float().numpy()[0, 0]
    prob = 1.0 / (1.0 + np.exp(-logits))
    return cv2.resize(prob, (image_bgr.shape[1], image_bgr.shape[0]), interpolation=cv2.INTER_LINEAR)


def evaluate_road(
    model,
    data: Sequence[tuple[np.ndarray, np.ndarray]],
    pairs: Sequence[RoadPair],
    settings: RoadTrainSettings,
) -> RoadMetrics:
    """IoU (thresholded, undilated) and vehicle keep rate / coverage (dilated, as the engine)."""
    from pipelines.base_layer import threshold_and_dilate

    model.eval()
    ious, kept, total, cover = [], 0, 0, []
    for (img, gt), p in zip(data, pairs, strict=True):
        prob = predict_prob(model, img, settings.input_size)
        ious.append(mask_iou(prob >= settings.threshold, gt))
        # keep rate and coverage at the original frame size, dilated as the engine does
        ow, oh = _orig_size(p, img)
        full = (
            cv2.resize(prob, (ow, oh), interpolation=cv2.INTER_LINEAR)
            if (ow, oh) != prob.shape[::-1]
            else prob
        )
        dil = threshold_and_dilate(full, settings.threshold, settings.dilate_px)
        cover.append(float(dil.mean()))
        if p.boxes is not None and len(p.boxes):
            k, n = vehicle_keep_rate(dil, p.boxes)
            kept, total = kept + k, total + n
    return RoadMetrics(
        iou=float(np.mean(ious)) if ious else 0.0,
        keep_rate=kept / total if total else None,
        coverage=float(np.mean(cover)) if cover else 0.0,
        images=len(data),
        vehicles=total,
    )


def _orig_size(p: RoadPair, img: np.ndarray) -> tuple[int, int]:
    """(width, height) of the original frame (the mask file has the frame's size)."""
    m = cv2.imread(str(p.mask), cv2.IMREAD_GRAYSCALE)
    return (m.shape[1], m.shape[0]) if m is not None else (img.shape[1], img.shape[0])


def split_pairs(
    pairs: Sequence[RoadPair], val_fraction: float, seed: int
) -> tuple[list[RoadPair], list[RoadPair]]:
    """By group (flight / tile), never by frame."""
    groups = sorted({p.group for p in pairs})
    rng = np.random.default_rng(seed)
    rng.shuffle(groups)
    n_val = max(1, int(round(val_fraction * len(groups)))) if len(groups) > 1 and val_fraction > 0 else 0
    val_groups = set(groups[:n_val])
    return [p for p in pairs if p.group not in val_groups], [p for p in pairs if p.group in val_groups]


def train_road(
    pairs: Sequence[RoadPair],
    out_path: str | Path,
    settings: RoadTrainSettings = RoadTrainSettings(),
    val_fraction: float = 0.2,
    val_pairs: Sequence[RoadPair] | None = None,
    init_from: str | Path | None = None,
) -> Path:
    """Train a U-Net on the pairs (split by group unless ``val_pairs`` is given); save the best
    checkpoint (validation IoU, or training loss without validation) to ``out_path``.
    ``init_from`` fine-tunes a checkpoint of the same architecture."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    if val_pairs is None:
        train_pairs, val_pairs = split_pairs(pairs, val_fraction, settings.seed)
    else:
        train_pairs = list(pairs)
    if not train_pairs:
        from pipelines.config import ConfigError

        raise ConfigError("no road training pairs left after the validation split")
    train_data = load_pairs(train_pairs, settings.max_side)
    val_data = load_pairs(val_pairs, settings.max_side) if val_pairs else []
    log.info(
        "road training: %d train / %d val images (groups %s / %s)",
        len(train_data),
        len(val_data),
        sorted({p.group for p in train_pairs}),
        sorted({p.group for p in val_pairs or []}),
    )
    model = build_road_model(settings.encoder, settings.decoder_channels)
    if init_from is not None:
        start, _ = load_road_model(init_from)
        model.load_state_dict(start.state_dict())
        log.info("road model initialised from %s", init_from)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)
    steps = settings.steps_per_epoch or max(1, math.ceil(len(train_data) / settings.batch))
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=settings.lr, total_steps=settings.epochs * steps, pct_start=0.15
    )
    pos = np.mean([m.mean() for _, m in train_data])
    pos_weight = torch.tensor(float(np.clip((1 - pos) / max(pos, 1e-3), 1.0, 5.0)))
    best, best_score = None, -1.0
    history = []
    t0 = time.perf_counter()
    out_path = Path(out_path)
    for epoch in range(settings.epochs):
        model.train()
        losses = []
        for _ in range(steps):
            idx = rng.integers(0, len(train_data), settings.batch)
            batch = [augment(*train_data[i], settings.input_size, rng) for i in idx]
            x = torch.from_numpy(to_tensor_batch([b[0] for b in batch]))
            y = torch.from_numpy(np.stack([b[1] for b in batch])[:, None].astype(np.float32))
            logits = model(x)
            bce = F.binary_cross_entropy_with_logits(logits, y, pos_weight=pos_weight)
            p = torch.sigmoid(logits)
            dice = 1 - (2 * (p * y).sum() + 1) / (p.sum() + y.sum() + 1)
            loss = bce + dice
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
        rec = {
            "epoch": epoch + 1,
            "loss": float(np.mean(losses)),
            "elapsed_s": round(time.perf_counter() - t0, 1),
        }
        if val_data:
            m = evaluate_road(model, val_data, val_pairs, settings)
            rec.update(val_iou=m.iou, val_keep_rate=m.keep_rate, val_coverage=m.coverage)
            score = m.iou
        else:
            score = -rec["loss"]
        history.append(rec)
        log.info("road epoch %s", rec)
        if score > best_score:
            best_score = score
            best = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if settings.time_s and time.perf_counter() - t0 > settings.time_s:
            log.info("road training stopped after %.0f s (time budget)", time.perf_counter() - t0)
            break
    assert best is not None
    model.load_state_dict(best)
    extra = {
        "threshold": settings.threshold,
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(settings).items()},
        "history": history,
        "train_groups": sorted({p.group for p in train_pairs}),
        "val_groups": sorted({p.group for p in val_pairs or []}),
    }
    save_road_checkpoint(
        out_path, model, settings.encoder, settings.decoder_channels, settings.input_size, extra
    )
    out_path.with_suffix(".json").write_text(json.dumps(history, indent=1))
    log.info("road checkpoint -> %s (best score %.3f)", out_path, best_score)
    return out_path


# ------------------------------------------------------------------------------ pseudo-labels


def read_mot_tracks(path: str | Path) -> dict[int, dict[int, np.ndarray]]:
    """MOT tracks (``frame,id,x,y,w,h,...``, frame 1-based) -> {frame0: {id: xyxy}}."""
    out: dict[int, dict[int, np.ndarray]] = defaultdict(dict)
    for line in Path(path).read_text().splitlines():
        p = line.split(",")
        if len(p) < 6:
            continue
        f, tid, x, y, w, h = int(float(p[0])) - 1, int(float(p[1])), *(float(v) for v in p[2:6])
        out[f][tid] = np.array([x, y, x + w, y + h], np.float64)
    return dict(out)


def load_homographies(path: str | Path | None) -> dict[int, np.ndarray] | None:
    """Per-frame ego homographies (previous frame -> this frame, the engine's ``EgoMotion``):
    ``.npy`` (N,3,3) indexed by frame, or JSON ``{"<frame>": [[...],[...],[...]]}``."""
    if path is None:
        return None
    path = Path(path)
    if path.suffix == ".npy":
        arr = np.load(path)
        return {i: arr[i] for i in range(len(arr))}
    data = json.loads(path.read_text())
    return {int(k): np.asarray(v, np.float64).reshape(3, 3) for k, v in data.items()}


def _frame_to_ref(ego: Mapping[int, np.ndarray] | None, frames: Iterable[int]) -> dict[int, np.ndarray]:
    """Frame -> reference (first frame) homography by chaining the ego homographies."""
    frames = sorted(frames)
    if not frames:
        return {}
    if ego is None:
        return {f: np.eye(3) for f in frames}
    acc = np.eye(3)  # first frame -> current
    out = {}
    for f in range(frames[0], frames[-1] + 1):
        if f != frames[0] and f in ego:
            acc = np.asarray(ego[f], np.float64) @ acc
        out[f] = np.linalg.inv(acc)
    return {f: out[f] for f in frames}


def pseudo_mask_from_tracks(
    tracks: Mapping[int, Mapping[int, np.ndarray]],
    size: tuple[int, int],
    ego_homographies: Mapping[int, np.ndarray] | None = None,
    min_track_frames: int = 5,
    min_motion_px: float = 0.0,
    close_px: int = 15,
    dilate_px: int = 5,
    reference_frame: int | None = None,
    to_reference: Mapping[int, np.ndarray] | None = None,
) -> np.ndarray:
    """Road mask (uint8 0/255, in the reference frame's pixels) from vehicle footprints.

    Each tracked box is warped into stabilised coordinates (the first frame, via the chained ego
    homographies; identity for a fixed camera) and painted; tracks seen in fewer than
    ``min_track_frames`` frames (likely false positives) and, with ``min_motion_px``, tracks
    that never move (parked cars) are skipped. A closing (``close_px``) joins consecutive
    footprints into lanes, and a dilation adds a margin. The result is the road as traffic used it
    during the flight: lanes nobody drove on are missing, so treat it as a lower bound.
    ``to_reference`` (frame -> reference homographies) replaces the chained ego homographies,
    e.g. for sparse frames registered by :func:`register_to_reference`; frames missing from it are
    skipped.
    """
    w, h = size
    by_track: dict[int, list[tuple[int, np.ndarray]]] = defaultdict(list)
    for f, boxes in tracks.items():
        for tid, xyxy in boxes.items():
            by_track[tid].append((f, np.asarray(xyxy, np.float64)))
    if to_reference is not None:
        to_ref = {f: np.asarray(hm, np.float64) for f, hm in to_reference.items()}
        by_track = {t: [(f, b) for f, b in obs if f in to_ref] for t, obs in by_track.items()}
    else:
        to_ref = _frame_to_ref(ego_homographies, tracks.keys())
    ref_from = np.eye(3)
    if reference_frame is not None and reference_frame in to_ref:
        ref_from = np.linalg.inv(to_ref[reference_frame])
    acc = np.zeros((h, w), np.uint8)
    used = 0
    for _tid, obs in by_track.items():
        if len(obs) < min_track_frames:
            continue
        centres = np.array([apply_h(to_ref[f], [[(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]])[0] for f, b in obs])
        if min_motion_px > 0 and np.linalg.norm(centres.max(0) - centres.min(0)) < min_motion_px:
            continue
        used += 1
        for f, (x1, y1, x2, y2) in obs:
            corners = np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]])
            poly = apply_h(ref_from @ to_ref[f], corners)
            cv2.fillPoly(acc, [np.round(poly).astype(np.int32).reshape(-1, 1, 2)], 255)
    if close_px > 0:
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * close_px + 1, 2 * close_px + 1))
        acc = cv2.morphologyEx(acc, cv2.MORPH_CLOSE, k)
    if dilate_px > 0:
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * dilate_px + 1, 2 * dilate_px + 1))
        acc = cv2.dilate(acc, k)
    log.info("pseudo road mask from %d tracks: %.1f %% of the frame", used, 100 * (acc > 0).mean())
    return acc


def apply_h(hmat: np.ndarray, pts) -> np.ndarray:
    pts = np.asarray(pts, np.float64).reshape(-1, 2)
    ph = np.column_stack([pts, np.ones(len(pts))]) @ np.asarray(hmat, np.float64).T
    return ph[:, :2] / ph[:, 2:3]


def warp_mask_to_frame(
    mask_ref: np.ndarray, frame: int, ego_homographies: Mapping[int, np.ndarray] | None, frames: Iterable[int]
) -> np.ndarray:
    """The reference-frame mask seen from ``frame`` (for per-frame training pairs)."""
    to_ref = _frame_to_ref(ego_homographies, frames)
    h, w = mask_ref.shape[:2]
    return cv2.warpPerspective(mask_ref, np.linalg.inv(to_ref[frame]), (w, h), flags=cv2.INTER_NEAREST)


def pseudo_mask_from_boxes(
    boxes_per_frame: Mapping[int, np.ndarray],
    size: tuple[int, int],
    to_reference: Mapping[int, np.ndarray] | None = None,
    close_px: int = 15,
    dilate_px: int = 5,
) -> np.ndarray:
    """Road mask from untracked boxes per frame (``{frame: (N,4) xyxy}``), painted in the
    reference frame through ``to_reference`` (frame -> reference homographies, e.g. from
    :func:`register_to_reference`). Every box counts: use tracks where false positives matter."""
    tracks = {
        f: {i: b for i, b in enumerate(np.asarray(bx).reshape(-1, 4))} for f, bx in boxes_per_frame.items()
    }
    # every box is its own one-frame "track"
    renum: dict[int, dict[int, np.ndarray]] = {}
    n = 0
    for f, d in tracks.items():
        renum[f] = {}
        for b in d.values():
            renum[f][n] = b
            n += 1
    return pseudo_mask_from_tracks(
        renum, size, min_track_frames=1, close_px=close_px, dilate_px=dilate_px, to_reference=to_reference
    )


def register_to_reference(
    images: Mapping[int, np.ndarray], reference: int, work_width: int = 960, min_inliers: int = 30
) -> dict[int, np.ndarray]:
    """Frame -> reference homographies of frames of one flight (SIFT + ratio test + RANSAC on a
    downscaled grey image). Frames that cannot be registered are left out."""

    def gray(img):
        s = work_width / img.shape[1]
        return cv2.cvtColor(
            cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2GRAY
        ), s

    sift = cv2.SIFT_create(nfeatures=3000)
    ref_g, s = gray(images[reference])
    kr, dr = sift.detectAndCompute(ref_g, None)
    matcher = cv2.BFMatcher(cv2.NORM_L2)
    scale = np.diag([s, s, 1.0])
    out = {reference: np.eye(3)}
    for f, img in images.items():
        if f == reference:
            continue
        g, _ = gray(img)
        kf, df = sift.detectAndCompute(g, None)
        if df is None or dr is None or len(kf) < min_inliers:
            continue
        good = [
            m
            for m, n in (p for p in matcher.knnMatch(df, dr, k=2) if len(p) == 2)
            if m.distance < 0.75 * n.distance
        ]
        if len(good) < min_inliers:
            log.info("frame %s: %d matches, not registered", f, len(good))
            continue
        src = np.float32([kf[m.queryIdx].pt for m in good])
        dst = np.float32([kr[m.trainIdx].pt for m in good])
        hmat, inl = cv2.findHomography(src, dst, cv2.RANSAC, 3.0)
        if hmat is None or int(inl.sum()) < min_inliers:
            log.info("frame %s: too few RANSAC inliers, not registered", f)
            continue
        out[f] = np.linalg.inv(scale) @ hmat @ scale
    return out


def pseudo_mask_from_mot(
    tracks_path: str | Path,
    size: tuple[int, int],
    homographies: str | Path | None = None,
    min_track_frames: int = 5,
    **kwargs,
) -> np.ndarray:
    """:func:`pseudo_mask_from_tracks` on a MOT tracks file (e.g. ``airpatrol process`` output)."""
    return pseudo_mask_from_tracks(
        read_mot_tracks(tracks_path), size, load_homographies(homographies), min_track_frames, **kwargs
    )


def write_pseudo_pairs(
    samples, out_dir: str | Path, close_px: int = 25, dilate_px: int = 8
) -> list[RoadPair]:
    """Road pseudo-label pairs from annotated frames of hovering flights (``training.datasets.Sample``).

    Per group (video), every frame is registered to the frame with the most boxes
    (:func:`register_to_reference`), all boxes are painted there (:func:`pseudo_mask_from_boxes`),
    and the mask is warped back into each frame; a frame's own boxes are always road. Writes
    ``images/<name>.jpg`` (symlinks when possible) and ``masks/<name>.png``.
    """
    out_dir = Path(out_dir)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    (out_dir / "masks").mkdir(parents=True, exist_ok=True)
    by_group: dict[str, list] = defaultdict(list)
    for s in samples:
        by_group[s.group].append(s)
    pairs = []
    for group, ss in sorted(by_group.items()):
        imgs = {i: s.load() for i, s in enumerate(ss)}
        ref = max(range(len(ss)), key=lambda i: len(ss[i].boxes))
        to_ref = register_to_reference(imgs, ref)
        h, w = imgs[ref].shape[:2]
        m_ref = pseudo_mask_from_boxes(
            {i: ss[i].boxes[:, 1:] for i in to_ref}, (w, h), to_ref, close_px, dilate_px
        )
        for i in to_ref:
            mask = cv2.warpPerspective(m_ref, np.linalg.inv(to_ref[i]), (w, h), flags=cv2.INTER_NEAREST)
            for x1, y1, x2, y2 in ss[i].boxes[:, 1:].astype(int):
                mask[max(0, y1) : y2, max(0, x1) : x2] = 255
            mask_path = out_dir / "masks" / f"{ss[i].name}.png"
            cv2.imwrite(str(mask_path), mask)
            img_path = out_dir / "images" / f"{ss[i].name}.jpg"
            if not img_path.exists():
                try:
                    img_path.symlink_to(Path(ss[i].image).resolve())
                except OSError:
                    cv2.imwrite(str(img_path), imgs[i])
            pairs.append(RoadPair(img_path, mask_path, group, boxes=ss[i].boxes[:, 1:].copy()))
        log.info(
            "pseudo road masks for %s: %d/%d frames registered, %.1f %% road",
            group,
            len(to_ref),
            len(ss),
            100 * (m_ref > 0).mean(),
        )
    return pairs
