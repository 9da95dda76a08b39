"""DJI Pilot 2's Open Platform page (/dji/pilot2) in a real browser (Debian's chromium).

DJI Pilot 2 itself cannot run here: its JSBridge (``window.djiBridge``, which the app puts into the
page's web view) is stood in for by a script that records every call and answers as DJI documents
(JSON text ``{"code": 0, "data": ...}``) and, like the app, calls the page's connect callback once
the thing module is loaded. Server, broker, page and API are real.
"""

from __future__ import annotations

import json

import pytest
from browser_helpers import console_errors
from edge_helpers import RunningServer, free_port
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait
from test_edge_dji_cloud import MOSQUITTO, PASSWORD

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(MOSQUITTO is None, reason="Mosquitto is not installed (.ci/mosquitto.sh installs it)"),
]

AIRCRAFT = "1581F5BKD225D00A"
BRIDGE = """
window.__calls = [];
const answer = (data) => JSON.stringify({code: 0, message: "ok", data: data});
window.djiBridge = {
  platformVerifyLicense: (...a) => { __calls.push(["platformVerifyLicense", ...a]); return answer(true); },
  platformSetInformation: (...a) => { __calls.push(["platformSetInformation", ...a]); return answer(true); },
  platformGetAircraftSN: () => answer("AIRCRAFT"),
  platformLoadComponent: (name, params) => {
    __calls.push(["platformLoadComponent", name, params]);
    const cb = JSON.parse(params).connectCallback;
    setTimeout(() => window[cb](true), 50);
    return answer(true);
  },
};
""".replace("AIRCRAFT", AIRCRAFT)


@pytest.fixture
def mqtt_server(server_factory) -> tuple[RunningServer, int]:
    port = free_port()
    licence = {"dji_app_id": "123456", "dji_app_key": "appkey-abc", "dji_app_license": "license-xyz"}
    srv = server_factory(
        mqtt_port=port, mqtt_host="127.0.0.1", mqtt_password=PASSWORD, mosquitto_path=MOSQUITTO, **licence
    )
    return srv, port


def test_pilot2_page_connects_the_app_and_makes_the_aircrafts_key(chromium, mqtt_server) -> None:
    srv, port = mqtt_server
    driver = chromium
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": BRIDGE})
    wait = WebDriverWait(driver, 20)
    driver.get(f"{srv.url}/dji/pilot2")
    token = wait.until(ec.visibility_of_element_located((By.ID, "token")))
    token.send_keys("not-the-token")
    driver.find_element(By.CSS_SELECTOR, "#login button").click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "wrong API token"))
    console_errors(driver)  # the 401 is the one expected console error
    driver.find_element(By.ID, "token").send_keys(srv.token)
    driver.find_element(By.CSS_SELECTOR, "#login button").click()
    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "Connected to the edge server."))
    wait.until(ec.text_to_be_present_in_element((By.ID, "mqtt"), "connected"))

    calls = driver.execute_script("return window.__calls")
    assert calls[0] == ["platformVerifyLicense", "123456", "appkey-abc", "license-xyz"]
    assert calls[1][0] == "platformSetInformation"
    name, params = calls[2][1], json.loads(calls[2][2])
    assert name == "thing"
    assert params == {
        "host": f"tcp://127.0.0.1:{port}",
        "username": "airpatrol",
        "password": PASSWORD,
        "connectCallback": "airpatrolThingConnected",
    }
    assert driver.find_element(By.ID, "aircraft").text == AIRCRAFT

    driver.find_element(By.ID, "make-key").click()
    url = wait.until(ec.visibility_of_element_located((By.ID, "key-url"))).text
    with srv.client() as c:
        keys = c.get("/api/v1/rtmp/keys").json()
    assert [k["device_sn"] for k in keys] == [AIRCRAFT]
    assert url.startswith("rtmp://127.0.0.1:") and "/live/" in url
    assert console_errors(driver) == []
    assert srv.token not in driver.page_source  # the token is in web storage, never in the page


def test_pilot2_config_needs_the_token_and_says_what_is_missing(server_factory) -> None:
    srv = server_factory(
        mqtt_port=free_port(), mqtt_host="127.0.0.1", mqtt_password=PASSWORD, mosquitto_path=MOSQUITTO
    )
    with srv.client() as c:
        body = c.get("/api/v1/dji/pilot2-config").json()
        assert c.get("/dji/pilot2").status_code == 200
    assert body["license"] is None and "dji_app_id" in body["license_missing"]
    import httpx

    assert httpx.get(f"{srv.url}/api/v1/dji/pilot2-config").status_code == 401
    off = server_factory()  # no MQTT: the page is told why
    with off.client() as c:
        r = c.get("/api/v1/dji/pilot2-config")
    assert r.status_code == 409 and r.json()["error"] == "mqtt_off" and "off" in r.json()["detail"]
