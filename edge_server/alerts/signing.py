"""Webhook signatures, both sides (issue 41). Standard library only: a dispatch system can copy this
file to check what the server sends.

Every POST carries ``X-AirPatrol-Signature: t=<unix seconds>,v1=<hex>``, where ``<hex>`` is the
HMAC-SHA256 under the target's shared secret of ``"<t>." + body`` (the exact bytes), and
``Idempotency-Key: <event id>`` (the same at every retry of one event). A receiver checks the
signature in constant time, refuses a timestamp more than ``tolerance_s`` (5 minutes) away from its
clock (a replayed old request), and acts once per idempotency key (a retry of a request it already
took, or a replay within the tolerance): :class:`WebhookReceiver`.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import OrderedDict

SIGNATURE_HEADER = "X-AirPatrol-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
EVENT_HEADER = "X-AirPatrol-Event"
TOLERANCE_S = 300.0


class WebhookRefused(ValueError):
    """A request that is not a fresh, authentic webhook (the message says why, in one line)."""


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The signature header's value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(
    secret: str, body: bytes, header: str | None, tolerance_s: float = TOLERANCE_S, now: float | None = None
) -> int:
    """The request's timestamp, or :class:`WebhookRefused`: no or a malformed signature, a wrong one
    (another secret, a changed body), or a timestamp outside the tolerance."""
    if not header:
        raise WebhookRefused(f"no {SIGNATURE_HEADER} header")
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts["t"])
        given = parts["v1"]
    except (KeyError, ValueError) as exc:
        raise WebhookRefused(f"malformed {SIGNATURE_HEADER}: {header[:80]!r}") from exc
    expected = sign(secret, body, timestamp).split("v1=", 1)[1]
    if not hmac.compare_digest(given, expected):
        raise WebhookRefused("signature does not match (another secret, or the body was changed)")
    age = (time.time() if now is None else now) - timestamp
    if abs(age) > tolerance_s:
        raise WebhookRefused(
            f"timestamp {age:+.0f} s from now, beyond {tolerance_s:.0f} s: a replayed or delayed request"
        )
    return timestamp


class WebhookReceiver:
    """A receiver's check of each request: authentic, fresh, and new (one action per idempotency
    key; the keys of the last ``remember`` requests are kept, which covers the tolerance window at
    any realistic rate)."""

    def __init__(self, secret: str, tolerance_s: float = TOLERANCE_S, remember: int = 100_000) -> None:
        self.secret = secret
        self.tolerance_s = tolerance_s
        self.remember = remember
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, headers: dict[str, str], body: bytes, now: float | None = None) -> str:
        """The idempotency key of a request to act on, or :class:`WebhookRefused` (including a
        duplicate: "already received")."""
        lower = {k.lower(): v for k, v in headers.items()}
        verify(self.secret, body, lower.get(SIGNATURE_HEADER.lower()), self.tolerance_s, now)
        key = lower.get(IDEMPOTENCY_HEADER.lower())
        if not key:
            raise WebhookRefused(f"no {IDEMPOTENCY_HEADER} header")
        with self._lock:
            if key in self._seen:
                raise WebhookRefused(f"already received {key}: a retry or a replay, not acted on twice")
            self._seen[key] = time.time()
            while len(self._seen) > self.remember:
                self._seen.popitem(last=False)
        return key


__all__ = [
    "EVENT_HEADER",
    "IDEMPOTENCY_HEADER",
    "SIGNATURE_HEADER",
    "TOLERANCE_S",
    "WebhookReceiver",
    "WebhookRefused",
    "sign",
    "verify",
]
