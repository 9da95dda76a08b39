"""REST and WebSocket API against a real uvicorn server: auth, filters, pagination, media, errors."""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import cv2
import numpy as np
import pytest
import websockets
from edge_helpers import SEED_PEAK_EXCESS, SEED_T0, TOKEN, RunningServer, seed_store

# a real server on 127.0.0.1, no stream: it may share the CPU (tests/conftest.py)
pytestmark = [pytest.mark.timeout(60), pytest.mark.parallel_safe]


@pytest.fixture
def seeded(server: RunningServer) -> RunningServer:
    """Two sessions with violations (the first ended); the first has a snapshot and a clip on disk."""
    ids = seed_store(
        server,
        {"sess-a": "webrtc", "sess-b": "whip"},
        [
            ("sess-a", 0, 61.0, "global"),
            ("sess-a", 1, 75.0, "school"),
            ("sess-a", 2, 90.5, "school"),
            ("sess-a", 3, 70.0, "global"),
            ("sess-b", 10, 55.0, "global"),
            ("sess-b", 11, 120.0, "global"),
            ("sess-b", 12, 70.0, "global"),
        ],
    )
    server.store.update_violation(ids[1], snapshot_path="../../etc/passwd")  # never served
    server.store.update_violation(ids[2], class_name="truck")
    server.seeded_ids = ids
    return server


