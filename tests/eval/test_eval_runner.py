"""The evaluator's per-sequence facts: what altitude and pitch a sequence was flown at."""

from __future__ import annotations

import pytest

from eval.datasets import SequenceSpec
from eval.runner import run_sequence
from eval.simulate import SimulatedFlight
from eval.variants import Variant
from pipelines.config import PipelineConfig


@pytest.mark.parametrize(
    ("given", "altitude", "pitch"),
    [
        ({}, 60.0, -90.0),  # a real flight's SRT gives them (here: the simulator's SRT, no flight.yaml)
        ({"altitude_m": 55.0}, 55.0, -90.0),  # the dataset's value wins over the log
    ],
)
def test_mot_sequence_takes_altitude_and_pitch_from_its_srt(
    small_flight: SimulatedFlight, given: dict, altitude: float, pitch: float
) -> None:
    seq = SequenceSpec(
        name="real-like",
        layout="mot",
        video=small_flight.video,
        gt=small_flight.gt,
        telemetry=small_flight.srt,
        camera=small_flight.spec.camera,
        **given,
    )
    base = PipelineConfig().with_overrides(road={"enabled": False})
    result = run_sequence(seq, base, Variant("oracle", oracle=True), max_frames=5, progress=False)
    assert (result.altitude_m, result.pitch_deg) == (altitude, pitch)
