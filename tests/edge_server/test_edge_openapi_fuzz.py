"""The OpenAPI document matches what the server sends: a bounded schemathesis run against a live server.

One real uvicorn server for the module, seeded with two sessions and three violations (one with a
snapshot and a clip on disk); the document is the one it serves at /openapi.json. Each operation is
one test: schemathesis' coverage cases (boundary and invalid values, missing parameters, methods the
document does not list), then a fixed number of generated valid and invalid requests (derandomized,
no example database). Every response must be no 5xx and conform to the document (status code,
content type, headers, body schema); invalid requests must be refused, valid ones accepted, and an
operation that answers 2xx with the token must answer 401 without it. The run is made as an admin
(the server's API token) in full, then as an officer, a viewer and a publisher (machine tokens of
those roles) with fewer requests: each role must get the documented 403 for what it may not do.

``schemathesis.pytest.from_fixture`` and the plugin's ``schema.parametrize()`` are not used: with
pytest 9.2 the first fails (it sets ``Function._nodeid``, gone in 9.2) and the second gives every
operation the same node id. This test uses the public pieces they are made of instead
(``APIOperation.as_strategy``, ``iter_coverage_cases``, ``Case.call_and_validate``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import hypothesis
import hypothesis.strategies as st
import pytest
import schemathesis
from edge_helpers import RunningServer, seed_store, start_server
from hypothesis.configuration import set_hypothesis_home_dir
from pydantic import TypeAdapter
from schemathesis import GenerationMode

pytestmark = [pytest.mark.timeout(120), pytest.mark.parallel_safe]  # API calls only: the parallel pass

# An SDP offer is text: generated bodies of the WHIP route (application/sdp) are sent as they are
schemathesis.serializer.alias("application/sdp", "text/plain")

SESSIONS = ["sess-a", "sess-b"]
VIOLATIONS = [1, 2, 3]  # the ids the seeded rows get in a fresh database

# Every operation of the document (test_every_operation_is_fuzzed keeps the list complete). The
# WebSocket route /api/v1/events is not in it: OpenAPI does not describe WebSockets.
OPERATIONS = [
    "GET /healthz",
    "POST /api/v1/auth/login",
    "GET /api/v1/auth/me",
    "POST /api/v1/auth/logout",
    "PUT /api/v1/auth/password",
    "GET /metrics",
    "POST /api/v1/webrtc/offer",
    "DELETE /api/v1/webrtc/{session_id}",
    "POST /whip",
    "DELETE /whip/{session_id}",
    "PATCH /whip/{session_id}",
    "GET /api/v1/sessions",
    "GET /api/v1/sessions/{session_id}",
    "GET /api/v1/sessions/{session_id}/rules",
    "POST /api/v1/sessions/{session_id}/viewers",
    "DELETE /api/v1/sessions/{session_id}/viewers/{viewer_id}",
    "PUT /api/v1/sessions/{session_id}/rules",
    "GET /api/v1/sessions/{session_id}/height-reference",
    "PUT /api/v1/sessions/{session_id}/height-reference",
    "DELETE /api/v1/sessions/{session_id}/height-reference",
    "POST /api/v1/sessions/{session_id}/height-reference/frames",
    "GET /api/v1/sessions/{session_id}/height-reference/frames/{frame_index}",
    "GET /api/v1/violations",
    "GET /api/v1/violations.csv",
    "GET /api/v1/violations.geojson",
    "GET /api/v1/map",
    "GET /api/v1/map/tiles/{z}/{x}/{y}",
    "GET /api/v1/violations/{violation_id}",
    "GET /api/v1/violations/{violation_id}/snapshot.jpg",
    "GET /api/v1/violations/{violation_id}/clip.mp4",
    "GET /api/v1/violations/{violation_id}/evidence.zip",
    "POST /api/v1/violations/{violation_id}/evidence",
    "GET /api/v1/violations/{violation_id}/history",
    "GET /api/v1/audit",
    "GET /api/v1/retention",
    "GET /api/v1/webhooks",
    "GET /api/v1/webhooks/dead",
    "POST /api/v1/webhooks/deliveries/{delivery_id}/retry",
    "POST /api/v1/retention/purge",
    "PUT /api/v1/violations/{violation_id}/legal-hold",
    "GET /api/v1/users",
    "POST /api/v1/users",
    "GET /api/v1/users/{username}",
    "PATCH /api/v1/users/{username}",
    "GET /api/v1/tokens",
    "POST /api/v1/tokens",
    "DELETE /api/v1/tokens/{token_id}",
    "PUT /api/v1/violations/{violation_id}/false_positive",
    "POST /api/v1/rtmp/keys",
    "GET /api/v1/rtmp/keys",
    "DELETE /api/v1/rtmp/keys/{key_id}",
    "DELETE /api/v1/rtmp/streams/{session_id}",
    "POST /api/v1/rtsp",
    "DELETE /api/v1/rtsp/{session_id}",
    "PUT /api/v1/sessions/{session_id}/operator-telemetry",
    "GET /api/v1/dji/pilot2-config",
]
MAX_EXAMPLES = 50  # generated requests per operation, valid and invalid ones, after the coverage cases
ROLE_RUNS = ["officer", "viewer", "publisher"]  # the admin's run is the full one
ROLE_EXAMPLES = 8  # generated requests per operation and role

CONFIG = {
    "seed": 20250601,
    # the token goes with every request (see validate): no generated Authorization headers
    "generation": {"with-security-parameters": False},
    # ids of the seeded rows in a third of the generated path parameters: GET routes hit real rows too
    "dictionaries": {"sessions": {"values": SESSIONS}, "violations": {"values": VIOLATIONS}},
    "parameters": {
        "path.session_id": {"dictionary": "sessions", "probability": 0.3},
        "path.violation_id": {"dictionary": "violations", "probability": 0.3},
    },
    # schemathesis' default list, plus 413: a body over the server's limit is refused before it is read
    # (documented for every operation with a body), however it violates the schema
    "checks": {
        "negative_data_rejection": {
            "expected-statuses": [400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429, "5xx"]
        }
    },
}

CHECKS = [
    getattr(schemathesis.checks, name)
    for name in (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "negative_data_rejection",
        "positive_data_acceptance",
        "unsupported_method",
        "allow_header_conformance",
        "ignored_auth",
    )
]
SDP = (
    "an SDP offer is a string to the document; the server parses it and refuses one that is not an offer "
    "with the documented 400 invalid_sdp"
)
# Checks that are false positives on one operation, and why.
NOT_CHECKED = {
    "POST /api/v1/webrtc/offer": {"positive_data_acceptance": SDP},
    "POST /whip": {"positive_data_acceptance": SDP},
    "PATCH /whip/{session_id}": {
        "positive_data_acceptance": "documented to be refused: 405 is its only answer (RFC 9725)",
        "allow_header_conformance": "Allow names DELETE, the one method the resource supports; the "
        "document lists PATCH only to document its 405",
    },
    "POST /api/v1/rtsp": {
        "positive_data_acceptance": "a URL valid to the document may name no camera: the server opens it "
        "first and refuses it with the documented 400 stream_unavailable",
    },
    "POST /api/v1/rtmp/keys": {
        "positive_data_acceptance": "a camera name is a string to the document; one that names no camera "
        "profile is refused with the documented 400 invalid_operator_telemetry",
    },
    "PUT /api/v1/sessions/{session_id}/operator-telemetry": {
        "positive_data_acceptance": "as for the keys: an unknown camera profile is a documented 400",
    },
    "GET /api/v1/dji/pilot2-config": {
        "positive_data_acceptance": "the fuzzed server runs without MQTT: its documented answer is 409 mqtt_off",
    },
    "DELETE /whip/{session_id}": {
        "allow_header_conformance": "as for PATCH: PATCH is in the document, not supported, not in Allow",
    },
    "POST /api/v1/auth/login": {
        "positive_data_acceptance": "generated credentials name no user: the documented 401, then 429 "
        "once the sign-in limit is reached",
    },
    "POST /api/v1/auth/logout": {
        "positive_data_acceptance": "the server's API token (the admin run's) is not signed out: the "
        "documented 409",
    },
    "PUT /api/v1/auth/password": {
        "positive_data_acceptance": "the current password must be the user's (a machine token has none): "
        "the documented 422",
    },
    "POST /api/v1/users": {
        "positive_data_acceptance": "a name valid to the document may be taken (409) or be inside the "
        "password (422): documented refusals JSON Schema cannot express",
    },
    "PATCH /api/v1/users/{username}": {
        "positive_data_acceptance": "as for POST: a new password with the user's name in it is a 422",
    },
}


def refused_by_design(case) -> bool:
    """A request valid to the document that the server refuses on purpose, with a documented 4xx the
    document's schemas cannot express: a cursor the server did not issue (400 invalid_cursor), since
    not before until, a time with no UTC equivalent, a legal hold without a reason, a minimum speed
    above the maximum, a stream's zones of the same name or named "global", or a height reference that is not one kind (a site
    value or a measured base: exactly one of them, a sigma only with the site value, a frame index only
    with the base's lines) (422).
    positive_data_acceptance skips these."""
    if case.method.upper() == "PUT" and case.path.endswith("/rules") and isinstance(case.body, dict):
        names = [str(z.get("name")) for z in case.body.get("zones") or [] if isinstance(z, dict)]
        if len(set(names)) != len(names) or "global" in names:
            return True
    if (
        case.method.upper() == "PUT"
        and case.path.endswith("/height-reference")
        and isinstance(case.body, dict)
    ):
        site, base = (case.body.get(k) is not None for k in ("takeoff_above_road_m", "lines"))
        if site == base or (base and case.body.get("sigma_m") is not None):
            return True
        if not base and case.body.get("frame_index") is not None:
            return True  # the frame a base was drawn on goes with its lines
    held = case.path.endswith("/legal-hold") and isinstance(case.body, dict) and case.body.get("hold") is True
    if held and not case.body.get("reason"):
        return True  # a hold needs a reason (422): one field's presence depending on another's value
    query = case.query or {}
    if "cursor" in query:
        return True
    try:  # a speed range upside down (422): JSON Schema cannot relate two parameters
        if float(query["min_speed_kmh"]) > float(query["max_speed_kmh"]):
            return True
    except (KeyError, TypeError, ValueError):
        pass
    bounds = []
    for name in ("since", "until"):
        if name not in query:
            continue
        try:
            value = TypeAdapter(dt.datetime).validate_python(query[name])
        except ValueError:  # not a time at all: the checks judge that one
            return False
        try:
            bounds.append(value.replace(tzinfo=value.tzinfo or dt.timezone.utc).astimezone(dt.timezone.utc))
        except OverflowError:
            return True
    return len(bounds) == 2 and bounds[0] >= bounds[1]


def _seed(server: RunningServer) -> list[int]:
    """Two sessions (one ended), three violations; the first has a snapshot and a clip on disk."""
    sessions = dict.fromkeys(SESSIONS, "webrtc")
    rows = [("sess-a", 0, 61.0, "global"), ("sess-a", 1, 90.5, "school"), ("sess-b", 2, 70.0, "global")]
    return seed_store(server, sessions, rows, sigma_kmh=0.5)


@pytest.fixture(scope="module", autouse=True)
def hypothesis_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Hypothesis' caches go to a temporary folder, not .hypothesis in the working directory."""
    set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))
    yield
    set_hypothesis_home_dir(None)


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    srv = start_server(tmp_path_factory.mktemp("fuzz"))
    try:
        assert _seed(srv) == VIOLATIONS
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def api_schema(live_server: RunningServer):
    """The document the live server serves (fetched with the token), its requests going to that server."""
    return schemathesis.openapi.from_url(
        f"{live_server.url}/openapi.json",
        config=schemathesis.Config.from_dict(CONFIG),
        headers=live_server.headers,
        timeout=30,
    )


