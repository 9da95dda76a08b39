"""Output sinks: annotated video, MOT tracks, speed CSV, violations JSON with snapshots, summary.

:class:`OutputWriter` consumes :class:`~pipelines.types.FrameResult` objects in frame order::

    with OutputWriter(out_dir, fps=source.fps, size=source.size, speed_limit_kmh=50) as writer:
        for result in results:
            writer.write(result)
        writer.add_violations(pipeline.finish())
        paths = writer.close({"source": str(path)})

Files in ``out_dir`` (every frame number in them is 1-based, :attr:`Frame.number`, as in
MOTChallenge files: the first frame of the video is frame 1):

* ``annotated.mp4``: H.264 (libx264 ``superfast``/crf 23, else MPEG-4 Part 2), yuv420p, even
  dimensions (an odd last row/column is cropped). On the 2-core dev VM at 1024x540 ``superfast``
  costs about 10 ms/frame vs 19 ms for ``veryfast`` for a 20 % larger file (``preset`` argument). Written as *fragmented* MP4 with a key frame every ~2 s, so a crashed
  run still leaves a playable file up to the last fragment. Frame pts follow the frames'
  ``timestamp_s`` (variable frame rate is kept).
* ``tracks.txt``: MOTChallenge ``frame(1-based),id,x,y,w,h,conf,-1,-1,-1``.
* ``speeds.csv``: one row per tracked box (``frame`` 1-based, as ``tracks.txt``); NaN is an empty cell;
  ``trusted`` is 0 where the speed stage doubts the figure (a box that jumped or changed size), which
  then counts towards no violation.
* ``violations.json``: list of ``Violation.to_dict()`` plus ``snapshot`` (path relative to
  ``out_dir``, or null); rewritten atomically (temp file + ``os.replace``) on every violation.
* ``snapshots/*.jpg``: the violation's snapshot, else a crop of the frame around the vehicle.
* ``summary.json``: the dict given to :meth:`OutputWriter.close` plus ``counts`` and ``files``.

Text files are flushed after every frame, so a crash keeps every frame written so far.
The writer is not thread-safe: call it from one thread.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import av
import cv2
import numpy as np

from pipelines.annotate import annotate, class_names, detection_speeds, detection_trust
from pipelines.rules import crop_with_margin
from pipelines.serialize import to_jsonable
from pipelines.types import FrameResult, Violation

__all__ = ["OutputWriter", "VideoWriter", "annotate", "atomic_write_text", "mot_lines", "speed_rows"]

logger = logging.getLogger(__name__)

VIDEO_NAME = "annotated.mp4"
TRACKS_NAME = "tracks.txt"
SPEEDS_NAME = "speeds.csv"
VIOLATIONS_NAME = "violations.json"
SUMMARY_NAME = "summary.json"
SNAPSHOT_DIR = "snapshots"
SPEED_COLUMNS = (
    "frame",
    "time_s",
    "track_id",
    "class",
    "x1",
    "y1",
    "x2",
    "y2",
    "speed_kmh",
    "sigma_kmh",
    "ground_x_m",
    "ground_y_m",
    "trusted",
    "scale_sigma_pct",  # the scale's share of sigma_kmh (pipelines.height), % of the speed
)
PTS_TIME_BASE = Fraction(1, 1000)  # video pts in milliseconds
KEYFRAME_INTERVAL_S = 2.0
FRAGMENTED_MP4 = {"movflags": "frag_keyframe+empty_moov+default_base_moof"}


# --------------------------------------------------------------------------------------------
# pure helpers


def fmt(value: float, digits: int) -> str:
    """Fixed-point number, or an empty string for NaN/inf/None."""
    if value is None or not math.isfinite(value):
        return ""
    return f"{value:.{digits}f}"


def mot_lines(result: FrameResult) -> list[str]:
    """MOTChallenge lines (``frame,id,x,y,w,h,conf,-1,-1,-1``) for the tracked boxes of a frame."""
    det = result.detections
    if det.tracker_id is None or len(det) == 0:
        return []
    conf = det.confidence if det.confidence is not None else np.ones(len(det))
    frame_no = result.frame.number
    lines = []
    for (x1, y1, x2, y2), tid, c in zip(det.xyxy, det.tracker_id, conf, strict=True):
        lines.append(
            f"{frame_no},{int(tid)},{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{float(c):.4f},-1,-1,-1\n"
        )
    return lines


def ground_positions(result: FrameResult) -> np.ndarray:
    """(N, 2) ground positions in metres (NaN when unknown)."""
    det = result.detections
    ground = det.data.get("ground_xy_m")
    if ground is None or len(ground) != len(det):
        return np.full((len(det), 2), np.nan)
    return np.asarray(ground, dtype=np.float64).reshape(len(det), 2)


def speed_rows(result: FrameResult) -> list[list[str]]:
    """``speeds.csv`` rows (see :data:`SPEED_COLUMNS`) for the tracked boxes of a frame."""
    det = result.detections
    if det.tracker_id is None or len(det) == 0:
        return []
    speeds, sigmas = detection_speeds(result)
    trust = detection_trust(result)
    names = class_names(result)
    ground = ground_positions(result)
    scale_fracs = det.data.get("speed_scale_frac") if det.data else None
    if scale_fracs is None:
        scale_fracs = np.full(len(det), np.nan)
    frame, time_s = str(result.frame.number), f"{result.frame.timestamp_s:.4f}"
    rows = []
    for i, (x1, y1, x2, y2) in enumerate(det.xyxy):
        rows.append(
            [
                frame,
                time_s,
                str(int(det.tracker_id[i])),
                names[i],
                fmt(x1, 1),
                fmt(y1, 1),
                fmt(x2, 1),
                fmt(y2, 1),
                fmt(speeds[i], 2),
                fmt(sigmas[i], 2),
                fmt(ground[i, 0], 3),
                fmt(ground[i, 1], 3),
                ("1" if trust[i] else "0") if math.isfinite(speeds[i]) else "",
                fmt(100.0 * scale_fracs[i], 3),
            ]
        )
    return rows


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so readers see the old or the new file, never a partial one."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def even_size(size: tuple[int, int]) -> tuple[int, int]:
    width, height = size
    if width < 2 or height < 2:
        raise ValueError(f"video size must be at least 2x2, got {width}x{height}")
    return width - width % 2, height - height % 2


def snapshot_name(number: int, violation: Violation) -> str:
    zone = re.sub(r"[^A-Za-z0-9_-]+", "-", violation.zone).strip("-") or "zone"
    return f"{number:04d}_track{violation.track_id}_{zone}_f{violation.start_frame}.jpg"


def processing_fps(timings_ms: Mapping[str, float]) -> float | None:
    total = timings_ms.get("total")
    return 1000.0 / total if total and total > 0 else None


# --------------------------------------------------------------------------------------------
# video


def choose_codec(preferred: str | None = None) -> str:
    """``preferred`` when this PyAV build has it, else libx264, else mpeg4."""
    for codec in (preferred, "libx264", "mpeg4"):
        if codec and codec in av.codecs_available:
            return codec
    raise RuntimeError("this PyAV build has neither libx264 nor mpeg4 encoders")


class VideoWriter:
    """Fragmented-MP4 encoder fed with BGR frames and their timestamps."""

    def __init__(
        self,
        path: Path,
        fps: float,
        size: tuple[int, int],
        *,
        codec: str | None = None,
        preset: str = "superfast",
        crf: int = 23,
    ) -> None:
        if not fps or fps <= 0:
            raise ValueError(f"video fps must be positive, got {fps}")
        self.path = path
        self.size = even_size(size)
        self.codec = choose_codec(codec)
        if codec and codec != self.codec:
            logger.warning("encoder %s is not available; writing %s with %s", codec, path.name, self.codec)
        self.frames = 0
        self._warned_resize = False
        self._last_pts = -1
        self._origin_s: float | None = None
        self._container = av.open(str(path), mode="w", options=FRAGMENTED_MP4)
        options = {"preset": preset, "crf": str(crf)} if self.codec == "libx264" else {}
        stream = self._container.add_stream(
            self.codec, rate=Fraction(fps).limit_denominator(1001), options=options
        )
        stream.width, stream.height = self.size
        stream.pix_fmt = "yuv420p"
        stream.codec_context.time_base = PTS_TIME_BASE
        stream.codec_context.gop_size = max(int(round(KEYFRAME_INTERVAL_S * fps)), 1)
        if self.codec != "libx264":
            stream.codec_context.bit_rate = int(self.size[0] * self.size[1] * fps * 0.2)
        self._stream = stream
        logger.info("writing %s (%s, %dx%d, %.3f fps)", path, self.codec, *self.size, fps)

    def _pts(self, timestamp_s: float) -> int:
        if self._origin_s is None:
            self._origin_s = timestamp_s
        pts = int(round((timestamp_s - self._origin_s) / PTS_TIME_BASE))
        pts = max(pts, self._last_pts + 1)
        self._last_pts = pts
        return pts

    def _fit(self, image: np.ndarray) -> np.ndarray:
        """Crop an odd last row/column; resize frames of another size (warned once)."""
        width, height = self.size
        if even_size((image.shape[1], image.shape[0])) == self.size:
            return image[:height, :width]
        if not self._warned_resize:
            self._warned_resize = True
            logger.warning(
                "%s: frames are %dx%d, the video is %dx%d; resizing",
                self.path.name,
                image.shape[1],
                image.shape[0],
                width,
                height,
            )
        return cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA)

    def write(self, image: np.ndarray, timestamp_s: float) -> None:
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(self._fit(image)), format="bgr24")
        frame.pts, frame.time_base = self._pts(timestamp_s), PTS_TIME_BASE
        self._container.mux(self._stream.encode(frame))
        self.frames += 1

    def close(self) -> None:
        if self._container is None:
            return
        try:
            self._container.mux(self._stream.encode())
        finally:
            self._container.close()
            self._container = None


# --------------------------------------------------------------------------------------------
# the writer


class OutputWriter:
    """Writes every output of a run; see the module docstring for the files."""

    def __init__(
        self,
        out_dir: str | Path,
        fps: float,
        size: tuple[int, int],
        *,
        write_video: bool = True,
        speed_limit_kmh: float | None = None,
        draw_mask: bool = True,
        codec: str | None = None,
        preset: str = "superfast",
        jpeg_quality: int = 90,
        snapshot_margin_px: int = 24,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.snapshot_dir = self.out_dir / SNAPSHOT_DIR
        self.snapshot_dir.mkdir(parents=True, exist_ok=True)
        self.fps, self.size = fps, size
        self.speed_limit_kmh = speed_limit_kmh
        self.draw_mask = draw_mask
        self.jpeg_quality = jpeg_quality
        self.snapshot_margin_px = snapshot_margin_px
        self.paths: dict[str, Path] = {
            "tracks": self.out_dir / TRACKS_NAME,
            "speeds": self.out_dir / SPEEDS_NAME,
            "violations": self.out_dir / VIOLATIONS_NAME,
            "summary": self.out_dir / SUMMARY_NAME,
            "snapshots": self.snapshot_dir,
        }
        self._video: VideoWriter | None = None
        if write_video:
            self.paths["video"] = self.out_dir / VIDEO_NAME
            self._video = VideoWriter(self.paths["video"], fps, size, codec=codec, preset=preset)
        self._tracks: TextIO = open(self.paths["tracks"], "w", encoding="utf-8", newline="")  # noqa: SIM115
        self._speeds_file: TextIO = open(self.paths["speeds"], "w", encoding="utf-8", newline="")  # noqa: SIM115
        self._speeds = csv.writer(self._speeds_file)
        self._speeds.writerow(SPEED_COLUMNS)
        self._speeds_file.flush()
        self._violations: list[dict] = []
        self._write_violations()
        self._track_ids: set[int] = set()
        self._counts = {"frames": 0, "track_rows": 0, "speed_rows": 0, "violations": 0}
        self._frame_range: list[int | None] = [None, None]
        self._last_result: FrameResult | None = None
        self._closed_paths: dict[str, str] | None = None

    # ---------------------------------------------------------------- per frame

    def write(self, result: FrameResult, annotated: np.ndarray | None = None) -> None:
        """Append one frame's outputs; ``annotated`` reuses an image already drawn by the caller."""
        if self._closed_paths is not None:
            raise RuntimeError("OutputWriter.write() after close()")
        lines = mot_lines(result)
        rows = speed_rows(result)
        self._tracks.writelines(lines)
        self._speeds.writerows(rows)
        self._tracks.flush()
        self._speeds_file.flush()
        if result.detections.tracker_id is not None:
            self._track_ids.update(int(t) for t in result.detections.tracker_id)
        self._count(result.frame.number, len(lines), len(rows))
        if result.violations:
            self.add_violations(result.violations, result)
        if self._video is not None:
            image = annotated
            if image is None:
                image = annotate(
                    result,
                    draw_mask=self.draw_mask,
                    speed_limit_kmh=self.speed_limit_kmh,
                    fps=processing_fps(result.timings_ms),
                )
            self._video.write(image, result.frame.timestamp_s)
        self._last_result = result

    def _count(self, index: int, n_lines: int, n_rows: int) -> None:
        self._counts["frames"] += 1
        self._counts["track_rows"] += n_lines
        self._counts["speed_rows"] += n_rows
        first, _ = self._frame_range
        self._frame_range = [index if first is None else first, index]

    def add_violations(self, violations: Iterable[Violation], result: FrameResult | None = None) -> None:
        """Record violations (e.g. those ``Pipeline.finish()`` returns) with their snapshots.

        ``result``: the frame to crop a snapshot from when a violation carries none
        (default: the last frame written).
        """
        violations = list(violations)
        if not violations:
            return
        source = result if result is not None else self._last_result
        for violation in violations:
            record = violation.to_dict()
            record["snapshot"] = self._save_snapshot(violation, source)
            self._violations.append(record)
        self._counts["violations"] = len(self._violations)
        self._write_violations()

    def _save_snapshot(self, violation: Violation, result: FrameResult | None) -> str | None:
        image = violation.snapshot
        if image is None and result is not None:
            image = crop_with_margin(
                result.frame.image, self._box_of(violation, result), self.snapshot_margin_px
            )
        if image is None or image.size == 0:
            logger.warning("no snapshot for the violation of track %d", violation.track_id)
            return None
        name = snapshot_name(len(self._violations) + 1, violation)
        ok = cv2.imwrite(str(self.snapshot_dir / name), image, [cv2.IMWRITE_JPEG_QUALITY, self.jpeg_quality])
        if not ok:
            logger.warning("could not write snapshot %s", self.snapshot_dir / name)
            return None
        return f"{SNAPSHOT_DIR}/{name}"

    @staticmethod
    def _box_of(violation: Violation, result: FrameResult) -> tuple[float, ...]:
        """The track's box in ``result`` when it is there, else the violation's peak box."""
        det = result.detections
        if det.tracker_id is not None:
            hits = np.flatnonzero(det.tracker_id == violation.track_id)
            if len(hits):
                return tuple(det.xyxy[hits[0]])
        return violation.bbox_xyxy

    def restamp(self, violations: Sequence[Violation]) -> None:
        """The violations written so far, in the order they were added, as they stand now (a
        ticket held for review since): their records rewritten, their snapshots kept."""
        if len(violations) != len(self._violations):
            logger.warning(
                "restamp: %d violations for %d records; left as written",
                len(violations),
                len(self._violations),
            )
            return
        for record, v in zip(self._violations, violations, strict=True):
            record.update(v.to_dict())
        self._write_violations()

    def _write_violations(self) -> None:
        atomic_write_text(self.paths["violations"], json.dumps(self._violations, indent=2) + "\n")

    # ---------------------------------------------------------------- end

    def close(self, summary: Mapping[str, Any] | None = None) -> dict[str, str]:
        """Finish the video, write ``summary.json``; returns ``{kind: path}`` (idempotent)."""
        if self._closed_paths is not None:
            return self._closed_paths
        try:
            if self._video is not None:
                self._video.close()
        finally:
            self._tracks.close()
            self._speeds_file.close()
        paths = {kind: str(path) for kind, path in self.paths.items()}
        record = dict(summary or {})
        record["counts"] = self.counts()
        record["files"] = {kind: os.path.relpath(path, self.out_dir) for kind, path in self.paths.items()}
        atomic_write_text(self.paths["summary"], json.dumps(to_jsonable(record), indent=2) + "\n")
        self._closed_paths = paths
        logger.info("outputs written to %s (%d frames)", self.out_dir, self._counts["frames"])
        return paths

    def counts(self) -> dict[str, Any]:
        first, last = self._frame_range
        return {
            **self._counts,
            "unique_tracks": len(self._track_ids),
            "first_frame": first,
            "last_frame": last,
            "video_frames": self._video.frames if self._video is not None else 0,
            "video_codec": self._video.codec if self._video is not None else None,
        }

    def __enter__(self) -> OutputWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._closed_paths is None:
            self.close({"status": "failed", "error": str(exc)} if exc is not None else {"status": "ok"})
