"""The stop team's phone page (/console/alert) in headless chromium against a real server on
127.0.0.1: an officer signs in; an enforceable violation stored by the server's own recorder
appears at once with its picture, class and colour, speed and limit, direction and the next
checkpoint's countdown, and a sound; one that is not enforceable does not; a dismissed one is struck
through. How soon one shows (p95 target 1 s): eval/examples/console_bench.py (a benchmark)."""

from __future__ import annotations

import datetime as dt

import pytest
from browser_helpers import WAIT_S, console_errors, require_selenium, screenshot
from edge_helpers import RunningServer, violation_recorder
from test_edge_alerts import ALERTS, speeding

require_selenium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = pytest.mark.timeout(180)
PASSWORD = "correct horse battery"


def card_text(driver: WebDriver, vid: int) -> str:
    cards = driver.find_elements(By.CSS_SELECTOR, f"#alerts li[data-id='{vid}']")
    return cards[0].text if cards else ""


def test_the_stop_team_sees_each_enforceable_violation(server: RunningServer, chromium: WebDriver) -> None:
    wait = WebDriverWait(chromium, WAIT_S)
    server.app.state.accounts.add_user("stop1", "officer", PASSWORD, "test")
    chromium.get(f"{server.url}/console/alert")
    wait.until(ec.visibility_of_element_located((By.ID, "username"))).send_keys("stop1")
    chromium.find_element(By.ID, "password").send_keys(PASSWORD)
    chromium.find_element(By.CSS_SELECTOR, "#login-form button[type=submit]").click()
    wait.until(lambda d: d.find_element(By.ID, "link-state").text == "live")
    chromium.find_element(By.ID, "sound").click()
    assert chromium.find_element(By.ID, "sound").text == "Sound on"

    recorder = violation_recorder(server.app, server.settings, "alert-b")
    recorder.alerts = ALERTS
    now = dt.datetime.now(dt.timezone.utc)
    quiet = recorder.record(speeding("not_enforceable", track_id=1), None, None, now)
    loud = recorder.record(speeding(track_id=2), None, None, now)
    wait.until(lambda d: "(estimate)" in card_text(d, loud.id))
    text = card_text(chromium, loud.id)
    assert "72 km/h in a 50 zone" in text and "car red (estimate)" in text
    assert "heading north" in text and "zone global" in text
    assert "north gate: in " in text and "580 m" in text
    assert "tolerance 3.0 km/h" in text
    assert card_text(chromium, quiet.id) == ""  # not enforceable: not for the stop team
    assert chromium.execute_script("return window.__alerts.beeps") == 1
    screenshot(chromium, "alert-page")

    with server.client() as c:
        c.put(f"/api/v1/violations/{loud.id}/false_positive", json={"false_positive": True})
    wait.until(
        lambda d: (
            "dismissed"
            in d.find_element(By.CSS_SELECTOR, f"#alerts li[data-id='{loud.id}']").get_attribute("class")
        )
    )
    assert [e for e in console_errors(chromium) if "401" not in e["message"]] == []
