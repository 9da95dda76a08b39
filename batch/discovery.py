"""Which flights a batch runs: :func:`discover_flights` turns video files, frame folders, folders
of flights, globs and list files into :class:`Flight` items (a video's telemetry: the .SRT beside it)."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from batch.commit import is_batch_output
from batch.errors import BatchError

VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".avi", ".m4v", ".ts", ".mts", ".webm")
LIST_SUFFIXES = (".txt", ".list", ".lst")
TELEMETRY_SUFFIXES = (".SRT", ".srt", ".Srt")


@dataclass(frozen=True)
class Flight:
    """One recorded flight: a video file or frame folder, and its telemetry if any."""

    name: str  # unique in the batch; '/'-separated, becomes the output folder under the batch's
    video: Path
    srt: Path | None = None

    @property
    def inputs(self) -> tuple[Path, ...]:
        return (self.video,) if self.srt is None else (self.video, self.srt)


def sidecar_telemetry(video: Path) -> Path | None:
    """The DJI .SRT beside a video (same name), or inside a frame folder as ``<folder>.SRT``."""
    for suffix in TELEMETRY_SUFFIXES:
        candidate = video.with_suffix(suffix) if video.is_file() else video / f"{video.name}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def is_sequence_folder(path: Path) -> bool:
    """A folder that is one flight as frames (MOT/UAVDT/VisDrone layout: images in it or in its
    img1/), not a folder of flights."""
    from pipelines.sources import list_images, resolve_layout

    try:
        layout = resolve_layout(path)
        return bool(list_images(layout.image_dir, layout.extension))
    except (OSError, ValueError):
        return False


def safe_name_part(text: str) -> str:
    """One path component of an output name: letters, digits, '._-'; never hidden, never empty."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text).lstrip(".") or "_"


def _flight_name(relative: Path) -> str:
    parts = [p for p in relative.with_suffix("").parts if p not in ("", ".")]
    return "/".join(safe_name_part(p) for p in parts) or "flight"


def _flights_in(folder: Path) -> list[Flight]:
    """Every video file and frame folder under ``folder``, named by its path relative to ``folder``.
    Searched recursively, except inside a frame folder, a folder that holds videos (a flight's own
    folder: its subfolders are its masks, ground truth, ...) and a batch's outputs (an earlier run's
    annotated videos are not flights)."""
    found: list[Flight] = []
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        dirs.sort()
        if is_batch_output(here):
            dirs[:] = []
            continue
        if any(f.lower().endswith(VIDEO_SUFFIXES) and not f.startswith(".") for f in files):
            dirs[:] = []
        keep = []
        for d in dirs:
            if d.startswith("."):
                continue
            if is_sequence_folder(here / d):
                video = here / d
                found.append(Flight(_flight_name(video.relative_to(folder)), video, sidecar_telemetry(video)))
            else:
                keep.append(d)
        dirs[:] = keep
        for f in sorted(files):
            video = here / f
            if video.suffix.lower() in VIDEO_SUFFIXES and not f.startswith("."):
                name = _flight_name(video.relative_to(folder))
                found.append(Flight(name, video, sidecar_telemetry(video)))
    return found


def _flights_in_list(list_file: Path) -> list[Flight]:
    """A list file: one flight per line, ``VIDEO [TELEMETRY]`` (relative to the list file's
    folder); blank lines and ``#`` comments skipped. No telemetry given: the sidecar, if any."""
    base = list_file.parent
    flights = []
    for number, line in enumerate(list_file.read_text(encoding="utf-8").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        fields = text.split()
        if len(fields) > 2:
            raise BatchError(f"{list_file}:{number}: expected 'VIDEO [TELEMETRY]', got {line.strip()!r}")
        video = (base / fields[0]).resolve()
        if not video.exists():
            raise BatchError(f"{list_file}:{number}: {fields[0]} not found")
        srt = (base / fields[1]).resolve() if len(fields) == 2 else sidecar_telemetry(video)
        if srt is not None and not srt.is_file():
            raise BatchError(f"{list_file}:{number}: telemetry {fields[1]} not found")
        named = Path(fields[0]) if not Path(fields[0]).is_absolute() else Path(video.name)
        flights.append(Flight(_flight_name(named), video, srt))
    return flights


def discover_flights(inputs: Iterable[str | Path], exclude: Path | None = None) -> list[Flight]:
    """The flights named by ``inputs``: video files, frame folders, folders of flights (searched
    recursively), glob patterns (quote them) and list files (``.txt``: one ``VIDEO [TELEMETRY]``
    per line). A video's telemetry is the .SRT of the same name beside it unless a list names one.
    Nothing under ``exclude`` (the batch's output folder) or under an earlier batch's outputs."""
    flights: list[Flight] = []
    for given in inputs:
        text = str(given)
        paths = (
            [Path(p) for p in sorted(glob.glob(os.path.expanduser(text), recursive=True))]
            if glob.has_magic(text)
            else [Path(text).expanduser()]
        )
        if not paths:
            raise BatchError(f"{text}: the pattern matches nothing")
        for path in paths:
            if not path.exists():
                raise BatchError(f"{path}: not found")
            if path.is_file() and path.suffix.lower() in LIST_SUFFIXES:
                flights += _flights_in_list(path)
            elif path.is_file() or is_sequence_folder(path):
                flights.append(Flight(_flight_name(Path(path.name)), path, sidecar_telemetry(path)))
            else:
                inside = _flights_in(path)
                if not inside:
                    raise BatchError(
                        f"{path}: no videos ({', '.join(VIDEO_SUFFIXES)}) or frame folders in it"
                    )
                flights += inside
    outside = exclude.resolve() if exclude is not None else None
    seen: dict[str, Flight] = {}
    videos: set[Path] = set()
    unique = []
    for f in flights:
        where = f.video.resolve()
        if (outside is not None and where.is_relative_to(outside)) or any(
            is_batch_output(parent) for parent in where.parents
        ):
            continue  # an output of this batch or an earlier one (a glob over everything)
        if where in videos:
            continue  # named twice (a folder and a glob): one flight, under its first name
        other = seen.get(f.name)
        if other is not None:
            raise BatchError(
                f"two flights would write to {f.name!r}: {other.video} and {f.video} (rename one)"
            )
        seen[f.name] = f
        videos.add(where)
        unique.append(f)
    if not unique:
        raise BatchError("no flights given")
    return unique
