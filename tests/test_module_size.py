"""Rooms a newcomer can read: no module of the project over 600 lines and no function over 80
(tests and database migrations aside). A module that grows past it holds several jobs: split it
along its seams (docs/ARCHITECTURE.md has the map), rather than raising the limit."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_import_graph import PACKAGES, REPO

MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# Python files outside the packages that are part of the product (examples, the wheel's build)
EXTRA = ("setup.py",)


def product_files() -> list[Path]:
    files = [REPO / name for name in EXTRA]
    for package in PACKAGES:
        files.extend(p for p in (REPO / package).rglob("*.py") if "migrations" not in p.parts)
    return sorted(files)


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(qualified name, lines from its first decorator or ``def`` to its last line) over ``limit``."""
    found = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    length = child.end_lineno - first + 1
                    if length > limit:
                        found.append((name, length))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def test_the_scan_sees_the_product() -> None:
    names = {p.relative_to(REPO).as_posix() for p in product_files()}
    assert "pipelines/pipeline.py" in names and "edge_server/app.py" in names
    assert not any(n.startswith("tests/") or "/migrations/" in n for n in names)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n" + "    x = 1\n" * 79, []),  # 80 lines: at the limit
        ("def f():\n" + "    x = 1\n" * 80, [("f", 81)]),
        ("class C:\n    @staticmethod\n    def g():\n" + "        x = 1\n" * 79, [("C.g", 81)]),
        (
            "def f():\n    def inner():\n" + "        x = 1\n" * 85 + "    return inner\n",
            [("f", 88), ("f.inner", 86)],
        ),
    ],
)
def test_long_functions_counts_decorators_and_nesting(tmp_path: Path, source: str, expected) -> None:
    path = tmp_path / "m.py"
    path.write_text(source)
    assert long_functions(path) == expected


def test_no_module_over_600_lines() -> None:
    over = {
        p.relative_to(REPO).as_posix(): n
        for p in product_files()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"


def test_no_function_over_80_lines() -> None:
    over = {
        f"{p.relative_to(REPO).as_posix()}:{name}": n
        for p in product_files()
        for name, n in long_functions(p)
    }
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines: {over}"


def test_every_package_says_what_lives_there_and_who_may_import_it() -> None:
    """A package's opening docstring is its room's sign: what lives there, and which packages may
    import it (the word "import" at least; docs/ARCHITECTURE.md has the map)."""
    unsigned = []
    for path in product_files():
        if path.name != "__init__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if len(doc) < 80 or "import" not in doc:
            unsigned.append(path.relative_to(REPO).as_posix())
    assert not unsigned, (
        f"packages without a docstring saying what lives there and who imports them: {unsigned}"
    )
