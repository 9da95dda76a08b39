"""The phone-browser publisher (/console/publish) in headless chromium with a fake camera, from a
server on HTTPS (a self-signed certificate, as on an edge box: a phone's browser gives a page the
camera only over HTTPS; chromium here is told to accept the certificate): a short,
low-resolution recorded flight (the synthetic scene, 320x180 at 15 fps, written as a y4m of ~8 MB)
is the camera (`--use-file-for-fake-video-capture`). The page streams it over WHIP with the flight
values typed into it and the device's location (set through the DevTools protocol) as telemetry on
the data channel; the server's pipeline measures the speeding vehicles, the violations come back
on the events channel; the console, in another tab, shows the stream live and its violations arrive
there without a reload; Stop ends the session.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import pytest
from browser_helpers import console_errors, require_selenium, screenshot, start_chromium
from edge_helpers import TOKEN, RunningServer, self_signed_certificate
from test_edge_console_browser import go, row_ids, sign_in, wait

from edge_client import synthetic

require_selenium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402

pytestmark = pytest.mark.timeout(240)
FPS, WIDTH, HEIGHT, SECONDS = 15, 320, 180, 8
LATITUDE, LONGITUDE = 59.3293, 18.0686


def write_y4m(path: Path) -> Path:
    """The synthetic scene as the fake camera's file: YUV 4:2:0 frames behind a YUV4MPEG2 header."""
    scene = synthetic.SyntheticScene(WIDTH, HEIGHT)
    with path.open("wb") as out:
        out.write(f"YUV4MPEG2 W{WIDTH} H{HEIGHT} F{FPS}:1 Ip A1:1 C420jpeg\n".encode())
        for k in range(FPS * SECONDS):
            out.write(b"FRAME\n")
            out.write(cv2.cvtColor(scene.render(k / FPS), cv2.COLOR_BGR2YUV_I420).tobytes())
    return path


@pytest.fixture
def phone(tmp_path: Path):
    flight = write_y4m(tmp_path / "flight.y4m")
    driver = start_chromium(
        tmp_path,
        (
            "--use-fake-device-for-media-stream",
            "--use-fake-ui-for-media-stream",  # the camera permission prompt, answered yes
            f"--use-file-for-fake-video-capture={flight}",
            "--ignore-certificate-errors",  # the edge box's self-signed certificate, accepted
        ),
    )
    try:
        yield driver
    finally:
        driver.quit()


def figure(driver: WebDriver, name: str) -> str:
    return driver.execute_script(
        "const el = document.querySelector(`#figures dd[data-figure='${arguments[0]}']`); return el ? el.textContent : ''",
        name,
    )


def located(driver: WebDriver, server: RunningServer) -> None:
    """The device's position, as a phone's GPS would give it (chromium here has no location source:
    its network provider would ask Google)."""
    driver.execute_cdp_cmd("Browser.grantPermissions", {"origin": server.url, "permissions": ["geolocation"]})
    driver.execute_cdp_cmd(
        "Emulation.setGeolocationOverride", {"latitude": LATITUDE, "longitude": LONGITUDE, "accuracy": 5}
    )


@pytest.fixture
def tls_server(server_factory, tmp_path: Path) -> RunningServer:
    cert, key = self_signed_certificate(tmp_path / "tls")
    return server_factory(tls_certfile=cert, tls_keyfile=key)


