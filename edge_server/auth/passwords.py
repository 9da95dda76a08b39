"""Passwords: Argon2id hashes (``argon2-cffi``, RFC 9106's low-memory profile: 3 passes over
64 MiB, 4 lanes), and the rule a new password must meet."""

from __future__ import annotations

import functools

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

MIN_LENGTH = 12
MAX_LENGTH = 256

_HASHER = PasswordHasher()


class PasswordError(ValueError):
    """A new password that does not meet the rule (the message says why)."""


def check_password_rule(username: str, password: str) -> None:
    """At least 12 characters (a passphrase is fine), at most 256, not the user name."""
    if len(password) < MIN_LENGTH:
        raise PasswordError(f"a password needs at least {MIN_LENGTH} characters (a passphrase is fine)")
    if len(password) > MAX_LENGTH:
        raise PasswordError(f"a password has at most {MAX_LENGTH} characters")
    if username.lower() in password.lower():
        raise PasswordError("a password must not contain the user name")


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _HASHER.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """True when the hash was made with other parameters than today's (rehash at the next sign-in)."""
    try:
        return _HASHER.check_needs_rehash(password_hash)
    except InvalidHashError:
        return True


@functools.cache
def _dummy_hash() -> str:
    return _HASHER.hash("not a password of anyone's")


def burn_verify(password: str) -> None:
    """Spend the time a real check takes, for a user name that does not exist (its sign-in must not
    answer faster than a wrong password's)."""
    verify_password(_dummy_hash(), password)


__all__ = [
    "MAX_LENGTH",
    "MIN_LENGTH",
    "PasswordError",
    "burn_verify",
    "check_password_rule",
    "hash_password",
    "needs_rehash",
    "verify_password",
]
