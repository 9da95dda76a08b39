"""The console's map page (#/map) in headless chromium against a real server on 127.0.0.1 with a
real MBTiles file: violations placed where the engine put them, coloured by status, over the site's
tiles (fetched with the token, shown from blob: URLs, no request leaves the server); one without a
position counted, not placed; a new one arrives live."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest
from browser_helpers import WAIT_S, console_errors, require_selenium, screenshot
from edge_helpers import seed_store, violation_recorder
from test_edge_alerts import speeding
from test_edge_console_browser import sign_in
from test_edge_geo import _mbtiles

require_selenium()

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = pytest.mark.timeout(180)


def test_the_map_shows_placed_violations_over_the_sites_tiles(
    server_factory, chromium: WebDriver, tmp_path: Path
) -> None:
    _mbtiles(tmp_path / "site.mbtiles", x=2, zooms=(2, 2))  # the tile over Berlin: shown enlarged at any zoom
    srv = server_factory(map_tiles=tmp_path / "site.mbtiles")
    ids = seed_store(srv, {"m": "webrtc"}, [("m", k, 60.0 + k, "global") for k in range(4)])
    for k, vid in enumerate(ids[:3]):
        srv.store.update_violation(
            vid, latitude=51.5 + k, longitude=11.4 + 2 * k
        )  # a few zooms below the tile's
    wait = WebDriverWait(chromium, WAIT_S)
    sign_in(chromium, srv)
    wait.until(lambda d: d.find_element(By.ID, "nav").is_displayed())
    chromium.get(f"{srv.url}/console/#/map")
    wait.until(lambda d: d.find_element(By.ID, "map").get_attribute("data-ready") == "true")
    markers = chromium.find_elements(By.CSS_SELECTOR, "#map path[data-id]")
    assert sorted(int(m.get_attribute("data-id")) for m in markers) == sorted(ids[:3])
    note = chromium.find_element(By.ID, "map-note").text
    assert "3 violations placed, 1 without a position" in note
    wait.until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('#map img.leaflet-tile-loaded')].some(i => i.src.startsWith('blob:'))"
    ))  # fmt: skip
    screenshot(chromium, "console-map")
    live = dataclasses.replace(speeding(track_id=7), latitude=52.0, longitude=13.0)
    new = (
        violation_recorder(srv.app, srv.settings, "m2")
        .record(live, None, None, dt.datetime.now(dt.timezone.utc))
        .id
    )
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f"#map path[data-id='{new}']"))
    assert "4 violations placed" in chromium.find_element(By.ID, "map-note").text
    assert [
        e for e in console_errors(chromium) if "404" not in e["message"]
    ] == []  # tiles outside the file: 404
