"""The operator console's targets (issue 14), measured in Debian's headless chromium against a real
server on 127.0.0.1 with 10,000 violations stored (200 sessions):

* page load: navigation start -> the page shows its data (violations: the first 50 rows; sessions:
  the first rows; live: the server's health line), over several loads, median and max;
* a violation stored -> its row on the open violations page: the server's own ViolationRecorder
  writes its snapshot, stores it and publishes it (as a live stream's worker does); the page stamps
  the row's arrival with a MutationObserver; the wall-clock time from the call (so an upper bound:
  it includes the snapshot's JPEG) to the row, over N violations: median, p95 and max;
* an enforceable violation stored -> its card on the stop team's phone page (/console/alert, issue
  41's target: p95 <= 1 s), the same way (the page stamps each card as it adds it).

A benchmark, not CI:    .venv/bin/python eval/examples/console_bench.py [--violations 10000] [--n 30]

Needs the dev extra (selenium) and Debian's chromium + chromium-driver (.ci/chromium.sh).
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import uvicorn
from fastapi import FastAPI

REPO = Path(__file__).resolve().parents[2]
from edge_server.app import create_app  # noqa: E402
from edge_server.settings import ServerSettings  # noqa: E402
from edge_server.store import SessionRow, ViolationRow, utcnow  # noqa: E402
from pipelines.types import Violation  # noqa: E402

# the project first: on the path, tests/edge_server would be found as a namespace package
sys.path.append(str(REPO / "tests"))

from browser_helpers import CHROMEDRIVER, CHROMIUM, chromium_options  # noqa: E402
from edge_helpers import violation_recorder  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

log = logging.getLogger("console_bench")
TOKEN = "console-bench-token"
T0 = dt.datetime(2026, 11, 1, 8, 0, tzinfo=dt.timezone.utc)

WAIT_ROWS = """
const [selector, count, done] = arguments;
const ready = () => document.querySelectorAll(selector).length >= count;
if (ready()) return done(performance.now());
new MutationObserver((_, observer) => {
  if (ready()) { observer.disconnect(); done(performance.now()); }
}).observe(document.body, {childList: true, subtree: true, characterData: true});
"""
WAIT_TEXT = """
const [selector, done] = arguments;
const ready = () => { const el = document.querySelector(selector); return el && el.textContent.trim(); };
if (ready()) return done(performance.now());
new MutationObserver((_, observer) => {
  if (ready()) { observer.disconnect(); done(performance.now()); }
}).observe(document.body, {childList: true, subtree: true, characterData: true});
"""
STAMP_ROWS = """
window.__seen = {};
new MutationObserver((records) => {
  const now = performance.timeOrigin + performance.now();
  for (const r of records) for (const n of r.addedNodes) if (n.dataset && n.dataset.id) window.__seen[n.dataset.id] ??= now;
}).observe(document.querySelector('#violations tbody'), {childList: true});
"""


def seed(store, sessions: int, violations: int) -> None:
    """Rows written in bulk (one transaction): the store's own add_violation commits one at a time."""
    rng = np.random.default_rng(0)
    with store._sessions.begin() as s:  # noqa: SLF001 - a benchmark's bulk seed
        for i in range(sessions):
            start = T0 + dt.timedelta(minutes=10 * i)
            s.add(
                SessionRow(id=f"seed{i:04d}", kind="webrtc", status="ended", started_at=start,
                           ended_at=start + dt.timedelta(minutes=8), end_reason="ended by client",
                           frames_received=14400, frames_processed=14400)
            )  # fmt: skip
        for k in range(violations):
            speed = float(rng.uniform(52, 120))
            s.add(
                ViolationRow(session_id=f"seed{k % sessions:04d}", occurred_at=T0 + dt.timedelta(seconds=3 * k),
                             track_id=k, class_name=("car", "van", "truck", "bus")[k % 4], zone="global",
                             speed_limit_kmh=50.0, peak_speed_kmh=speed, mean_speed_kmh=speed - 2, sigma_kmh=0.8,
                             start_frame=1, end_frame=60, start_time_s=0.0, end_time_s=2.0,
                             false_positive=False, created_at=utcnow(), updated_at=utcnow())
            )  # fmt: skip


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--violations", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--loads", type=int, default=7, help="page loads per page")
    ap.add_argument("--n", type=int, default=30, help="live violations timed")
    return ap.parse_args()


def start_server(tmp: Path) -> tuple[ServerSettings, FastAPI, uvicorn.Server]:
    """A real server (uvicorn, in a thread) on a free port of 127.0.0.1: its settings, app and server."""
    settings = ServerSettings(api_token=TOKEN, data_dir=tmp / "data", host="127.0.0.1", port=0,
                              rtmp_port=None, mqtt_port=None, warm_pipeline=False)  # fmt: skip
    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        settings = settings.model_copy(update={"port": sock.getsockname()[1]})
    app = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=settings.port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return settings, app, server


