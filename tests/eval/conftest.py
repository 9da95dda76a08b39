"""Fixtures of the evaluation tests: one small simulated flight, generated once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.simulate import FlightSpec, SimulatedFlight, simulate_flight

# Small but real: 30 fps (the speed estimator needs its window), nadir at 60 m, drift and yaw.
REGRESSION_SPEC = FlightSpec(
    seed=7,
    duration_s=4.0,
    fps=30.0,
    width=640,
    height=360,
    altitude_m=60.0,
    pitch_deg=-90.0,
    drift_mps=(1.0, 0.5),
    yaw_rate_dps=2.0,
    layout="straight",
    road_heading_deg=35.0,  # diagonal road: axis-aligned boxes hold background, as in real footage
    n_vehicles=8,
    accel_sigma_mps2=0.3,
    mask_every=30,
)


# The same traffic seen obliquely from lower down, on a curved road: the ground homography of a
# tilted camera (metres per pixel vary across the frame) is what this one exercises.
OBLIQUE_SPEC = REGRESSION_SPEC.replace(seed=11, altitude_m=50.0, pitch_deg=-55.0, layout="curved")


# A slice of the speed-accuracy grid (eval/examples/speed_grid.sh) in CI: 100 m, gimbal -45, the
# drone flying forward at 10 m/s along the road (the cell where ego-motion matters most).
HIGH_FORWARD_SPEC = REGRESSION_SPEC.replace(
    seed=13,
    altitude_m=100.0,
    pitch_deg=-45.0,
    drift_mps=(0.0, 10.0),
    yaw_deg=0.0,
    yaw_rate_dps=0.0,
    road_heading_deg=0.0,
)


@pytest.fixture(scope="session")
def high_forward_flight_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate_flight(HIGH_FORWARD_SPEC, tmp_path_factory.mktemp("sim") / "high_forward").out_dir


@pytest.fixture(scope="session")
def oblique_flight_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate_flight(OBLIQUE_SPEC, tmp_path_factory.mktemp("sim") / "oblique").out_dir


@pytest.fixture(scope="session")
def small_flight(tmp_path_factory: pytest.TempPathFactory) -> SimulatedFlight:
    return simulate_flight(REGRESSION_SPEC, tmp_path_factory.mktemp("sim") / "flight")


@pytest.fixture(scope="session")
def small_flight_dir(small_flight: SimulatedFlight) -> Path:
    return small_flight.out_dir
