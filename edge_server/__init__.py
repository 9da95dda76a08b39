"""AirPatrol live edge server: WebRTC ingest, per-stream pipelines, violation store and API."""

from __future__ import annotations

try:
    from importlib.metadata import PackageNotFoundError, version

    __version__ = version("airpatrol")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0"
