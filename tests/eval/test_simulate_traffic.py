"""Near-limit traffic in the simulator (eval.simulate.spec, eval.simulate.traffic): the third speed
band of clear speeders, its validation, and flights without it drawn exactly as before."""

from __future__ import annotations

import json

import pytest

from eval.simulate import FlightSpec, Scene, SimulationError
from eval.simulate.traffic import speed_band

NEAR_LIMIT = {
    "normal_speed_kmh": (45.0, 50.0),
    "speeding_speed_kmh": (50.0, 55.0),
    "fast_speed_kmh": (58.0, 75.0),
    "speeding_fraction": 0.3,
    "fast_fraction": 0.2,
}


def _tiny(**changes) -> FlightSpec:
    base = dict(seed=1, width=320, height=180, duration_s=2.0, n_vehicles=10, mask_every=0)
    return FlightSpec(**(base | changes))


@pytest.mark.parametrize(
    ("fast", "speeding", "u", "band"),
    [
        (0.2, 0.3, 0.0, "fast"),
        (0.2, 0.3, 0.19, "fast"),
        (0.2, 0.3, 0.2, "speeding"),
        (0.2, 0.3, 0.49, "speeding"),
        (0.2, 0.3, 0.5, "normal"),
        (0.0, 0.3, 0.1, "speeding"),  # no fast band: as before, speeding below speeding_fraction
        (0.0, 0.3, 0.3, "normal"),
        (1.0, 0.0, 0.99, "fast"),
    ],
)
def test_speed_band(fast, speeding, u, band):
    assert speed_band(_tiny(fast_fraction=fast, speeding_fraction=speeding), u) == band


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"fast_fraction": 0.8, "speeding_fraction": 0.3},
            "speeding_fraction \\+ fast_fraction must be at most 1",
        ),
        ({"fast_fraction": -0.1}, "fast_fraction"),
        ({"fast_fraction": 1.5, "speeding_fraction": 0.0}, "fast_fraction"),
        ({"fast_speed_kmh": (75.0, 58.0)}, "fast_speed_kmh"),
        ({"fast_speed_kmh": (0.0, 58.0)}, "fast_speed_kmh"),
    ],
)
def test_invalid_near_limit_specs(changes, message):
    with pytest.raises(SimulationError, match=message):
        _tiny(**changes)


def test_near_limit_spec_round_trips(tmp_path):
    spec = _tiny(**NEAR_LIMIT, accel_sigma_mps2=0.0)
    path = tmp_path / "flight.yaml"
    path.write_text(json.dumps(spec.to_dict()))  # JSON is YAML
    assert FlightSpec.from_yaml(path) == spec


# vehicles.json of _tiny() as the simulator drew it before the fast band existed: (id, initial speed
# km/h, speeding); a flight without fast vehicles must draw exactly these
BEFORE = [
    (1, 33.4, False), (2, 44.758, False), (3, 66.388, True), (4, 29.844, False), (5, 28.188, False),
    (6, 28.019, False), (7, 75.94, True), (8, 75.95, True), (9, 38.25, False), (10, 28.538, False),
]  # fmt: skip


@pytest.mark.parametrize("changes", [{}, {"fast_speed_kmh": (90.0, 120.0)}])
def test_a_flight_without_fast_vehicles_is_drawn_as_before(changes):
    vehicles = [v.to_dict() for v in Scene(_tiny(**changes)).vehicles]
    assert [(v["id"], v["initial_speed_kmh"], v["speeding"]) for v in vehicles] == BEFORE


@pytest.mark.parametrize("accel", [0.0, 0.8])
def test_near_limit_traffic_keeps_to_its_bands(accel):
    spec = _tiny(**NEAR_LIMIT, n_vehicles=16, accel_sigma_mps2=accel, seed=5)
    vehicles = Scene(spec).vehicles
    bands = {tuple(v.to_dict()["speed_band_kmh"]) for v in vehicles}
    # trucks and buses 10 km/h lower at the top, never under the band's bottom
    assert bands <= {(45.0, 50.0), (45.0, 45.0), (50.0, 55.0), (50.0, 50.0), (58.0, 75.0), (58.0, 65.0)}
    for v in vehicles:
        kmh = v.speeds_mps * 3.6
        assert v.v_lo_mps * 3.6 - 1e-6 <= kmh.min() and kmh.max() <= v.v_hi_mps * 3.6 + 1e-6
        assert v.speeding == (v.v_lo_mps * 3.6 >= 50.0 - 1e-9)
        if accel == 0.0:
            assert kmh.max() - kmh.min() < 1e-9  # steady traffic
    assert any(v.v_lo_mps * 3.6 >= 58.0 - 1e-9 for v in vehicles)  # some clear speeders
