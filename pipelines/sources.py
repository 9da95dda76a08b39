"""Frame sources: video files (PyAV) and image-sequence folders (MOTChallenge, UAVDT, VisDrone-MOT).

``open_source(path)`` returns a :class:`FrameSource`: an iterable of :class:`~pipelines.types.Frame`
with ``name``, ``fps`` (nominal), ``size`` (width, height), ``frame_count`` (None when unknown) and
``close()`` / context-manager support. Every ``__iter__`` starts a fresh pass over the source.

Timestamps
----------
Video: ``timestamp_s = (pts - pts_of_first_frame) * stream.time_base``, so variable-frame-rate
video keeps its real timing. Frames without a pts (raw ``.h264`` streams) continue from the last
known timestamp at the nominal rate (logged once). Timestamps are forced strictly increasing
(a duplicate or backwards pts is moved one nominal frame period after the previous frame and
counted). ``start_frame`` does not rebase the clock: frame ``k`` keeps the timestamp it has in a
full run, so telemetry and ground truth stay aligned. Folders: ``timestamp_s = index / fps``.

Damaged video
-------------
* cannot be opened, or has no video stream: :class:`SourceError` from ``open_source``;
* a packet the decoder rejects: skipped, counted in ``stats.decode_errors``, warned once and
  summed at the end; more than ``MAX_CONSECUTIVE_DECODE_ERRORS`` in a row -> ``SourceError``.
  ``Frame.index`` counts decoded frames, so after a skipped packet it lags the file's frame
  number by the frames lost; ``timestamp_s`` (from pts) stays right;
* frames the decoder concealed (``is_corrupt``) are yielded and counted in ``stats.corrupt_frames``;
* the demuxer fails mid-file, or the video ends clearly before its declared duration (a truncated
  file): ``SourceError`` raised *after* every good frame has been yielded, so a consumer keeps what
  it processed (close your sinks in a ``finally``).
"""

from __future__ import annotations

import configparser
import dataclasses
import logging
import math
import re
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from types import TracebackType

import av
import cv2
import numpy as np
from av.error import FFmpegError

from pipelines.errors import SourceError
from pipelines.types import Frame

logger = logging.getLogger(__name__)

DEFAULT_FPS = 30.0
MAX_PLAUSIBLE_FPS = 240.0
MAX_CONSECUTIVE_DECODE_ERRORS = 25
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
# A video that stops this much before its declared duration is reported as truncated.
TRUNCATION_MIN_S = 0.5
TRUNCATION_FRACTION = 0.02


@dataclass(frozen=True, slots=True)
class SourceStats:
    """What happened during the last pass over a source."""

    frames: int = 0  # frames yielded
    decode_errors: int = 0  # packets skipped because the decoder rejected them
    corrupt_frames: int = 0  # frames the decoder concealed (yielded anyway)
    missing_pts: int = 0  # frames timed from the nominal rate
    nonmonotonic_pts: int = 0  # frames whose pts did not increase


