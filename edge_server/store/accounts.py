"""User accounts and bearer tokens in the database (``users``, ``api_tokens``; issue 41). Rows only:
hashing, roles, sign-in and the audit trail are :mod:`edge_server.auth`'s."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from edge_server.store.models import ApiTokenRow, UserRow, utcnow


class UserExists(Exception):
    """A user of that name is already in the database."""


class AccountStore:
    """Reads and writes of ``users`` and ``api_tokens``, each in its own short session."""

    def __init__(self, sessions: sessionmaker) -> None:
        self._sessions = sessions

    # -- users ------------------------------------------------------------------------------------

    def add_user(self, username: str, role: str, password_hash: str, created_by: str) -> UserRow:
        now = utcnow()
        row = UserRow(
            username=username,
            role=role,
            password_hash=password_hash,
            created_at=now,
            created_by=created_by,
            password_changed_at=now,
        )
        try:
            with self._sessions.begin() as s:
                s.add(row)
        except IntegrityError as exc:
            raise UserExists(username) from exc
        return row

    def user(self, username: str) -> UserRow | None:
        with self._sessions() as s:
            return s.scalars(select(UserRow).where(UserRow.username == username)).first()

    def users(self) -> list[UserRow]:
        with self._sessions() as s:
            return list(s.scalars(select(UserRow).order_by(UserRow.username)))

    def update_user(self, username: str, **fields: Any) -> UserRow | None:
        with self._sessions.begin() as s:
            row = s.scalars(select(UserRow).where(UserRow.username == username)).first()
            if row is None:
                return None
            for name, value in fields.items():
                setattr(row, name, value)
        return row

    # -- tokens -----------------------------------------------------------------------------------

    def add_token(self, **fields: Any) -> ApiTokenRow:
        row = ApiTokenRow(created_at=utcnow(), **fields)
        with self._sessions.begin() as s:
            s.add(row)
        return row

    def token(self, token_sha256: str) -> tuple[ApiTokenRow, UserRow | None] | None:
        """The token with this hash and its user (None for a machine token), revoked or not."""
        with self._sessions() as s:
            found = s.execute(
                select(ApiTokenRow, UserRow)
                .outerjoin(UserRow, ApiTokenRow.user_id == UserRow.id)
                .where(ApiTokenRow.token_sha256 == token_sha256)
            ).first()
            return None if found is None else (found[0], found[1])

    def token_by_id(self, token_id: str) -> ApiTokenRow | None:
        with self._sessions() as s:
            return s.get(ApiTokenRow, token_id)

    def tokens(
        self, include_revoked: bool = False, now: dt.datetime | None = None
    ) -> list[tuple[ApiTokenRow, str | None]]:
        """Tokens (newest first) with their user's name; without ``include_revoked``, only those
        still valid at ``now``."""
        now = now or utcnow()
        with self._sessions() as s:
            query = select(ApiTokenRow, UserRow.username, UserRow.role).outerjoin(
                UserRow, ApiTokenRow.user_id == UserRow.id
            )
            if not include_revoked:
                query = query.where(
                    ApiTokenRow.revoked_at.is_(None),
                    or_(ApiTokenRow.expires_at.is_(None), ApiTokenRow.expires_at > now),
                )
            rows = s.execute(query.order_by(ApiTokenRow.created_at.desc(), ApiTokenRow.id)).all()
            return [(row[0], row[1], row[2]) for row in rows]

    def revoke_token(self, token_id: str) -> ApiTokenRow | None:
        """Revoke one token; None when there is none of that id (or it was revoked already)."""
        with self._sessions.begin() as s:
            row = s.get(ApiTokenRow, token_id)
            if row is None or row.revoked_at is not None:
                return None
            row.revoked_at = utcnow()
        return row

    def revoke_user_tokens(self, user_id: int, keep: str | None = None) -> int:
        """Revoke every live token of a user (but ``keep``); how many."""
        with self._sessions.begin() as s:
            query = update(ApiTokenRow).where(
                ApiTokenRow.user_id == user_id, ApiTokenRow.revoked_at.is_(None)
            )
            if keep is not None:
                query = query.where(ApiTokenRow.id != keep)
            return s.execute(query.values(revoked_at=utcnow())).rowcount or 0

    def touch_token(self, token_id: str, at: dt.datetime) -> None:
        with self._sessions.begin() as s:
            s.execute(update(ApiTokenRow).where(ApiTokenRow.id == token_id).values(last_used_at=at))


__all__ = ["AccountStore", "UserExists"]
