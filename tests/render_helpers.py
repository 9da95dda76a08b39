"""Rendered test images with exactly known motion: band-limited textured vehicles at sub-pixel boxes
on a smooth ground that moves with the camera (optical-flow and propagation tests)."""

from __future__ import annotations

import numpy as np


class BoxScene:
    """``render(boxes, pan)``: ground ``level + amp * cos(x / px) * cos(y / py)`` shifted by the
    camera pan, and each box filled with a texture attached to the box (an exact sub-pixel shift
    when the box moves), with anti-aliased edges. ``rng`` is left for further random draws."""

    def __init__(
        self,
        width: int,
        height: int,
        seed: int,
        *,
        ground: tuple[float, float, float, float] = (100.0, 25.0, 53.0, 41.0),
        fill: float = 130.0,
        plain_fill: float = 200.0,
        k: int = 24,
    ) -> None:
        self.rng = np.random.default_rng(seed)
        self.fx, self.fy = self.rng.uniform(-0.2, 0.2, k), self.rng.uniform(-0.2, 0.2, k)
        self.phase = self.rng.uniform(0, 2 * np.pi, k)
        self.yy, self.xx = np.mgrid[0:height, 0:width].astype(np.float64)
        self.ground, self.fill, self.plain_fill = ground, fill, plain_fill

    def texture(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Band-limited texture at continuous coordinates."""
        return sum(
            np.cos(2 * np.pi * (fx * x + fy * y) + ph)
            for fx, fy, ph in zip(self.fx, self.fy, self.phase, strict=True)
        )

    def render(
        self, boxes: np.ndarray, pan: tuple[float, float] = (0.0, 0.0), textured: bool = True
    ) -> np.ndarray:
        level, amp, px, py = self.ground
        xx, yy = self.xx, self.yy
        img = level + amp * np.cos(2 * np.pi * (xx - pan[0]) / px) * np.cos(2 * np.pi * (yy - pan[1]) / py)
        for x1, y1, x2, y2 in boxes:
            m = np.clip(
                np.minimum(
                    np.minimum(xx - x1 + 0.5, x2 - xx + 0.5), np.minimum(yy - y1 + 0.5, y2 - yy + 0.5)
                ),
                0,
                1,
            )
            fill = self.fill + 12.0 * self.texture(xx - x1, yy - y1) if textured else self.plain_fill
            img = img * (1 - m) + m * fill
        return np.clip(np.round(img), 0, 255).astype(np.uint8)
