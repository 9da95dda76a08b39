"""Where the third-party test material lives (``../shared/data`` beside the checkout).

A plain module, not a conftest: test modules import ``shared_path`` from here (``tests/`` is on
pytest's ``pythonpath``), while the conftests stay free to define fixtures per folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("AIRPATROL_SHARED_DATA", REPO.parent / "shared" / "data"))


def shared_path(*parts: str) -> Path:
    """Path under ../shared/data, or skip the test with a clear reason when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"third-party test material not present: {path} (only on machines with ../shared/data)")
    return path


def visdrone_images(n: int) -> list[np.ndarray]:
    """``n`` VisDrone-DET images of one size (real traffic; a batch of them is one shape), or skip."""
    import cv2

    folder = shared_path("visdrone_det", "images")
    by_shape: dict[tuple[int, ...], list[np.ndarray]] = {}
    for path in sorted(folder.glob("*.jpg")):
        image = cv2.imread(str(path))
        by_shape.setdefault(image.shape, []).append(image)
        if len(by_shape[image.shape]) == n:
            return by_shape[image.shape]
    pytest.skip(f"no {n} VisDrone images of one size under {folder}")
