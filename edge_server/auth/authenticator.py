"""Bearer tokens to principals: who is calling, with which role.

Three kinds of token are accepted: the server's API token (``AIRPATROL_API_TOKEN`` or
``<data_dir>/api_token``: an **admin machine token**, compared in constant time, never stored in the
database), a user's sign-in token (it acts with the user's role of the moment, and stops with the
user), and a machine token with its own role. Only a SHA-256 of a stored token is kept; a lookup
finds it by that hash.

Lookups are cached for ``cache_s`` (2 s), so a page's dozen requests cost one database read; a
token revoked on this server is refused at once (a revocation, a disabled user or a new role clears the cache), on
another server of a fleet within ``cache_s``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from edge_server.auth.roles import Role
from edge_server.store.accounts import AccountStore
from edge_server.store.models import utcnow

log = logging.getLogger(__name__)

TOKEN_PREFIX = "ap_"
CACHE_MAX = 4096  # tokens remembered at once (a flood of wrong ones cannot grow the cache)
TOUCH_EVERY_S = 60.0  # last_used_at is written at most once a minute per token


@dataclass(frozen=True)
class Principal:
    """Who a request acts as. ``kind``: ``user`` (signed in), ``machine`` (a machine token) or
    ``server`` (the server's API token)."""

    kind: str
    name: str
    role: Role
    token_id: str | None = None
    user_id: int | None = None
    expires_at: dt.datetime | None = None

    def actor(self, address: str | None) -> str:
        """How the audit trail names this principal acting from ``address``."""
        where = address or "?"
        if self.kind == "server":
            return f"api-token@{where}"
        who = "user" if self.kind == "user" else "token"
        return f"{who}:{self.name}[{self.role.value}]@{where}"[:128]


SERVER = Principal("server", "api_token", Role.ADMIN)


def new_token() -> tuple[str, str, str]:
    """A fresh bearer token, its SHA-256 (what is stored) and its id (what names it)."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return token, token_sha256(token), "tok_" + secrets.token_hex(6)


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class Authenticator:
    """A token to its :class:`Principal`, or None (missing, wrong, revoked, expired, a disabled user)."""

    def __init__(
        self, server_token: str, cache_s: float = 2.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._server_token = server_token.encode()
        self.cache_s = cache_s
        self._clock = clock
        self._accounts: AccountStore | None = None
        self._cache: OrderedDict[str, tuple[float, Principal | None]] = OrderedDict()
        self._touched: dict[str, float] = {}
        self._lock = threading.Lock()

    def bind(self, accounts: AccountStore | None) -> None:
        """The database's accounts (at start-up; before it only the server's token is known)."""
        self._accounts = accounts
        self.forget()

    def forget(self) -> None:
        """Drop every cached lookup (after any change to users or tokens)."""
        with self._lock:
            self._cache.clear()

    def is_server_token(self, token: str) -> bool:
        return hmac.compare_digest(token.encode("utf-8", "surrogatepass"), self._server_token)

    def cached(self, token: str | None) -> tuple[bool, Principal | None]:
        """(known, principal) from the server's token or the cache alone, without the database."""
        if not token:
            return True, None
        if self.is_server_token(token):
            return True, SERVER
        if self._accounts is None or not token.startswith(TOKEN_PREFIX) or len(token) > 128:
            return True, None
        key = token_sha256(token)
        now = self._clock()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < self.cache_s:
                principal = hit[1]
                if principal is None or principal.expires_at is None or principal.expires_at > utcnow():
                    return True, principal
                return True, None
        return False, None

    def lookup(self, token: str | None) -> Principal | None:
        """The principal of ``token`` (blocking: may read the database)."""
        known, principal = self.cached(token)
        if known:
            return principal
        assert token is not None and self._accounts is not None
        key = token_sha256(token)
        principal = self._from_database(key)
        with self._lock:
            self._cache[key] = (self._clock(), principal)
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_MAX:
                self._cache.popitem(last=False)
        return principal

    async def principal(self, token: str | None) -> Principal | None:
        """:meth:`lookup` from the event loop: the database is read on a thread, only on a miss."""
        known, principal = self.cached(token)
        return principal if known else await asyncio.to_thread(self.lookup, token)

    def _from_database(self, key: str) -> Principal | None:
        assert self._accounts is not None
        found = self._accounts.token(key)
        if found is None:
            return None
        row, user = found
        now = utcnow()
        if row.revoked_at is not None or (row.expires_at is not None and row.expires_at <= now):
            return None
        if row.kind == "login":
            if user is None or user.disabled_at is not None:
                return None
            principal = Principal("user", user.username, Role(user.role), row.id, user.id, row.expires_at)
        else:
            principal = Principal(
                "machine", row.name, Role(row.role or Role.VIEWER), row.id, None, row.expires_at
            )
        self._touch(row.id, now)
        return principal

    def _touch(self, token_id: str, now: dt.datetime) -> None:
        clock = self._clock()
        if clock - self._touched.get(token_id, -TOUCH_EVERY_S) < TOUCH_EVERY_S:
            return
        self._touched[token_id] = clock
        if len(self._touched) > CACHE_MAX:
            self._touched.clear()
        try:
            assert self._accounts is not None
            self._accounts.touch_token(token_id, now)
        except Exception:  # noqa: BLE001 - a last-used time is not worth refusing a request
            log.warning("could not note the use of token %s", token_id, exc_info=True)


__all__ = ["SERVER", "TOKEN_PREFIX", "Authenticator", "Principal", "new_token", "token_sha256"]
