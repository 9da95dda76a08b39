"""Every route checks its role (issue 41), over a live server.

The table below says, independently of the code, what each API route needs (read, publish,
operate, admin, or any valid token); the test checks that it names every route the app serves and
that each role is refused (403 forbidden) exactly what it may not do, and let through the rest (its
request may then fail for other reasons: an empty body, an unknown id; never 401 or 403). Sign-in,
sign-out, revoked and disabled users' tokens, the sign-in limit and the audit trail's actor are
checked over HTTP too."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
import websockets
from edge_helpers import RunningServer, seed_store, start_server

from edge_server.app import ROUTERS

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

PASSWORD = "correct horse battery"
ROLES = ["admin", "officer", "viewer", "publisher"]
MAY = {
    "read": {"admin", "officer", "viewer"},
    "publish": {"admin", "officer", "publisher"},
    "operate": {"admin", "officer"},
    "admin": {"admin"},
    "token": set(ROLES),
}
V = "/api/v1"
# (method, route path, a request path, what it needs). The request bodies are {} (or an SDP-less
# text): a route let through refuses them with 4xx, so nothing is started, changed or made.
ROUTES = [
    ("GET", "/metrics", "/metrics", "read"),
    ("GET", f"{V}/auth/me", f"{V}/auth/me", "token"),
    ("POST", f"{V}/auth/logout", None, "token"),  # would end the test's own token: tested below
    ("PUT", f"{V}/auth/password", f"{V}/auth/password", "token"),
    ("POST", f"{V}/webrtc/offer", f"{V}/webrtc/offer", "publish"),
    ("DELETE", f"{V}/webrtc/{{session_id}}", f"{V}/webrtc/nope", "publish"),
    ("POST", "/whip", "/whip", "publish"),
    ("DELETE", "/whip/{session_id}", "/whip/nope", "publish"),
    ("PATCH", "/whip/{session_id}", "/whip/nope", "publish"),
    ("GET", f"{V}/sessions", f"{V}/sessions", "read"),
    ("GET", f"{V}/sessions/{{session_id}}", f"{V}/sessions/sess-a", "read"),
    ("POST", f"{V}/sessions/{{session_id}}/viewers", f"{V}/sessions/nope/viewers", "read"),
    ("DELETE", f"{V}/sessions/{{session_id}}/viewers/{{viewer_id}}", f"{V}/sessions/nope/viewers/x", "read"),
    ("GET", f"{V}/sessions/{{session_id}}/rules", f"{V}/sessions/nope/rules", "read"),
    ("PUT", f"{V}/sessions/{{session_id}}/rules", f"{V}/sessions/nope/rules", "operate"),
    ("GET", f"{V}/sessions/{{session_id}}/height-reference", f"{V}/sessions/nope/height-reference", "read"),
    (
        "PUT",
        f"{V}/sessions/{{session_id}}/height-reference",
        f"{V}/sessions/nope/height-reference",
        "operate",
    ),
    (
        "DELETE",
        f"{V}/sessions/{{session_id}}/height-reference",
        f"{V}/sessions/nope/height-reference",
        "operate",
    ),
    (
        "POST",
        f"{V}/sessions/{{session_id}}/height-reference/frames",
        f"{V}/sessions/nope/height-reference/frames",
        "operate",
    ),
    (
        "GET",
        f"{V}/sessions/{{session_id}}/height-reference/frames/{{frame_index}}",
        f"{V}/sessions/nope/height-reference/frames/3",
        "read",
    ),
    ("GET", f"{V}/violations", f"{V}/violations", "read"),
    ("GET", f"{V}/violations.csv", f"{V}/violations.csv", "operate"),
    ("GET", f"{V}/violations.geojson", f"{V}/violations.geojson", "operate"),
    ("GET", f"{V}/map", f"{V}/map", "read"),
    ("GET", f"{V}/map/tiles/{{z}}/{{x}}/{{y}}", f"{V}/map/tiles/1/0/0", "read"),
    ("GET", f"{V}/violations/{{violation_id}}", f"{V}/violations/1", "read"),
    ("GET", f"{V}/violations/{{violation_id}}/snapshot.jpg", f"{V}/violations/1/snapshot.jpg", "read"),
    ("GET", f"{V}/violations/{{violation_id}}/clip.mp4", f"{V}/violations/1/clip.mp4", "read"),
    ("PUT", f"{V}/violations/{{violation_id}}/false_positive", f"{V}/violations/1/false_positive", "operate"),
    ("GET", f"{V}/violations/{{violation_id}}/evidence.zip", f"{V}/violations/1/evidence.zip", "operate"),
    ("POST", f"{V}/violations/{{violation_id}}/evidence", f"{V}/violations/99999/evidence", "operate"),
    ("GET", f"{V}/violations/{{violation_id}}/history", f"{V}/violations/1/history", "read"),
    ("GET", f"{V}/audit", f"{V}/audit", "admin"),
    ("GET", f"{V}/retention", f"{V}/retention", "admin"),
    ("GET", f"{V}/webhooks", f"{V}/webhooks", "admin"),
    ("GET", f"{V}/webhooks/dead", f"{V}/webhooks/dead", "admin"),
    ("POST", f"{V}/webhooks/deliveries/{{delivery_id}}/retry", f"{V}/webhooks/deliveries/99/retry", "admin"),
    ("POST", f"{V}/retention/purge", f"{V}/retention/purge?dry_run=true", "admin"),
    ("PUT", f"{V}/violations/{{violation_id}}/legal-hold", f"{V}/violations/1/legal-hold", "admin"),
    ("GET", f"{V}/users", f"{V}/users", "admin"),
    ("POST", f"{V}/users", f"{V}/users", "admin"),
    ("GET", f"{V}/users/{{username}}", f"{V}/users/nobody", "admin"),
    ("PATCH", f"{V}/users/{{username}}", f"{V}/users/nobody", "admin"),
    ("GET", f"{V}/tokens", f"{V}/tokens", "admin"),
    ("POST", f"{V}/tokens", f"{V}/tokens", "admin"),
    ("DELETE", f"{V}/tokens/{{token_id}}", f"{V}/tokens/tok_000000000000", "admin"),
    ("POST", f"{V}/rtmp/keys", f"{V}/rtmp/keys", "admin"),
    ("GET", f"{V}/rtmp/keys", f"{V}/rtmp/keys", "admin"),
    ("DELETE", f"{V}/rtmp/keys/{{key_id}}", f"{V}/rtmp/keys/nope", "admin"),
    ("DELETE", f"{V}/rtmp/streams/{{session_id}}", f"{V}/rtmp/streams/nope", "publish"),
    ("POST", f"{V}/rtsp", f"{V}/rtsp", "publish"),
    ("DELETE", f"{V}/rtsp/{{session_id}}", f"{V}/rtsp/nope", "publish"),
    (
        "PUT",
        f"{V}/sessions/{{session_id}}/operator-telemetry",
        f"{V}/sessions/nope/operator-telemetry",
        "publish",
    ),
    ("GET", f"{V}/dji/pilot2-config", f"{V}/dji/pilot2-config", "publish"),
    ("GET", "/openapi.json", "/openapi.json", "read"),
    ("GET", "/docs", "/docs", "read"),
]
# Routes without a token: liveness, sign-in, CORS preflight of WHIP, pages with no data in them, and
# nginx's callbacks (a secret in the path).
PUBLIC = {
    ("GET", "/healthz"),
    ("POST", f"{V}/auth/login"),
    ("OPTIONS", "/whip"),
    ("GET", "/internal/rtmp/{secret}/publish"),
    ("GET", "/internal/rtmp/{secret}/publish_done"),
    ("GET", "/dji/pilot2"),
    ("GET", "/guide"),
    ("GET", "/guide/{name}"),
    ("GET", "/guide/lab/{name}"),
    ("GET", "/console"),
    ("GET", "/console/"),
    ("GET", "/console/publish"),
    ("GET", "/console/alert"),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    srv = start_server(tmp_path_factory.mktemp("roles"))
    try:
        seed_store(srv, {"sess-a": "webrtc"}, [("sess-a", 0, 61.0, "global")])
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def tokens(server: RunningServer) -> dict[str, str]:
    """A machine token per role; the officer's is a user's sign-in over HTTP."""
    accounts = server.app.state.accounts
    out = {role: accounts.add_machine_token(f"test {role}", role, "test").token for role in ROLES}
    accounts.add_user("olivia", "officer", PASSWORD, "test")
    with httpx.Client(base_url=server.url, timeout=30) as c:
        answer = c.post(f"{V}/auth/login", json={"username": "olivia", "password": PASSWORD})
    assert answer.status_code == 200, answer.text
    out["officer"] = answer.json()["token"]
    return out


def _served_routes() -> set[tuple[str, str]]:
    found = set()
    for router in ROUTERS:
        for route in router.routes:
            for method in getattr(route, "methods", None) or ():
                found.add((method, route.path))
    return found | {("GET", "/openapi.json"), ("GET", "/docs")}


def test_the_table_names_every_route() -> None:
    table = {(m, p) for m, p, _, _ in ROUTES}
    assert len(table) == len(ROUTES)
    assert table | PUBLIC == _served_routes(), "a route was added or renamed: say who may call it here"
    assert not table & PUBLIC


def test_every_protected_route_declares_one_requirement() -> None:
    for router in ROUTERS:
        for route in router.routes:
            if not getattr(route, "methods", None) or (next(iter(route.methods)), route.path) in PUBLIC:
                continue
            names = [d.call.__name__ for d in route.dependant.dependencies if d.call is not None]
            assert len([n for n in names if n.startswith("require_")]) == 1, (route.path, names)


def _request(server: RunningServer, method: str, path: str, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=server.url, timeout=30) as c:
        if method in ("POST", "PUT", "PATCH"):
            return c.request(method, path, json={}, headers=headers)
        return c.request(method, path, headers=headers)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(
    ("method", "route", "path", "needs"), [r for r in ROUTES if r[2]], ids=lambda v: str(v)
)
def test_each_role_is_refused_what_it_may_not_do(server, tokens, role, method, route, path, needs) -> None:
    answer = _request(server, method, path, tokens[role])
    if role in MAY[needs]:
        assert answer.status_code not in (401, 403), (role, method, path, answer.text)
    else:
        assert answer.status_code == 403, (role, method, path, answer.status_code, answer.text)
        assert answer.json()["error"] == "forbidden"
        assert f"acts as {role}" in answer.json()["detail"]


@pytest.mark.parametrize(
    ("method", "route", "path", "needs"), [r for r in ROUTES if r[2]], ids=lambda v: str(v)
)
def test_no_token_or_a_wrong_one_is_401(server, method, route, path, needs) -> None:
    for token in (None, "ap_" + "0" * 43):
        answer = _request(server, method, path, token)
        assert answer.status_code == 401, (method, path, answer.text)
        assert answer.headers["www-authenticate"] == "Bearer"


async def test_live_events_need_read(server: RunningServer, tokens: dict[str, str]) -> None:
    ws = server.url.replace("http", "ws") + f"{V}/events?token="
    for role in ("viewer", "officer", "admin"):
        async with websockets.connect(ws + tokens[role]) as conn:
            assert "hello" in await asyncio.wait_for(conn.recv(), 5)
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:  # closed before it is accepted
        async with websockets.connect(ws + tokens["publisher"]):
            pass
    assert refused.value.response.status_code == 403


def test_sign_in_me_and_sign_out(server: RunningServer) -> None:
    server.app.state.accounts.add_user("vic", "viewer", PASSWORD, "test")
    with httpx.Client(base_url=server.url, timeout=30) as c:
        signed = c.post(f"{V}/auth/login", json={"username": "VIC", "password": PASSWORD}).json()
        assert signed["role"] == "viewer" and signed["kind"] == "user" and signed["access"] == ["read"]
        auth = {"Authorization": f"Bearer {signed['token']}"}
        me = c.get(f"{V}/auth/me", headers=auth).json()
        assert (me["name"], me["token_id"]) == ("vic", signed["token_id"]) and "token" not in me
        assert c.post(f"{V}/auth/logout", headers=auth).status_code == 204
        assert c.get(f"{V}/auth/me", headers=auth).status_code == 401
        server_token = {"Authorization": f"Bearer {server.token}"}
        assert c.post(f"{V}/auth/logout", headers=server_token).json()["error"] == "not_revocable"
        me = c.get(f"{V}/auth/me", headers=server_token).json()
        assert (me["kind"], me["role"], me["token_id"]) == ("server", "admin", None)


def test_sign_in_refusals_and_the_limit(tmp_path) -> None:
    srv = start_server(tmp_path, login_failures_per_user=3)
    try:
        srv.app.state.accounts.add_user("walt", "viewer", PASSWORD, "test")
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            for _ in range(3):
                wrong = c.post(f"{V}/auth/login", json={"username": "walt", "password": "guess guess guess"})
                assert wrong.status_code == 401 and wrong.json()["error"] == "login_refused"
            locked = c.post(f"{V}/auth/login", json={"username": "walt", "password": PASSWORD})
            assert locked.status_code == 429 and locked.json()["error"] == "too_many_attempts"
            assert 890 <= int(locked.headers["retry-after"]) <= 901
            assert c.post(f"{V}/auth/login", json={"username": "walt"}).status_code == 422
            huge = c.post(f"{V}/auth/login", content=b'{"username": "' + b"x" * 5000 + b'"}')
            assert huge.status_code == 413  # a sign-in body is small: refused before it is read
        trail = srv.store.audit.entries(0, 100)
        assert [e["action"] for e in trail if e["target_type"] == "user"] == ["user.created", "auth.locked"]
    finally:
        srv.stop()


def test_revoked_and_disabled_tokens_refused_at_once(server: RunningServer) -> None:
    accounts = server.app.state.accounts
    accounts.add_user("xena", "officer", PASSWORD, "test")
    admin = {"Authorization": f"Bearer {server.token}"}
    with httpx.Client(base_url=server.url, timeout=30) as c:
        token = c.post(f"{V}/auth/login", json={"username": "xena", "password": PASSWORD}).json()["token"]
        mine = {"Authorization": f"Bearer {token}"}
        assert c.get(f"{V}/violations", headers=mine).status_code == 200
        answer = c.patch(f"{V}/users/xena", json={"disabled": True}, headers=admin)
        assert answer.status_code == 200 and answer.json()["disabled"] is True
        assert c.get(f"{V}/violations", headers=mine).status_code == 401
        made = c.post(f"{V}/tokens", json={"name": "encoder 2", "role": "publisher"}, headers=admin)
        assert made.status_code == 201 and made.json()["token"].startswith("ap_")
        machine = {"Authorization": f"Bearer {made.json()['token']}"}
        assert c.get(f"{V}/auth/me", headers=machine).json()["role"] == "publisher"
        listed = c.get(f"{V}/tokens", headers=admin).json()
        assert made.json()["id"] in [t["id"] for t in listed] and all("token" not in t for t in listed)
        assert c.delete(f"{V}/tokens/{made.json()['id']}", headers=admin).status_code == 200
        assert c.get(f"{V}/auth/me", headers=machine).status_code == 401
        assert c.delete(f"{V}/tokens/{made.json()['id']}", headers=admin).status_code == 404


def test_the_audit_trail_names_the_user(server: RunningServer, tokens: dict[str, str]) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        auth = {"Authorization": f"Bearer {tokens['officer']}"}
        answer = c.put(f"{V}/violations/1/false_positive", json={"false_positive": True}, headers=auth)
        assert answer.status_code == 200, answer.text
        history = c.get(f"{V}/violations/1/history", headers=auth).json()
    mark = [e for e in history["entries"] if e["action"] == "violation.false_positive"][-1]
    assert mark["actor"] == "user:olivia[officer]@127.0.0.1"


def test_users_over_the_api(server: RunningServer) -> None:
    admin = {"Authorization": f"Bearer {server.token}"}
    with httpx.Client(base_url=server.url, timeout=30) as c:
        made = c.post(
            f"{V}/users", json={"username": "Yara", "role": "viewer", "password": PASSWORD}, headers=admin
        )
        assert made.status_code == 201 and made.json()["username"] == "yara"
        again = c.post(
            f"{V}/users", json={"username": "yara", "role": "viewer", "password": PASSWORD}, headers=admin
        )
        assert again.status_code == 409 and again.json()["error"] == "conflict"
        weak = c.post(
            f"{V}/users", json={"username": "zed", "role": "viewer", "password": "short"}, headers=admin
        )
        assert weak.status_code == 422 and "at least 12" in weak.json()["detail"]
        assert c.patch(f"{V}/users/yara", json={"role": "officer"}, headers=admin).json()["role"] == "officer"
        assert "yara" in [u["username"] for u in c.get(f"{V}/users", headers=admin).json()]
        signed = c.post(f"{V}/auth/login", json={"username": "yara", "password": PASSWORD}).json()
        auth = {"Authorization": f"Bearer {signed['token']}"}
        new = {"current_password": PASSWORD, "new_password": "yet another passphrase"}
        assert c.put(f"{V}/auth/password", json=new, headers=auth).status_code == 204
        assert c.put(f"{V}/auth/password", json=new, headers=auth).status_code == 422  # current is now new
    trail = [e for e in server.store.audit.entries(0, 1000) if e["target_id"] == "yara"]
    assert [e["action"] for e in trail] == [
        "user.created",
        "user.updated",
        "auth.signed_in",
        "user.password_changed",
    ]
    assert trail[1]["before"]["role"] == "viewer" and trail[1]["after"]["role"] == "officer"
    assert all("hash" not in str(e["after"]) for e in trail)
