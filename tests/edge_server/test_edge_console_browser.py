"""The operator console (/console) in headless chromium against a real server on 127.0.0.1: a wrong
token is refused; users sign in with a password and see what their role may do; the violations page filters, shows a snapshot and plays a clip, has a violation's
evidence pack made and downloads it (it verifies), exports CSV, and a
false positive marked there persists across a reload; a real stream (`airpatrol publish synthetic`
over WebRTC, speeding vehicles) appears on the live page, its violations arrive in the table without
a reload, and the sessions page ends it; its card's height tool measures a base on a frame the server froze
and sets the take-off height above the road. How fast pages load with 10,000 violations stored and how
soon a violation shows: eval/examples/console_bench.py (a benchmark, not a timed test).

Screenshots of every page go to $AIRPATROL_SCREENSHOTS (default runs/screenshots/): look at them.
Waits are explicit (on what the page shows), never sleeps.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from browser_helpers import WAIT_S, console_errors, require_selenium, screenshot
from edge_helpers import SEED_T0, TOKEN, RunningServer, seed_store, synthetic_stream

from edge_server.evidence.keys import KeyRing
from edge_server.evidence.verify import verify_pack

require_selenium()

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

pytestmark = pytest.mark.timeout(240)
ROWS = (By.CSS_SELECTOR, "#violations tbody tr")


def shot(driver: WebDriver, name: str) -> None:
    screenshot(driver, f"console-{name}")


def wait(driver: WebDriver) -> WebDriverWait:
    """Pages redraw rows and cards as events arrive (a live stream's stats every 0.5 s here): an
    element found a moment ago may be gone; the wait looks again."""
    return WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))


def click(driver: WebDriver, locator: tuple[str, str]) -> None:
    """Find and click in one step, again if the element was redrawn in between."""

    def attempt(d: WebDriver) -> bool:
        element = d.find_element(*locator)
        d.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        element.click()
        return True

    wait(driver).until(attempt)


def js(driver: WebDriver, expression: str):
    """Read the page in one step (no element reference to go stale)."""
    return driver.execute_script(f"return {expression}")


def sign_in(driver: WebDriver, server: RunningServer, token: str = TOKEN) -> None:
    driver.get(f"{server.url}/console/")
    field = wait(driver).until(ec.visibility_of_element_located((By.ID, "token")))
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#login-form button[type=submit]").click()


def sign_in_as(driver: WebDriver, server: RunningServer, username: str, password: str) -> None:
    driver.get(f"{server.url}/console/")
    wait(driver).until(ec.visibility_of_element_located((By.ID, "username"))).send_keys(username)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "#login-form button[type=submit]").click()


def go(driver: WebDriver, page: str) -> None:
    # the nav shows once the sign-in's token check has answered: not at once on a loaded machine
    wait(driver).until(ec.element_to_be_clickable((By.CSS_SELECTOR, f"#nav a[data-page='{page}']"))).click()
    wait(driver).until(lambda d: d.find_element(By.ID, "page").get_attribute("data-page") == page)


def row_ids(driver: WebDriver) -> list[int]:
    return [
        int(i)
        for i in js(driver, "[...document.querySelectorAll('#violations tbody tr')].map(tr => tr.dataset.id)")
    ]


@pytest.fixture
def seeded(server: RunningServer) -> RunningServer:
    server.seeded_ids = seed_store(
        server,
        {"sess-a": "webrtc", "sess-b": "whip"},
        [
            ("sess-a", 0, 61.0, "global"),
            ("sess-a", 1, 75.0, "school"),
            ("sess-a", 2, 90.5, "school"),
            ("sess-b", 10, 55.0, "global"),
            ("sess-b", 11, 120.0, "global"),
        ],
        sigma_kmh=1.2,
    )
    return server


def test_a_wrong_token_is_refused(server: RunningServer, chromium: WebDriver) -> None:
    sign_in(chromium, server, "not-the-token")
    error = wait(chromium).until(ec.visibility_of_element_located((By.ID, "login-error")))
    assert "refused" in error.text
    assert not chromium.find_element(By.ID, "nav").is_displayed()
    assert chromium.execute_script("return sessionStorage.getItem('airpatrol.token')") is None
    shot(chromium, "login-refused")
    field = chromium.find_element(By.ID, "token")
    field.send_keys(TOKEN)
    chromium.find_element(By.CSS_SELECTOR, "#login-form button[type=submit]").click()
    wait(chromium).until(ec.visibility_of_element_located((By.ID, "nav")))
    assert not chromium.find_element(By.ID, "login").is_displayed()
    # the 401 of the refused sign-in is the only error the console caused
    errors = [e for e in console_errors(chromium) if "401" not in e["message"]]
    assert errors == []


@pytest.mark.parametrize(("role", "reviews"), [("viewer", False), ("officer", True)])
def test_a_user_signs_in_and_sees_what_the_role_may_do(
    seeded: RunningServer, chromium: WebDriver, role: str, reviews: bool
) -> None:
    """A user's sign-in (name and password); a viewer sees the violations without the review, export
    and evidence controls, an officer with them; signing out ends the token on the server."""
    password = "correct horse battery"
    seeded.app.state.accounts.add_user(f"{role}1", role, password, "test")
    sign_in_as(chromium, seeded, f"{role}1", "not the password")
    error = wait(chromium).until(ec.visibility_of_element_located((By.ID, "login-error")))
    assert "Wrong user name or password" in error.text
    sign_in_as(chromium, seeded, f"{role}1", password)
    go(chromium, "violations")
    wait(chromium).until(lambda d: len(row_ids(d)) == 5)
    assert chromium.find_element(By.ID, "whoami").text == f"{role}1 · {role}"
    toggles = chromium.find_elements(By.CSS_SELECTOR, "#violations input.fp")
    assert len(toggles) == 5 and all(t.is_enabled() == reviews for t in toggles)
    assert chromium.find_element(By.ID, "export-csv").is_displayed() == reviews
    click(chromium, (By.CSS_SELECTOR, f"#violations tr[data-id='{seeded.seeded_ids[0]}'] td"))
    wait(chromium).until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#violation-detail img")))
    assert chromium.find_element(By.ID, "evidence").is_displayed() == reviews
    assert "no legal hold" in chromium.find_element(By.ID, "retention").text
    assert not chromium.find_elements(By.ID, "legal-hold")  # an admin's
    shot(chromium, f"violations-as-{role}")
    token = js(chromium, "sessionStorage.getItem('airpatrol.token')")
    assert token.startswith("ap_")
    chromium.find_element(By.ID, "logout").click()
    wait(chromium).until(ec.visibility_of_element_located((By.ID, "login")))
    with httpx.Client(base_url=seeded.url, timeout=30) as c:
        assert c.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    errors = [e for e in console_errors(chromium) if "401" not in e["message"]]
    assert errors == []


def test_an_admin_places_a_legal_hold(seeded: RunningServer, chromium: WebDriver) -> None:
    """The violation's retention line: an admin (the server's API token) places a legal hold with a
    reason and releases it; the API says the same."""
    vid = seeded.seeded_ids[0]
    sign_in(chromium, seeded)
    go(chromium, "violations")
    click(chromium, (By.CSS_SELECTOR, f"#violations tr[data-id='{vid}'] td"))
    wait(chromium).until(ec.visibility_of_element_located((By.ID, "legal-hold")))
    assert "no legal hold" in chromium.find_element(By.ID, "retention").text
    chromium.execute_script("window.prompt = () => 'case 2026-114'")
    click(chromium, (By.ID, "legal-hold"))
    wait(chromium).until(lambda d: "legal hold: case 2026-114" in d.find_element(By.ID, "retention").text)
    with seeded.client() as c:
        assert c.get(f"/api/v1/violations/{vid}").json()["legal_hold"]["reason"] == "case 2026-114"
    shot(chromium, "legal-hold")
    click(chromium, (By.ID, "legal-hold"))
    wait(chromium).until(lambda d: "no legal hold" in d.find_element(By.ID, "retention").text)
    with seeded.client() as c:
        assert c.get(f"/api/v1/violations/{vid}").json()["legal_hold"] is None


def test_violations_review_persists_a_false_positive(
    seeded: RunningServer, chromium: WebDriver, tmp_path: Path
) -> None:
    sign_in(chromium, seeded)
    go(chromium, "violations")
    wait(chromium).until(lambda d: len(row_ids(d)) == 5)
    assert row_ids(chromium) == sorted(seeded.seeded_ids, reverse=True)  # newest first

    form = chromium.find_element(By.ID, "violation-filters")
    form.find_element(By.NAME, "zone").send_keys("school")
    form.find_element(By.NAME, "min_speed_kmh").send_keys("80")
    form.find_element(By.NAME, "server_id").send_keys(seeded.app.state.server_id)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(chromium).until(lambda d: row_ids(d) == [seeded.seeded_ids[2]])
    form.find_element(By.NAME, "zone").clear()
    form.find_element(By.NAME, "min_speed_kmh").clear()
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(chromium).until(lambda d: len(row_ids(d)) == 5)

    first = seeded.seeded_ids[0]  # the one with a snapshot and a clip on disk
    click(chromium, (By.CSS_SELECTOR, f"#violations tr[data-id='{first}'] td"))
    image = wait(chromium).until(ec.visibility_of_element_located((By.CSS_SELECTOR, "#violation-detail img")))
    assert image.get_attribute("src").startswith("blob:")
    wait(chromium).until(
        lambda d: (
            d.execute_script("return document.querySelector('#violation-detail img').naturalWidth") == 80
        )
    )
    detail = chromium.find_element(By.ID, "violation-detail").text
    assert "61.0 km/h ± 1.2" in detail and seeded.app.state.server_id in detail  # who recorded it
    chromium.find_element(By.ID, "play-clip").click()
    video = wait(chromium).until(ec.presence_of_element_located((By.CSS_SELECTOR, "#violation-detail video")))
    assert video.get_attribute("src").startswith("blob:")
    wait(chromium).until(
        lambda d: d.execute_script("return document.querySelector('#violation-detail video').readyState") >= 1
    )
    assert (
        chromium.execute_script("return document.querySelector('#violation-detail video').videoWidth") == 160
    )
    shot(chromium, "violations")

    # its evidence pack: made on request (a violation stored without one), then downloaded; it verifies
    chromium.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)}
    )
    click(chromium, (By.ID, "make-evidence"))
    click(chromium, (By.ID, "download-evidence"))
    assert "(later, on request)" in chromium.find_element(By.ID, "evidence").text
    pack = tmp_path / f"violation-{first}-evidence.zip"
    wait(chromium).until(lambda d: pack.exists() and pack.stat().st_size > 1000)
    ring = KeyRing.open(seeded.settings.resolved_keys_dir, create=False)
    report = wait(chromium).until(lambda d: (r := verify_pack(pack, ring.trusted())).ok and r)
    assert report.manifest["violation_id"] == first
    # the violation's history: the pack made and downloaded, by the token's holder
    wait(chromium).until(lambda d: "evidence.made" in d.find_element(By.ID, "history").text)

    # CSV export of what the filters select, downloaded by the browser
    form.find_element(By.NAME, "session_id").send_keys("sess-b")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(chromium).until(lambda d: len(row_ids(d)) == 2)
    chromium.find_element(By.ID, "export-csv").click()
    wait(chromium).until(lambda d: [p for p in tmp_path.glob("violations-*.csv") if p.stat().st_size])
    (exported,) = tmp_path.glob("violations-*.csv")
    rows = list(csv.DictReader(io.StringIO(exported.read_text())))
    assert sorted(float(r["ticket_speed_kmh"]) for r in rows) == [55.0, 120.0]

    # false positive: marked in the table, stored, still marked after a reload
    target = seeded.seeded_ids[4]
    toggle = (By.CSS_SELECTOR, f"#violations tr[data-id='{target}'] input.fp")
    click(chromium, toggle)
    wait(chromium).until(
        lambda d: (
            "dismissed" in d.find_element(By.CSS_SELECTOR, f"tr[data-id='{target}']").get_attribute("class")
        )
    )
    with seeded.client() as c:
        assert c.get(f"/api/v1/violations/{target}").json()["false_positive"] is True
    chromium.refresh()  # the token stays in the tab's sessionStorage: still signed in
    go(chromium, "violations")
    wait(chromium).until(lambda d: len(row_ids(d)) == 5)
    marked = js(
        chromium,
        "[...document.querySelectorAll('#violations input.fp:checked')].map(i => i.closest('tr').dataset.id)",
    )
    assert marked == [str(target)]
    assert console_errors(chromium) == []


def cells(driver: WebDriver, column: str) -> list[str]:
    """The text of one column of the violations table, top to bottom."""
    return js(
        driver, f"[...document.querySelectorAll('#violations tbody td.{column}')].map(td => td.textContent)"
    )


def test_violations_show_the_ticket_speed_and_status(seeded: RunningServer, chromium: WebDriver) -> None:
    """The list shows the ticket speed ± sigma and a status badge ("—" and the reason without a
    ticket speed), sorts by the ticket speed and filters by status; the detail shows the ticket,
    its tolerance, k and measuring base, and the per-frame peak as information."""
    from pipelines.types import Violation

    ids = seeded.seeded_ids
    reason = "no measuring base of 1.0 s and 15 m"
    no_base = Violation(
        9, "global", 50.0, 88.0, 80.0, 4.0, 1, 20, 0.0, 0.6, status_reason=reason, tolerance_kmh=3.0
    )
    nb = seeded.store.add_violation("sess-b", no_base, occurred_at=SEED_T0).id
    legacy = ids[3]  # 55 km/h, as a row stored before the ticket speed
    seeded.store.update_violation(
        legacy,
        ticket_speed_kmh=None,
        ticket_sigma_kmh=None,
        base=None,
        ticket_status=None,
        status_reason=None,
    )
    sign_in(chromium, seeded)
    go(chromium, "violations")
    wait(chromium).until(lambda d: len(row_ids(d)) == 6)
    speeds = dict(zip(row_ids(chromium), cells(chromium, "speed"), strict=True))
    assert speeds[ids[4]] == "120.0 ± 1.2" and speeds[nb] == "—" and speeds[legacy] == "—"
    statuses = dict(zip(row_ids(chromium), cells(chromium, "status"), strict=True))
    assert statuses[ids[0]] == "enforceable" and statuses[nb] == f"not enforceable{reason}"
    assert statuses[legacy].startswith("legacy: peak only")

    form = chromium.find_element(By.ID, "violation-filters")
    Select(form.find_element(By.NAME, "sort")).select_by_value("-ticket_speed_kmh")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(chromium).until(lambda d: row_ids(d)[:1] == [ids[4]])
    assert cells(chromium, "speed") == ["120.0 ± 1.2", "90.5 ± 1.2", "75.0 ± 1.2", "61.0 ± 1.2", "—", "—"]
    Select(form.find_element(By.NAME, "status")).select_by_value("legacy")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(chromium).until(lambda d: row_ids(d) == [legacy])
    Select(form.find_element(By.NAME, "status")).select_by_value("")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(chromium).until(lambda d: len(row_ids(d)) == 6)

    click(chromium, (By.CSS_SELECTOR, f"#violations tr[data-id='{ids[2]}'] td"))
    wait(chromium).until(lambda d: f"Violation {ids[2]}" in d.find_element(By.ID, "violation-detail").text)
    detail = chromium.find_element(By.ID, "violation-detail").text
    for needle in (
        "90.5 km/h ± 1.2",
        "enforceable",
        "3.0 km/h at this speed",
        "1.645",
        "120.00–121.50 s (1.50 s), frames 3601–3646, 30.0 m, 46 positions",
        "93.0 km/h ± 1.2 (mean 91.0; informative, not the ticket speed)",
    ):
        assert needle in detail, (needle, detail)
    shot(chromium, "violation-ticket")
    click(chromium, (By.CSS_SELECTOR, f"#violations tr[data-id='{nb}'] td"))
    wait(chromium).until(lambda d: f"Violation {nb}" in d.find_element(By.ID, "violation-detail").text)
    detail = chromium.find_element(By.ID, "violation-detail").text
    assert f"— ({reason})" in detail and "not enforceable" in detail and "none" in detail, detail
    click(chromium, (By.CSS_SELECTOR, f"#violations tr[data-id='{legacy}'] td"))
    wait(chromium).until(lambda d: "legacy: peak only" in d.find_element(By.ID, "violation-detail").text)
    assert console_errors(chromium) == []


def test_a_live_stream_on_every_page(server: RunningServer, chromium: WebDriver) -> None:
    sign_in(chromium, server)
    wait(chromium).until(ec.visibility_of_element_located((By.ID, "no-streams")))
    wait(chromium).until(lambda d: d.find_element(By.ID, "link-state").text == "live")
    publisher = subprocess.Popen(
        [sys.executable, "-m", "airpatrol.cli", "publish", "synthetic", "--server", server.url]
        + ["--token", TOKEN, "--max-seconds", "120", "--no-return-video"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # live page: the stream's card appears and its figures move
        session_id = wait(chromium).until(
            lambda d: js(d, "document.querySelector('#streams .card')?.dataset.id")
        )
        fps = (By.CSS_SELECTOR, "#streams .card dd[data-figure='fps']")
        wait(chromium).until(lambda d: d.find_element(*fps).text not in ("–", "0.0"))
        # the scale check from the vehicles (issue 40): on from the start, unverified until enough cars
        check = (By.CSS_SELECTOR, "#streams .card dd[data-figure='scale check']")
        assert (
            wait(chromium)
            .until(lambda d: d.find_element(*check).text)
            .startswith(("unverified", "ok", "suspect"))
        )
        # what the server gives up to keep up (issue 42): a synthetic 640x360 stream needs nothing
        effort = (By.CSS_SELECTOR, "#streams .card dd[data-figure='keeping up']")
        assert (
            wait(chromium).until(lambda d: d.find_element(*effort).text).startswith(("full effort", "level "))
        )
        # before the server (issue 42): frames lost on the way in, and a frame's delay from its capture
        lost = (By.CSS_SELECTOR, "#streams .card dd[data-figure='lost before the server']")
        assert re.fullmatch(
            r"\d+; arrives -?\d+ ms after capture \(p95\)",
            wait(chromium).until(
                lambda d: "arrives" in d.find_element(*lost).text and d.find_element(*lost).text
            ),
        )
        # violations page, opened before the first violation: it arrives without a reload (how
        # fast: eval/examples/console_bench.py measures it)
        go(chromium, "violations")
        wait(chromium).until(lambda d: "No violation" in d.find_element(By.ID, "violation-status").text)
        wait(chromium).until(lambda d: d.find_elements(*ROWS))
        assert js(chromium, "document.querySelector('#violations tbody tr').classList.contains('new')")
        shot(chromium, "violations-live")

        go(chromium, "live")
        wait(chromium).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#streams .card .last-violation a"))
        wait(chromium).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#feed li.violation"))
        # its annotated video, watched over WebRTC from the card (the server's viewer endpoint)
        click(chromium, (By.CSS_SELECTOR, "#streams .card button.watch"))
        playing = "const v = document.querySelector('#streams .card video'); return v && !v.hidden && v.videoWidth > 0 && v.currentTime > 0.5 && v.videoWidth"
        assert (
            wait(chromium).until(lambda d: d.execute_script(playing)) == 320
        )  # the return video's width here
        assert len(server.manager.get(session_id).viewers) == 1

        shot(chromium, "live")
        click(chromium, (By.CSS_SELECTOR, "#streams .card button.watch"))  # stop watching
        wait(chromium).until(lambda _: server.manager.get(session_id).viewers == {})

        # sessions page: the stream is there, live; the operator ends it
        go(chromium, "sessions")
        # its limit, changed from the session's detail while it streams
        click(chromium, (By.CSS_SELECTOR, f"#sessions tr[data-id='{session_id}'] td"))
        limit = (By.CSS_SELECTOR, "#rules-form input[name=speed_limit_kmh]")
        wait(chromium).until(lambda d: d.find_element(*limit).get_attribute("value") == "50")
        chromium.find_element(*limit).clear()
        chromium.find_element(*limit).send_keys("40")
        zones = chromium.find_element(By.CSS_SELECTOR, "#rules-form textarea[name=zones]")
        assert zones.get_attribute("value") == "[]"
        zones.clear()
        zones.send_keys("[{not json")
        click(chromium, (By.CSS_SELECTOR, "#rules-form button[type=submit]"))
        wait(chromium).until(lambda d: "Zones are not JSON" in d.find_element(By.ID, "session-detail").text)
        zones.clear()
        zones.send_keys(
            '[{"name": "school", "polygon": [[0, 180], [640, 180], [640, 360]], "speed_limit_kmh": 20}]'
        )
        click(chromium, (By.CSS_SELECTOR, "#rules-form button[type=submit]"))
        with server.client() as c:
            rules = wait(chromium).until(
                lambda _: (
                    (r := c.get(f"/api/v1/sessions/{session_id}/rules").json())["speed_limit_kmh"] == 40 and r
                )
            )
        assert [(z["name"], z["speed_limit_kmh"]) for z in rules["zones"]] == [("school", 20.0)]
        shot(chromium, "session-live")
        click(chromium, (By.CSS_SELECTOR, f"#sessions tr[data-id='{session_id}'] button.stop"))
        wait(chromium).until(ec.alert_is_present()).accept()
        ended = (By.CSS_SELECTOR, f"#sessions tr[data-id='{session_id}'] .badge.ended")
        wait(chromium).until(ec.presence_of_element_located(ended))
        click(chromium, (By.CSS_SELECTOR, f"#sessions tr[data-id='{session_id}'] td"))
        wait(chromium).until(lambda d: "ended" in d.find_element(By.ID, "session-detail").text)
        shot(chromium, "sessions")
        publisher.wait(60)
    finally:
        if publisher.poll() is None:
            publisher.kill()
            publisher.wait()
    with server.client() as c:
        session = c.get(f"/api/v1/sessions/{session_id}").json()
    assert session["status"] == "ended" and session["end_reason"] == "ended by client", session
    assert console_errors(chromium) == []


ROAD = "road:\n  polygon: [[0, 90], [640, 90], [640, 270], [0, 270]]\n  polygon_mode: override\n"


def click_frame(driver: WebDriver, canvas, u: float, v: float) -> None:
    """Click the frozen frame where the stream's 640x360 frame has pixel (u, v)."""
    box = driver.execute_script(
        "arguments[0].scrollIntoView({block: 'center'}); return arguments[0].getBoundingClientRect().toJSON()",
        canvas,
    )
    dx, dy = u / 640 * box["width"] - box["width"] / 2, v / 360 * box["height"] - box["height"] / 2
    ActionChains(driver).move_to_element_with_offset(canvas, round(dx), round(dy)).click().perform()


