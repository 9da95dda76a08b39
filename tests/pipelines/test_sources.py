"""Frame sources: pts timing on real (VFR) videos, frame-folder layouts, damaged inputs, telemetry."""

from __future__ import annotations

import logging
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from pipelines.errors import SourceError
from pipelines.sources import ImageSequenceSource, VideoFileSource, natural_key, open_source
from pipelines.telemetry import attach_telemetry
from pipelines.types import Frame, Telemetry

VFR_PTS_MS = [0, 33, 67, 100, 300, 333, 367, 900, 933, 1000]  # gaps at 100->300 and 367->900 ms


def make_video(
    path: Path,
    pts_ms: list[int],
    *,
    codec: str = "libx264",
    size: tuple[int, int] = (64, 48),
    options: dict[str, str] | None = None,
    noise: bool = False,
) -> Path:
    """Encode frames whose grey level encodes their position (20 * i) at the given pts (ms)."""
    if codec not in av.codecs_available:
        pytest.skip(f"encoder {codec} not in this PyAV build")
    rng = np.random.default_rng(0)
    with av.open(str(path), "w", options=options or {}) as out:
        stream = out.add_stream(codec, rate=30)
        stream.width, stream.height = size
        stream.pix_fmt = "yuvj420p" if codec == "mjpeg" else "yuv420p"
        stream.codec_context.time_base = Fraction(1, 1000)
        stream.codec_context.gop_size = 10
        for i, pts in enumerate(pts_ms):
            image = np.full((size[1], size[0], 3), (20 * i) % 256, np.uint8)
            if noise:
                image = rng.integers(0, 256, image.shape, dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts, frame.time_base = pts, Fraction(1, 1000)
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    return path


def cfr_pts(n: int, fps: float = 30.0) -> list[int]:
    return [round(1000 * i / fps) for i in range(n)]


# ---------------------------------------------------------------------------------------- video


@pytest.mark.parametrize(
    ("suffix", "codec"),
    [(".mp4", "libx264"), (".mkv", "libx264"), (".mp4", "mpeg4"), (".avi", "mjpeg")],
)
def test_vfr_timestamps_come_from_pts(tmp_path: Path, suffix: str, codec: str) -> None:
    path = make_video(tmp_path / f"vfr{suffix}", VFR_PTS_MS, codec=codec)
    with open_source(path) as source:
        frames = list(source)
    assert isinstance(source, VideoFileSource)
    assert source.size == (64, 48)
    assert [f.index for f in frames] == list(range(len(VFR_PTS_MS)))
    stamps = np.array([f.timestamp_s for f in frames])
    np.testing.assert_allclose(stamps, np.array(VFR_PTS_MS) / 1000, atol=1e-3)
    by_index = np.arange(len(frames)) / source.fps
    assert np.max(np.abs(stamps - by_index)) > 0.05  # index/fps would be wrong here
    assert np.ptp(np.diff(stamps)) > 0.4  # the 533 ms gap survives
    grey = [int(f.image[..., 1].mean()) for f in frames]
    np.testing.assert_allclose(grey, 20 * np.arange(len(frames)), atol=6)  # order and content kept
    assert all(f.image.dtype == np.uint8 and f.image.shape == (48, 64, 3) for f in frames)


def test_timestamps_are_relative_to_the_first_frame(tmp_path: Path) -> None:
    path = make_video(tmp_path / "late.mkv", [500 + p for p in VFR_PTS_MS])
    stamps = [f.timestamp_s for f in open_source(path)]
    np.testing.assert_allclose(stamps, np.array(VFR_PTS_MS) / 1000, atol=1e-3)


def test_missing_pts_fall_back_to_nominal_rate_and_log_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = make_video(tmp_path / "raw.h264", VFR_PTS_MS)  # raw H.264: no container timestamps
    with caplog.at_level(logging.WARNING, logger="pipelines.sources"):
        source = open_source(path, fps=10)
        stamps = [f.timestamp_s for f in source]
    np.testing.assert_allclose(stamps, np.arange(len(VFR_PTS_MS)) / 10)
    assert source.stats.missing_pts == len(VFR_PTS_MS)
    assert sum("no pts" in r.message for r in caplog.records) == 1


@pytest.mark.parametrize(
    ("start", "max_frames", "indices"),
    [
        (0, None, list(range(10))),
        (3, None, list(range(3, 10))),
        (2, 4, [2, 3, 4, 5]),
        (0, 0, []),
        (8, 5, [8, 9]),
        (12, None, []),
    ],
)
def test_start_frame_and_max_frames_keep_absolute_index_and_time(
    tmp_path: Path, start: int, max_frames: int | None, indices: list[int]
) -> None:
    path = make_video(tmp_path / "vfr.mp4", VFR_PTS_MS)
    source = open_source(path, max_frames=max_frames, start_frame=start)
    frames = list(source)
    assert [f.index for f in frames] == indices
    assert source.frame_count == len(indices)
    np.testing.assert_allclose(
        [f.timestamp_s for f in frames], [VFR_PTS_MS[i] / 1000 for i in indices], atol=1e-3
    )


def test_source_can_be_iterated_twice_and_closed(tmp_path: Path) -> None:
    path = make_video(tmp_path / "cfr.mp4", cfr_pts(6))
    with open_source(path) as source:
        first = next(iter(source))
        assert first.index == 0
        again = [f.index for f in source]
    assert again == list(range(6))
    source.close()  # idempotent


@pytest.mark.shared
def test_uavdt_clip_frames_size_and_time(uavdt_clip: Path) -> None:
    source = open_source(uavdt_clip / "demo_M1303.mp4")
    assert (source.size, source.fps, source.frame_count) == ((1024, 540), 30.0, 445)
    count, last = 0, None
    for frame in source:
        assert frame.index == count
        assert frame.timestamp_s == pytest.approx(count / 30.0, abs=1e-6)
        count, last = count + 1, frame
    assert count == 445
    assert last is not None and last.image.shape == (540, 1024, 3) and last.image.dtype == np.uint8
    assert source.stats.frames == 445 and source.stats.decode_errors == 0


# -------------------------------------------------------------------------------- damaged video


def write_bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def truncated(path: Path, out: Path, keep: float = 0.5) -> Path:
    data = path.read_bytes()
    return write_bytes(out, data[: int(len(data) * keep)])


def make_noisy(tmp_path: Path, name: str, **kw) -> Path:
    return make_video(tmp_path / name, cfr_pts(90), size=(128, 96), noise=True, **kw)


BAD_INPUTS = {
    "missing": (lambda d: d / "nope.mp4", "not found"),
    "empty_file": (lambda d: write_bytes(d / "empty.mp4", b""), "empty"),
    "text_as_video": (lambda d: write_bytes(d / "notes.mp4", b"hello, not a video\n" * 10), "cannot open"),
    "random_bytes": (
        lambda d: write_bytes(d / "noise.mkv", np.random.default_rng(1).bytes(20000)),
        "cannot open",
    ),
    # moov atom at the end (ffmpeg default): the index is gone, nothing can be opened
    "truncated_mp4": (lambda d: truncated(make_noisy(d, "full.mp4"), d / "cut.mp4"), "cannot open"),
    # moov at the front: the good half is delivered, then the truncation is reported
    "truncated_faststart_mp4": (
        lambda d: truncated(make_noisy(d, "fs.mp4", options={"movflags": "faststart"}), d / "cut.mp4"),
        "truncated",
    ),
    "truncated_mkv": (lambda d: truncated(make_noisy(d, "full.mkv"), d / "cut.mkv"), "truncated"),
    "empty_folder": (lambda d: (d / "frames").mkdir() or d / "frames", "no images"),
    "folder_without_images": (
        lambda d: (d / "frames").mkdir() or write_bytes(d / "frames" / "readme.txt", b"x").parent,
        "no images",
    ),
    "folder_of_sequences": (
        lambda d: make_folder(d / "sequences" / "uav1", "{:07d}.jpg", 2).parent,
        "pass one",
    ),
    "undecodable_image": (lambda d: bad_image_folder(d), "cannot decode"),
    "mixed_image_sizes": (lambda d: mixed_size_folder(d), "the sequence is"),
    "bad_seqinfo_rate": (lambda d: make_mot(d / "MOT", 2, "frameRate=fast\n"), "not a number"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_inputs_raise_source_error(tmp_path: Path, case: str) -> None:
    build, message = BAD_INPUTS[case]
    path = build(tmp_path)
    with pytest.raises(SourceError, match=message):
        list(open_source(path))


@pytest.mark.parametrize("suffix", [".mp4", ".mkv"])
def test_truncated_video_delivers_good_frames_before_the_error(tmp_path: Path, suffix: str) -> None:
    options = {"movflags": "faststart"} if suffix == ".mp4" else None
    path = truncated(make_noisy(tmp_path, f"full{suffix}", options=options), tmp_path / f"cut{suffix}")
    received: list[Frame] = []
    with pytest.raises(SourceError, match="truncated"):
        for frame in open_source(path):
            received.append(frame)
    assert 30 <= len(received) < 90
    assert [f.index for f in received] == list(range(len(received)))


def test_corrupt_packets_mid_stream_are_skipped_and_counted(tmp_path: Path) -> None:
    path = make_noisy(tmp_path, "ok.mp4", codec="mpeg4", options={"movflags": "faststart"})
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 3000] = np.random.default_rng(0).bytes(3000)
    damaged = write_bytes(tmp_path / "damaged.mp4", bytes(data))
    source = open_source(damaged)
    frames = list(source)
    assert len(frames) >= 85  # decoding resumes after the damage
    assert source.stats.decode_errors + source.stats.corrupt_frames >= 1
    assert frames[-1].timestamp_s == pytest.approx(89 / 30, abs=1e-3)  # pts keep the real time


# ------------------------------------------------------------------------------- frame folders


def write_image(path: Path, value: int, size: tuple[int, int] = (32, 24)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), np.full((size[1], size[0], 3), value, np.uint8))


def make_folder(folder: Path, pattern: str, n: int, start: int = 1) -> Path:
    for i in range(n):
        write_image(folder / pattern.format(start + i), 10 * i)
    return folder


def make_mot(seq: Path, n: int, extra: str = "frameRate=25\n") -> Path:
    make_folder(seq / "img1", "{:06d}.jpg", n)
    seq.joinpath("seqinfo.ini").write_text(
        f"[Sequence]\nname={seq.name}-seq\nimDir=img1\n{extra}seqLength={n}\nimWidth=32\nimHeight=24\nimExt=.jpg\n"
    )
    return seq


def bad_image_folder(d: Path) -> Path:
    folder = make_folder(d / "seq", "img{:06d}.jpg", 3)
    (folder / "img000004.jpg").write_bytes(b"not a jpeg")
    return folder


def mixed_size_folder(d: Path) -> Path:
    folder = make_folder(d / "seq", "{:07d}.jpg", 2)
    write_image(folder / "0000003.jpg", 0, size=(40, 30))
    return folder


LAYOUTS = {
    # name: (build(tmp) -> path to pass, expected name, fps given, expected fps)
    "mot_sequence_dir": (lambda d: make_mot(d / "MOT17-02", 5), "MOT17-02-seq", None, 25.0),
    "mot_img1_dir": (lambda d: make_mot(d / "MOT17-02", 5) / "img1", "MOT17-02-seq", None, 25.0),
    "mot_seqinfo_wins_over_fps": (lambda d: make_mot(d / "MOT17-02", 5), "MOT17-02-seq", 12.0, 25.0),
    "uavdt": (lambda d: make_folder(d / "M1303", "img{:06d}.jpg", 5), "M1303", None, 30.0),
    "visdrone_mot": (
        lambda d: make_folder(d / "sequences" / "uav0000013_00000_v", "{:07d}.jpg", 5),
        "uav0000013_00000_v",
        10.0,
        10.0,
    ),
    "unpadded_natural_sort": (lambda d: make_folder(d / "clip", "frame{}.png", 12), "clip", 12.5, 12.5),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_frame_folder_layouts(tmp_path: Path, layout: str) -> None:
    build, name, fps, expected_fps = LAYOUTS[layout]
    source = open_source(build(tmp_path), fps=fps)
    frames = list(source)
    n = len(frames)
    assert isinstance(source, ImageSequenceSource)
    assert (source.name, source.fps, source.size, source.frame_count) == (name, expected_fps, (32, 24), n)
    assert [f.index for f in frames] == list(range(n))
    np.testing.assert_allclose([f.timestamp_s for f in frames], np.arange(n) / expected_fps)
    np.testing.assert_allclose([f.image.mean() for f in frames], 10 * np.arange(n), atol=2)  # natural order


def test_folder_range_and_imext_filter(tmp_path: Path) -> None:
    seq = make_mot(tmp_path / "MOT", 8)
    write_image(seq / "img1" / "000009.png", 255)  # not the declared imExt: ignored
    (seq / "img1" / "labels.txt").write_text("x")
    source = open_source(seq, max_frames=3, start_frame=4)
    frames = list(source)
    assert [f.index for f in frames] == [4, 5, 6] and source.frame_count == 3
    assert frames[0].timestamp_s == pytest.approx(4 / 25)


def test_folder_without_seqinfo_logs_default_fps(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = make_folder(tmp_path / "M0101", "img{:06d}.jpg", 2)
    with caplog.at_level(logging.INFO, logger="pipelines.sources"):
        source = open_source(folder)
    assert source.fps == 30.0
    assert any("assuming 30 fps" in r.message for r in caplog.records)


@pytest.mark.parametrize(
    ("names", "ordered"),
    [
        (["img10.jpg", "img2.jpg", "img1.jpg"], ["img1.jpg", "img2.jpg", "img10.jpg"]),
        (["0000010.jpg", "0000002.jpg"], ["0000002.jpg", "0000010.jpg"]),
        (["b2.png", "a10.png", "a9.png"], ["a9.png", "a10.png", "b2.png"]),
    ],
)
def test_natural_sort(names: list[str], ordered: list[str]) -> None:
    assert sorted(names, key=natural_key) == ordered


# ----------------------------------------------------------------------------------- telemetry


class LinearAltitudeTrack:
    """Stand-in for TelemetryTrack: altitude climbs 10 m per second from 100 m."""

    def at(self, t: float) -> Telemetry:
        return Telemetry(timestamp_s=t, altitude_m=100.0 + 10.0 * t, gimbal_pitch_deg=-90.0)


@pytest.mark.parametrize(
    ("offset", "expected_alt"), [(0.0, [100.0, 101.0, 102.0]), (2.5, [125.0, 126.0, 127.0])]
)
def test_attach_telemetry_samples_track_at_frame_time(offset: float, expected_alt: list[float]) -> None:
    image = np.zeros((4, 4, 3), np.uint8)
    frames = [Frame(index=i, timestamp_s=0.1 * i, image=image) for i in range(3)]
    out = list(attach_telemetry(iter(frames), LinearAltitudeTrack(), time_offset_s=offset))
    assert [f.telemetry.altitude_m for f in out] == pytest.approx(expected_alt)
    assert [f.telemetry.timestamp_s for f in out] == pytest.approx([0.1 * i + offset for i in range(3)])
    assert all(a.image is b.image and a.index == b.index for a, b in zip(out, frames, strict=True))
    assert all(f.telemetry is None for f in frames)  # inputs untouched (frozen, replaced)


def test_frames_outside_the_telemetry_get_none_and_the_run_goes_on():
    from pipelines.errors import TelemetryError
    from pipelines.types import Frame, Telemetry

    class Track:
        def at(self, t: float) -> Telemetry:
            if t < 0.1:
                raise TelemetryError("before the first sample")
            return Telemetry(t, altitude_m=50.0)

    image = np.zeros((4, 4, 3), np.uint8)
    frames = [Frame(i, i * 0.05, image) for i in range(4)]
    out = list(attach_telemetry(frames, Track()))
    assert [f.telemetry is None for f in out] == [True, True, False, False]
    assert out[3].telemetry.altitude_m == 50.0
