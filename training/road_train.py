"""Road U-Net training: settings, the training loop and its validation metrics.

:func:`train_road` trains on :class:`training.road_data.RoadPair` lists (BCE + Dice, AdamW,
one-cycle learning rate), keeps the epoch with the best validation IoU (or training loss without
validation) and saves it with :func:`training.road_model.save_road_checkpoint`.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import cv2
import numpy as np

from pipelines.config import ConfigError
from training.defaults import ROAD_DECODER_CHANNELS as DEFAULT_DECODER_CHANNELS
from training.defaults import ROAD_ENCODER as DEFAULT_ENCODER
from training.road_data import RoadPair, augment, load_pairs, split_pairs
from training.road_metrics import mask_iou, vehicle_keep_rate
from training.road_model import (
    build_road_model,
    load_road_model,
    predict_prob,
    save_road_checkpoint,
    to_tensor_batch,
)

log = logging.getLogger(__name__)


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

    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    if val_pairs is None:
        train_pairs, val_pairs = split_pairs(pairs, val_fraction, settings.seed)
    else:
        train_pairs = list(pairs)
    if not train_pairs:
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
        losses = _train_epoch(model, opt, sched, train_data, steps, pos_weight, settings, rng)
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
    _save_trained(out_path, model, settings, history, train_pairs, val_pairs or [])
    log.info("road checkpoint -> %s (best score %.3f)", out_path, best_score)
    return out_path


def _train_epoch(
    model,
    opt,
    sched,
    train_data: Sequence[tuple[np.ndarray, np.ndarray]],
    steps: int,
    pos_weight,
    settings: RoadTrainSettings,
    rng: np.random.Generator,
) -> list[float]:
    """``steps`` optimiser steps on augmented random batches (BCE + Dice); the loss of each step."""
    import torch
    import torch.nn.functional as F

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
    return losses


def _save_trained(
    out_path: Path,
    model,
    settings: RoadTrainSettings,
    history: list[dict],
    train_pairs: Sequence[RoadPair],
    val_pairs: Sequence[RoadPair],
) -> None:
    """The checkpoint (settings, history and groups in ``extra``) and ``<out>.json`` (the history)."""
    extra = {
        "threshold": settings.threshold,
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(settings).items()},
        "history": history,
        "train_groups": sorted({p.group for p in train_pairs}),
        "val_groups": sorted({p.group for p in val_pairs}),
    }
    save_road_checkpoint(
        out_path, model, settings.encoder, settings.decoder_channels, settings.input_size, extra
    )
    out_path.with_suffix(".json").write_text(json.dumps(history, indent=1))
