"""Web pages in a real browser: Debian's chromium, headless, driven by Selenium through Debian's
chromedriver. The fixtures here are imported by tests/edge_server/conftest.py (and by any other
conftest.py whose tests need a browser).

``.ci/chromium.sh`` installs chromium and chromedriver with apt and prints
``AIRPATROL_TEST_CHROMIUM`` and ``AIRPATROL_TEST_CHROMEDRIVER``; without those variables the programs
are looked up on PATH. Where they are missing the browser tests skip, except in CI (``CI=true``),
where they fail: the same policy as the PostgreSQL store tests.

Offline by construction: the driver is the explicit chromedriver path, so Selenium Manager (which
would download drivers and browsers) never runs, and the browser resolves no host name but
127.0.0.1, so a page that reaches for a CDN fails instead of loading it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

# Belt and braces: Selenium Manager is skipped when the driver path is given, and offline if it runs.
os.environ.setdefault("SE_OFFLINE", "true")

CHROMIUM = os.environ.get("AIRPATROL_TEST_CHROMIUM") or shutil.which("chromium")
CHROMEDRIVER = os.environ.get("AIRPATROL_TEST_CHROMEDRIVER") or shutil.which("chromedriver")
IN_CI = os.environ.get("CI") == "true"
CHROMIUM_HINT = 'eval "$(.ci/chromium.sh)" installs Debian\'s chromium and chromium-driver and sets both'

# Generous: chromium on a loaded 2-core CI machine can take seconds to lay out a page.
WAIT_S = 60.0


SELENIUM_MISSING = "selenium is not installed (scripts/install.sh --dev installs the dev extra)"


def _cannot_run(reason: str, *, module_level: bool = False) -> NoReturn:
    if IN_CI:
        pytest.fail(f"CI=true and the browser tests cannot run: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=module_level)


def require_selenium() -> None:
    """At the top of a test module, before it imports selenium: skip the module without selenium
    (fail in CI)."""
    if importlib.util.find_spec("selenium") is None:
        _cannot_run(SELENIUM_MISSING, module_level=True)


def _missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if importlib.util.find_spec("selenium") is None:
        return SELENIUM_MISSING
    for name, path, var in (
        ("chromium", CHROMIUM, "AIRPATROL_TEST_CHROMIUM"),
        ("chromedriver", CHROMEDRIVER, "AIRPATROL_TEST_CHROMEDRIVER"),
    ):
        if not path:
            return f"no {name}: {var} is not set and {name} is not on PATH ({CHROMIUM_HINT})"
        if not (Path(path).is_file() and os.access(path, os.X_OK)):
            return f"{var}={path} is not an executable file ({CHROMIUM_HINT})"
    return None


def require_chromium() -> tuple[str, str]:
    """The chromium and chromedriver paths; skips the test where they are missing, fails in CI."""
    reason = _missing()
    if reason is not None:
        _cannot_run(reason)
    assert CHROMIUM and CHROMEDRIVER
    return CHROMIUM, CHROMEDRIVER


def chromium_options(binary: str, profile_dir: Path):
    """Headless chromium with a fresh profile, no sandbox (tests run as root), loopback only."""
    from selenium.webdriver.chrome.options import Options

    options = Options()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile_dir}",
        "--window-size=1400,1000",
        # no network beyond this machine: every host name but 127.0.0.1 fails to resolve, and the
        # background services (updates, sync, safe browsing lists, ...) stay quiet
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--no-first-run",
        "--no-default-browser-check",
    ):
        options.add_argument(arg)
    # the page's console, read with driver.get_log("browser")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return options


def start_chromium(tmp_path: Path, extra_args: tuple[str, ...] = ()) -> WebDriver:
    """A headless chromium (Selenium WebDriver) with a fresh profile in ``tmp_path`` and
    ``extra_args`` beside the usual ones (e.g. a fake camera); the caller quits it."""
    binary, driver_path = require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    service = Service(executable_path=driver_path, log_output=str(tmp_path / "chromedriver.log"))
    options = chromium_options(binary, profile)
    for arg in extra_args:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(WAIT_S)
    driver.set_script_timeout(WAIT_S)
    return driver


@pytest.fixture
def chromium(tmp_path: Path) -> Iterator[WebDriver]:
    """A headless chromium (Selenium WebDriver) with a fresh profile; quit after the test."""
    driver = start_chromium(tmp_path)
    try:
        yield driver
    finally:
        driver.quit()


SCREENSHOTS = Path(
    os.environ.get("AIRPATROL_SCREENSHOTS", Path(__file__).resolve().parents[1] / "runs" / "screenshots")
)


def screenshot(driver: WebDriver, name: str) -> Path:
    """The page as it looks now, to $AIRPATROL_SCREENSHOTS/<name>.png (default runs/screenshots/)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def console_errors(driver: WebDriver) -> list[dict]:
    """The SEVERE entries of the browser console since the last call (reading empties the log)."""
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
