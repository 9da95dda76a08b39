"""Fixtures for the edge client tests: a real edge server on loopback to talk to (tests/edge_helpers.py)."""

from __future__ import annotations

from edge_helpers import loopback_ice, server  # noqa: F401 - fixtures shared with tests/edge_server
