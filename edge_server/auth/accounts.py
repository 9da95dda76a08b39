"""Sign-in, users and tokens (issue 41), every change written to the audit trail.

A sign-in checks the password (Argon2id) under the :class:`~edge_server.auth.limiter.LoginLimiter`
and gives a **sign-in token** valid ``login_hours`` (a shift); signing out revokes it. Disabling a
user, or a new password set by an admin, revokes all of the user's tokens; a user changing their own
password keeps only the token they are using. Machine tokens are made by an admin with a role and,
optionally, an expiry; they are shown once.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from edge_server.auth.authenticator import Authenticator, Principal, new_token
from edge_server.auth.limiter import LoginLimiter
from edge_server.auth.passwords import (
    PasswordError,
    burn_verify,
    check_password_rule,
    hash_password,
    needs_rehash,
    verify_password,
)
from edge_server.auth.roles import MACHINE_ROLES, PERSON_ROLES, Role
from edge_server.store.accounts import AccountStore, UserExists
from edge_server.store.models import ApiTokenRow, UserRow, utcnow

if TYPE_CHECKING:
    from edge_server.evidence.audit import Auditor
    from edge_server.settings import ServerSettings
    from edge_server.store import Store

log = logging.getLogger(__name__)

MAX_TOKEN_DAYS = 3650
PASSWORD_CHECKS = 2  # Argon2 checks at once
USERNAME = re.compile(r"^[a-z0-9][a-z0-9_.@-]{1,63}$")
TOKEN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.@-]{0,63}$")


class AccountError(ValueError):
    """A request about accounts that cannot be done (the message says why). ``code``: not_found,
    conflict or invalid."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class LoginRefused(Exception):
    """A wrong user name or password, or a disabled user (one message for all: no name is confirmed)."""


class LoginLocked(Exception):
    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"too many failed sign-ins: try again in {int(retry_after_s) + 1} s")
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class Issued:
    """A token just made: shown this once."""

    token: str
    row: ApiTokenRow
    principal: Principal | None = None


def user_view(row: UserRow) -> dict:
    """A user as the audit trail records it (never the hash)."""
    return {"username": row.username, "role": row.role, "disabled": row.disabled_at is not None}


def token_view(row: ApiTokenRow) -> dict:
    return {
        "id": row.id,
        "kind": row.kind,
        "name": row.name,
        "role": row.role,
        "revoked": row.revoked_at is not None,
    }


def _username(name: str) -> str:
    name = name.strip().lower()
    if not USERNAME.match(name):
        raise AccountError("invalid", "a user name is 2-64 characters: a-z, 0-9, and _ . @ - (not first)")
    return name


def _role(role: str, allowed: tuple[Role, ...]) -> Role:
    if role not in [r.value for r in allowed]:
        raise AccountError("invalid", f"role {role!r} is not one of {', '.join(r.value for r in allowed)}")
    return Role(role)