class FrameSource(ABC):
    """Iterable of :class:`Frame`; also a context manager."""

    name: str
    fps: float
    size: tuple[int, int]  # (width, height)
    frame_count: int | None

    def __init__(self) -> None:
        self._stats = SourceStats()

    @abstractmethod
    def __iter__(self) -> Iterator[Frame]: ...

    @property
    def stats(self) -> SourceStats:
        return self._stats

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the underlying resources (idempotent)."""

    def __enter__(self) -> FrameSource:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, fps={self.fps:.3f}, size={self.size}, "
            f"frame_count={self.frame_count})"
        )


# --------------------------------------------------------------------------------------------
# small pure helpers


def remaining_count(total: int | None, start_frame: int, max_frames: int | None) -> int | None:
    """Frames a pass yields given the source length, the first index and the cap."""
    if total is None:
        return max_frames
    left = max(total - start_frame, 0)
    return left if max_frames is None else min(left, max_frames)


def plausible_fps(*candidates: Fraction | float | None) -> float | None:
    """First candidate rate in (0, MAX_PLAUSIBLE_FPS]; AVI/VFR files often report 1000 or 90000."""
    for rate in candidates:
        if rate is not None and 0 < float(rate) <= MAX_PLAUSIBLE_FPS:
            return float(rate)
    return None


def natural_key(name: str) -> tuple:
    """Sort key that orders ``img2`` before ``img10``."""
    return tuple(int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name))


def truncation_shortfall_s(last_timestamp_s: float, expected_duration_s: float | None, fps: float) -> float:
    """Seconds missing at the end of a video (0 when its declared duration is unknown)."""
    if expected_duration_s is None or not math.isfinite(expected_duration_s):
        return 0.0
    return max(expected_duration_s - (last_timestamp_s + 1.0 / fps), 0.0)


def is_truncated(shortfall_s: float, expected_duration_s: float | None) -> bool:
    if not expected_duration_s:
        return False
    return shortfall_s > max(TRUNCATION_MIN_S, TRUNCATION_FRACTION * expected_duration_s)


def _validate_range(start_frame: int, max_frames: int | None) -> None:
    if start_frame < 0:
        raise SourceError(f"start_frame must be >= 0, got {start_frame}")
    if max_frames is not None and max_frames < 0:
        raise SourceError(f"max_frames must be >= 0, got {max_frames}")


# --------------------------------------------------------------------------------------------
# video files


def _open_container(path: str) -> av.container.InputContainer:
    try:
        return av.open(path, mode="r")
    except FileNotFoundError as exc:
        raise SourceError(f"video not found: {path}") from exc
    except (FFmpegError, OSError, ValueError) as exc:
        raise SourceError(
            f"cannot open {path} as a video (not a video, or damaged/truncated): {exc}"
        ) from exc


class _Clock:
    """Turns successive frame pts into timestamps relative to the first frame (one per pass)."""

    def __init__(self, time_base: Fraction | None, fps: float) -> None:
        self.time_base = time_base
        self.period = 1.0 / fps
        self.origin: int | None = None
        self.last: float | None = None
        self.missing = 0
        self.nonmonotonic = 0

    def timestamp(self, pts: int | None) -> float:
        if pts is None or self.time_base is None:
            self.missing += 1
            ts = 0.0 if self.last is None else self.last + self.period
        else:
            if self.origin is None:
                self.origin = pts
            ts = float((pts - self.origin) * self.time_base)
            if self.last is not None and ts <= self.last:
                self.nonmonotonic += 1
                ts = self.last + self.period
        self.last = ts
        return ts


class VideoFileSource(FrameSource):
    """Video decoded with PyAV (multi-threaded), BGR uint8 frames timed by their pts."""

    def __init__(
        self,
        path: str | Path,
        max_frames: int | None = None,
        start_frame: int = 0,
        fps: float | None = None,
    ) -> None:
        super().__init__()
        _validate_range(start_frame, max_frames)
        self.path = str(path)
        self.start_frame = start_frame
        self.max_frames = max_frames
        self._container: av.container.InputContainer | None = None
        container = _open_container(self.path)
        try:
            if not container.streams.video:
                raise SourceError(f"{self.path} has no video stream")
            stream = container.streams.video[0]
            width, height = int(stream.width or 0), int(stream.height or 0)
            if width <= 0 or height <= 0:
                raise SourceError(f"{self.path}: the video stream has no frame size (damaged header?)")
            self.size = (width, height)
            self.fps = self._nominal_fps(stream, fps)
            self.name = Path(self.path).stem or self.path
            self._time_base: Fraction | None = stream.time_base
            self._expected_duration_s = self._declared_duration_s(container, stream)
            declared = int(stream.frames) if stream.frames and stream.frames > 0 else None
            self.frame_count = remaining_count(declared, start_frame, max_frames)
            self.codec = stream.codec_context.name
        finally:
            container.close()

    def _nominal_fps(self, stream: av.video.stream.VideoStream, override: float | None) -> float:
        if override is not None:
            if override <= 0:
                raise SourceError(f"fps must be positive, got {override}")
            return float(override)
        rate = plausible_fps(stream.average_rate, stream.guessed_rate, stream.base_rate)
        if rate is None:
            logger.warning("%s declares no usable frame rate; assuming %.0f fps", self.path, DEFAULT_FPS)
            return DEFAULT_FPS
        return rate

    @staticmethod
    def _declared_duration_s(
        container: av.container.InputContainer, stream: av.video.stream.VideoStream
    ) -> float | None:
        """Video duration the file declares (stream first; container only when it holds one stream)."""
        if stream.duration and stream.time_base is not None:
            return float(stream.duration * stream.time_base)
        if container.duration and len(container.streams) == 1:
            return container.duration / av.time_base
        return None

    def __iter__(self) -> Iterator[Frame]:
        self.close()
        container = _open_container(self.path)
        self._container = container
        try:
            yield from self._frames(container)
        finally:
            container.close()
            if self._container is container:
                self._container = None

    def _decoded(self, container: av.container.InputContainer) -> Iterator[av.VideoFrame]:
        """Decoded frames in presentation order; bad packets are skipped and counted."""
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        consecutive = 0
        try:
            for packet in container.demux(stream):
                try:
                    frames = packet.decode()
                except FFmpegError as exc:
                    consecutive += 1
                    self._count_decode_error(exc, consecutive)
                    continue
                consecutive = 0
                yield from frames
        except (FFmpegError, OSError) as exc:
            raise SourceError(
                f"{self.path}: reading failed after {self._stats.frames} frames ({exc}); "
                "the file is damaged or truncated"
            ) from exc

    def _count_decode_error(self, exc: FFmpegError, consecutive: int) -> None:
        errors = self._stats.decode_errors + 1
        self._stats = dataclasses.replace(self._stats, decode_errors=errors)
        if errors == 1:
            logger.warning("%s: skipping an undecodable packet (%s); later ones are counted", self.path, exc)
        if consecutive > MAX_CONSECUTIVE_DECODE_ERRORS:
            raise SourceError(
                f"{self.path}: {consecutive} packets in a row could not be decoded after "
                f"{self._stats.frames} good frames; the video is corrupt"
            ) from exc

    def _frames(self, container: av.container.InputContainer) -> Iterator[Frame]:
        self._stats = SourceStats()
        clock = _Clock(self._time_base, self.fps)
        corrupt = 0
        warned_missing = False
        stop = None if self.max_frames is None else self.start_frame + self.max_frames
        index = -1
        for index, vframe in enumerate(self._decoded(container)):  # noqa: B007 - used after the loop
            timestamp = clock.timestamp(vframe.pts)
            if stop is not None and index >= stop:
                break
            if index < self.start_frame:
                continue
            corrupt += bool(vframe.is_corrupt)
            image = vframe.to_ndarray(format="bgr24")
            self._stats = dataclasses.replace(
                self._stats,
                frames=self._stats.frames + 1,
                corrupt_frames=corrupt,
                missing_pts=clock.missing,
                nonmonotonic_pts=clock.nonmonotonic,
            )
            if clock.missing and not warned_missing:
                warned_missing = True
                logger.warning(
                    "%s: frames carry no pts; timing them at the nominal %.3f fps", self.path, self.fps
                )
            yield Frame(index=index, timestamp_s=timestamp, image=image)
        self._report_end(clock, index, stop)

    def _report_end(self, clock: _Clock, last_index: int, stop: int | None) -> None:
        stats = self._stats
        if stats.decode_errors or stats.corrupt_frames or stats.nonmonotonic_pts:
            logger.warning(
                "%s: %d undecodable packets skipped, %d concealed (corrupt) frames, %d non-increasing pts",
                self.path,
                stats.decode_errors,
                stats.corrupt_frames,
                stats.nonmonotonic_pts,
            )
        if stop is not None and last_index + 1 >= stop:
            return  # stopped by max_frames, not by the end of the file
        if clock.last is None:
            raise SourceError(f"{self.path}: no frame could be decoded")
        shortfall = truncation_shortfall_s(clock.last, self._expected_duration_s, self.fps)
        if is_truncated(shortfall, self._expected_duration_s):
            raise SourceError(
                f"{self.path}: the video ended at {clock.last:.2f} s (frame {last_index}) but declares "
                f"{self._expected_duration_s:.2f} s; the file is truncated or damaged "
                f"(the {stats.frames} frames before were delivered)"
            )
        if shortfall > 2.0 / self.fps:
            logger.warning(
                "%s: ended %.2f s before its declared duration (%d frames read)",
                self.path,
                shortfall,
                last_index + 1,
            )

    def close(self) -> None:
        if self._container is not None:
            self._container.close()
            self._container = None


# --------------------------------------------------------------------------------------------
# image-sequence folders


@dataclass(frozen=True, slots=True)
class SequenceLayout:
    """Where a frame folder's images are and what its metadata says."""

    name: str
    image_dir: Path
    fps: float | None  # from seqinfo.ini
    extension: str | None  # from seqinfo.ini (imExt), e.g. ".jpg"
    declared_length: int | None  # from seqinfo.ini (seqLength)


