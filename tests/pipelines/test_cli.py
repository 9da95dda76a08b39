"""`airpatrol process` / `bench` end to end, and what a user sees on bad input."""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from airpatrol.cli import main

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "airpatrol.cli", *args], capture_output=True, text=True, timeout=300, cwd=REPO
    )


@pytest.mark.shared
def test_process_real_uavdt_clip_with_coco_int8(tmp_path, uavdt_clip, coco_openvino, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "process",
            str(uavdt_clip / "demo_M1303.mp4"),
            "--detector",
            str(coco_openvino),
            "--classes",
            "coco",
            "--imgsz",
            "640",
            "--altitude",
            "60",
            "--pitch",
            "-60",
            "--camera",
            "dji_mavic_3",
            "--max-frames",
            "45",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    tracks = [line.split(",") for line in (out / "tracks.txt").read_text().splitlines()]
    assert len(tracks) > 100
    assert {int(t[0]) for t in tracks} <= set(range(1, 46))
    assert len({t[1] for t in tracks}) >= 5, "several vehicles tracked"
    with (out / "speeds.csv").open() as fh:
        speeds = [float(r["speed_kmh"]) for r in csv.DictReader(fh) if r["speed_kmh"]]
    assert len(speeds) > 20
    assert 0 <= np.median(speeds) < 120, "urban traffic speeds"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frames"] == 45
    assert summary["pipeline"]["road_mask"] == "unet every 30 frames"  # the shipped road U-Net
    # the scale check from the vehicles: a second and a half of traffic is too little to judge
    check = summary["scale_check"]
    assert check["status"] == "unverified" and check["reason"].startswith("too few vehicles yet"), check
    assert "scale check unverified (too few vehicles yet" in capsys.readouterr().out
    assert (out / "annotated.mp4").stat().st_size > 10_000
    assert isinstance(json.loads((out / "violations.json").read_text()), list)


@pytest.mark.shared
@pytest.mark.parametrize(
    ("extra", "detection"),
    [
        ([], "detection: every frame"),
        (["--detect-every", "3"], "detection: keyframes: at least every 3 frames"),
    ],
)
def test_bench_prints_per_stage_ms(uavdt_clip, coco_openvino, extra, detection, capsys):
    """``airpatrol bench`` in this process (``main`` as the console script calls it), its table on stdout."""
    code = main(
        [
            "bench",
            str(uavdt_clip / "demo_M1303.mp4"),
            "--detector",
            str(coco_openvino),
            "--classes",
            "coco",
            "--max-frames",
            "20",
            "--warmup",
            "5",
            "--quiet",
            "--altitude",
            "60",
            "--camera",
            "mavic 3",
            *extra,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    for stage in ("decode", "detect", "flow", "track", "speed", "end-to-end"):
        assert stage in out
    assert "cores" in out, "the machine is named"
    assert detection in out
    if extra:  # how often the detector ran, and why
        assert re.search(r"detected \d+ of 20 frames \(\d+ %\): interval \d+", out), out
        assert "propagate" in out


def _corrupt_video(tmp_path: Path) -> Path:
    path = tmp_path / "corrupt.mp4"
    path.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 40)
    return path


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (lambda t: ["process", str(_corrupt_video(t))], "corrupt.mp4"),
        (lambda t: ["process", str(t / "missing.mp4")], "missing.mp4"),
        (
            lambda t: ["process", str(_tiny_video(t / "v.mp4")), "--detector", str(t / "none.onnx")],
            "none.onnx",
        ),
        (lambda t: ["process", "x.mp4", "--altitude", "-3"], "altitude"),
        (lambda t: ["process", "x.mp4", "--camera", "toaster"], "unknown camera"),
        (lambda t: ["process", "x.mp4", "--config", str(t / "nope.yaml")], "nope.yaml"),
        (lambda t: ["process", "x.mp4", "--imgsz", "-5"], "detector.imgsz"),
        (lambda t: ["process", "x.mp4", "--imgsz", "huge"], "--imgsz"),
        (lambda t: ["process", "x.mp4", "--max-frames", "0"], "--max-frames"),
        (lambda t: ["bench", "x.mp4", "--fps", "0"], "--fps"),
        (lambda t: ["process", "x.mp4", "--detect-every", "0"], "--detect-every"),
        (lambda t: ["process", "x.mp4", "--lens=-0.1,x"], "--lens"),
        (lambda t: ["process", "x.mp4", "--lens", "9"], "camera.lens.k1"),
        (lambda t: ["process", "x.mp4", "--lens", "d;1,2,3,4,5,6,7,8"], "expected 9"),
        (lambda t: ["process", "x.mp4", "--readout-ms", "-1"], "--readout-ms"),
        (lambda t: ["process", str(_tiny_video(t / "v.mp4")), "--dem", str(t / "nope.tif")], "nope.tif"),
        (lambda t: ["process", "x.mp4", "--takeoff", "47.1,8.5"], "need --dem"),
        (lambda t: ["process", "x.mp4", "--dem", "a.tif", "--takeoff", "147,8"], "--takeoff"),
    ],
    ids=[
        "corrupt-video",
        "missing-video",
        "missing-weights",
        "absurd-altitude",
        "unknown-camera",
        "missing-config",
        "negative-imgsz",
        "word-imgsz",
        "zero-frames",
        "zero-fps",
        "zero-detect-every",
        "word-lens",
        "absurd-lens",
        "short-dewarp-data",
        "negative-readout",
        "missing-dem",
        "takeoff-without-dem",
        "takeoff-off-earth",
    ],
)
def test_bad_input_is_one_clear_line_not_a_traceback(tmp_path, capsys, make_args, message):
    """In this process (``main`` as the console script calls it: an exception that escaped would fail
    the test); one case also as a real process, below."""
    try:
        code = main(make_args(tmp_path))
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], err  # the reason is on the error line