def test_the_live_card_measures_the_height_above_the_road(
    server_factory, chromium: WebDriver, tmp_path: Path
) -> None:
    (tmp_path / "site.yaml").write_text(ROAD)
    server = server_factory(pipeline_config=tmp_path / "site.yaml")
    sign_in(chromium, server)
    with synthetic_stream(server, seconds=90) as sid, server.client() as c:
        card = f"#streams .card[data-id='{sid}']"
        height = (By.CSS_SELECTOR, f"{card} dd[data-figure='height above the road']")
        wait(chromium).until(lambda d: "drone altitude over unknown ground" in d.find_element(*height).text)
        click(chromium, (By.CSS_SELECTOR, f"{card} button.height-open"))
        tool = f"{card} .height-tool"
        wait(chromium).until(
            lambda d: "Now: the drone's altitude" in d.find_element(By.CSS_SELECTOR, tool).text
        )
        chromium.find_element(By.CSS_SELECTOR, f"{tool} input[name=set_by]").send_keys("officer 12")
        click(chromium, (By.CSS_SELECTOR, f"{tool} button.freeze"))  # the server keeps the frame shown
        canvas = wait(chromium).until(
            ec.visibility_of_element_located((By.CSS_SELECTOR, f"{tool} canvas.base-canvas"))
        )
        note = (By.CSS_SELECTOR, f"{tool} p[role=status]")
        said = wait(chromium).until(lambda d: re.search(r"Frame (\d+) frozen \(", d.find_element(*note).text))
        frozen = int(said.group(1))
        # 12 m along the fast lane as a camera 45 m above the road sees it (test_edge_height_reference)
        click_frame(chromium, canvas, 60, 119)
        click_frame(chromium, canvas, 178.2, 119)
        chromium.find_element(By.CSS_SELECTOR, f"{tool} input.length").send_keys("12")
        click(chromium, (By.CSS_SELECTOR, f"{tool} button.solve"))
        wait(chromium).until(lambda d: "Applied from the next frame" in d.find_element(*note).text)
        state = c.get(f"/api/v1/sessions/{sid}/height-reference").json()
        assert state["reference"]["set_by"] == "officer 12" and state["origin"] == "session"
        assert abs(state["solution"]["height_above_road_m"] - 45.0) < 2.0  # clicks on a scaled canvas
        assert state["solution"]["frame_index"] == frozen  # solved on the frame frozen, not a later one
        wait(chromium).until(lambda d: "measured base" in d.find_element(*height).text)
        shot(chromium, "live-height")
        # the take-off point's height above the road instead
        chromium.find_element(By.CSS_SELECTOR, f"{tool} input[name=takeoff_above_road_m]").send_keys("-8")
        click(chromium, (By.CSS_SELECTOR, f"{tool} form.height-site button[type=submit]"))
        wait(chromium).until(
            lambda _: (
                c.get(f"/api/v1/sessions/{sid}/height-reference").json()["reference"]["source"] == "site"
            )
        )
        wait(chromium).until(lambda d: "take-off -8.00" in d.find_element(*note).text)
    assert console_errors(chromium) == []


def test_console_assets_are_served_with_a_strict_policy(server: RunningServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:
        assert anonymous.get("/console", follow_redirects=False).status_code == 308
        page = anonymous.get("/console/")
        assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
        for asset in ("console.css", "js/main.js", "js/violations.js"):
            r = anonymous.get(f"/console/assets/{asset}")
            assert r.status_code == 200 and r.headers["x-content-type-options"] == "nosniff", asset
            assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
        assert anonymous.get("/console/assets/js/../../app.py").status_code == 404
        assert anonymous.get("/api/v1/violations").status_code == 401  # the data stays behind the token
