"""The shipped guides (``docs/*.md``), rendered to HTML at ``/guide`` and ``/guide/{name}``.

They travel in the wheel as the package ``airpatrol_docs`` (setup.py maps it onto ``docs/``), so an
installed server documents itself: the setup of the DJI apps, the API, the data channel, the measured
results. The lab notes behind the results (``docs/lab/*.md``, dated) are served at
``/guide/lab/{name}``, linked from the results and from the index, not listed as guides. Public like
``/healthz``: they hold nothing of the site. Links between guides and notes point at their pages; a
link out of ``docs/`` (a README of the source tree) is kept as text, since an installed server has no
tree.
"""

from __future__ import annotations

import functools
import html
import importlib.resources
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from markdown_it import MarkdownIt
from markdown_it.token import Token

from edge_server.routes.common import ApiError

ICON = "/docs/assets/favicon.png"  # the /docs page's (public, app.py), or the browser asks /favicon.ico
REPO_DOCS = Path(__file__).resolve().parents[1] / "docs"
# No script on the pages, no request anywhere but here; the style is inline.
HEADERS = {
    "Cache-Control": "no-cache",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'",
    "X-Content-Type-Options": "nosniff",
}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
LAB = "lab"  # docs/lab/: the dated measurements behind RESULTS.md, at /guide/lab/<name>
_PAGE = re.compile(rf"^(?:(?P<sub>{LAB})/)?(?P<name>[A-Za-z0-9][A-Za-z0-9_-]*)\.md$")


def guides_dir() -> Path:
    """``docs/`` of a checkout (or an editable install), else the installed ``airpatrol_docs``."""
    if (REPO_DOCS / "__init__.py").is_file():
        return REPO_DOCS
    try:
        return Path(str(importlib.resources.files("airpatrol_docs")))
    except ModuleNotFoundError:
        return REPO_DOCS


@dataclass(frozen=True)
class Guide:
    name: str  # file stem: /guide/<name>
    title: str  # its first "# " heading


def _title(text: str, name: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return name


def list_guides(folder: Path | None = None, sub: str = "") -> list[Guide]:
    """The guides (``sub`` "") or the lab notes (``sub`` LAB), by name."""
    folder = (folder or guides_dir()) / sub
    found = []
    for path in sorted(folder.glob("*.md"), key=lambda p: p.stem.lower()):
        if _NAME.fullmatch(path.stem):
            found.append(Guide(path.stem, _title(path.read_text(encoding="utf-8"), path.stem)))
    return found


def slug(text: str) -> str:
    """A heading's anchor as GitHub makes it (what the guides' own ``#links`` use)."""
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def heading_ids(texts: Iterable[str]) -> list[str]:
    """The ids of a page's headings, in order: each one's slug, a repeated one with -1, -2, ...
    (as GitHub numbers them; tests/test_docs_links.py checks the docs' anchors with it)."""
    seen: dict[str, int] = {}
    ids = []
    for text in texts:
        base = slug(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        ids.append(base if n == 0 else f"{base}-{n}")
    return ids


def _heading_ids(state) -> None:  # markdown-it core rule
    tokens: list[Token] = state.tokens
    heads = [i for i, t in enumerate(tokens) if t.type == "heading_open" and i + 1 < len(tokens)]
    for i, heading_id in zip(heads, heading_ids(tokens[i + 1].content for i in heads), strict=True):
        tokens[i].attrSet("id", heading_id)


def page_href(href: str, sub: str = "") -> str | None:
    """The /guide URL of a relative link to a guide or lab note from a page in ``sub`` ("" or LAB)."""
    path, hash_, anchor = href.partition("#")
    match = _PAGE.match(posixpath.normpath(posixpath.join(sub, path))) if path else None
    if not match:
        return None
    page = f"{LAB}/{match['name']}" if match["sub"] else match["name"]
    return f"/guide/{page}{hash_}{anchor}"


def _links(state) -> None:  # markdown-it core rule: guides and lab notes -> their pages, others out -> text
    for block in state.tokens:
        children = block.children or []
        for i, token in enumerate(children):
            if token.type != "link_open":
                continue
            href = str(token.attrGet("href") or "")
            target = page_href(href, state.env.get("sub", ""))
            if target:
                token.attrSet("href", target)
            elif not href.startswith(("http://", "https://", "#", "/")):
                token.type, token.tag, token.attrs = "span_open", "span", {"class": "local"}
                close = next(t for t in children[i:] if t.type == "link_close")
                close.type, close.tag = "span_close", "span"


@functools.cache
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    md.core.ruler.push("heading_ids", _heading_ids)
    md.core.ruler.push("guide_links", _links)
    return md


STYLE = """
body{font:16px/1.55 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1b1f24}
nav{margin-bottom:1.5rem;font-size:.9rem}a{color:#0b5cad}
code{background:#f1f3f5;padding:.1em .3em;border-radius:3px;font-size:.9em}
pre{background:#f1f3f5;padding:.8rem;overflow-x:auto}pre code{background:none;padding:0}
table{border-collapse:collapse;display:block;overflow-x:auto;font-size:.9rem}
th,td{border:1px solid #d0d7de;padding:.3rem .5rem;vertical-align:top}th{background:#f6f8fa}
"""


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="{ICON}">'
        f"<title>{html.escape(title)} - AirPatrol</title><style>{STYLE}</style></head>"
        f'<body><nav><a href="/guide">AirPatrol guides</a> · <a href="/docs">API reference</a></nav>'
        f"<main>{body}</main></body></html>\n"
    )


def render(name: str, folder: Path | None = None, sub: str = "") -> str:
    """The page of a guide (``sub`` "") or a lab note (``sub`` LAB); KeyError for a name that is not
    a shipped one."""
    if sub not in ("", LAB) or not _NAME.fullmatch(name):
        raise KeyError(name)
    path = (folder or guides_dir()) / sub / f"{name}.md"
    if not path.is_file():
        raise KeyError(name)
    text = path.read_text(encoding="utf-8")
    return _page(_title(text, name), _markdown().render(text, {"sub": sub}))


def index(folder: Path | None = None) -> str:
    items = "".join(
        f'<li><a href="/guide/{g.name}">{html.escape(g.title)}</a> <code>{g.name}.md</code></li>'
        for g in list_guides(folder)
    )
    lab = ""
    if ((folder or guides_dir()) / LAB / "README.md").is_file():
        lab = f'<p>The dated measurements behind the results: <a href="/guide/{LAB}/README">lab notes</a></p>'
    return _page("Guides", f"<h1>AirPatrol guides</h1><ul>{items}</ul>{lab}")


router = APIRouter(include_in_schema=False)


@router.get("/guide")
async def guide_index() -> HTMLResponse:
    return HTMLResponse(index(), headers=HEADERS)


@router.get("/guide/{name}")
async def guide_page(name: str) -> HTMLResponse:
    try:
        return HTMLResponse(render(name), headers=HEADERS)
    except KeyError:
        known = ", ".join(g.name for g in list_guides())
        raise ApiError(404, "not_found", f"no guide {name!r}; the guides: {known}") from None


@router.get(f"/guide/{LAB}/{{name}}")
async def lab_page(name: str) -> HTMLResponse:
    try:
        return HTMLResponse(render(name, sub=LAB), headers=HEADERS)
    except KeyError:
        known = ", ".join(g.name for g in list_guides(sub=LAB))
        raise ApiError(404, "not_found", f"no lab note {name!r}; the notes: {known}") from None
