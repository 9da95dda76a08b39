"""``airpatrol users`` and ``airpatrol tokens`` (edge_server.auth.cli) on a server's data folder: the
first admin bootstrapped, roles changed, users disabled, machine tokens made and revoked; what a
user typed wrong is one line and exit 2; every change in the audit trail as the command line."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from airpatrol.cli import main as airpatrol
from edge_server.auth.authenticator import Authenticator
from edge_server.store import Store

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

PASSWORD = "correct horse battery"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.delenv("AIRPATROL_SETTINGS_FILE", raising=False)
    monkeypatch.setenv("AIRPATROL_DATA_DIR", str(tmp_path))
    return tmp_path


def _stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(text))


def test_bootstrap_an_admin_and_manage_users(data_dir: Path, monkeypatch, capsys) -> None:
    _stdin(monkeypatch, PASSWORD + "\n")
    assert airpatrol(["users", "add", "Root", "--role", "admin", "--password-stdin"]) == 0
    assert capsys.readouterr().out == "added root (admin)\n"
    _stdin(monkeypatch, PASSWORD + "\n")
    assert airpatrol(["users", "add", "bob", "--role", "officer", "--password-stdin"]) == 0
    assert airpatrol(["users", "set", "bob", "--role", "viewer"]) == 0
    assert airpatrol(["users", "set", "bob", "--disable"]) == 0
    capsys.readouterr()
    assert airpatrol(["users", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"username": "bob", "role": "viewer", "disabled": True},
        {"username": "root", "role": "admin", "disabled": False},
    ]
    store = Store.from_url(f"sqlite:///{data_dir / 'airpatrol.db'}")
    try:
        trail = store.audit.entries(0, 100)
        assert [(e["action"], e["target_id"]) for e in trail] == [
            ("user.created", "root"),
            ("user.created", "bob"),
            ("user.updated", "bob"),
            ("user.disabled", "bob"),
        ]
        assert all(e["actor"].startswith("cli:") for e in trail)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("argv", "stdin", "says"),
    [
        (["users", "add", "x1", "--role", "admin", "--password-stdin"], "short\n", "at least 12"),
        (["users", "add", "ann", "--password-stdin"], PASSWORD + "\n", "needs --role"),
        (["users", "add", "--role", "viewer", "--password-stdin"], PASSWORD + "\n", "needs a user name"),
        (["users", "set", "nobody", "--role", "viewer"], "", "no user nobody"),
        (
            ["users", "add", "bad name", "--role", "viewer", "--password-stdin"],
            PASSWORD + "\n",
            "user name is",
        ),
        (["tokens", "create", "cam", "--role", "viewer", "--expires-days", "-1"], "", "expires"),
        (["tokens", "create", "cam"], "", "needs --role"),
        (["tokens", "revoke", "tok_000000000000"], "", "no live token"),
    ],
)
def test_mistakes_are_one_line(data_dir: Path, monkeypatch, capsys, argv, stdin, says) -> None:
    _stdin(monkeypatch, stdin)
    assert airpatrol(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_machine_tokens(data_dir: Path, capsys) -> None:
    assert (
        airpatrol(["tokens", "create", "phone of unit 7", "--role", "publisher", "--expires-days", "90"]) == 0
    )
    captured = capsys.readouterr()
    token = captured.out.strip()
    assert token.startswith("ap_") and "shown once" in captured.err
    token_id = captured.err.split()[1]
    store = Store.from_url(f"sqlite:///{data_dir / 'airpatrol.db'}")
    try:
        auth = Authenticator("unused")
        auth.bind(store.accounts)
        assert auth.lookup(token).role.value == "publisher"
        assert airpatrol(["tokens", "list"]) == 0
        assert token_id in capsys.readouterr().out
        assert airpatrol(["tokens", "revoke", token_id]) == 0
        assert capsys.readouterr().out == f"revoked {token_id}\n"
        auth.forget()
        assert auth.lookup(token) is None
        assert airpatrol(["tokens", "list"]) == 0
        assert token_id not in capsys.readouterr().out
        assert airpatrol(["tokens", "list", "--all"]) == 0
        assert "revoked" in capsys.readouterr().out
    finally:
        store.close()
