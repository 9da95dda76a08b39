"""The API's view of sign-in, users and tokens (pydantic: the edge of the service)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from edge_server.auth.passwords import MAX_LENGTH, MIN_LENGTH

PersonRole = Literal["admin", "officer", "viewer"]
MachineRole = Literal["admin", "officer", "viewer", "publisher"]
USERNAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.@-]{1,63}$"
TOKEN_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.@-]{0,63}$"


class LoginIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=MAX_LENGTH)


class PrincipalOut(BaseModel):
    kind: Literal["user", "machine", "server"] = Field(
        description="user: signed in; machine: a machine token; server: the server's API token (admin)"
    )
    name: str = Field(description="the user name, or the token's name")
    role: MachineRole
    token_id: str | None = Field(None, description="the token in use (none for the server's API token)")
    expires_at: dt.datetime | None = None
    access: list[Literal["read", "publish", "operate", "admin"]] = Field(
        description="what this role may do: read, publish (streams), operate (review, dismiss, export, "
        "evidence, rules), admin (users, tokens, keys, audit trail)"
    )


class LoginOut(PrincipalOut):
    token: str = Field(description="the bearer token for this sign-in (shown once; valid until expires_at)")


class PasswordIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    current_password: str = Field(min_length=1, max_length=MAX_LENGTH)
    new_password: str = Field(
        min_length=MIN_LENGTH, max_length=MAX_LENGTH, description="12 characters or more, not the user name"
    )


class UserIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    username: str = Field(pattern=USERNAME_PATTERN, description="kept in lower case")
    role: PersonRole
    password: str = Field(
        min_length=MIN_LENGTH, max_length=MAX_LENGTH, description="12 characters or more, not the user name"
    )


class UserPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: PersonRole | None = None
    disabled: StrictBool | None = Field(
        None, description="true: the user cannot sign in; every token of theirs ends"
    )
    password: str | None = Field(
        None,
        min_length=MIN_LENGTH,
        max_length=MAX_LENGTH,
        description="a new password (every token of theirs ends)",
    )


class UserOut(BaseModel):
    username: str
    role: PersonRole
    disabled: bool
    created_at: dt.datetime
    created_by: str
    password_changed_at: dt.datetime

    @classmethod
    def from_row(cls, row) -> UserOut:  # noqa: ANN001 - a UserRow
        return cls(
            username=row.username,
            role=row.role,
            disabled=row.disabled_at is not None,
            created_at=row.created_at,
            created_by=row.created_by,
            password_changed_at=row.password_changed_at,
        )


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=TOKEN_NAME_PATTERN, description="what uses it, e.g. 'phone of unit 7'")
    role: MachineRole = Field(description="publisher: streams only")
    expires_days: float | None = Field(None, gt=0, le=3650, description="none: until revoked")


class TokenOut(BaseModel):
    id: str
    kind: Literal["login", "machine"] = Field(
        description="login: a user's sign-in; machine: made by an admin"
    )
    name: str
    role: MachineRole = Field(description="a sign-in token's is its user's")
    username: str | None = Field(None, description="the user of a sign-in token")
    created_at: dt.datetime
    created_by: str
    expires_at: dt.datetime | None
    revoked_at: dt.datetime | None
    last_used_at: dt.datetime | None

    @classmethod
    def from_row(cls, row, username: str | None, user_role: str | None = None) -> TokenOut:  # noqa: ANN001
        return cls(
            id=row.id,
            kind=row.kind,
            name=row.name,
            role=row.role or user_role or "viewer",
            username=username,
            created_at=row.created_at,
            created_by=row.created_by,
            expires_at=row.expires_at,
            revoked_at=row.revoked_at,
            last_used_at=row.last_used_at,
        )


class TokenCreated(TokenOut):
    token: str = Field(description="the bearer token (shown once: only its SHA-256 is kept)")


class RevokedOut(BaseModel):
    id: str
    revoked: Literal[True] = True