class Accounts:
    """Users and tokens. ``audit(actor, action, target_type, target_id, before, after, detail)`` is
    the audit trail's ``Auditor.record`` (None: nothing is recorded, e.g. in a unit test)."""

    def __init__(
        self,
        store: AccountStore,
        authenticator: Authenticator,
        audit=None,
        limiter: LoginLimiter | None = None,
        login_hours: float = 12.0,
    ) -> None:
        self.store = store
        self.auth = authenticator
        self._audit = audit
        self.limiter = limiter or LoginLimiter()
        self.login_hours = login_hours
        self._checks = threading.BoundedSemaphore(PASSWORD_CHECKS)

    def _record(
        self, actor: str, action: str, kind: str, target: str, before=None, after=None, detail=""
    ) -> None:
        if self._audit is not None:
            self._audit(actor, action, kind, target, before, after, detail)

    # -- users ------------------------------------------------------------------------------------

    def add_user(self, username: str, role: str, password: str, actor: str) -> UserRow:
        name = _username(username)
        grant = _role(role, PERSON_ROLES)
        try:
            check_password_rule(name, password)
        except PasswordError as exc:
            raise AccountError("invalid", str(exc)) from exc
        try:
            row = self.store.add_user(name, grant.value, hash_password(password), actor)
        except UserExists as exc:
            raise AccountError("conflict", f"user {name} exists already") from exc
        self._record(actor, "user.created", "user", name, None, user_view(row))
        log.info("user %s (%s) created by %s", name, grant.value, actor)
        return row

    def user(self, username: str) -> UserRow:
        row = self.store.user(username.strip().lower())
        if row is None:
            raise AccountError("not_found", f"no user {username}")
        return row

    def update_user(
        self,
        username: str,
        actor: str,
        *,
        role: str | None = None,
        disabled: bool | None = None,
        password: str | None = None,
        acting: Principal | None = None,
    ) -> UserRow:
        """An admin's change: role, disabled or enabled, a new password. An admin cannot demote or
        disable themselves (another admin, or the server's API token, must)."""
        before = self.user(username)
        fields: dict = {}
        if role is not None and role != before.role:
            fields["role"] = _role(role, PERSON_ROLES).value
        if disabled is not None and disabled != (before.disabled_at is not None):
            fields["disabled_at"] = utcnow() if disabled else None
        if password is not None:
            try:
                check_password_rule(before.username, password)
            except PasswordError as exc:
                raise AccountError("invalid", str(exc)) from exc
            fields["password_hash"] = hash_password(password)
            fields["password_changed_at"] = utcnow()
        if acting is not None and acting.user_id == before.id and ({"role", "disabled_at"} & set(fields)):
            raise AccountError("conflict", "an admin cannot change their own role or disable themselves")
        if not fields:
            return before
        row = self.store.update_user(before.username, **fields)
        assert row is not None
        if fields.get("disabled_at") is not None or "password_hash" in fields:
            revoked = self.store.revoke_user_tokens(row.id)
            log.info("user %s: %d tokens revoked", row.username, revoked)
        self.auth.forget()  # a new role, or tokens that end: no cached lookup may outlive it
        detail = "password set by an admin" if "password_hash" in fields else ""
        action = "user.disabled" if fields.get("disabled_at") else "user.updated"
        self._record(actor, action, "user", row.username, user_view(before), user_view(row), detail)
        return row

    def change_password(self, principal: Principal, current: str, new: str, actor: str) -> None:
        """A user's own new password (the current one first); their other sign-ins end."""
        if principal.kind != "user":
            raise AccountError("invalid", "only a signed-in user has a password to change")
        row = self.user(principal.name)
        if not verify_password(row.password_hash, current):
            raise AccountError("invalid", "the current password is wrong")
        try:
            check_password_rule(row.username, new)
        except PasswordError as exc:
            raise AccountError("invalid", str(exc)) from exc
        self.store.update_user(row.username, password_hash=hash_password(new), password_changed_at=utcnow())
        self.store.revoke_user_tokens(row.id, keep=principal.token_id)
        self.auth.forget()
        self._record(actor, "user.password_changed", "user", row.username, None, None, "by the user")

    # -- sign-in ----------------------------------------------------------------------------------

    def login(self, username: str, password: str, address: str) -> Issued:
        """A sign-in token, or :class:`LoginRefused` / :class:`LoginLocked`."""
        name = username.strip().lower()[:64]
        wait = self.limiter.retry_after(name, address)
        if wait > 0:
            raise LoginLocked(wait)
        row = self.store.user(name)
        with self._checks:  # each check holds 64 MiB for ~0.1 s: a few at a time, whatever the flood
            if row is None:
                burn_verify(password)
            ok = row is not None and verify_password(row.password_hash, password) and row.disabled_at is None
        if not ok:
            if self.limiter.failed(name, address):
                self._record(
                    f"sign-in@{address}",
                    "auth.locked",
                    "user",
                    name,
                    None,
                    None,
                    f"{self.limiter.limits['user']} failed sign-ins for the name or "
                    f"{self.limiter.limits['address']} from the address in {int(self.limiter.window_s)} s",
                )
            raise LoginRefused("wrong user name or password, or the user is disabled")
        assert row is not None
        self.limiter.succeeded(name)
        if needs_rehash(row.password_hash):
            self.store.update_user(row.username, password_hash=hash_password(password))
        token, digest, token_id = new_token()
        expires = utcnow() + dt.timedelta(hours=self.login_hours)
        saved = self.store.add_token(
            id=token_id, token_sha256=digest, kind="login", name=row.username, role=None,
            user_id=row.id, created_by=f"sign-in@{address}", expires_at=expires,
        )  # fmt: skip
        principal = Principal("user", row.username, Role(row.role), token_id, row.id, expires)
        self._record(
            principal.actor(address), "auth.signed_in", "user", row.username, None, None, f"token {token_id}"
        )
        return Issued(token, saved, principal)

    def logout(self, principal: Principal, actor: str) -> bool:
        if principal.token_id is None:
            return False
        revoked = self.store.revoke_token(principal.token_id) is not None
        if revoked:
            self.auth.forget()
            self._record(
                actor,
                "auth.signed_out",
                "user" if principal.kind == "user" else "token",
                principal.name if principal.kind == "user" else principal.token_id,
            )
        return revoked

    # -- machine tokens ---------------------------------------------------------------------------

    def add_machine_token(
        self, name: str, role: str, actor: str, expires_days: float | None = None
    ) -> Issued:
        name = name.strip()
        if not TOKEN_NAME.match(name):
            raise AccountError(
                "invalid", "a token name is 1-64 characters: letters, digits, space and _ . @ -"
            )
        grant = _role(role, MACHINE_ROLES)
        if expires_days is not None and not 0 < expires_days <= MAX_TOKEN_DAYS:
            raise AccountError(
                "invalid", f"a token expires after more than 0 and at most {MAX_TOKEN_DAYS} days"
            )
        token, digest, token_id = new_token()
        expires = None if expires_days is None else utcnow() + dt.timedelta(days=expires_days)
        row = self.store.add_token(
            id=token_id, token_sha256=digest, kind="machine", name=name, role=grant.value,
            user_id=None, created_by=actor, expires_at=expires,
        )  # fmt: skip
        self._record(actor, "token.created", "token", token_id, None, token_view(row))
        return Issued(token, row)

    def revoke_token(self, token_id: str, actor: str) -> ApiTokenRow:
        before = self.store.token_by_id(token_id)
        row = self.store.revoke_token(token_id)
        if row is None or before is None:
            raise AccountError("not_found", f"no live token {token_id}")
        self.auth.forget()
        self._record(actor, "token.revoked", "token", token_id, token_view(before), token_view(row))
        return row


def start_accounts(auth: Authenticator, store: Store, auditor: Auditor, settings: ServerSettings) -> Accounts:
    """At the server's start: the tokens in ``store`` become valid, sign-ins counted as configured."""
    auth.bind(store.accounts)
    limiter = LoginLimiter(
        settings.login_failures_per_user, settings.login_failures_per_address, settings.login_window_s
    )
    users = len(store.accounts.users())
    if not users:
        log.info("no user accounts yet: add one with 'airpatrol users add NAME --role admin'")
    return Accounts(store.accounts, auth, auditor.record, limiter, settings.login_hours)


__all__ = [
    "AccountError",
    "Accounts",
    "Issued",
    "LoginLocked",
    "LoginRefused",
    "start_accounts",
    "token_view",
    "user_view",
]
