"""Predicted tracks of one sequence: :class:`PredTracks` (flat arrays, 1-based frames like MOT
files) and :class:`TrackCollector`, which accumulates a pipeline's ``FrameResult`` detections into
them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, slots=True, eq=False)
class PredTracks:
    """Tracked boxes of one sequence as flat arrays (frames 1-based, like MOT files)."""

    frames: np.ndarray  # (N,) int
    ids: np.ndarray  # (N,) int
    xyxy: np.ndarray  # (N, 4)
    speed_kmh: np.ndarray  # (N,) float, NaN while unknown
    class_names: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    sigma_kmh: np.ndarray | None = None  # (N,) the engine's reported one-sigma; None: not collected
    trusted: np.ndarray | None = None  # (N,) bool, the speed stage's trust flag; None: not collected
    # (N,) the scale's relative share of sigma_kmh (pipelines.height; NaN where unknown); None: not collected
    scale_frac: np.ndarray | None = None
    # (N,) str, the scale source of the row's frame (pipelines.height; "" where none); None: not collected
    scale_source: np.ndarray | None = None

    def trust(self) -> np.ndarray:
        """(N,) trust flags (True where not collected)."""
        if self.trusted is None or len(self.trusted) != len(self):
            return np.ones(len(self), dtype=bool)
        return self.trusted

    def sigmas(self) -> np.ndarray:
        """(N,) reported sigmas (NaN where unknown or not collected)."""
        if self.sigma_kmh is None or len(self.sigma_kmh) != len(self):
            return np.full(len(self), np.nan)
        return self.sigma_kmh

    def scale_sources(self) -> np.ndarray:
        """(N,) the scale source each row's speed was measured with ("" where unknown)."""
        if self.scale_source is None or len(self.scale_source) != len(self):
            return np.full(len(self), "", dtype=object)
        return self.scale_source

    def scale_fracs(self) -> np.ndarray:
        """(N,) the scale's relative sigma in each reported sigma (NaN where unknown or not collected)."""
        if self.scale_frac is None or len(self.scale_frac) != len(self):
            return np.full(len(self), np.nan)
        return self.scale_frac

    @staticmethod
    def empty() -> PredTracks:
        return PredTracks(np.zeros(0, int), np.zeros(0, int), np.zeros((0, 4)), np.zeros(0))

    def __len__(self) -> int:
        return len(self.frames)

    def by_frame(self) -> dict[int, np.ndarray]:
        """1-based frame -> row indices."""
        out: dict[int, list[int]] = {}
        for i, f in enumerate(self.frames.tolist()):
            out.setdefault(int(f), []).append(i)
        return {f: np.asarray(v, int) for f, v in out.items()}

    def of_classes(self, names: Iterable[str] | None) -> PredTracks:
        """The rows whose class is one of ``names`` (all rows for ``None``)."""
        if names is None:
            return self
        if len(self.class_names) != len(self):  # scoring by class needs every row's class
            raise ValueError(f"{len(self)} tracked boxes but {len(self.class_names)} class names")
        keep = np.isin(self.class_names.astype(str), list(names))
        return PredTracks(
            self.frames[keep],
            self.ids[keep],
            self.xyxy[keep],
            self.speed_kmh[keep],
            self.class_names[keep],
            self.sigmas()[keep],
            self.trust()[keep],
            self.scale_fracs()[keep],
            self.scale_sources()[keep],
        )

    def to_mot_lines(self) -> list[str]:
        lines = []
        for f, i, b in zip(self.frames, self.ids, self.xyxy, strict=True):
            lines.append(f"{f},{i},{b[0]:.2f},{b[1]:.2f},{b[2] - b[0]:.2f},{b[3] - b[1]:.2f},1,-1,-1,-1")
        return lines


class TrackCollector:
    """Accumulates ``FrameResult`` detections into :class:`PredTracks`."""

    def __init__(self) -> None:
        self._frames: list[np.ndarray] = []
        self._ids: list[np.ndarray] = []
        self._xyxy: list[np.ndarray] = []
        self._speed: list[np.ndarray] = []
        self._sigma: list[np.ndarray] = []
        self._trusted: list[np.ndarray] = []
        self._cls: list[np.ndarray] = []
        self._scale: list[np.ndarray] = []
        self._source: list[np.ndarray] = []

    def add(self, frame_index: int, detections, scale_source: str = "") -> None:
        """One frame's tracked boxes; ``scale_source``: the frame's scale (``FrameResult.scale``)."""
        n = len(detections)
        if n == 0 or detections.tracker_id is None:
            return
        self._frames.append(np.full(n, frame_index + 1, int))
        self._ids.append(np.asarray(detections.tracker_id, int))
        self._xyxy.append(np.asarray(detections.xyxy, float))
        sp = detections.data.get("speed_kmh")
        self._speed.append(np.asarray(sp, float) if sp is not None else np.full(n, np.nan))
        sg = detections.data.get("speed_sigma_kmh")
        self._sigma.append(np.asarray(sg, float) if sg is not None else np.full(n, np.nan))
        sf = detections.data.get("speed_scale_frac")
        self._scale.append(np.asarray(sf, float) if sf is not None else np.full(n, np.nan))
        self._source.append(np.full(n, scale_source, dtype=object))
        tr = detections.data.get("speed_trusted")
        self._trusted.append(np.asarray(tr, bool) if tr is not None else np.ones(n, bool))
        cl = detections.data.get("class_name")
        self._cls.append(
            np.asarray(cl, dtype=object) if cl is not None else np.full(n, "vehicle", dtype=object)
        )

    def result(self) -> PredTracks:
        if not self._frames:
            return PredTracks.empty()
        return PredTracks(
            np.concatenate(self._frames),
            np.concatenate(self._ids),
            np.concatenate(self._xyxy),
            np.concatenate(self._speed),
            np.concatenate(self._cls),
            np.concatenate(self._sigma),
            np.concatenate(self._trusted),
            np.concatenate(self._scale),
            np.concatenate(self._source),
        )
