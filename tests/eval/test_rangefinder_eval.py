"""The laser rangefinder offline, through the evaluator (the same build_pipeline as the server): a
flight whose road lies 8 m above the take-off point reads 8 m too high; its laser's readings in the
SRT give the speeds back their true scale, and the summary says how many readings were used."""

from __future__ import annotations

import numpy as np
import pytest

from eval.datasets import sim_sequence
from eval.runner import run_sequence
from eval.simulate import LaserSim, TelemetryErrors, derive_flight
from eval.variants import OracleOptions, Variant
from pipelines.config import PipelineConfig


def _run(flight_dir, config: PipelineConfig | None = None):
    variant = Variant("lrf", oracle=True, mask="oracle")
    return run_sequence(
        sim_sequence(flight_dir), config or PipelineConfig(), variant, oracle=OracleOptions(), progress=False
    )


def _bias(result) -> float:
    s = result.speed_samples
    ok = np.isfinite(s.pred_kmh) & (s.gt_kmh > 5.0)
    return float(np.median(s.pred_kmh[ok] / s.gt_kmh[ok]) - 1.0)


def test_the_laser_gives_the_speeds_their_true_scale(small_flight_dir, tmp_path) -> None:
    """Without the laser this flight's speeds are 13 % high (68 m read for 60: the error budget's
    road+8 scenario); with it, within 1 %."""
    laser = LaserSim(hz=2.0, preroll=2)  # a 4 s flight: readings every 0.5 s
    errors = TelemetryErrors(road_level_m=8.0)
    result = _run(derive_flight(small_flight_dir, tmp_path / "d", errors, laser=laser, seed=5))
    bias = _bias(result)
    assert abs(bias) < 0.01, bias
    on_lrf = result.speed_samples.scale_source == "lrf"
    assert on_lrf.mean() > 0.5  # the speeds say which scale they were measured with
    lrf = result.pipeline["rangefinder"]
    assert lrf["used"] >= 3 and lrf["status"].startswith("laser rangefinder:"), lrf
    assert set(lrf["refused"]) <= {"a vehicle is under the laser's point"}, lrf
    sources = {v.scale.source for v in result.predicted_violations if v.scale is not None}
    assert sources <= {"lrf"} and all(
        v.scale.height_m == pytest.approx(60.0, abs=0.3) for v in result.predicted_violations if v.scale
    )


@pytest.mark.parametrize("keyframes", [False, True])
def test_a_laser_taken_mid_track_re_measures_what_the_tracks_had(
    small_flight_dir, tmp_path, keyframes
) -> None:
    """Without the provisional reference, the laser's third reading comes 1 s into the flight, the tracks 13 % fast till then (the road 8 m
    above the take-off point): their windows are re-measured on the laser's scale from its first frame
    (pipelines.ground.GroundModel.reinterpreted), not read as a deceleration that the carry overshoots.
    Measured: in the second after the switch the worst frame 3.6 % off (14 % left as they were), after
    it p95 0.7 % (5.7 %). With keyframes, a box whose flow failed keeps its track's last estimate: one
    measured on the old scale is dropped, not shown as the laser's (kept, the worst frame read 14 %)."""
    laser = LaserSim(hz=2.0, preroll=0)
    config = PipelineConfig().with_overrides(
        keyframes={"enabled": keyframes}, camera={"rangefinder": {"provisional": False}}
    )
    result = _run(derive_flight(small_flight_dir, tmp_path / "d", TelemetryErrors(road_level_m=8.0), laser=laser,
                                seed=5), config)  # fmt: skip
    s = result.speed_samples
    ok = np.isfinite(s.pred_kmh) & (s.gt_kmh > 5.0)
    rel = np.abs(s.pred_kmh[ok] / s.gt_kmh[ok] - 1.0)
    on_lrf, frames = s.scale_source[ok] == "lrf", s.frames[ok]
    first = frames[on_lrf].min()
    # the third reading's frame: the tracks were measured on the take-off altitude before it
    assert 20 <= first <= 45
    assert np.median(rel[~on_lrf]) > 0.1
    assert rel[on_lrf & (frames < first + 30)].max() < 0.06
    assert np.percentile(rel[on_lrf & (frames >= first + 30)], 95) < 0.02


def test_the_laser_s_first_reading_gives_the_speeds_a_provisional_scale(small_flight_dir, tmp_path) -> None:
    """The same flight with the default provisional reference: the laser's scale from its first reading
    (frame 5, not the third's 31): measured p95 1.4 % (13.4 % without), MAE 0.20 km/h (0.93). No ticket
    rests on the provisional reference, nor on a base across its confirmation."""
    laser = LaserSim(hz=2.0, preroll=0)
    result = _run(derive_flight(small_flight_dir, tmp_path / "d", TelemetryErrors(road_level_m=8.0), laser=laser,
                                seed=5))  # fmt: skip
    s = result.speed_samples
    ok = np.isfinite(s.pred_kmh) & (s.gt_kmh > 5.0)
    rel = np.abs(s.pred_kmh[ok] / s.gt_kmh[ok] - 1.0)
    on_lrf, frames = s.scale_source[ok] == "lrf", s.frames[ok]
    assert frames[on_lrf].min() <= 10 and on_lrf.mean() > 0.95
    assert np.percentile(rel, 95) < 0.03, np.percentile(rel, 95)
    assert result.pipeline["rangefinder"]["status"].startswith("laser rangefinder:")  # confirmed by the end
    for v in result.predicted_violations:
        provisional = v.scale is not None and v.scale.reference is not None and v.scale.reference.provisional
        assert v.status != "enforceable" or not provisional, v.status_reason
        if v.base is not None and v.base.start_time_s < 1.0:  # begun on the provisional reference
            assert v.status == "not_enforceable", v.status_reason
