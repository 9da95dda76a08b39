"""A recorded flight on disk for the engine's tests: a frame folder and its DJI .SRT telemetry."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np


def srt_flight(
    tmp_path: Path, rel_alt: float, *, pitch: float = -60.0, n: int = 3, size: tuple[int, int] = (160, 90)
) -> tuple[Path, Path]:
    """``n`` frames (``size`` = width, height) at 10 fps and an SRT whose every line reads
    ``rel_alt`` and gimbal ``pitch``; returns (frame folder, SRT)."""
    frames = tmp_path / "img1"
    frames.mkdir()
    for k in range(n):
        cv2.imwrite(str(frames / f"{k + 1:06d}.jpg"), np.full((size[1], size[0], 3), 40 * k, np.uint8))
    srt = tmp_path / "flight.SRT"
    srt.write_text(
        "".join(
            f"{k + 1}\n00:00:00,{k * 100:03d} --> 00:00:00,{k * 100 + 100:03d}\n"
            f"[focal_len: 24.00] [latitude: 47.3769] [longitude: 8.5417] [rel_alt: {rel_alt} abs_alt: 460.1] "
            f"[gb_yaw: 10.0 gb_pitch: {pitch}]\n\n"
            for k in range(n)
        )
    )
    return frames, srt
