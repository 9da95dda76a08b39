"""Samples: video names to groups, and splits by group (never by frame)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from training.samples import Sample, split_by_group, video_group


def test_video_group_names():
    assert video_group("DJI_0005-0018") == "DJI_0005"
    assert video_group("DJI-00760-00001") == "DJI-00760"
    assert video_group("DJI_0762-00001") == "DJI_0762"


def test_split_by_group_never_splits_a_video():
    samples = [
        Sample(Path(f"{g}-{k:04d}.jpg"), np.zeros((0, 5)), g) for g in ("A", "B", "C", "D") for k in range(5)
    ]
    split = split_by_group(samples, val_groups=["C"])
    assert {s.group for s in split["val"]} == {"C"} and "C" not in {s.group for s in split["train"]}
    auto = split_by_group(samples, val_fraction=0.3, seed=1)
    assert not ({s.group for s in auto["train"]} & {s.group for s in auto["val"]})
    assert auto["val"] and auto["train"]
    with pytest.raises(ValueError):
        split_by_group(samples, val_groups=["nope"])