def test_bad_input_in_a_real_process_is_one_line(tmp_path):
    res = run_cli("process", str(_corrupt_video(tmp_path)))
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "corrupt.mp4" in errors[0], res.stderr


def test_absurd_srt_altitude_is_rejected_clearly(tmp_path):
    srt = tmp_path / "bad.SRT"
    srt.write_text(
        '1\n00:00:00,000 --> 00:00:00,033\n<font size="28">FrameCnt: 1, DiffTime: 33ms\n'
        "2025-01-01 10:00:00.000\n[focal_len: 24.00] [latitude: 37.1] [longitude: 126.1] "
        "[rel_alt: 90000.000 abs_alt: 90010.000] </font>\n"
    )
    video = tmp_path / "v.mp4"
    _tiny_video(video)
    res = run_cli("process", str(video), "--srt", str(srt), "--detector", str(tmp_path / "w.onnx"))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert "altitude" in res.stderr.lower() or "telemetry" in res.stderr.lower()


def _tiny_video(path: Path) -> Path:
    import av

    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for i in range(5):
            frame = av.VideoFrame.from_ndarray(np.full((64, 64, 3), i * 40, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def test_the_terrain_options_reach_the_camera_config(tmp_path):
    from pipelines.cli import add_pipeline_options, config_from_args

    parser = argparse.ArgumentParser()
    add_pipeline_options(parser)
    argv = ["--dem", str(tmp_path / "site.tif"), "--takeoff", "47.1,8.5", "--dem-sigma", "0.2"]
    terrain = config_from_args(parser.parse_args(argv + ["--dem-datum", "egm2008"])).camera.terrain
    assert (terrain.dem, terrain.takeoff, terrain.sigma_m) == (tmp_path / "site.tif", (47.1, 8.5), 0.2)
    assert (terrain.dem_datum, terrain.altitude_datum) == ("egm2008", "egm96")
    assert config_from_args(parser.parse_args([])).camera.terrain is None


@pytest.mark.parametrize(
    ("argv", "lens", "readout_ms"),
    [
        ([], None, None),
        (["--lens", "-0.1"], {"k1": -0.1, "k2": 0.0, "source": "--lens"}, None),
        (["--lens=-0.1,0.01,0,0,0.002", "--readout-ms", "28"], {"k1": -0.1, "k3": 0.002}, 28.0),
        (
            ["--lens", "2022-06-08;3713.29,3713.29,7.02,-10.46,-0.112,0.0148,-0.00018,0.00017,-0.0166"],
            {"k1": -0.112},
            None,
        ),
    ],
)
def test_the_lens_and_readout_options_reach_the_camera_config(argv, lens, readout_ms):
    from pipelines.cli import add_pipeline_options, config_from_args

    parser = argparse.ArgumentParser()
    add_pipeline_options(parser)
    camera = config_from_args(parser.parse_args(argv)).camera
    assert camera.readout_ms == readout_ms
    if lens is None:
        assert camera.lens is None
    else:
        model = camera.lens.model()
        for key, value in lens.items():
            assert getattr(model, key) == value
