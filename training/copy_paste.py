"""Copy-paste augmentation: vehicle crops of the training split pasted onto training frames.

Used by :func:`training.yolo_dataset.build_yolo_dataset` on the training split only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from training.samples import Sample

log = logging.getLogger(__name__)


@dataclass
class CopyPaste:
    """Paste vehicle crops from the training split onto training tiles.

    Crops are pasted with a random 90-degree rotation and flips (nadir views have no up) where
    ``placement`` allows it: by default near where vehicles of the same group were annotated
    (a hovering drone sees the same roads in every frame, so the union of the group's boxes,
    dilated, approximates its roads). A placement never overlaps an existing box.
    """

    per_image: int = 6
    dilate_px: int = 25
    seed: int = 0
    crops: list[tuple[int, np.ndarray]] = field(default_factory=list)
    masks: dict[str, np.ndarray] = field(default_factory=dict)

    def collect(self, samples_with_images: Iterable[tuple[Sample, np.ndarray]]) -> None:
        for s, img in samples_with_images:
            h, w = img.shape[:2]
            mask = self.masks.setdefault(s.group, np.zeros((h, w), np.uint8))
            if mask.shape != (h, w):
                continue
            for c, x1, y1, x2, y2 in s.boxes:
                xi1, yi1, xi2, yi2 = max(0, int(x1)), max(0, int(y1)), min(w, int(x2)), min(h, int(y2))
                if xi2 - xi1 < 6 or yi2 - yi1 < 6:
                    continue
                self.crops.append((int(c), img[yi1:yi2, xi1:xi2].copy()))
                d = self.dilate_px
                mask[max(0, yi1 - d) : yi2 + d, max(0, xi1 - d) : xi2 + d] = 1
        log.info("copy-paste bank: %d vehicle crops from %d groups", len(self.crops), len(self.masks))

    def apply(
        self, sample: Sample, image: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        if not self.crops or self.per_image <= 0:
            return image, sample.boxes
        image = image.copy()
        boxes = [tuple(b) for b in sample.boxes]
        h, w = image.shape[:2]
        mask = self.masks.get(sample.group)
        if mask is not None and mask.shape != (h, w):
            mask = None
        for _ in range(self.per_image):
            cls, crop = self.crops[int(rng.integers(len(self.crops)))]
            crop = np.rot90(crop, int(rng.integers(4)))
            if rng.random() < 0.5:
                crop = crop[:, ::-1]
            ch, cw = crop.shape[:2]
            if ch >= h or cw >= w:
                continue
            for _try in range(20):
                x0, y0 = int(rng.integers(0, w - cw)), int(rng.integers(0, h - ch))
                if mask is not None and not mask[y0 + ch // 2, x0 + cw // 2]:
                    continue
                if any(not (x0 + cw <= b[1] or b[3] <= x0 or y0 + ch <= b[2] or b[4] <= y0) for b in boxes):
                    continue
                image[y0 : y0 + ch, x0 : x0 + cw] = crop
                boxes.append((cls, x0, y0, x0 + cw, y0 + ch))
                break
        return image, np.asarray(boxes, np.float32).reshape(-1, 5)
