"""The batch's own error: :class:`BatchError`, a batch that cannot start (a user error)."""

from __future__ import annotations

from pipelines.errors import AirPatrolError


class BatchError(AirPatrolError):
    """A batch that cannot start: no flights found, two with one name, an output folder in use."""
