"""The client side talks to the server over HTTP/WebRTC only: of the server package it may import
the wire formats and the ICE helper, never the store, the stream workers or the web app."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
# dji_cloud: the DJI Cloud API OSD message (the simulated Pilot 2 writes what the server reads)
ALLOWED_SERVER_MODULES = {
    "edge_server.telemetry",
    "edge_server.schemas",
    "edge_server.ice",
    "edge_server.dji_cloud",
}


@pytest.mark.parametrize("path", sorted((REPO / "edge_client").rglob("*.py")), ids=lambda p: p.name)
def test_client_imports_only_the_servers_wire_formats(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "edge_server":
                assert name in ALLOWED_SERVER_MODULES, f"{path.name} imports {name}"
