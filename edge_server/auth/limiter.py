"""Sign-in rate limiting: failed attempts counted per user name and per client address over a
sliding window. Past the limit, sign-ins for that name (or from that address) are refused until the
oldest failure leaves the window, whatever the password: guessing is slowed to a few tries per
quarter hour and a name under attack does not lock its owner out for ever. The counts are this
server's (kept in memory; a fleet's servers count apart)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

MAX_KEYS = 10_000  # names and addresses remembered at once; the least recently failed go first


class LoginLimiter:
    def __init__(
        self,
        per_user: int = 5,
        per_address: int = 20,
        window_s: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = {"user": per_user, "address": per_address}
        self.window_s = window_s
        self._clock = clock
        self._failures: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def retry_after(self, username: str, address: str) -> float:
        """Seconds until a sign-in for ``username`` from ``address`` may be tried (0: now)."""
        now = self._clock()
        wait = 0.0
        with self._lock:
            for key in (("user", username.lower()), ("address", address)):
                times = self._recent(key, now)
                if len(times) >= self.limits[key[0]]:
                    wait = max(wait, times[len(times) - self.limits[key[0]]] + self.window_s - now)
        return wait

    def failed(self, username: str, address: str) -> bool:
        """Count a failure; True when it reaches a limit (the name or the address is now locked)."""
        now = self._clock()
        locked = False
        with self._lock:
            for key in (("user", username.lower()), ("address", address)):
                times = self._recent(key, now)
                times.append(now)
                self._failures[key] = times
                self._failures.move_to_end(key)
                locked = locked or len(times) == self.limits[key[0]]
            while len(self._failures) > MAX_KEYS:
                self._failures.popitem(last=False)
        return locked

    def succeeded(self, username: str) -> None:
        """A right password: the name's failures are forgotten (the address's are not)."""
        with self._lock:
            self._failures.pop(("user", username.lower()), None)


__all__ = ["LoginLimiter"]
