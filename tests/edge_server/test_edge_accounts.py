"""Users, tokens and sign-in (edge_server.auth) on a real SQLite store: password hashes, the password
rule, sign-in tokens and their expiry, revocation, disabled users, the sign-in limiter, the token
cache, and what each change writes to the audit trail."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from sqlalchemy import update

from edge_server.auth.accounts import AccountError, Accounts, LoginLocked, LoginRefused
from edge_server.auth.authenticator import SERVER, Authenticator, Principal, token_sha256
from edge_server.auth.limiter import LoginLimiter
from edge_server.auth.passwords import hash_password, needs_rehash, verify_password
from edge_server.auth.roles import ROLES_FOR, Access, Role, allowed, who_may
from edge_server.store import Store
from edge_server.store.models import ApiTokenRow

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

SERVER_TOKEN = "the-servers-own-api-token"
PASSWORD = "correct horse battery"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def store(tmp_path: Path):
    store = Store.from_url(f"sqlite:///{tmp_path / 'a.db'}")
    yield store
    store.close()


@pytest.fixture
def trail():
    return []


@pytest.fixture
def accounts(store: Store, trail: list) -> Accounts:
    auth = Authenticator(SERVER_TOKEN, cache_s=60.0)
    auth.bind(store.accounts)
    return Accounts(store.accounts, auth, lambda *entry: trail.append(entry), LoginLimiter(3, 10, 600.0))


@pytest.mark.parametrize(
    ("role", "may"),
    [
        (Role.ADMIN, {Access.READ, Access.PUBLISH, Access.OPERATE, Access.ADMIN}),
        (Role.OFFICER, {Access.READ, Access.PUBLISH, Access.OPERATE}),
        (Role.VIEWER, {Access.READ}),
        (Role.PUBLISHER, {Access.PUBLISH}),
    ],
)
def test_what_each_role_may_do(role: Role, may: set) -> None:
    assert {a for a in Access if allowed(role, a)} == may
    assert set(ROLES_FOR) == set(Access)


def test_who_may_names_the_roles() -> None:
    assert who_may(Access.OPERATE) == "admin or officer"
    assert who_may(Access.ADMIN) == "admin"
    assert who_may(Access.READ) == "admin, officer or viewer"


def test_password_hash_is_argon2id_and_checks() -> None:
    digest = hash_password(PASSWORD)
    assert digest.startswith("$argon2id$") and PASSWORD not in digest
    assert verify_password(digest, PASSWORD)
    assert not verify_password(digest, PASSWORD + "!")
    assert not verify_password("not a hash", PASSWORD)
    assert not needs_rehash(digest) and needs_rehash(
        "$argon2id$v=19$m=1024,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo"
    )


@pytest.mark.parametrize(
    ("username", "role", "password", "why"),
    [
        ("alice", "admin", "short", "at least 12"),
        ("alice", "admin", "x" * 257, "at most 256"),
        ("alice", "admin", "my name is ALICE ok", "user name"),
        ("alice", "publisher", PASSWORD, "is not one of"),
        ("a", "admin", PASSWORD, "user name is"),
        ("al ice", "admin", PASSWORD, "user name is"),
        ("-alice", "viewer", PASSWORD, "user name is"),
    ],
)
def test_a_user_that_cannot_be_added(accounts: Accounts, username, role, password, why) -> None:
    with pytest.raises(AccountError, match=why):
        accounts.add_user(username, role, password, "test")
    assert accounts.store.users() == []


def test_sign_in_gives_a_token_of_the_users_role(accounts: Accounts, store: Store, trail: list) -> None:
    row = accounts.add_user("Alice", "officer", PASSWORD, "cli:root@box")
    assert row.username == "alice" and row.password_hash.startswith("$argon2id$")
    issued = accounts.login("ALICE", PASSWORD, "10.0.0.7")
    assert issued.token.startswith("ap_") and len(issued.token) > 40
    saved = store.accounts.token(token_sha256(issued.token))
    assert saved is not None and saved[0].kind == "login" and saved[0].user_id == row.id
    assert issued.token not in str(vars(saved[0]))  # only its hash is kept
    principal = accounts.auth.lookup(issued.token)
    assert principal == issued.principal
    assert (principal.kind, principal.name, principal.role) == ("user", "alice", Role.OFFICER)
    assert (
        dt.timedelta(hours=11.9)
        < principal.expires_at - dt.datetime.now(dt.timezone.utc)
        <= dt.timedelta(hours=12)
    )
    assert principal.actor("10.0.0.7") == "user:alice[officer]@10.0.0.7"
    actions = [(e[0], e[1], e[3]) for e in trail]
    assert actions == [
        ("cli:root@box", "user.created", "alice"),
        ("user:alice[officer]@10.0.0.7", "auth.signed_in", "alice"),
    ]


@pytest.mark.parametrize("username", ["alice", "nobody"])
def test_wrong_password_or_unknown_name_refused_alike(accounts: Accounts, username: str) -> None:
    accounts.add_user("alice", "viewer", PASSWORD, "test")
    with pytest.raises(LoginRefused, match="wrong user name or password"):
        accounts.login(username, "not the password", "10.0.0.7")


def test_sign_ins_locked_after_failures_then_free_again(store: Store, trail: list) -> None:
    clock = Clock()
    auth = Authenticator(SERVER_TOKEN)
    auth.bind(store.accounts)
    accounts = Accounts(store.accounts, auth, lambda *e: trail.append(e), LoginLimiter(3, 10, 600.0, clock))
    accounts.add_user("alice", "viewer", PASSWORD, "test")
    for _ in range(3):
        with pytest.raises(LoginRefused):
            accounts.login("alice", "guess", "10.0.0.7")
    with pytest.raises(LoginLocked) as locked:  # even the right password, from anywhere
        accounts.login("alice", PASSWORD, "10.0.0.8")
    assert 599 <= locked.value.retry_after_s <= 600
    assert [e[1] for e in trail].count("auth.locked") == 1
    clock.t += 601
    assert accounts.login("alice", PASSWORD, "10.0.0.8").principal.name == "alice"


def test_an_address_is_locked_across_names(store: Store) -> None:
    clock = Clock()
    limiter = LoginLimiter(per_user=100, per_address=4, window_s=60.0, clock=clock)
    for i in range(4):
        assert limiter.retry_after(f"user{i}", "10.0.0.9") == 0
        limiter.failed(f"user{i}", "10.0.0.9")
    assert limiter.retry_after("someone", "10.0.0.9") == pytest.approx(60.0)
    assert limiter.retry_after("someone", "10.0.0.10") == 0
    clock.t += 30
    limiter.failed("x", "10.0.0.10")
    assert limiter.retry_after("someone", "10.0.0.9") == pytest.approx(30.0)
    clock.t += 31
    assert limiter.retry_after("someone", "10.0.0.9") == 0


def test_success_forgets_the_names_failures(store: Store) -> None:
    limiter = LoginLimiter(per_user=2, per_address=100, window_s=60.0, clock=Clock())
    limiter.failed("alice", "a")
    limiter.succeeded("alice")
    limiter.failed("alice", "a")
    assert limiter.retry_after("alice", "a") == 0


def test_disabled_user_and_its_tokens_refused(accounts: Accounts, trail: list) -> None:
    accounts.add_user("bob", "officer", PASSWORD, "test")
    token = accounts.login("bob", PASSWORD, "a").token
    assert accounts.auth.lookup(token) is not None
    accounts.update_user("bob", "user:root[admin]@a", disabled=True)
    assert accounts.auth.lookup(token) is None  # at once: the cache was dropped
    with pytest.raises(LoginRefused):
        accounts.login("bob", PASSWORD, "a")
    assert trail[-1][1:5] == (
        "user.disabled",
        "user",
        "bob",
        {"username": "bob", "role": "officer", "disabled": False},
    )
    accounts.update_user("bob", "test", disabled=False)
    assert accounts.auth.lookup(token) is None  # revoked tokens stay revoked
    assert accounts.login("bob", PASSWORD, "a").principal is not None


def test_role_change_applies_to_live_sign_ins(accounts: Accounts) -> None:
    accounts.add_user("carol", "officer", PASSWORD, "test")
    token = accounts.login("carol", PASSWORD, "a").token
    accounts.update_user("carol", "test", role="viewer")
    assert accounts.auth.lookup(token).role is Role.VIEWER


def test_an_admin_cannot_demote_themselves(accounts: Accounts) -> None:
    accounts.add_user("root", "admin", PASSWORD, "test")
    me = accounts.login("root", PASSWORD, "a").principal
    with pytest.raises(AccountError, match="their own role"):
        accounts.update_user("root", "x", role="viewer", acting=me)
    with pytest.raises(AccountError, match="disable themselves"):
        accounts.update_user("root", "x", disabled=True, acting=me)
    with pytest.raises(AccountError, match="no user"):
        accounts.update_user("nobody", "x", role="viewer")


def test_own_password_change_ends_other_sign_ins(accounts: Accounts) -> None:
    accounts.add_user("dave", "viewer", PASSWORD, "test")
    here = accounts.login("dave", PASSWORD, "a")
    elsewhere = accounts.login("dave", PASSWORD, "b")
    with pytest.raises(AccountError, match="current password is wrong"):
        accounts.change_password(here.principal, "nope", "a brand new passphrase", "x")
    with pytest.raises(AccountError, match="at least 12"):
        accounts.change_password(here.principal, PASSWORD, "short", "x")
    accounts.change_password(here.principal, PASSWORD, "a brand new passphrase", "x")
    assert accounts.auth.lookup(here.token) is not None
    assert accounts.auth.lookup(elsewhere.token) is None
    with pytest.raises(LoginRefused):
        accounts.login("dave", PASSWORD, "a")
    assert accounts.login("dave", "a brand new passphrase", "a").principal is not None


def test_password_set_by_an_admin_ends_every_sign_in(accounts: Accounts) -> None:
    accounts.add_user("erin", "viewer", PASSWORD, "test")
    token = accounts.login("erin", PASSWORD, "a").token
    accounts.update_user("erin", "admin-x", password="reset by the admin")
    assert accounts.auth.lookup(token) is None


def test_sign_out_and_expiry(accounts: Accounts, store: Store) -> None:
    accounts.add_user("fay", "viewer", PASSWORD, "test")
    first = accounts.login("fay", PASSWORD, "a")
    assert accounts.logout(first.principal, "x")
    assert accounts.auth.lookup(first.token) is None
    second = accounts.login("fay", PASSWORD, "a")
    with store._sessions.begin() as s:  # the shift is over
        s.execute(
            update(ApiTokenRow)
            .where(ApiTokenRow.id == second.row.id)
            .values(expires_at=dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1))
        )
    accounts.auth.forget()
    assert accounts.auth.lookup(second.token) is None


def test_machine_tokens(accounts: Accounts, trail: list) -> None:
    issued = accounts.add_machine_token("phone of unit 7", "publisher", "cli:x@y", expires_days=30)
    principal = accounts.auth.lookup(issued.token)
    assert principal == Principal(
        "machine", "phone of unit 7", Role.PUBLISHER, issued.row.id, None, principal.expires_at
    )
    assert principal.actor("10.1.1.1") == "token:phone of unit 7[publisher]@10.1.1.1"
    assert trail[-1][1:4] == ("token.created", "token", issued.row.id)
    accounts.revoke_token(issued.row.id, "cli:x@y")
    assert accounts.auth.lookup(issued.token) is None
    with pytest.raises(AccountError, match="no live token"):
        accounts.revoke_token(issued.row.id, "cli:x@y")
    with pytest.raises(AccountError, match="is not one of"):
        accounts.add_machine_token("x", "root", "cli")
    with pytest.raises(AccountError, match="token name"):
        accounts.add_machine_token("", "viewer", "cli")


@pytest.mark.parametrize(
    "token", [None, "", "wrong", "ap_" + "x" * 43, "ap_" + "y" * 500, SERVER_TOKEN + " "]
)
def test_unknown_tokens_are_nobody(accounts: Accounts, token) -> None:
    assert accounts.auth.lookup(token) is None


def test_server_token_is_an_admin_machine_token(accounts: Accounts) -> None:
    assert accounts.auth.lookup(SERVER_TOKEN) is SERVER
    assert SERVER.role is Role.ADMIN and SERVER.actor("1.2.3.4") == "api-token@1.2.3.4"


def test_lookups_are_cached_and_revocation_elsewhere_seen_after_the_cache(store: Store) -> None:
    clock = Clock()
    auth = Authenticator(SERVER_TOKEN, cache_s=2.0, clock=clock)
    auth.bind(store.accounts)
    accounts = Accounts(store.accounts, auth)
    issued = accounts.add_machine_token("scraper", "viewer", "t")
    assert auth.lookup(issued.token) is not None
    other = Accounts(store.accounts, Authenticator(SERVER_TOKEN))  # another server of the fleet
    other.auth.bind(store.accounts)
    other.revoke_token(issued.row.id, "t")
    assert auth.lookup(issued.token) is not None  # cached here
    clock.t += 2.1
    assert auth.lookup(issued.token) is None