def test_auth_everywhere_but_healthz(server: RunningServer) -> None:
    import httpx

    with httpx.Client(base_url=server.url) as anon:
        health = anon.get("/healthz")
        assert (
            health.status_code == 200
            and health.json()["status"] == "ok"
            and health.json()["database"] is True
        )
        receiving = health.json()["receiving"]  # the box's UDP receive-buffer overflows (Linux)
        if Path("/proc/net/snmp").exists():
            assert receiving["udp_receive_buffer_errors"] >= 0 and isinstance(receiving["overflowing"], bool)
        else:
            assert receiving is None
        for method, path in [
            ("GET", "/api/v1/violations"),
            ("GET", "/api/v1/violations.csv"),
            ("GET", "/api/v1/sessions"),
            ("GET", "/metrics"),
            ("GET", "/docs"),
            ("GET", "/openapi.json"),
            ("POST", "/whip"),
            ("POST", "/api/v1/webrtc/offer"),
            ("PUT", "/api/v1/violations/1/false_positive"),
        ]:
            r = anon.request(method, path)
            assert r.status_code == 401, (path, r.status_code, r.text)
            assert r.json()["error"] == "unauthorized"
            assert r.headers["www-authenticate"] == "Bearer"
        wrong = anon.get("/api/v1/violations", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert anon.get("/api/v1/violations", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
        # /docs: the token opens the page (?token= from a browser, or the header) but is never
        # written into it; the page's script reads it and sends it as a header to /openapi.json
        for headers, query in [({}, {"token": TOKEN}), ({"Authorization": f"Bearer {TOKEN}"}, {})]:
            docs = anon.get("/docs", params=query, headers=headers)
            assert docs.status_code == 200 and "swagger" in docs.text.lower(), docs.text
            assert TOKEN not in docs.text
            assert 'url: "/openapi.json"' in docs.text and 'preauthorizeApiKey("bearer", token)' in docs.text
            assert docs.headers["cache-control"] == "no-store"
            assert docs.headers["referrer-policy"] == "no-referrer"
            # everything the page loads comes from this server: docs work on an offline edge box
            assets = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
            assert assets and all(a.startswith("/docs/assets/") for a in assets), assets
            for asset in assets:  # public files of the fastapi-offline package, no token needed
                r = anon.get(asset)
                assert r.status_code == 200 and len(r.content) > 1000, asset
        assert anon.get("/docs", params={"token": "wrong"}).status_code == 401
        assert anon.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        spec = anon.get(f"/openapi.json?token={TOKEN}").json()
        assert "/whip" in spec["paths"] and "/api/v1/violations" in spec["paths"]
        # the document says what the server sends: every error an ErrorOut, never FastAPI's own
        # HTTPValidationError; a request with a body may get 413 from the guard
        assert "HTTPValidationError" not in json.dumps(spec)
        for path, operations in spec["paths"].items():
            for method, op in operations.items():
                for status, response in op["responses"].items():
                    if status.startswith("4") and "content" in response:
                        schema = response["content"]["application/json"]["schema"]
                        assert schema == {"$ref": "#/components/schemas/ErrorOut"}, (method, path, status)
                if method in ("post", "put", "patch"):
                    assert {"400", "413"} <= set(op["responses"]), (method, path)
        assert "400" in spec["paths"]["/api/v1/sessions"]["get"]["responses"]
        patch = spec["paths"]["/whip/{session_id}"]["patch"]["responses"]
        assert "405" in patch and "200" not in patch  # its only answer; no success it never sends
        assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    with server.client() as c:
        assert c.get("/metrics").status_code == 200
        assert c.get("/api/v1/violations").json() == {"items": [], "next_cursor": None}


def _cursor(raw_json: str) -> str:
    """A cursor as the server encodes them, around hand-written (tampered) JSON."""
    return base64.urlsafe_b64encode(raw_json.encode()).decode().rstrip("=")


HUGE = "99999999999999999999999"  # beyond 64 bits: SQLite raises OverflowError binding it
V = "/api/v1/violations"

# (method, path, query, json body, status, error code, text the detail must contain)
BAD_REQUESTS = [
    ("GET", "/api/v1/nope", None, None, 404, "not_found", "/api/v1/nope"),
    ("POST", V, None, None, 405, "method_not_allowed", "POST"),
    ("GET", V, {"since": "2025-06-02T00:00:00Z", "until": "2025-06-01T00:00:00Z"}, None, 422,
     "invalid_request", "before"),
    ("GET", V, {"since": "9999-12-31T23:59:59-12:00"}, None, 422, "invalid_request", "since"),
    ("GET", V, {"until": "0001-01-01T00:00:00+01:00"}, None, 422, "invalid_request", "until"),
    # a number is not read as Unix seconds (since=2025 would mean 1970): the document says date-time text
    ("GET", V, {"since": "2025"}, None, 422, "invalid_request", "query.since: Value error, expected an ISO 8601"),
    ("GET", V, {"until": "0.5"}, None, 422, "invalid_request", "query.until: Value error, expected an ISO 8601"),
    ("GET", V, {"session_id": "a\x00b"}, None, 422, "invalid_request", "session_id"),
    ("GET", V, {"zone": "school\x00"}, None, 422, "invalid_request", "zone"),
    # unknown parameters: a typo never drops a filter silently
    ("GET", V, {"min_sped": 80}, None, 422, "invalid_request", "query.min_sped: unknown query parameter (did you mean 'min_speed_kmh'?)"),
    ("GET", V, {"zone": "school", "limt": 5}, None, 422, "invalid_request", "query.limt: unknown"),
    ("GET", "/api/v1/sessions", {"stauts": "ended"}, None, 422, "invalid_request", "query.stauts: unknown"),
    # ids beyond 64 bits, zero, negative
    ("GET", f"{V}/{HUGE}", None, None, 422, "invalid_request", "violation_id"),
    ("GET", f"{V}/{HUGE}/snapshot.jpg", None, None, 422, "invalid_request", "violation_id"),
    ("GET", f"{V}/{HUGE}/clip.mp4", None, None, 422, "invalid_request", "violation_id"),
    ("PUT", f"{V}/{HUGE}/false_positive", None, {"false_positive": True}, 422, "invalid_request",
     "violation_id"),
    ("GET", f"{V}/0", None, None, 422, "invalid_request", "violation_id"),
    ("GET", f"{V}/-5", None, None, 422, "invalid_request", "violation_id"),
    ("GET", f"{V}/abc", None, None, 422, "invalid_request", "violation_id"),
    ("GET", f"{V}/{2**63 - 1}", None, None, 404, "not_found", "no violation"),  # largest id: no row
    ("GET", f"{V}/424242", None, None, 404, "not_found", "no violation"),
    ("GET", "/api/v1/sessions/unknown", None, None, 404, "not_found", "no session"),
    ("GET", "/api/v1/sessions/a%00b", None, None, 422, "invalid_request", "session_id"),
    ("GET", "/api/v1/sessions/" + "x" * 100, None, None, 422, "invalid_request", "session_id"),
    # tampered cursors
    ("GET", V, {"cursor": "garbage!!"}, None, 400, "invalid_cursor", "invalid cursor"),
    ("GET", V, {"sort": "-id", "cursor": _cursor('["-id",1e400,1]')}, None, 400, "invalid_cursor", "cursor"),
    ("GET", V, {"sort": "-id", "cursor": _cursor(f'["-id",{HUGE},1]')}, None, 400, "invalid_cursor", "cursor"),
    ("GET", V, {"sort": "-id", "cursor": _cursor('["-id",true,1]')}, None, 400, "invalid_cursor", "cursor"),
    ("GET", V, {"sort": "-peak_speed_kmh", "cursor": _cursor(f'["-peak_speed_kmh",70.5,{HUGE}]')}, None,
     400, "invalid_cursor", "cursor"),
    ("GET", V, {"sort": "-peak_speed_kmh", "cursor": _cursor('["-peak_speed_kmh",NaN,3]')}, None, 400,
     "invalid_cursor", "cursor"),
    ("GET", V, {"sort": "peak_speed_kmh", "cursor": _cursor(f'["peak_speed_kmh",1{"0" * 309},3]')}, None,
     400, "invalid_cursor", "cursor"),
    ("GET", V, {"cursor": _cursor('["-occurred_at","9999-12-31T23:59:59-12:00",1]')}, None, 400,
     "invalid_cursor", "cursor"),
    ("GET", V, {"cursor": _cursor('["-occurred_at","0001-01-01T00:00:00+01:00",1]')}, None, 400,
     "invalid_cursor", "cursor"),
    ("GET", V, {"cursor": _cursor('["-occurred_at",12,1]')}, None, 400, "invalid_cursor", "cursor"),
    ("GET", V, {"cursor": _cursor('["-occurred_at","2025-06-01T12:00:00+00:00",[1]]')}, None, 400,
     "invalid_cursor", "cursor"),
    ("GET", "/api/v1/sessions", {"cursor": _cursor('["-started_at","9999-12-31T23:59:59-12:00","x"]')},
     None, 400, "invalid_cursor", "cursor"),
    ("GET", "/api/v1/sessions", {"cursor": _cursor('["-started_at","2025-06-01T12:00:00+00:00",7]')},
     None, 400, "invalid_cursor", "cursor"),
    ("GET", "/api/v1/sessions", {"cursor": _cursor('["-started_at","2025-06-01T12:00:00+00:00","a\\u0000"]')},
     None, 400, "invalid_cursor", "cursor"),
    ("PUT", f"{V}/1/false_positive", None, {"false_positive": "perhaps"}, 422, "invalid_request",
     "false_positive"),
    # a JSON boolean, as documented: 0, 1 or "true" are refused, not read as booleans
    ("PUT", f"{V}/1/false_positive", None, {"false_positive": 0}, 422, "invalid_request",
     "body.false_positive: Input should be a valid boolean"),
    ("PUT", f"{V}/1/false_positive", None, {"false_positive": "true"}, 422, "invalid_request",
     "body.false_positive: Input should be a valid boolean"),
]  # fmt: skip


# Runs the /docs page's script under Node with the two things a browser page gives it (location and
# history) and a stand-in for the Swagger UI bundle that records its configuration.
DOCS_HARNESS = """
const calls = {replaced: null, preauthorized: null, config: null};
globalThis.window = {
  location: {search: process.argv[2], pathname: "/docs", hash: "#/violations"},
  history: {replaceState: (_s, _t, url) => { calls.replaced = url; }},
};
globalThis.SwaggerUIBundle = (config) => {
  calls.config = config;
  return {preauthorizeApiKey: (name, value) => { calls.preauthorized = [name, value]; }};
};
SwaggerUIBundle.presets = {apis: {}};
SwaggerUIBundle.SwaggerUIStandalonePreset = {};
eval(require("fs").readFileSync(0, "utf8"));
calls.config.onComplete();
const spec = calls.config.requestInterceptor({url: "http://edge:8080/openapi.json", headers: {}});
const other = calls.config.requestInterceptor({url: "http://edge:8080/api/v1/violations", headers: {}});
console.log(JSON.stringify({...calls, config: calls.config.url, spec: spec.headers, other: other.headers}));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the page's script")
@pytest.mark.parametrize(
    ("search", "replaced", "authorized"),
    [
        (f"?token={TOKEN}", "/docs#/violations", True),
        (f"?a=1&token={TOKEN}", "/docs?a=1#/violations", True),
        ("", None, False),
    ],
)
def test_docs_page_script_keeps_the_token_out_of_the_url(
    tmp_path, search: str, replaced: str | None, authorized: bool
) -> None:
    """The token leaves the address bar, fetches the spec as a header and fills the Authorize dialog."""
    from edge_server.api_docs import DOCS_HTML

    script = DOCS_HTML.split("<script>")[1].split("</script>")[0]
    (tmp_path / "harness.js").write_text(DOCS_HARNESS)
    proc = subprocess.run(
        ["node", str(tmp_path / "harness.js"), search],
        input=script,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["replaced"] == replaced and out["config"] == "/openapi.json"
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert out["spec"] == (bearer if authorized else {})
    assert out["other"] == {}  # "Try it out" uses the Authorize dialog, which the user can change
    assert out["preauthorized"] == (["bearer", TOKEN] if authorized else None)


def test_clear_errors_never_tracebacks(db_server: RunningServer) -> None:
    """Bad requests with a valid token get a clear 4xx on SQLite and PostgreSQL, never a 500."""
    with db_server.client() as c:
        for params, field in [
            ({"limit": 0}, "limit"),
            ({"limit": "many"}, "limit"),
            ({"since": "yesterday"}, "since"),
            ({"min_speed_kmh": -3}, "min_speed_kmh"),
            ({"min_speed_kmh": "nan"}, "min_speed_kmh"),
            ({"sort": "speed"}, "sort"),
            ({"false_positive": "maybe"}, "false_positive"),
            ({"status": "fast"}, "unknown status 'fast': give one of enforceable, not_enforceable"),
            ({"status": "legacy,"}, "unknown status ''"),
            ({"status": "Enforceable"}, "unknown status 'Enforceable'"),
        ]:
            r = c.get("/api/v1/violations", params=params)
            body = r.json()
            assert r.status_code == 422 and body["error"] == "invalid_request", (params, body)
            assert field in body["detail"] and "Traceback" not in r.text
        for method, path, params, body, status, code, needle in BAD_REQUESTS:
            r = c.request(method, path, params=params, json=body)
            case = (method, path, params, r.status_code, r.text)
            assert r.status_code == status and r.json()["error"] == code, case
            assert needle in r.json()["detail"] and "Traceback" not in r.text, case
        for path in ("/api/v1/webrtc/offer", "/api/v1/violations/1/false_positive"):  # not UTF-8
            method = "PUT" if path.endswith("false_positive") else "POST"
            r = c.request(method, path, content=b"\xff\xfe{", headers={"Content-Type": "application/json"})
            assert (r.status_code, r.json()["error"]) == (400, "bad_request"), (path, r.text)
        r = c.put(
            "/api/v1/violations/1/false_positive",
            content=b"{not json",
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 422 and r.json()["error"] == "invalid_request"
        assert c.get("/healthz").json()["status"] == "ok"


def test_violation_filters_and_detail(seeded: RunningServer) -> None:
    with seeded.client() as c:

        def speeds(**params) -> list[float]:  # the ticket speeds (the filters' and the seeds')
            r = c.get("/api/v1/violations", params=params)
            assert r.status_code == 200, r.text
            return sorted(v["ticket_speed_kmh"] for v in r.json()["items"])

        assert speeds() == [55.0, 61.0, 70.0, 70.0, 75.0, 90.5, 120.0]
        assert speeds(session_id="sess-b") == [55.0, 70.0, 120.0]
        assert speeds(zone="school") == [75.0, 90.5]
        assert speeds(min_speed_kmh=71) == [75.0, 90.5, 120.0]
        assert speeds(since="2025-06-01T12:01:00Z", until="2025-06-01T12:03:00Z") == [75.0, 90.5]
        assert speeds(since="2025-06-01T14:01:00+02:00") == [55.0, 70.0, 70.0, 75.0, 90.5, 120.0]  # 12:01Z
        assert speeds(since="2025-06-01T12:10:00") == [55.0, 70.0, 120.0]  # naive = UTC
        assert speeds(session_id="sess-a", zone="global", min_speed_kmh=65) == [70.0]
        assert speeds(max_speed_kmh=70) == [55.0, 61.0, 70.0, 70.0]
        assert speeds(min_speed_kmh=61, max_speed_kmh=75) == [61.0, 70.0, 70.0, 75.0]
        assert speeds(class_name="truck") == [90.5] and speeds(class_name="bus") == []
        assert speeds(class_name="vehicle", zone="school") == [75.0]
        for params, needle in [
            ({"min_speed_kmh": 80, "max_speed_kmh": 70}, "'min_speed_kmh' must not be above 'max_speed_kmh'"),
            ({"class_name": "car\x00"}, "class_name"),
        ]:
            r = c.get("/api/v1/violations", params=params)
            assert r.status_code == 422 and needle in r.json()["detail"], r.text

        vid = seeded.seeded_ids[0]
        detail = c.get(f"/api/v1/violations/{vid}").json()
        assert detail["session_id"] == "sess-a" and detail["ticket_speed_kmh"] == 61.0
        assert detail["peak_speed_kmh"] == 61.0 + SEED_PEAK_EXCESS  # informative, kept
        assert (
            detail["status"],
            detail["status_reason"],
            detail["tolerance_kmh"],
            detail["confidence_k"],
        ) == (
            "enforceable",
            "",
            3.0,
            1.645,
        )
        assert detail["base"] == {
            "start_time_s": 0.0, "end_time_s": 1.5, "duration_s": 1.5, "start_frame": 1, "end_frame": 46,
            "distance_m": 30.0, "n_samples": 46, "index": 1, "of": 1, "snapshot_frame": 23,
            "snapshot_time_s": 0.7333, "track_id": None,  # measured on its own track
        }  # fmt: skip
        assert detail["occurred_at"].startswith("2025-06-01T12:00:00")
        assert detail["snapshot_url"] == f"/api/v1/violations/{vid}/snapshot.jpg"
        assert detail["clip_url"] == f"/api/v1/violations/{vid}/clip.mp4"
        assert detail["bbox_xyxy"] == [10, 20, 50, 40]


def test_csv_export_streams_every_filtered_violation(seeded: RunningServer) -> None:
    """The list's filters; every matching row however many (read in pages of CSV_PAGE); a text
    cell that a spreadsheet would run as a formula is defused."""
    from edge_server.routes.violations import CSV_PAGE
    from edge_server.violation_csv import CSV_COLUMNS
    from pipelines.types import Violation

    with seeded.client() as c:
        r = c.get("/api/v1/violations.csv", params={"zone": "school", "sort": "peak_speed_kmh"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv"), r.text
        assert re.fullmatch(
            r'attachment; filename="violations-\d{8}T\d{6}Z\.csv"', r.headers["content-disposition"]
        )
        rows = list(csv.DictReader(io.StringIO(r.text)))
        assert tuple(rows[0]) == CSV_COLUMNS
        assert [
            (row["session_id"], row["ticket_speed_kmh"], row["peak_speed_kmh"], row["zone"]) for row in rows
        ] == [
            ("sess-a", "75.0", "77.5", "school"),
            ("sess-a", "90.5", "93.0", "school"),
        ]
        base = {k: rows[0][k] for k in CSV_COLUMNS if k.startswith("base_")}
        assert base == {
            "base_start_time_s": "60.0", "base_end_time_s": "61.5", "base_start_frame": "1801",
            "base_end_frame": "1846", "base_distance_m": "30.0",
        }  # fmt: skip
        assert (rows[0]["status"], rows[0]["status_reason"], rows[0]["tolerance_kmh"]) == (
            "enforceable",
            "",
            "3.0",
        )
        assert rows[0]["false_positive"] == "false" and rows[0]["occurred_at"].startswith(
            "2025-06-01T12:01:00"
        )
        first = next(
            iter(csv.DictReader(io.StringIO(c.get("/api/v1/violations.csv", params={"sort": "id"}).text)))
        )
        assert first["snapshot_url"] == f"/api/v1/violations/{seeded.seeded_ids[0]}/snapshot.jpg"

        many = 2 * CSV_PAGE + 3
        for i in range(many):
            v = Violation(
                track_id=i,
                zone="=HYPERLINK(1)" if i == 0 else "bulk",
                speed_limit_kmh=50.0,
                peak_speed_kmh=60.0 + i % 40,
                mean_speed_kmh=58.0,
                sigma_kmh=1.0,
                start_frame=1,
                end_frame=2,
                start_time_s=0.0,
                end_time_s=1.0,
            )
            seeded.store.add_violation("sess-b", v, occurred_at=SEED_T0)
        r = c.get("/api/v1/violations.csv", params={"session_id": "sess-b", "sort": "-peak_speed_kmh"})
        rows = list(csv.DictReader(io.StringIO(r.text)))
        assert len(rows) == many + 3 and len({row["id"] for row in rows}) == len(rows)
        speeds = [float(row["peak_speed_kmh"]) for row in rows]
        assert speeds == sorted(speeds, reverse=True)
        assert "'=HYPERLINK(1)" in {row["zone"] for row in rows} and "=HYPERLINK(1)" not in r.text.replace(
            "'=", ""
        )
        bulk = next(row for row in rows if row["zone"] == "bulk")  # no ticket speed: empty cells
        assert (bulk["ticket_speed_kmh"], bulk["base_start_frame"], bulk["status"]) == (
            "",
            "",
            "not_enforceable",
        )
        for params, needle in [
            ({"limit": 5}, "query.limit: unknown query parameter"),
            ({"min_speed_kmh": 9, "max_speed_kmh": 1}, "must not be above"),
        ]:
            r = c.get("/api/v1/violations.csv", params=params)
            assert r.status_code == 422 and needle in r.json()["detail"], r.text


def test_sorting_and_cursor_pagination(seeded: RunningServer) -> None:
    with seeded.client() as c:
        for sort, key in [
            ("-ticket_speed_kmh", "ticket_speed_kmh"),
            ("ticket_speed_kmh", "ticket_speed_kmh"),
            ("-peak_speed_kmh", "peak_speed_kmh"),
            ("occurred_at", "occurred_at"),
            ("-id", "id"),
        ]:
            items, cursor = [], None
            while True:
                params = {"sort": sort, "limit": 2}
                if cursor:
                    params["cursor"] = cursor
                page = c.get("/api/v1/violations", params=params).json()
                items.extend(page["items"])
                cursor = page["next_cursor"]
                if not cursor:
                    break
            assert len(items) == 7 and len({v["id"] for v in items}) == 7
            keys = [(v[key], v["id"]) for v in items]
            assert keys == sorted(keys, reverse=sort.startswith("-"))
        first = c.get("/api/v1/violations", params={"sort": "-peak_speed_kmh", "limit": 2}).json()
        r = c.get("/api/v1/violations", params={"sort": "id", "cursor": first["next_cursor"]})
        assert r.status_code == 400 and "sort" in r.json()["detail"]


def test_status_filter_and_rows_without_a_ticket_speed(seeded: RunningServer) -> None:
    """``status=`` (one or a comma list) selects by the derived status; a speed filter leaves out
    violations without a ticket speed; the ticket-speed sort puts them last."""
    from pipelines.types import Violation

    ids = seeded.seeded_ids  # seven enforceable ones
    no_base = Violation(
        99, "global", 50.0, 88.0, 80.0, 4.0, 1, 20, 0.0, 0.6, status="not_enforceable",
        status_reason="no measuring base of 1.0 s and 15 m", tolerance_kmh=3.0,
    )  # fmt: skip
    nb = seeded.store.add_violation("sess-b", no_base, occurred_at=SEED_T0).id
    legacy = ids[5]  # 120 km/h: as a row stored before the ticket speed
    seeded.store.update_violation(
        legacy, ticket_speed_kmh=None, ticket_sigma_kmh=None, tolerance_kmh=None, confidence_k=None,
        base=None, ticket_status=None, status_reason=None,
    )  # fmt: skip
    seeded.store.update_violation(ids[0], false_positive=True)
    with seeded.client() as c:

        def got(**params) -> list[int]:
            r = c.get("/api/v1/violations", params={"sort": "id", **params})
            assert r.status_code == 200, r.text
            return [v["id"] for v in r.json()["items"]]

        assert got(status="legacy") == [legacy]
        assert got(status="not_enforceable") == [nb]
        assert got(status="dismissed") == [ids[0]]
        assert got(status="enforceable") == [i for i in ids if i not in (ids[0], legacy)]
        assert got(status="legacy,dismissed,not_enforceable") == [ids[0], legacy, nb]
        assert got(status="dismissed", session_id="sess-b") == []
        assert legacy not in got(min_speed_kmh=0) and nb not in got(max_speed_kmh=1000)
        assert len(got()) == 8

        shown = {v["id"]: v for v in c.get("/api/v1/violations", params={"limit": 100}).json()["items"]}
        old = shown[legacy]
        assert (old["status"], old["ticket_speed_kmh"], old["peak_speed_kmh"]) == ("legacy", None, 122.5)
        assert "peak only" in old["status_reason"]
        assert (shown[nb]["status"], shown[nb]["ticket_speed_kmh"], shown[nb]["base"]) == (
            "not_enforceable",
            None,
            None,
        )
        assert shown[nb]["status_reason"] == "no measuring base of 1.0 s and 15 m"
        fastest = c.get("/api/v1/violations", params={"sort": "-ticket_speed_kmh", "limit": 100}).json()[
            "items"
        ]
        assert [v["ticket_speed_kmh"] for v in fastest] == [90.5, 75.0, 70.0, 70.0, 61.0, 55.0, None, None]

        csv_rows = list(
            csv.DictReader(io.StringIO(c.get("/api/v1/violations.csv", params={"status": "legacy"}).text))
        )
        assert [(r["id"], r["status"], r["ticket_speed_kmh"], r["peak_speed_kmh"]) for r in csv_rows] == [
            (str(legacy), "legacy", "", "122.5")
        ]


def test_false_positive_and_media_downloads(seeded: RunningServer) -> None:
    vid, other = seeded.seeded_ids[0], seeded.seeded_ids[1]
    with seeded.client() as c:
        r = c.put(f"/api/v1/violations/{vid}/false_positive", json={"false_positive": True})
        assert r.status_code == 200 and r.json()["false_positive"] is True
        assert c.get(f"/api/v1/violations/{vid}").json()["false_positive"] is True
        assert [
            v["id"] for v in c.get("/api/v1/violations", params={"false_positive": True}).json()["items"]
        ] == [vid]
        assert len(c.get("/api/v1/violations", params={"false_positive": False}).json()["items"]) == 6
        assert (
            c.put(f"/api/v1/violations/{vid}/false_positive", json={"false_positive": False}).json()[
                "false_positive"
            ]
            is False
        )
        assert (
            c.put("/api/v1/violations/999999/false_positive", json={"false_positive": True}).status_code
            == 404
        )

        snap = c.get(f"/api/v1/violations/{vid}/snapshot.jpg")
        assert snap.status_code == 200 and snap.headers["content-type"] == "image/jpeg"
        assert cv2.imdecode(np.frombuffer(snap.content, np.uint8), cv2.IMREAD_COLOR).shape == (60, 80, 3)
        clip = c.get(f"/api/v1/violations/{vid}/clip.mp4")
        assert clip.status_code == 200 and clip.headers["content-type"] == "video/mp4"
        assert clip.content[4:8] == b"ftyp"
        ranged = c.get(f"/api/v1/violations/{vid}/clip.mp4", headers={"Range": "bytes=0-99"})
        assert ranged.status_code == 206 and len(ranged.content) == 100  # browsers seek with ranges
        size = len(clip.content)
        for header, status, error in [
            (f"bytes={size + 10}-", 416, "range_not_satisfiable"),
            ("items=0-1", 400, "invalid_range"),
            ("bytes=50-10", 400, "invalid_range"),
        ]:
            r = c.get(f"/api/v1/violations/{vid}/clip.mp4", headers={"Range": header})
            assert (r.status_code, r.json()["error"]) == (status, error), header  # JSON like every error
        r = c.get(f"/api/v1/violations/{vid}/clip.mp4", headers={"Range": f"bytes={size + 10}-"})
        assert r.headers["content-range"] == f"bytes */{size}"
        # a path outside the media folder is never served; a missing clip is a clear 404
        r = c.get(f"/api/v1/violations/{other}/snapshot.jpg")
        assert r.status_code == 404 and r.json()["error"] == "not_found"
        r = c.get(f"/api/v1/violations/{other}/clip.mp4")
        assert r.status_code == 404 and "no clip" in r.json()["detail"]


def test_sessions_list_and_detail(seeded: RunningServer) -> None:
    with seeded.client() as c:
        page = c.get("/api/v1/sessions").json()
        assert {s["id"] for s in page["items"]} == {"sess-a", "sess-b"}
        assert [s["id"] for s in c.get("/api/v1/sessions", params={"status": "ended"}).json()["items"]] == [
            "sess-a"
        ]
        first = c.get("/api/v1/sessions", params={"limit": 1}).json()
        second = c.get("/api/v1/sessions", params={"limit": 1, "cursor": first["next_cursor"]}).json()
        assert {first["items"][0]["id"], second["items"][0]["id"]} == {"sess-a", "sess-b"}
        assert second["next_cursor"] is None
        detail = c.get("/api/v1/sessions/sess-a").json()
        assert detail["violations_count"] == 4 and detail["status"] == "ended" and detail["tracks"] == []
        assert c.get("/api/v1/sessions", params={"status": "weird"}).status_code == 422


async def test_events_websocket_auth_and_updates(seeded: RunningServer) -> None:
    ws_base = seeded.url.replace("http", "ws") + "/api/v1/events"
    with pytest.raises(websockets.exceptions.InvalidStatus) as exc:
        async with websockets.connect(ws_base):
            pass
    assert exc.value.response.status_code == 403
    with pytest.raises(websockets.exceptions.InvalidStatus):
        async with websockets.connect(ws_base + "?token=wrong"):
            pass
    vid = seeded.seeded_ids[2]
    async with websockets.connect(ws_base, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        hello = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert hello == {"type": "hello", "active_sessions": []}
        async with websockets.connect(ws_base + f"?token={TOKEN}&session_id=sess-b") as ws_b:
            json.loads(await asyncio.wait_for(ws_b.recv(), 5))
            await asyncio.to_thread(
                lambda: seeded.client().put(
                    f"/api/v1/violations/{vid}/false_positive", json={"false_positive": True}
                )
            )
            event = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert event["type"] == "violation.updated" and event["violation"]["id"] == vid
            assert event["violation"]["false_positive"] is True
            assert event["violation"]["status"] == "dismissed"  # the mark wins over the engine's status
            assert (
                event["violation"]["ticket_speed_kmh"] == 90.5
                and event["violation"]["base"]["end_frame"] == 3646
            )
            with pytest.raises(asyncio.TimeoutError):  # filtered: sess-a events do not reach sess-b watchers
                await asyncio.wait_for(ws_b.recv(), 0.5)


async def test_internal_error_is_json_keeps_cors_and_the_connection(server_factory) -> None:
    """A failure the server did not foresee (here the database losing a table) is a JSON 500 with
    the CORS headers a browser needs, logged once, and the keep-alive connection stays usable."""
    import httpx

    origin = "http://officer-console.example"
    srv = server_factory(cors_origins=[origin])
    with srv.store.engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE violations RENAME TO violations_gone")
    headers = {"Authorization": f"Bearer {TOKEN}", "Origin": origin}
    async with httpx.AsyncClient(base_url=srv.url, headers=headers, timeout=30) as c:
        for _ in range(2):  # the second request goes over the first one's connection
            r = await c.get("/api/v1/violations")
            assert r.status_code == 500, r.text
            assert r.json() == {
                "error": "internal_error",
                "detail": "internal server error (logged on the server)",
            }
            assert r.headers["access-control-allow-origin"] == origin
            await asyncio.sleep(0.3)  # a server that closes the connection after a 500 has done so now
        assert (await c.get("/healthz")).status_code == 200
