"""A live stream's speed limit and zones set by the operator (GET/PUT /api/v1/sessions/{id}/rules)
against a real server and a real WebRTC stream (`airpatrol publish synthetic`: a fast lane at ~73 km/h,
a slow one at ~24 km/h): the new limit applies from the stream's next frames, on the violations it
stores; bad requests are refused with the field at fault."""

from __future__ import annotations

import httpx
import pytest
from edge_helpers import RunningServer, synthetic_stream, wait_until

pytestmark = pytest.mark.timeout(180)


def test_the_operator_changes_the_limit_of_a_live_stream(server: RunningServer) -> None:
    with synthetic_stream(server) as sid, server.client() as c:
        rules = wait_until(
            lambda: (r := c.get(f"/api/v1/sessions/{sid}/rules")).status_code == 200 and r.json(),
            30,
            "rules",
        )
        assert rules == {  # the site config's: OIML R 91's tolerance, the default ticket rule
            "speed_limit_kmh": 50.0,
            "zones": [],
            "tolerance_kmh": 3.0,
            "tolerance_percent": 3.0,
            "tolerance_mode": "max",
            "ticket_rule": "tolerance",
            "confidence": 0.95,
            "min_duration_s": 0.5,
        }
        # the ticket's settings: each one given is set, the others kept
        ticket = {
            "tolerance_percent": 5,
            "tolerance_mode": "percent",
            "ticket_rule": "lower_bound",
            "confidence": 0.99,
        }
        r = c.put(f"/api/v1/sessions/{sid}/rules", json={"speed_limit_kmh": 50, **ticket})
        assert r.status_code == 200, r.text
        assert {k: r.json()[k] for k in ticket} == {**ticket, "tolerance_percent": 5.0}
        assert c.get(f"/api/v1/sessions/{sid}/rules").json() == r.json()
        assert r.json()["tolerance_kmh"] == 3.0 and "use_lower_bound" not in r.json()
        assert server.manager.get(sid).worker.rules.ticket_rule == "lower_bound"
        # above every vehicle: nothing is speeding any more
        high = c.put(f"/api/v1/sessions/{sid}/rules", json={"speed_limit_kmh": 100, "tolerance_kmh": 2})
        assert high.status_code == 200 and high.json()["speed_limit_kmh"] == 100.0, high.text
        kept = c.get(f"/api/v1/sessions/{sid}/rules").json()
        assert kept["tolerance_kmh"] == 2.0 and kept["ticket_rule"] == "lower_bound"  # kept below
        # 30 km/h and a zone over the slow lane's half of the frame with a limit of 20: both
        # lanes speed, each against its own limit
        zone = {
            "name": "school",
            "polygon": [[0, 180], [640, 180], [640, 360], [0, 360]],
            "speed_limit_kmh": 20,
        }
        low = c.put(f"/api/v1/sessions/{sid}/rules", json={"speed_limit_kmh": 30, "zones": [zone]})
        assert low.status_code == 200, low.text
        assert low.json()["zones"][0]["name"] == "school" and low.json()["tolerance_kmh"] == 2.0

        def limits() -> set[float]:
            items = c.get("/api/v1/violations", params={"session_id": sid}).json()["items"]
            return {(v["zone"], v["speed_limit_kmh"]) for v in items}

        found = wait_until(
            lambda: {("global", 30.0), ("school", 20.0)} <= limits() and limits(), 40, "new limits"
        )
        assert ("global", 100.0) not in found


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"speed_limit_kmh": 60}, 404, "no active stream nope"),
        ({}, 422, "speed_limit_kmh"),
        ({"speed_limit_kmh": 0}, 422, "speed_limit_kmh"),
        ({"speed_limit_kmh": 500}, 422, "speed_limit_kmh"),
        ({"speed_limit_kmh": "50"}, 422, "speed_limit_kmh"),  # a JSON number, not a string
        (
            {
                "speed_limit_kmh": 50,
                "zones": [{"name": "a", "polygon": [[0, 0], [1, 1]], "speed_limit_kmh": 30}],
            },
            422,
            "polygon",
        ),
        (
            {
                "speed_limit_kmh": 50,
                "zones": [{"name": "a", "polygon": [[0, 0], [9, 0], [9, 9]], "speed_limit_kmh": 30}] * 2,
            },
            422,
            "unique",
        ),
        (
            {
                "speed_limit_kmh": 50,
                "zones": [{"name": "global", "polygon": [[0, 0], [9, 0], [9, 9]], "speed_limit_kmh": 30}],
            },
            422,
            "unique",
        ),
        (
            {
                "speed_limit_kmh": 50,
                "zones": [{"name": "a", "polygon": [[0, 0], [9, 0], [9, 1e9]], "speed_limit_kmh": 30}],
            },
            422,
            "polygon",
        ),
        ({"speed_limit_kmh": 50, "limit": 3}, 422, "limit"),
        ({"speed_limit_kmh": 50, "use_lower_bound": True}, 422, "use_lower_bound"),  # ticket_rule now
        (
            {"speed_limit_kmh": 50, "tolerance_kmh": -1},
            422,
            "body.tolerance_kmh: Input should be greater than or equal to 0",
        ),
        (
            {"speed_limit_kmh": 50, "tolerance_percent": 60},
            422,
            "body.tolerance_percent: Input should be less than or equal to 50",
        ),
        (
            {"speed_limit_kmh": 50, "tolerance_mode": "loose"},
            422,
            "body.tolerance_mode: Input should be 'kmh', 'percent' or 'max'",
        ),
        (
            {"speed_limit_kmh": 50, "ticket_rule": "strict"},
            422,
            "body.ticket_rule: Input should be 'tolerance', 'tolerance_and_sigma' or 'lower_bound'",
        ),
        (
            {"speed_limit_kmh": 50, "confidence": 0.5},
            422,
            "body.confidence: Input should be greater than 0.5",
        ),
        ({"speed_limit_kmh": 50, "confidence": 1}, 422, "body.confidence: Input should be less than 1"),
        ({"speed_limit_kmh": 50, "confidence": "0.95"}, 422, "body.confidence"),  # a JSON number
    ],
)
def test_bad_rules_are_refused(server: RunningServer, body: dict, status: int, needle: str) -> None:
    with server.client() as c:
        r = c.put("/api/v1/sessions/nope/rules", json=body)
    assert r.status_code == status and needle in str(r.json()["detail"]), r.text


def test_rules_need_a_token_and_a_finite_number(server: RunningServer) -> None:
    anonymous = httpx.put(f"{server.url}/api/v1/sessions/x/rules", json={"speed_limit_kmh": 50})
    assert anonymous.status_code == 401
    with server.client() as c:
        nan = c.put(
            "/api/v1/sessions/x/rules",
            content=b'{"speed_limit_kmh": NaN}',
            headers={"Content-Type": "application/json"},
        )
        assert nan.status_code == 422 and "speed_limit_kmh" in str(nan.json()["detail"]), nan.text
        assert c.get("/api/v1/sessions/x/rules").status_code == 404