def read_seqinfo(path: Path) -> dict[str, str]:
    """The ``[Sequence]`` section of a MOTChallenge ``seqinfo.ini`` (keys lower-cased)."""
    parser = configparser.ConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise SourceError(f"cannot parse {path}: {exc}") from exc
    if not parser.has_section("Sequence"):
        raise SourceError(f"{path} has no [Sequence] section")
    return dict(parser.items("Sequence"))


def _optional_number(info: dict[str, str], key: str, kind: type, where: Path) -> float | int | None:
    if key not in info or not info[key].strip():
        return None
    try:
        value = kind(float(info[key]))
    except ValueError as exc:
        raise SourceError(f"{where}: {key}={info[key]!r} is not a number") from exc
    if value <= 0:
        raise SourceError(f"{where}: {key} must be positive, got {info[key]!r}")
    return value


def resolve_layout(folder: Path) -> SequenceLayout:
    """Find the image folder and seqinfo.ini for a MOT sequence dir, its img1 dir, or a plain folder."""
    given_img_dir = folder.name == "img1" and (folder.parent / "seqinfo.ini").is_file()
    seq_dir = folder.parent if given_img_dir else folder
    info_path = seq_dir / "seqinfo.ini"
    info = read_seqinfo(info_path) if info_path.is_file() else {}
    sub_dir = seq_dir / (info.get("imdir", "").strip() or "img1")
    image_dir = sub_dir if not given_img_dir and sub_dir.is_dir() else folder
    extension = info.get("imext", "").strip() or None
    if extension and not extension.startswith("."):
        extension = "." + extension
    return SequenceLayout(
        name=info.get("name", "").strip() or seq_dir.name,
        image_dir=image_dir,
        fps=_optional_number(info, "framerate", float, info_path),
        extension=extension.lower() if extension else None,
        declared_length=_optional_number(info, "seqlength", int, info_path),
    )


