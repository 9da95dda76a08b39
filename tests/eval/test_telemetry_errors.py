"""Telemetry errors on a simulated flight (eval.simulate.telemetry_errors): the rewritten SRT carries
exactly the injected errors at every frame, the video and the ground truth are the source's own
files (links), and a flight's own config.yaml reaches the configuration it is evaluated under."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eval.datasets import sim_sequence
from eval.runner import sequence_config
from eval.simulate import (
    ERRORS_FILE,
    FLIGHT_CONFIG,
    CameraPath,
    ErrorPrior,
    FlightSpec,
    SimulationError,
    TelemetryErrors,
    derive_flight,
    read_errors,
)
from eval.simulate.telemetry_errors import erroneous_telemetry, read_error_table
from eval.variants import Variant
from pipelines.config import PipelineConfig
from pipelines.height import ScalePriors, pitch_sigma_on_road
from pipelines.telemetry import load_telemetry

ERRORS = [
    TelemetryErrors(road_level_m=8.0),
    TelemetryErrors(road_level_m=-15.0),
    TelemetryErrors(altitude_bias_m=-2.0, altitude_drift_m_per_min=1.5),
    TelemetryErrors(pitch_bias_deg=1.5),
    TelemetryErrors(pitch_bias_deg=-2.0),
    TelemetryErrors(road_level_m=5.0, altitude_bias_m=0.7, altitude_drift_m_per_min=0.5, pitch_bias_deg=1.0),
]


def _expected_pitch(true: float, bias: float) -> float:
    return min(max(true + bias, -90.0), 30.0)  # DJI's gimbal never reads below -90


@pytest.mark.parametrize("errors", ERRORS, ids=lambda e: e.describe())
@pytest.mark.parametrize("which", ["small_flight_dir", "oblique_flight_dir"])
def test_the_rewritten_srt_carries_exactly_the_injected_errors(errors, which, request, tmp_path):
    source = request.getfixturevalue(which)
    out = derive_flight(source, tmp_path / "derived", errors)
    spec = FlightSpec.from_yaml(source / "flight.yaml")
    truth = CameraPath(spec).telemetry()
    read = load_telemetry(out / "video.SRT", camera=spec.camera).samples
    assert len(read) == len(truth) == spec.n_frames
    for t, r in zip(truth, read, strict=True):
        assert r.timestamp_s == pytest.approx(t.timestamp_s, abs=5e-4)  # SRT: whole milliseconds
        want = (
            errors.road_level_m
            + errors.altitude_bias_m
            + errors.altitude_drift_m_per_min * t.timestamp_s / 60
        )
        assert r.altitude_m - t.altitude_m == pytest.approx(want, abs=1e-9)
        assert r.abs_altitude_m - t.abs_altitude_m == pytest.approx(want - errors.road_level_m, abs=1e-9)
        assert r.gimbal_pitch_deg == pytest.approx(_expected_pitch(t.gimbal_pitch_deg, errors.pitch_bias_deg))
        assert (r.latitude, r.longitude, r.gimbal_yaw_deg) == pytest.approx(
            (t.latitude, t.longitude, t.gimbal_yaw_deg), abs=1e-9
        )
    table = read_error_table(out)
    reading = np.array([r.altitude_m for r in read])
    assert np.allclose(
        table["altitude_error_m"], reading - np.array([t.altitude_m for t in truth]), atol=1e-9
    )
    assert np.allclose(table["pitch_deg"], [r.gimbal_pitch_deg for r in read])


def test_the_video_and_the_truth_are_the_source_s_own_files(small_flight_dir, tmp_path):
    out = derive_flight(
        small_flight_dir,
        tmp_path / "d",
        TelemetryErrors(road_level_m=8.0),
        config={"camera": {"takeoff_above_road_m": -8.0}},
        label="road+8/site",
    )
    for name in ("video.mp4", "gt", "road_mask", "seqinfo.ini", "flight.yaml"):
        assert (out / name).is_symlink()
        assert (out / name).resolve() == (small_flight_dir / name).resolve()
    for name in ("gt.txt", "speeds.csv", "violations.json", "camera.csv"):
        assert (out / "gt" / name).read_bytes() == (small_flight_dir / "gt" / name).read_bytes()
    assert (out / "video.SRT").read_text() != (small_flight_dir / "video.SRT").read_text()
    record = read_errors(out)
    assert record["errors"]["road_level_m"] == 8.0 and record["label"] == "road+8/site"
    assert record["injected"]["altitude_error_m"] == {"mean": 8.0, "min": 8.0, "max": 8.0}
    assert read_errors(small_flight_dir) is None
    # derived again without a config: the old one goes
    derive_flight(small_flight_dir, out, TelemetryErrors())
    assert not (out / FLIGHT_CONFIG).exists() and (out / ERRORS_FILE).is_file()


def test_exact_errors_rewrite_the_srt_as_the_simulator_wrote_it(small_flight_dir, tmp_path):
    out = derive_flight(small_flight_dir, tmp_path / "d", TelemetryErrors())
    assert (out / "video.SRT").read_text() == (small_flight_dir / "video.SRT").read_text()


@pytest.mark.parametrize(
    ("delay_s", "rate_hz", "frame", "state_time"),
    [
        (0.0, None, 45, 1.5),
        (0.5, None, 45, 1.0),
        (0.0, 0.5, 45, 0.0),  # a 0.5 Hz feed: updates at 0, 2, 4 s
        (0.0, 0.5, 75, 2.0),
        (0.2, 2.0, 45, 1.0),  # 1.3 s of state, held from the update at 1.0 s
        (0.5, None, 10, 0.0),  # before the first sample's state: the first one
    ],
)
def test_a_late_slow_feed_carries_an_earlier_state(delay_s, rate_hz, frame, state_time):
    spec = FlightSpec(duration_s=3.0, fps=30.0, width=320, height=180, altitude_m=50.0, climb_rate_mps=2.0)
    truth = CameraPath(spec).telemetry()
    errors = TelemetryErrors(delay_s=delay_s, rate_hz=rate_hz, altitude_bias_m=1.0)
    out = erroneous_telemetry(truth, errors)
    assert out[frame].timestamp_s == truth[frame].timestamp_s
    assert errors.state_time(truth[frame].timestamp_s) == pytest.approx(state_time, abs=1e-9)
    assert out[frame].altitude_m == pytest.approx(50.0 + 2.0 * state_time + 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"road_level_m": math.nan},
        {"road_level_m": 500.0},
        {"pitch_bias_deg": 20.0},
        {"delay_s": -1.0},
        {"rate_hz": 0.0},
    ],
)
def test_impossible_errors_are_refused(kwargs):
    with pytest.raises(SimulationError):
        TelemetryErrors(**kwargs)


def test_a_reading_below_the_ground_is_refused_and_bad_folders_too(small_flight_dir, tmp_path):
    truth = CameraPath(FlightSpec(duration_s=1.0, width=320, height=180, altitude_m=10.0)).telemetry()
    with pytest.raises(SimulationError, match="would read"):
        erroneous_telemetry(truth, TelemetryErrors(road_level_m=-12.0))
    with pytest.raises(SimulationError, match="not a simulated flight"):
        derive_flight(tmp_path, tmp_path / "x", TelemetryErrors())
    with pytest.raises(SimulationError, match="another folder"):
        derive_flight(small_flight_dir, small_flight_dir, TelemetryErrors())
    with pytest.raises(SimulationError, match="unknown keys"):
        TelemetryErrors.from_dict({"road_level": 1.0})


def test_errors_round_trip_and_describe():
    e = ERRORS[-1]
    assert TelemetryErrors.from_dict(e.to_dict()) == e
    assert e.describe() == "road +5 m above take-off, altitude +0.7 m, drift +0.5 m/min, pitch +1 deg"
    assert TelemetryErrors().exact and TelemetryErrors().describe() == "exact"


def test_the_prior_draws_seeded_errors_of_its_stated_sigmas():
    prior = ErrorPrior()
    draws = [prior.draw(np.random.default_rng([3, i])) for i in range(3000)]
    assert draws[:5] == [prior.draw(np.random.default_rng([3, i])) for i in range(5)]
    engine = ScalePriors()  # the engine's own priors are the default
    stated = (
        ("road_level_m", engine.unknown_ground_sigma_m),
        ("altitude_bias_m", engine.baro_sigma_m),
        ("pitch_bias_deg", pitch_sigma_on_road(engine)),  # the gimbal's and the road's tilt
    )
    for name, sigma in stated:
        v = np.array([getattr(d, name) for d in draws])
        assert abs(v.mean()) < 4 * sigma / math.sqrt(len(v))
        assert v.std() == pytest.approx(sigma, rel=0.05)
    assert all(d.altitude_drift_m_per_min == 0 for d in draws)


def test_a_flight_s_own_config_reaches_its_evaluation(small_flight_dir, tmp_path):
    ref = {"source": "site", "takeoff_above_road_m": -8.0, "sigma_m": 0.3}
    out = derive_flight(
        small_flight_dir,
        tmp_path / "d",
        TelemetryErrors(road_level_m=8.0),
        config={"camera": {"height_reference": ref}},
    )
    seq = sim_sequence(out)
    assert seq.config == out / FLIGHT_CONFIG
    cfg = sequence_config(PipelineConfig(), seq, Variant("base"), 30.0)
    assert cfg.camera.height_reference.takeoff_above_road_m == -8.0
    assert cfg.camera.name == "dji_mavic_3" and cfg.rules.speed_limit_kmh == 50.0
    # the configuration under test goes on top of the flight's own
    variant = Variant("v", overrides=(("camera", "pitch_sigma_deg", 2.5),))
    assert sequence_config(PipelineConfig(), seq, variant, 30.0).camera.pitch_sigma_deg == 2.5
    assert sim_sequence(small_flight_dir).config is None
    (out / FLIGHT_CONFIG).write_text("cameras: {name: x}\n")
    with pytest.raises(Exception, match="config section"):
        sequence_config(PipelineConfig(), sim_sequence(out), Variant("base"), 30.0)


@pytest.mark.parametrize(
    ("pitch", "sigma_m", "spread"),
    [(-90.0, 0.0, 0.0), (-45.0, 0.0, 0.0), (-45.0, 0.2, 0.2 + 0.001 * 50 * math.sqrt(2))],
)
def test_a_laser_reads_the_true_slant_range_at_its_own_rate(pitch, sigma_m, spread):
    """The laser's readings (eval.simulate.LaserSim) come with the OSD at 0.5 Hz, of the true slant
    range to the image's centre (the road 8 m above the take-off point changes the altitude reading,
    not the range), with the stated noise; seeded."""
    from eval.simulate import LaserSim

    spec = FlightSpec(duration_s=8.0, fps=30.0, width=320, height=180, altitude_m=50.0, pitch_deg=pitch)
    truth = CameraPath(spec).telemetry()
    laser = LaserSim(hz=0.5, sigma_m=sigma_m, sigma_frac=0.001 if sigma_m else 0.0)
    out = erroneous_telemetry(truth, TelemetryErrors(road_level_m=8.0), laser, seed=3)
    frames = [k for k, s in enumerate(out) if s.lrf_range_m is not None]
    assert frames == [0, 60, 120, 180]
    true_range = 50.0 / math.sin(math.radians(-pitch))
    ranges = np.array([out[k].lrf_range_m for k in frames])
    assert np.all(np.abs(ranges - true_range) <= 4 * spread + 0.005)
    assert all(out[k].altitude_m == pytest.approx(58.0) for k in frames)
    again = erroneous_telemetry(truth, TelemetryErrors(road_level_m=8.0), laser, seed=3)
    assert [s.lrf_range_m for s in again] == [s.lrf_range_m for s in out]


def test_the_laser_readings_reach_the_flight_s_srt(small_flight_dir, tmp_path):
    from eval.simulate import LaserSim

    out = derive_flight(
        small_flight_dir, tmp_path / "d", TelemetryErrors(road_level_m=-4.0), laser=LaserSim(hz=1.0)
    )
    samples = load_telemetry(out / "video.SRT").samples
    assert sum(s.lrf_range_m is not None for s in samples) == math.floor(samples[-1].timestamp_s) + 1
    assert read_errors(out)["laser"] == {"hz": 1.0, "sigma_m": 0.2, "sigma_frac": 0.001, "preroll": 0}


def test_readings_from_before_the_clip_come_with_its_first_frames():
    from eval.simulate import LaserSim

    spec = FlightSpec(duration_s=5.0, fps=30.0, width=320, height=180, altitude_m=50.0)
    out = erroneous_telemetry(
        CameraPath(spec).telemetry(), TelemetryErrors(), LaserSim(sigma_m=0.0, sigma_frac=0.0, preroll=2)
    )
    assert [k for k, s in enumerate(out) if s.lrf_range_m is not None] == [0, 1, 2, 60, 120]