def test_every_operation_is_fuzzed(api_schema) -> None:
    served = [result.ok().label for result in api_schema.get_all_operations()]
    assert sorted(served) == sorted(OPERATIONS), "an operation was added or renamed: update OPERATIONS"


@pytest.fixture(scope="module")
def role_headers(live_server: RunningServer) -> dict[str, dict[str, str]]:
    """Bearer headers per role: the server's API token (an admin machine token), and machine tokens
    of the other roles."""
    accounts = live_server.app.state.accounts
    out = {"admin": live_server.headers}
    for role in ROLE_RUNS:
        token = accounts.add_machine_token(f"fuzz {role}", role, "test").token
        out[role] = {"Authorization": f"Bearer {token}"}
    return out


def _fuzz(api_schema, url: str, headers: dict[str, str], label: str, coverage: bool, examples: int) -> None:
    """Schemathesis' coverage cases (when ``coverage``) and ``examples`` generated requests of one
    operation, every response checked against the document."""
    operation = api_schema.find_operation_by_label(label)
    assert operation is not None, label
    not_checked = [getattr(schemathesis.checks, name) for name in NOT_CHECKED.get(label, {})]

    def validate(case) -> None:
        excluded = list(not_checked)
        if refused_by_design(case):
            excluded.append(schemathesis.checks.positive_data_acceptance)
        case.call_and_validate(
            base_url=url, headers=headers, checks=CHECKS, excluded_checks=excluded, timeout=30
        )

    # coverage cases: a fixed list per operation; every failure is reported, not just the first
    failures = []
    if coverage:
        config = api_schema.config.generation_for(operation=operation, phase="coverage")
        for case in api_schema.iter_coverage_cases(
            operation, generation_modes=list(GenerationMode), generation_config=config
        ):
            try:
                validate(case)
            except schemathesis.errors.FailureGroup as exc:
                failures.append(str(exc))
    assert not failures, "\n\n".join(failures)

    # generated requests, valid and invalid ones: the same every run of the same code (Hypothesis
    # also draws constants from the project's modules); no time-based deadline or health check
    @hypothesis.settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(
        case=st.one_of([operation.as_strategy(generation_mode=mode) for mode in GenerationMode])
    )
    def fuzz(case) -> None:
        validate(case)

    fuzz()


@pytest.mark.parametrize("label", OPERATIONS)
def test_operation_matches_the_document(api_schema, live_server: RunningServer, label: str) -> None:
    """As an admin (the server's API token): every operation in full."""
    _fuzz(api_schema, live_server.url, live_server.headers, label, coverage=True, examples=MAX_EXAMPLES)


@pytest.mark.parametrize("role", ROLE_RUNS)
@pytest.mark.parametrize("label", [op for op in OPERATIONS if op != "POST /api/v1/auth/logout"])
def test_operation_matches_the_document_as(
    api_schema, live_server, role_headers, role: str, label: str
) -> None:
    """As each other role: what it may not do answers the documented 403, what it may do conforms
    as for an admin (fewer generated requests: the admin run has covered the parameters). Signing
    out is left out: it would end the run's own token (tests/edge_server/test_edge_roles.py)."""
    _fuzz(api_schema, live_server.url, role_headers[role], label, coverage=False, examples=ROLE_EXAMPLES)
