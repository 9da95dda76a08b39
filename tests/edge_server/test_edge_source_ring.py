"""The received video kept for evidence (edge_server/source_ring.py): a pulled stream's packets as
they arrived, and a violation's segment remuxed from them without re-encoding."""

from __future__ import annotations

import hashlib
from pathlib import Path

import av
import pytest

from edge_client.synthetic import write_video
from edge_server.source_ring import SourceRing

FPS, GOP_S = 30, 1.0  # write_video: H.264, a keyframe every second


pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    return write_video(tmp_path_factory.mktemp("src") / "src.mp4", 8.0, FPS, 320, 180)


def _fill(video: Path, seconds: float) -> tuple[SourceRing, dict[int, str]]:
    """A ring fed as the pull reader feeds it; the input closed after; each packet's hash by pts."""
    ring = SourceRing(seconds)
    hashes = {}
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        ring.attach(stream)
        for packet in container.demux(stream):
            if packet.size:
                hashes[packet.pts] = hashlib.sha256(bytes(packet)).hexdigest()
            ring.add(packet)
    return ring, hashes


def _segment(path: Path) -> tuple[list, list[float], list]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        packets = [p for p in container.demux(stream) if p.size]
        times = [float(p.pts * stream.time_base) for p in packets]
    with av.open(str(path)) as container:
        frames = list(container.decode(video=0))
    return packets, times, frames


def test_a_segment_is_the_received_packets_unchanged(video: Path, tmp_path: Path) -> None:
    ring, hashes = _fill(video, 30.0)
    kept = ring.write(tmp_path / "seg.mp4", 3.4, 5.2)  # written after the input was closed
    assert kept is not None and kept["covers_start"] and kept["codec"] == "h264"
    assert kept["start_s"] == pytest.approx(3.0)  # the keyframe before 3.4 s: a decoder needs it
    assert kept["end_s"] == pytest.approx(5.2, abs=1 / FPS)
    packets, times, frames = _segment(tmp_path / "seg.mp4")
    assert packets[0].is_keyframe and len(frames) == len(packets) == kept["packets"]
    assert times[0] == pytest.approx(3.0) and times[-1] == pytest.approx(kept["end_s"])  # times kept
    # byte for byte the packets that arrived (no re-encoding)
    with av.open(str(video)) as src:
        base = src.streams.video[0].time_base
    assert all(
        hashlib.sha256(bytes(p)).hexdigest() == hashes[round(t / base)]
        for p, t in zip(packets, times, strict=True)
    )
    assert (frames[0].width, frames[0].height) == (320, 180)


@pytest.mark.parametrize(("seconds", "start", "covers"), [(3.0, 1.5, False), (3.0, 6.0, True)])
def test_the_ring_keeps_its_seconds_from_a_keyframe(
    video: Path, tmp_path: Path, seconds: float, start: float, covers: bool
) -> None:
    ring, _ = _fill(video, seconds)
    first, last = ring.span_s
    assert last - seconds - GOP_S <= first <= last - seconds + 1e-6  # from the keyframe before the cut
    kept = ring.write(tmp_path / "seg.mp4", start, last)
    assert kept["covers_start"] is covers
    assert kept["start_s"] == pytest.approx(first if not covers else 6.0)
    assert ring.bytes == sum(len(p.data) for p in ring._packets)


def test_nothing_kept_nothing_written(tmp_path: Path) -> None:
    ring = SourceRing(10.0)
    assert ring.write(tmp_path / "seg.mp4", 0.0, 5.0) is None  # never attached
    assert not (tmp_path / "seg.mp4").exists()
