"""Drone telemetry: DJI .SRT sidecars and CSV flight logs -> a validated, interpolated track.

``load_telemetry(path)`` is the entry point; ``TelemetryTrack.at(t)`` gives the flight state of
one video frame; ``attach_telemetry(frames, track)`` gives each frame its own. ``write_srt`` writes the modern DJI layout (used by the flight simulator).
Part of the engine: it imports only ``pipelines`` (types, errors, camera profiles); the server's
live telemetry buffer (``edge_server.telemetry``) and the simulator use its validation and
interpolation.
"""

from pipelines.telemetry.flightlog import parse_flightlog_csv
from pipelines.telemetry.srt import format_srt, parse_srt, write_srt
from pipelines.telemetry.track import (
    DEFAULT_MAX_GAP_S,
    TelemetrySource,
    TelemetryTrack,
    at_sample,
    attach_telemetry,
    between_samples,
    interpolate_telemetry,
    load_telemetry,
)
from pipelines.telemetry.validate import continuity_problem, telemetry_problems, validate_telemetry

__all__ = [
    "DEFAULT_MAX_GAP_S",
    "TelemetrySource",
    "TelemetryTrack",
    "at_sample",
    "attach_telemetry",
    "between_samples",
    "continuity_problem",
    "format_srt",
    "interpolate_telemetry",
    "load_telemetry",
    "parse_flightlog_csv",
    "parse_srt",
    "telemetry_problems",
    "validate_telemetry",
    "write_srt",
]
