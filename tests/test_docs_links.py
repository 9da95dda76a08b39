"""Every relative link in the docs lands: docs/**/*.md, README.md and every other README.md of the
tree. A link's file (or folder) must exist inside the repository, and a ``#anchor`` must name a
heading of the target as GitHub slugs it (lower case, punctuation but - and _ removed, spaces to -;
a repeated heading gets -1, -2, ...: the ids /guide gives, tests/edge_server/test_edge_guides.py) or
an explicit ``<a id=...>`` / ``name=``. External links (http, https, mailto, any scheme) are not
checked, and a link in code (fenced, indented or inline) is not a link."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

from edge_server.guides import heading_ids

REPO = Path(__file__).resolve().parents[1]
# folders that are not the project's documentation: environments, caches, build and run outputs
SKIP_DIRS = {"runs", "build", "dist", "node_modules", "__pycache__", "out"}
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
HTML_ANCHOR = re.compile(r"""<a\s[^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
HTML_HREF = re.compile(r"""<(?:a|img)\s[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)


def doc_files(root: Path = REPO) -> list[Path]:
    """docs/**/*.md and every README.md outside hidden folders, environments and outputs."""
    found = set((root / "docs").rglob("*.md"))
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not (d.startswith(".") or d in SKIP_DIRS or d.endswith(".egg-info"))]
        if "README.md" in files:
            found.add(Path(folder) / "README.md")
    return sorted(found)


@functools.cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable("table")


def _tokens(text: str) -> list[Token]:
    return _parser().parse(text)


def _plain(inline: Token) -> str:
    """A heading's text as rendered (what GitHub slugs): text and code, no markup or link targets."""
    return "".join(
        c.content for c in inline.children or [] if c.type in ("text", "code_inline", "html_inline")
    )


def anchors(text: str) -> set[str]:
    tokens = _tokens(text)
    heads = [i for i, t in enumerate(tokens) if t.type == "heading_open"]
    found = set(heading_ids(_plain(tokens[i + 1]) for i in heads))  # the ids /guide gives them too
    for token in tokens:
        if token.type in ("html_block", "inline"):
            html = token.content if token.type == "html_block" else ""
            html += "".join(c.content for c in token.children or [] if c.type == "html_inline")
            found.update(HTML_ANCHOR.findall(html))
    return found


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of every link and image outside code."""
    found = []
    for token in _tokens(text):
        line = token.map[0] + 1 if token.map else 0
        if token.type == "html_block":
            found.extend((line, href) for href in HTML_HREF.findall(token.content))
        for child in token.children or []:
            if child.type == "link_open":
                found.append((line, str(child.attrGet("href") or "")))
            elif child.type == "image":
                found.append((line, str(child.attrGet("src") or "")))
            elif child.type == "html_inline":
                found.extend((line, href) for href in HTML_HREF.findall(child.content))
    return found


@functools.cache
def _anchors_of(path: Path) -> frozenset[str]:
    return frozenset(anchors(path.read_text(encoding="utf-8")))


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    """One line per link of ``path`` that leads nowhere: 'FILE:LINE: [target] why'."""
    root = root.resolve()
    name = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    problems = []
    for line, href in links(path.read_text(encoding="utf-8")):
        if SCHEME.match(href):
            continue  # external (http, https, mailto, ...): not checked
        parts = urlsplit(href)
        where = f"{name}:{line}: [{href}]"
        if not parts.path:
            target = path
        elif parts.path.startswith("/"):
            target = root / unquote(parts.path).lstrip("/")
        else:
            target = path.parent / unquote(parts.path)
        target = target.resolve()
        if not target.is_relative_to(root):
            problems.append(f"{where} points outside the repository")
            continue
        if not target.exists():
            problems.append(f"{where} no such file: {target.relative_to(root).as_posix()}")
            continue
        fragment = unquote(parts.fragment)
        if fragment and target.suffix == ".md" and fragment not in _anchors_of(target):
            problems.append(
                f"{where} no heading or anchor #{fragment} in {target.relative_to(root).as_posix()}"
            )
    return problems


FILES = doc_files()


def test_the_scan_sees_the_docs() -> None:
    names = {p.relative_to(REPO).as_posix() for p in FILES}
    assert {
        "README.md",
        "docs/RESULTS.md",
        "docs/lab/README.md",
        "eval/README.md",
        "training/README.md",
    } <= names
    assert not any(n.startswith((".venv/", ".git/", "runs/")) for n in names)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    problems = broken_links(path)
    assert not problems, f"{len(problems)} broken link(s):\n" + "\n".join(problems)


def test_a_planted_broken_link_and_anchor_are_caught(tmp_path: Path) -> None:
    (tmp_path / "docs" / "lab").mkdir(parents=True)
    (tmp_path / "docs" / "lab" / "note.md").write_text(
        "# Note\n\n## Speeds from 30 to 150 m (`speed_grid.sh`)\n\n## Twice\n\n## Twice\n\n"
        '<a id="kept-row"></a>\n\nBack: [results](../RESULTS.md#results).\n'
    )
    page = tmp_path / "docs" / "RESULTS.md"
    page.write_text(
        "# Results\n\n"
        "[ok](lab/note.md) [ok](lab/note.md#speeds-from-30-to-150-m-speed_gridsh) [ok](lab/note.md#twice-1)\n"
        "[ok](lab/note.md#kept-row) [ok](#results) [ok](lab/) [ok](https://example.com/x.md#nope)\n"
        "[ok](mailto:ops@example.com) `[code](nowhere.md)`\n\n"
        "```\n[fenced](nowhere.md)\n```\n\n"
        "[gone](lab/gone.md) [bad anchor](lab/note.md#twice-2) [bad here](#nope)\n\n"
        "| table | [cell](../README.md) |\n|---|---|\n| [out](../../elsewhere.md) | x |\n"
    )
    (tmp_path / "README.md").write_text("# Top\n")
    problems = broken_links(page, tmp_path)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "[lab/gone.md] no such file: docs/lab/gone.md",
        "[lab/note.md#twice-2] no heading or anchor #twice-2 in docs/lab/note.md",
        "[#nope] no heading or anchor #nope in docs/RESULTS.md",
        "[../../elsewhere.md] points outside the repository",
    ], problems
    assert problems[0].startswith("docs/RESULTS.md:11: ")
    assert broken_links(tmp_path / "docs" / "lab" / "note.md", tmp_path) == []


def test_doc_files_finds_package_readmes_and_skips_environments(tmp_path: Path) -> None:
    for name in (
        "README.md",
        "docs/a.md",
        "docs/lab/b.md",
        "eval/README.md",
        ".venv/x/README.md",
        "runs/README.md",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("# x\n")
    assert [p.relative_to(tmp_path).as_posix() for p in doc_files(tmp_path)] == [
        "README.md",
        "docs/a.md",
        "docs/lab/b.md",
        "eval/README.md",
    ]
