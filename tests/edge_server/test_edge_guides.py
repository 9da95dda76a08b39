"""The shipped guides at /guide: every docs/*.md page (and every lab note, docs/lab/*.md, at
/guide/lab/<name>) from a real server on 127.0.0.1, every link between them landing on a page and a
heading that exist, refusals as JSON errors, and one page in headless chromium (its strict CSP: no
console error, the links work)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from browser_helpers import WAIT_S, console_errors, require_selenium
from edge_helpers import RunningServer

from edge_server import guides

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

DOCS = Path(__file__).resolve().parents[2] / "docs"
NAMES = sorted(p.stem for p in DOCS.glob("*.md"))
LAB_NAMES = sorted(p.stem for p in (DOCS / guides.LAB).glob("*.md"))
HREF = re.compile(r'<a href="([^"]*)"')


def test_every_doc_is_a_guide() -> None:
    assert guides.guides_dir() == DOCS
    assert sorted(g.name for g in guides.list_guides()) == NAMES
    assert {"api", "dji-apps", "telemetry-datachannel", "RESULTS"} <= set(NAMES)
    assert "BASELINES" not in NAMES  # moved: RESULTS.md (today) and lab/ (the dated history)
    assert sorted(g.name for g in guides.list_guides(sub=guides.LAB)) == LAB_NAMES
    assert "README" in LAB_NAMES and len(LAB_NAMES) > 1


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Latency and dropped frames", "latency-and-dropped-frames"),
        ("API reads during a live stream", "api-reads-during-a-live-stream"),
        ("Clock alignment", "clock-alignment"),
        ("`POST /api/v1/offer` (phone app)", "post-apiv1offer-phone-app"),
        ("7. DJI apps: RTMP + OSD", "7-dji-apps-rtmp--osd"),
    ],
)
def test_heading_anchors_are_githubs(heading: str, anchor: str) -> None:
    assert guides.slug(heading.replace("`", "")) == anchor


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("[x](other.md)", '<a href="/guide/other">x</a>'),
        ("[x](other.md#a-b)", '<a href="/guide/other#a-b">x</a>'),
        ("[x](#here)", '<a href="#here">x</a>'),
        ("[x](https://developer.dji.com/)", '<a href="https://developer.dji.com/">x</a>'),
        ("[x](../eval/README.md)", '<span class="local">x</span>'),  # no source tree when installed
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),  # raw HTML is text
        ("| a | b |\n|---|---|\n| 1 | 2 |", "<td>1</td>"),
    ],
)
def test_markdown_to_page(tmp_path: Path, markdown: str, html: str) -> None:
    (tmp_path / "page.md").write_text(f"# Title\n\n{markdown}\n")
    (tmp_path / "other.md").write_text("# Other\n")
    page = guides.render("page", tmp_path)
    assert html in page and "<title>Title - AirPatrol</title>" in page


@pytest.mark.parametrize(
    ("href", "sub", "url"),
    [
        ("other.md", "", "/guide/other"),
        ("./other.md#a-b", "", "/guide/other#a-b"),
        ("lab/README.md", "", "/guide/lab/README"),
        ("lab/2026-11-26-issue-10-x.md#a", "", "/guide/lab/2026-11-26-issue-10-x#a"),
        ("../RESULTS.md#detector", "lab", "/guide/RESULTS#detector"),
        ("note.md", "lab", "/guide/lab/note"),
        ("../eval/README.md", "", None),  # out of docs/: text
        ("../../weights/card.md", "lab", None),
        ("lab/", "", None),
        ("#here", "", None),
        ("other/deeper.md", "", None),
    ],
)
def test_links_to_guides_and_lab_notes(href: str, sub: str, url: str | None) -> None:
    assert guides.page_href(href, sub) == url


def test_a_lab_note_links_back(tmp_path: Path) -> None:
    (tmp_path / "RESULTS.md").write_text("# Results\n\nHistory: [v4](lab/note.md#chunk-4).\n")
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "note.md").write_text("# Note\n\n## Chunk 4\n\n[today](../RESULTS.md#results)\n")
    assert '<a href="/guide/lab/note#chunk-4">v4</a>' in guides.render("RESULTS", tmp_path)
    note = guides.render("note", tmp_path, sub=guides.LAB)
    assert '<a href="/guide/RESULTS#results">today</a>' in note and '<h2 id="chunk-4">' in note
    with pytest.raises(KeyError):
        guides.render("note", tmp_path)  # a note is not a guide
    with pytest.raises(KeyError):
        guides.render("note", tmp_path, sub="..")


def test_index_and_every_page_from_the_server_with_working_links(server: RunningServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as anonymous:  # public: no token
        index = anonymous.get("/guide")
        assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
        listed = {
            href.removeprefix("/guide/") for href in HREF.findall(index.text) if href.startswith("/guide/")
        }
        assert listed == set(NAMES) | {"lab/README"}
        assert anonymous.get(guides.ICON).status_code == 200
        pages = {}
        for name in NAMES:
            page = anonymous.get(f"/guide/{name}")
            assert page.status_code == 200, name
            assert "default-src 'none'" in page.headers["content-security-policy"]
            pages[name] = page.text
        for name in LAB_NAMES:
            page = anonymous.get(f"/guide/lab/{name}")
            assert page.status_code == 200, name
            pages[f"lab/{name}"] = page.text
        assert 'href="/guide/lab/' in pages["RESULTS"]
        for name, text in pages.items():
            for href in HREF.findall(text):
                if href.startswith("http"):
                    continue
                link = urlsplit(href)
                if link.path in ("/guide", "/docs"):
                    continue
                target = link.path.removeprefix("/guide/") if link.path else name
                assert target in pages, f"{name}: {href} leads nowhere"
                if link.fragment:
                    assert f'id="{link.fragment}"' in pages[target], f"{name}: {href}: no such heading"


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        ("/guide/nope", "no guide 'nope'; the guides: "),
        ("/guide/__init__", "no guide '__init__'"),
        ("/guide/API", "no guide 'API'"),
        ("/guide/api.md", "no guide 'api.md'"),
        ("/guide/BASELINES", "no guide 'BASELINES'"),
        ("/guide/lab/nope", "no lab note 'nope'; the notes: "),
        ("/guide/lab/RESULTS", "no lab note 'RESULTS'"),
        ("/guide/..%2F..%2Fsetup.py", "no route GET /guide/../../setup.py"),  # %2F decoded: no route
    ],
)
def test_unknown_guides_are_404_errors(server: RunningServer, path: str, detail: str) -> None:
    response = httpx.get(server.url + path, timeout=30)
    assert response.status_code == 404
    body = response.json()
    assert body["error"] == "not_found" and body["detail"].startswith(detail), body


def test_a_guide_in_the_browser(server: RunningServer, chromium) -> None:
    require_selenium()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    chromium.get(f"{server.url}/guide/api")
    wait = WebDriverWait(chromium, WAIT_S)
    wait.until(ec.presence_of_element_located((By.TAG_NAME, "h1")))
    assert chromium.find_element(By.TAG_NAME, "h1").text == "AirPatrol edge server API"
    assert chromium.find_elements(By.TAG_NAME, "table")
    assert console_errors(chromium) == []
    chromium.find_element(By.CSS_SELECTOR, "main a[href^='/guide/dji-apps']").click()
    wait.until(lambda d: urlsplit(d.current_url).path == "/guide/dji-apps")
    chromium.find_element(By.LINK_TEXT, "AirPatrol guides").click()
    wait.until(lambda d: urlsplit(d.current_url).path == "/guide")
    assert len(chromium.find_elements(By.CSS_SELECTOR, "main li a")) == len(NAMES)
    assert console_errors(chromium) == []
