"""Errors a user can act on. The CLI and the server show their message, never a traceback."""

from __future__ import annotations


class AirPatrolError(Exception):
    """Base class of every error whose message tells the user what to fix."""


class SourceError(AirPatrolError):
    """A video or frame folder that cannot be opened or decoded."""


class TelemetryError(AirPatrolError, ValueError):
    """Telemetry that is missing, malformed or physically absurd."""


class WeightsError(AirPatrolError, FileNotFoundError):
    """Model weights that are missing or unusable; the message names what to provide."""


def is_user_error(exc: BaseException) -> bool:
    return isinstance(exc, AirPatrolError | FileNotFoundError)
