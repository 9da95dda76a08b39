"""/docs in a real browser: headless chromium (tests/browser_helpers.py) against a real server on
127.0.0.1. Swagger UI renders every operation of /openapi.json from the server's own assets (nothing
from a CDN), with no console error, and a user can Authorize and "Try it out" an authenticated GET.

Waits are explicit (WebDriverWait on what the page shows), never sleeps. The server serves no
/redoc (app.py: ``redoc_url=None``); the test asserts that, so a /redoc added later gets a browser
check here too.
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit

from browser_helpers import WAIT_S, console_errors, require_selenium
from edge_helpers import RunningServer

require_selenium()

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

# The path item keys Swagger UI shows as operations (others, like "parameters", are not operations).
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
TRY_PATH = "/api/v1/violations"
# what the page loads: itself, its script, style sheet and icon, and the spec
PAGE_LOADS = {
    "/docs",
    *(f"/docs/assets/{name}" for name in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png")),
    "/openapi.json",
}
LOADED_JS = "return [document.URL].concat(performance.getEntriesByType('resource').map(e => e.name))"
OPBLOCKS_JS = """return Array.from(document.querySelectorAll('.opblock')).map(b => [
    b.querySelector('.opblock-summary-method').textContent.trim().toLowerCase(),
    b.querySelector('.opblock-summary-path').dataset.path])"""


def has_class(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


# Locators, found again at each poll: Swagger UI (React) may redraw any element between two steps.
TRY_BLOCK = f"//div[{has_class('opblock-get')}][.//*[@data-path='{TRY_PATH}']]"
EXPAND = (By.XPATH, f"{TRY_BLOCK}//button[{has_class('opblock-summary-control')}]")
TRY_IT_OUT = (By.XPATH, f"{TRY_BLOCK}//button[{has_class('try-out__btn')}]")
EXECUTE = (By.XPATH, f"{TRY_BLOCK}//button[{has_class('execute')}]")
LIVE_RESPONSE = f"{TRY_BLOCK}//table[{has_class('live-responses-table')}]/tbody/tr"
LIVE_STATUS = (By.XPATH, f"{LIVE_RESPONSE}/td[{has_class('response-col_status')}]")
LIVE_BODY = (By.XPATH, f"{LIVE_RESPONSE}/td[{has_class('response-col_description')}]")
AUTHORIZE_OPEN = (By.CSS_SELECTOR, ".auth-wrapper .btn.authorize")
DIALOG = (By.CSS_SELECTOR, ".dialog-ux .modal-ux")
DIALOG_BUTTON = "//div[contains(@class, 'modal-ux')]//button[normalize-space()='{}']"
BEARER_FIELD = (By.CSS_SELECTOR, ".modal-ux input[aria-label='auth-bearer-value']")
AUTHORIZED = (By.XPATH, "//div[contains(@class, 'modal-ux')]//h6[normalize-space()='Authorized']")
CLOSE_DIALOG = (By.CSS_SELECTOR, ".modal-ux .btn-done")


def expected_opblocks(document: dict) -> Counter[tuple[str, str]]:
    """(method, path) -> how many .opblock Swagger UI draws: one per tag (untagged: under "default")."""
    blocks: Counter[tuple[str, str]] = Counter()
    for path, item in document["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                blocks[(method, path)] += max(1, len(item[method].get("tags", [])))
    return blocks


def shown_opblocks(driver: WebDriver) -> Counter[tuple[str, str]]:
    """(method, path) -> how many .opblock the page shows, read in one script (no stale elements)."""
    return Counter((method, path) for method, path in driver.execute_script(OPBLOCKS_JS))


def click(wait: WebDriverWait, locator: tuple[str, str]) -> None:
    wait.until(ec.element_to_be_clickable(locator)).click()


def execute(wait: WebDriverWait, status: str) -> None:
    """Click Execute and wait until the page shows a response with ``status``."""
    click(wait, EXECUTE)
    wait.until(lambda d: d.find_element(*LIVE_STATUS).text.strip() == status, f"no {status} for {TRY_PATH}")


def authorize_dialog(wait: WebDriverWait) -> None:
    click(wait, AUTHORIZE_OPEN)
    wait.until(ec.visibility_of_element_located(DIALOG))


def close_dialog(wait: WebDriverWait) -> None:
    click(wait, CLOSE_DIALOG)
    wait.until(ec.invisibility_of_element_located(DIALOG))


def test_docs_render_offline_and_try_it_out_works(chromium: WebDriver, server: RunningServer) -> None:
    driver = chromium
    wait = WebDriverWait(driver, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))
    with server.client() as client:
        document = client.get("/openapi.json").json()
        assert client.get("/redoc").status_code == 404, "/redoc is served now: render it in the browser here"
    expected = expected_opblocks(document)
    assert expected[("get", TRY_PATH)] == 1, "the operation tried below is missing from /openapi.json"

    # Opened as the server's log says: /docs?token=... (a browser cannot send the header)
    driver.get(f"{server.url}/docs?token={server.token}")
    title = wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, ".information-container .title")))
    assert document["info"]["title"] in title.text
    assert driver.title == "AirPatrol edge server API"
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".opblock")) >= expected.total())
    assert shown_opblocks(driver) == expected
    assert server.token not in driver.current_url, "the page script must take the token out of the URL"

    # Everything the page loaded came from this server: no CDN. (The icon loads after the page: wait.)
    wait.until(lambda d: {urlsplit(url).path for url in d.execute_script(LOADED_JS)} >= PAGE_LOADS)
    loaded = driver.execute_script(LOADED_JS)
    origin = urlsplit(server.url)[:2]
    assert [url for url in loaded if urlsplit(url)[:2] != origin] == [], loaded
    assert console_errors(driver) == []

    # Try it out: the token from ?token= is already in the Authorize dialog
    click(wait, EXPAND)
    click(wait, TRY_IT_OUT)
    execute(wait, "200")
    body = driver.find_element(*LIVE_BODY).get_attribute("textContent")
    assert '"items": []' in body, body

    # Logged out, the same request is refused (the 401 is the browser's one expected console error) ...
    authorize_dialog(wait)
    click(wait, (By.XPATH, DIALOG_BUTTON.format("Logout")))
    wait.until(ec.visibility_of_element_located(BEARER_FIELD))
    close_dialog(wait)
    execute(wait, "401")
    errors: list[dict] = []

    def logged(d: WebDriver) -> bool:  # the console entry may come after the page shows the 401
        errors.extend(console_errors(d))
        return bool(errors)

    wait.until(logged, "the 401 never reached the console")
    assert all("401" in entry["message"] for entry in errors), errors

    # ... and a user who types the token into Authorize gets the 200 back.
    authorize_dialog(wait)
    wait.until(ec.visibility_of_element_located(BEARER_FIELD)).send_keys(server.token)
    click(wait, (By.XPATH, DIALOG_BUTTON.format("Authorize")))
    wait.until(ec.visibility_of_element_located(AUTHORIZED))
    close_dialog(wait)
    execute(wait, "200")
    assert console_errors(driver) == []
