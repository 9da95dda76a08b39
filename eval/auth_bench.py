"""People and roles, measured: what signing in and checking a token cost (``python -m eval.auth_bench``).

* an Argon2id hash and check (the sign-in's cost; median of 5);
* a token's lookup: from the 2 s cache, and from the database (SQLite) on a miss;
* one live server on 127.0.0.1 (SQLite, no stream): ``GET /api/v1/violations?limit=50`` (50 rows
  stored) and ``GET /api/v1/auth/me``, 200 requests each in a row, p50 and p95, with the server's API
  token (compared in memory) against a user's sign-in token and a machine token (looked up, then
  cached), so the lookup's share of a request shows; and sign-ins: 10 in a row (p50), and 20 at once
  (how long the last waits: at most two Argon2 checks run at a time).

Prints one JSON object; the machine is the caller's to name.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

PASSWORD = "correct horse battery"


def _ms(values: list[float]) -> dict:
    ordered = sorted(values)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 3),
    }


def hashing(repeats: int = 5) -> dict:
    from edge_server.auth.passwords import hash_password, verify_password

    made, checked = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        digest = hash_password(PASSWORD)
        t1 = time.perf_counter()
        verify_password(digest, PASSWORD)
        made.append(t1 - t0)
        checked.append(time.perf_counter() - t1)
    return {
        "argon2_hash_ms": round(statistics.median(made) * 1000, 1),
        "argon2_check_ms": round(statistics.median(checked) * 1000, 1),
    }


def lookups(root: Path, repeats: int = 2000) -> dict:
    from edge_server.auth.accounts import Accounts
    from edge_server.auth.authenticator import Authenticator
    from edge_server.store import Store

    store = Store.from_url(f"sqlite:///{root / 'lookup.db'}")
    try:
        auth = Authenticator("server-token")
        auth.bind(store.accounts)
        token = Accounts(store.accounts, auth).add_machine_token("bench", "viewer", "bench").token
        misses = []
        for _ in range(50):
            auth.forget()
            t0 = time.perf_counter()
            auth.lookup(token)
            misses.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(repeats):
            auth.lookup(token)
        cached_us = (time.perf_counter() - t0) / repeats * 1e6
    finally:
        store.close()
    return {"lookup_cached_us": round(cached_us, 1), "lookup_database_ms": _ms(misses)["p50_ms"]}


def _timed(client, path: str, headers: dict, n: int) -> dict:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        answer = client.get(path, headers=headers)
        times.append(time.perf_counter() - t0)
        assert answer.status_code == 200, answer.text
    return _ms(times)


def server(root: Path, n: int = 200) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import httpx
    from edge_helpers import TOKEN, seed_store, start_server

    srv = start_server(root)
    try:
        seed_store(srv, {"s": "webrtc"}, [("s", k, 60.0 + k % 30, "global") for k in range(50)])
        accounts = srv.app.state.accounts
        accounts.add_user("bench", "officer", PASSWORD, "bench")
        machine = accounts.add_machine_token("bench", "viewer", "bench").token
        out: dict = {}
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            user = c.post("/api/v1/auth/login", json={"username": "bench", "password": PASSWORD}).json()[
                "token"
            ]
            who = {"server_token": TOKEN, "user_token": user, "machine_token": machine}
            for path in ("/api/v1/violations?limit=50", "/api/v1/auth/me"):
                for name, token in who.items():
                    _timed(c, path, {"Authorization": f"Bearer {token}"}, 20)  # warm
                    out[f"GET {path} {name}"] = _timed(c, path, {"Authorization": f"Bearer {token}"}, n)
            logins = []
            for _ in range(10):
                t0 = time.perf_counter()
                c.post("/api/v1/auth/login", json={"username": "bench", "password": PASSWORD})
                logins.append(time.perf_counter() - t0)
            out["login"] = _ms(logins)

        def one(_: int) -> float:
            with httpx.Client(base_url=srv.url, timeout=60) as c:
                t0 = time.perf_counter()
                c.post("/api/v1/auth/login", json={"username": "bench", "password": PASSWORD})
                return time.perf_counter() - t0

        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            burst = list(pool.map(one, range(20)))
        out["login_20_at_once"] = {"max_ms": round(max(burst) * 1000, 1), **_ms(burst)}
    finally:
        srv.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="airpatrol-auth-bench-") as tmp:
        root = Path(tmp)
        report = {**hashing(), **lookups(root), **server(root / "server", args.requests)}
    sys.stdout.write(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