def list_images(image_dir: Path, extension: str | None = None) -> list[Path]:
    """Image files of a folder in natural order (only ``extension`` when given)."""
    allowed = (extension,) if extension else IMAGE_EXTENSIONS
    files = [p for p in image_dir.iterdir() if p.is_file() and p.suffix.lower() in allowed]
    return sorted(files, key=lambda p: natural_key(p.name))


def _no_images_message(folder: Path, image_dir: Path) -> str:
    subdirs = sorted(
        (p for p in image_dir.iterdir() if p.is_dir() and list_images(p)),
        key=lambda p: natural_key(p.name),
    )
    if subdirs:
        names = ", ".join(p.name for p in subdirs[:5]) + (" ..." if len(subdirs) > 5 else "")
        return (
            f"{folder} holds {len(subdirs)} image sequences ({names}); pass one sequence folder, "
            f"e.g. {subdirs[0]}"
        )
    return f"no images ({', '.join(IMAGE_EXTENSIONS)}) in {image_dir}"


def read_image(path: Path) -> np.ndarray:
    """BGR uint8 image; ``SourceError`` when the file cannot be decoded."""
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise SourceError(f"cannot decode image {path} (damaged or not an image)")
    return image


class ImageSequenceSource(FrameSource):
    """Numbered frames in a folder; ``timestamp_s = index / fps``. Images are read one step ahead."""

    def __init__(
        self,
        folder: str | Path,
        max_frames: int | None = None,
        start_frame: int = 0,
        fps: float | None = None,
        prefetch: int = 2,
    ) -> None:
        super().__init__()
        _validate_range(start_frame, max_frames)
        folder = Path(folder)
        layout = resolve_layout(folder)
        self.layout = layout
        self.name = layout.name
        self.files = list_images(layout.image_dir, layout.extension)
        if not self.files:
            raise SourceError(_no_images_message(folder, layout.image_dir))
        if layout.declared_length is not None and layout.declared_length != len(self.files):
            logger.warning(
                "%s: seqinfo.ini declares %d frames, the folder has %d",
                folder,
                layout.declared_length,
                len(self.files),
            )
        self.fps = self._choose_fps(layout.fps, fps, folder)
        first = read_image(self.files[0])
        self.size = (int(first.shape[1]), int(first.shape[0]))
        self.start_frame = start_frame
        self.max_frames = max_frames
        self.frame_count = remaining_count(len(self.files), start_frame, max_frames)
        self.prefetch = max(int(prefetch), 0)

    @staticmethod
    def _choose_fps(from_seqinfo: float | None, given: float | None, folder: Path) -> float:
        if given is not None and given <= 0:
            raise SourceError(f"fps must be positive, got {given}")
        if from_seqinfo is not None:
            if given is not None and not math.isclose(given, from_seqinfo):
                logger.warning(
                    "%s: seqinfo.ini says %.3f fps; using it, not %.3f", folder, from_seqinfo, given
                )
            return from_seqinfo
        if given is None:
            logger.info("%s: no seqinfo.ini frame rate; assuming %.0f fps", folder, DEFAULT_FPS)
            return DEFAULT_FPS
        return float(given)

    def _selected(self) -> list[tuple[int, Path]]:
        stop = None if self.max_frames is None else self.start_frame + self.max_frames
        return list(enumerate(self.files))[self.start_frame : stop]

    def __iter__(self) -> Iterator[Frame]:
        self._stats = SourceStats()
        selected = self._selected()
        if self.prefetch == 0:
            for index, path in selected:
                yield self._frame(index, read_image(path))
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="frame-read") as pool:
            pending: deque[tuple[int, Future[np.ndarray]]] = deque()
            for index, path in selected:
                pending.append((index, pool.submit(read_image, path)))
                if len(pending) > self.prefetch:
                    yield self._frame(*self._take(pending))
            while pending:
                yield self._frame(*self._take(pending))

    @staticmethod
    def _take(pending: deque[tuple[int, Future[np.ndarray]]]) -> tuple[int, np.ndarray]:
        index, future = pending.popleft()
        return index, future.result()

    def _frame(self, index: int, image: np.ndarray) -> Frame:
        if (image.shape[1], image.shape[0]) != self.size:
            raise SourceError(
                f"{self.files[index]} is {image.shape[1]}x{image.shape[0]}, the sequence is "
                f"{self.size[0]}x{self.size[1]}"
            )
        self._stats = dataclasses.replace(self._stats, frames=self._stats.frames + 1)
        return Frame(index=index, timestamp_s=index / self.fps, image=image)


# --------------------------------------------------------------------------------------------
# public entry points


def is_stream_url(path: str | Path) -> bool:
    return isinstance(path, str) and "://" in path


def open_source(
    path: str | Path,
    max_frames: int | None = None,
    start_frame: int = 0,
    *,
    fps: float | None = None,
) -> FrameSource:
    """Open a video file, a stream URL (``rtsp://``...) or a frame folder.

    ``fps``: frame rate of a folder without ``seqinfo.ini`` (default 30, logged); for video it
    overrides the nominal rate, which only times frames that carry no pts.
    """
    if is_stream_url(path):
        return VideoFileSource(str(path), max_frames, start_frame, fps)
    path = Path(path).expanduser()
    if not path.exists():
        raise SourceError(f"source not found: {path}")
    if path.is_dir():
        return ImageSequenceSource(path, max_frames, start_frame, fps)
    if path.stat().st_size == 0:
        raise SourceError(f"{path} is empty (0 bytes)")
    return VideoFileSource(path, max_frames, start_frame, fps)
