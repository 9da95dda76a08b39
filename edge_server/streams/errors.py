"""Why a stream cannot start: :class:`OfferError` (a bad SDP offer: HTTP 400), :class:`CapacityError`
(no room, or shutting down: 503), :class:`KeyBusy` (an RTMP key streaming already: 409) and
:class:`PipelineUnavailable` (its pipeline cannot be built: 503). The API turns them into answers."""

from __future__ import annotations


class OfferError(ValueError):
    """An SDP offer the server cannot use (HTTP 400); the message says why."""


class CapacityError(RuntimeError):
    """No room for another stream (HTTP 503)."""


class KeyBusy(RuntimeError):
    """An RTMP stream key that is streaming already (HTTP 409)."""


class PipelineUnavailable(RuntimeError):
    """The pipeline for a new stream could not be built (HTTP 503); the message says why."""


__all__ = ["CapacityError", "KeyBusy", "OfferError", "PipelineUnavailable"]