def test_the_phone_page_streams_its_camera_with_telemetry(
    tls_server: RunningServer, phone: WebDriver
) -> None:
    server = tls_server
    assert server.url.startswith("https://")
    located(phone, server)
    phone.get(f"{server.url}/console/publish")
    form = wait(phone).until(lambda d: d.find_element(By.ID, "publish-form"))
    assert not phone.find_element(By.ID, "insecure").is_displayed()  # 127.0.0.1 is a secure context
    values = {
        "token": TOKEN,
        "altitude_m": str(synthetic.DEFAULT_ALTITUDE_M),
        "camera": synthetic.DEFAULT_CAMERA,
        "focal_length_35mm": str(synthetic.DEFAULT_FOCAL_35MM),
    }
    for name, value in values.items():
        field = form.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)
    form.find_element(By.CSS_SELECTOR, "select[name=size] option[value='640x360']").click()
    phone.find_element(By.ID, "start").click()

    wait(phone).until(lambda d: d.find_element(By.ID, "state").text == "Streaming.")
    with server.client() as c:
        session_id = wait(phone).until(
            lambda _: [s["id"] for s in c.get("/api/v1/sessions").json()["items"]]
        )[0]
        session = c.get(f"/api/v1/sessions/{session_id}").json()
        assert session["kind"] == "whip" and session["status"] == "active"
        # the fake camera's frames arrive, at the file's size, and the typed values as telemetry
        wait(phone).until(lambda _: c.get(f"/api/v1/sessions/{session_id}").json()["telemetry_received"] >= 4)
        wait(phone).until(lambda d: int(figure(d, "frames sent") or 0) > 30)
        # a violation: measured on the page's altitude and camera, located where the device is
        wait(phone).until(lambda d: int(figure(d, "violations") or 0) >= 1)
        violations = c.get("/api/v1/violations", params={"session_id": session_id}).json()["items"]
        session = c.get(f"/api/v1/sessions/{session_id}").json()
    assert violations, "the page saw a violation the store does not have"
    v = violations[0]
    assert v["altitude_m"] == synthetic.DEFAULT_ALTITUDE_M and v["scale_source"] == "flight"
    assert v["drone_latitude"] == pytest.approx(LATITUDE) and v["drone_longitude"] == pytest.approx(LONGITUDE)
    assert 55 < v["peak_speed_kmh"] < 95, v  # the fast lane's ~73 km/h
    assert (session["width"], session["height"]) == (WIDTH, HEIGHT)
    assert session["telemetry_rejected"] == 0
    assert "km/h" in phone.find_element(By.CSS_SELECTOR, "#feed li.violation").text
    screenshot(phone, "publisher-streaming")

    # the console, in another tab: the phone's stream on the Live page, and its violations arriving
    # on the Violations page without a reload while it streams on
    phone_tab = phone.current_window_handle
    phone.switch_to.new_window("tab")
    sign_in(phone, server)
    wait(phone).until(
        lambda d: d.execute_script(
            f"return !!document.querySelector(\"#streams .card[data-id='{session_id}']\")"
        )
    )
    go(phone, "violations")
    # the first page loaded (a violation pushed while it loads is a row before the page is in: the
    # count would then grow with the page, not with the next push; CI saw that once)
    wait(phone).until(lambda d: "shown" in d.find_element(By.ID, "violation-status").text)
    wait(phone).until(lambda d: len(row_ids(d)) >= 1)
    seen = len(row_ids(phone))
    wait(phone).until(lambda d: len(row_ids(d)) > seen)  # the next speeder, pushed live
    assert phone.execute_script(
        "return document.querySelector('#violations tbody tr').classList.contains('new')"
    )
    screenshot(phone, "console-violations-from-phone")
    phone.close()
    phone.switch_to.window(phone_tab)

    phone.find_element(By.ID, "stop").click()
    wait(phone).until(lambda d: d.find_element(By.ID, "state").text == "Stopped.")
    with server.client() as c:
        wait(phone).until(lambda _: c.get(f"/api/v1/sessions/{session_id}").json()["status"] == "ended")
        assert c.get(f"/api/v1/sessions/{session_id}").json()["end_reason"] == "ended by client (WHIP DELETE)"
    assert console_errors(phone) == []


def test_a_wrong_token_is_refused_on_the_phone_page(server: RunningServer, phone: WebDriver) -> None:
    located(phone, server)
    phone.get(f"{server.url}/console/publish")
    form = wait(phone).until(lambda d: d.find_element(By.ID, "publish-form"))
    form.find_element(By.NAME, "token").send_keys("wrong")
    phone.find_element(By.ID, "start").click()
    state = wait(phone).until(
        lambda d: (
            d.find_element(By.ID, "state").text.startswith("The server refused")
            and d.find_element(By.ID, "state")
        )
    )
    assert "401" in state.text and "bearer token" in state.text
    assert not phone.find_element(By.ID, "stop").is_enabled()
    with server.client() as c:
        assert c.get("/api/v1/sessions").json()["items"] == []
    assert phone.execute_script("return sessionStorage.getItem('airpatrol.token')") is None
    assert [e for e in console_errors(phone) if "401" not in e["message"]] == []