def time_page_loads(driver, url: str, loads: int) -> None:
    """Navigation start -> data shown, ``loads`` fresh loads of each page: median and max."""
    pages = {
        "violations (first 50 of 10,000)": ("#/violations", WAIT_ROWS, ["#violations tbody tr", 50]),
        "sessions (first 50 of 200)": ("#/sessions", WAIT_ROWS, ["#sessions tbody tr", 50]),
        "live (health + streams)": ("#/live", WAIT_TEXT, ["#health"]),
    }
    say(f"\npage load, navigation start -> data shown, {loads} loads each (ms):")
    for name, (route, script, script_args) in pages.items():
        times = []
        for _ in range(loads):
            driver.get("about:blank")  # a new document each time, not a hash change
            driver.get(f"{url}/console/{route}")
            times.append(driver.execute_async_script(script, *script_args))
        say(f"  {name:34s} median {statistics.median(times):6.0f}   max {max(times):6.0f}")


def time_arrivals(driver, app: FastAPI, settings: ServerSettings, session_id: str, n: int, seen_js: str,
                  what: str, **ticket) -> None:  # fmt: skip
    """``n`` violations (with ``ticket``'s fields) stored by the server's own ViolationRecorder, one
    every 0.3 s -> when the open page stamped each (``seen_js``: id -> ms): median, p95 and max."""
    recorder = violation_recorder(app, settings, session_id)
    frame = np.full((360, 640, 3), 90, np.uint8)
    stored: dict[int, float] = {}
    for k in range(n):
        v = Violation(track_id=k, zone="global", speed_limit_kmh=50.0, peak_speed_kmh=70.0 + k % 20,
                      mean_speed_kmh=68.0, sigma_kmh=0.9, start_frame=30 * k + 1, end_frame=30 * k + 30,
                      start_time_s=float(k), end_time_s=k + 1.0, class_name="car",
                      bbox_xyxy=(100.0, 100.0, 160.0, 130.0), **ticket)  # fmt: skip
        before = time.time() * 1000  # before the row is stored: an upper bound of the delay
        row = recorder.record(v, frame, None, dt.datetime.now(dt.timezone.utc))
        stored[row.id] = before
        time.sleep(0.3)
    time.sleep(2.0)
    seen = driver.execute_script(f"return {seen_js}")
    latency = [seen[str(i)] - t for i, t in stored.items() if str(i) in seen]
    missing = len(stored) - len(latency)
    say(f"\n{what}, {len(latency)} violations (ms):")
    say(f"  median {statistics.median(latency):.0f}   p95 {pct(latency, 95):.0f}   max {max(latency):.0f}"
          f"   missing {missing}")  # fmt: skip


def time_live_rows(driver, url: str, app: FastAPI, settings: ServerSettings, n: int) -> None:
    """Violations stored -> their rows on the open violations page."""
    driver.get("about:blank")
    driver.get(f"{url}/console/#/violations")
    driver.execute_async_script(WAIT_ROWS, "#violations tbody tr", 50)
    time.sleep(1.0)  # the events link is up
    driver.execute_script(STAMP_ROWS)
    time_arrivals(driver, app, settings, "live0001", n, "window.__seen",
                  "violation stored -> row on the open violations page")  # fmt: skip


def time_alerts(driver, url: str, app: FastAPI, settings: ServerSettings, n: int) -> None:
    """Enforceable violations stored -> their cards on the stop team's page."""
    driver.get("about:blank")
    driver.get(f"{url}/console/alert")
    WebDriverWait(driver, 30).until(lambda d: d.find_element("id", "link-state").text == "live")
    time_arrivals(driver, app, settings, "alert001", n, "window.__alerts.shown",
                  "enforceable violation stored -> card on the stop team's page", ticket_speed_kmh=66.0,
                  ticket_sigma_kmh=0.9, tolerance_kmh=3.0, confidence_k=1.645, status="enforceable")  # fmt: skip


def main() -> int:
    args = parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    if not (CHROMIUM and CHROMEDRIVER):
        sys.exit("needs chromium and chromedriver (.ci/chromium.sh)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    tmp = Path(tempfile.mkdtemp(prefix="console-bench-"))
    settings, app, server = start_server(tmp)
    url = f"http://127.0.0.1:{settings.port}"
    started = time.perf_counter()
    seed(app.state.store, args.sessions, args.violations)
    say(
        f"seeded {args.violations} violations in {args.sessions} sessions in {time.perf_counter() - started:.1f} s"
    )

    driver = webdriver.Chrome(options=chromium_options(CHROMIUM, tmp / "profile"),
                              service=Service(executable_path=CHROMEDRIVER))  # fmt: skip
    driver.set_script_timeout(30)
    try:
        driver.get(f"{url}/console/")
        driver.execute_script("sessionStorage.setItem('airpatrol.token', arguments[0])", TOKEN)
        time_page_loads(driver, url, args.loads)
        time_live_rows(driver, url, app, settings, args.n)
        time_alerts(driver, url, app, settings, args.n)
    finally:
        driver.quit()
        server.should_exit = True
    say(f"\nmachine: {platform.node()}, {platform.processor() or platform.machine()}, "
          f"{__import__('os').cpu_count()} CPUs, Python {platform.python_version()}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
