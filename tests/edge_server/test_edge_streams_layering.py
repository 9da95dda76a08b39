"""Ingest reaches the engine through one interface (edge_server/engine_link.py), so that a stream's
engine can move to another process without touching the ingest modules.

The modules through which streams arrive (edge_server/streams/: webrtc_ingest, pull_ingest,
rtmp_ingest, viewers, telemetry_routing) and the pieces they stand on (peers, session, errors,
host) import neither the engine (``pipelines.pipeline``, ``pipelines.builder``: none of
``pipelines`` but its user-facing errors) nor the worker (``edge_server.worker`` and its parts
``frame_queue``, ``stream_outputs``), nor the registry or the spare pipeline, which build the
worker (nor the ``edge_server.streams`` package, which imports the registry). They may not reach
the worker through another project module either.

Runtime imports count: import statements at any depth (inside functions too) and
``importlib.import_module("...")``. Imports under ``if TYPE_CHECKING:`` do not: they name types
for annotations (a ``Telemetry``, a ``RulesConfig``) and run only under a type checker. A planted
import of each kind shows the check sees it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
STREAMS = REPO / "edge_server" / "streams"
INGEST = [
    "webrtc_ingest",
    "pull_ingest",
    "rtmp_ingest",
    "viewers",
    "telemetry_routing",
    "peers",
    "session",
    "errors",
    "host",
]
# the engine and everything that builds or runs it (a name, and every module below it)
ENGINE_SIDE = (
    "edge_server.worker",
    "edge_server.frame_queue",
    "edge_server.stream_outputs",
    "edge_server.streams.registry",
    "edge_server.streams.spare",
)
# of pipelines, only the errors a telemetry parser raises (TelemetryError): they import nothing
ALLOWED_PIPELINES = {"pipelines.errors"}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(source: str, module: str) -> set[str]:
    """The modules ``source`` (the module named ``module``) imports when it runs: for ``from a.b
    import c`` both ``a.b`` and ``a.b.c`` (c may be a module); relative imports resolved."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.orelse:  # the else branch runs
                    visit_one(stmt)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.rsplit(".", node.level)[0]
                base = f"{package}.{base}" if base else package
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        elif (
            isinstance(node, ast.Call)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
        visit(node)

    visit(ast.parse(source))
    return found


def forbidden(name: str) -> bool:
    """An import an ingest module may not make."""
    if name == "pipelines" or name.startswith("pipelines."):
        return not any(name == a or name.startswith(f"{a}.") for a in ALLOWED_PIPELINES)
    if name == "edge_server.streams":  # the package: it imports the registry
        return True
    return any(name == m or name.startswith(f"{m}.") for m in ENGINE_SIDE)


def _module(name: str) -> str:
    return f"edge_server.streams.{name}"


def test_the_ingest_modules_exist() -> None:
    assert {p.stem for p in STREAMS.glob("*.py")} >= {*INGEST, "registry", "spare", "__init__"}


@pytest.mark.parametrize("name", INGEST)
def test_an_ingest_module_imports_no_engine(name: str) -> None:
    imports = runtime_imports((STREAMS / f"{name}.py").read_text(encoding="utf-8"), _module(name))
    assert not sorted(filter(forbidden, imports)), f"{name} imports the engine side"


@pytest.mark.parametrize("name", ["webrtc_ingest", "pull_ingest"])
def test_frames_go_to_the_engine_through_the_interface(name: str) -> None:
    imports = runtime_imports((STREAMS / f"{name}.py").read_text(encoding="utf-8"), _module(name))
    assert "edge_server.engine_link.IncomingFrame" in imports


def _project_module(name: str) -> Path | None:
    """The file of a project module, or None (a third-party module, or a name inside a module)."""
    path = REPO.joinpath(*name.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@pytest.mark.parametrize("name", INGEST)
def test_an_ingest_module_reaches_no_worker_through_another_module(name: str) -> None:
    """What an ingest module imports, and what those import, down to the bottom: no worker,
    no registry. Not checked here: ``pipelines``, reached through the telemetry parsers
    (``edge_server.telemetry``), and the packages' ``__init__`` modules Python runs first (that of
    ``edge_server.streams`` imports the registry for the package's callers)."""
    seen: dict[str, str] = {}  # module -> the module that imported it
    todo = [_module(name)]
    while todo:
        current = todo.pop()
        path = _project_module(current)
        if path is None:
            continue
        for imported in runtime_imports(path.read_text(encoding="utf-8"), current):
            if imported not in seen and _project_module(imported) is not None:
                seen[imported] = current
                todo.append(imported)
    reached = sorted(m for m in seen if any(m == e or m.startswith(f"{e}.") for e in ENGINE_SIDE))
    assert not reached, {m: f"imported by {seen[m]}" for m in reached}


@pytest.mark.parametrize(
    ("planted", "caught"),
    [
        ("from pipelines.pipeline import Pipeline", True),
        ("import pipelines.builder", True),
        ("from pipelines import types", True),
        ("from edge_server.worker import StreamWorker", True),
        ("from edge_server import worker", True),
        ("from edge_server.frame_queue import FrameQueue", True),
        ("from edge_server.streams import StreamManager", True),
        ("from edge_server.streams.registry import StreamManager", True),
        ("from .registry import StreamManager", True),
        ("from . import spare", True),
        ("def f():\n    from edge_server.worker import close_pipeline", True),
        ("importlib.import_module('pipelines.builder')", True),
        ("if TYPE_CHECKING:\n    pass\nelse:\n    import pipelines.pipeline", True),
        ("if TYPE_CHECKING:\n    from pipelines.pipeline import Pipeline", False),
        ("if typing.TYPE_CHECKING:\n    from edge_server.worker import StreamWorker", False),
        ("from edge_server.engine_link import IncomingFrame", False),
        ("from edge_server.streams.session import StreamSession", False),
        ("from pipelines.errors import TelemetryError", False),
    ],
)
def test_the_check_sees_a_planted_import(planted: str, caught: bool) -> None:
    source = (STREAMS / "webrtc_ingest.py").read_text(encoding="utf-8") + "\n" + planted + "\n"
    imports = runtime_imports(source, _module("webrtc_ingest"))
    assert bool(sorted(filter(forbidden, imports))) is caught
