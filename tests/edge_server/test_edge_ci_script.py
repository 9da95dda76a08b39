""".ci/run: in CI a PostgreSQL that cannot be started, or a chromium that cannot be installed, fails
the run instead of skipping their tests; outside CI those tests skip."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.parallel_safe  # API, store, files and child processes: no stream (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]


def _stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/usr/bin/env bash\n{body}\n")
    path.chmod(0o755)


@pytest.mark.parametrize(
    ("postgres_ok", "rc", "output"),
    [
        (False, 1, "PostgreSQL could not be started for the store tests"),
        (True, 0, "pytest ran with AIRPATROL_TEST_POSTGRES_URL=postgresql://stub"),
    ],
)
def test_ci_run_sets_ci_so_postgres_failures_fail(
    tmp_path: Path, postgres_ok: bool, rc: int, output: str
) -> None:
    """The real .ci/run and scripts/test.sh in a scratch tree; installer, PostgreSQL and pytest stubbed."""
    for rel in (".ci/run", "scripts/test.sh"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, tmp_path / rel)
    _stub(tmp_path / "scripts/install.sh", "exit 0")
    if postgres_ok:
        _stub(tmp_path / ".ci/postgres.sh", "echo 'export AIRPATROL_TEST_POSTGRES_URL=postgresql://stub'")
    else:
        _stub(tmp_path / ".ci/postgres.sh", "echo 'postgres.sh: no apt here' >&2; exit 1")
    _stub(
        tmp_path / ".venv/bin/python",
        'echo "pytest ran with AIRPATROL_TEST_POSTGRES_URL=$AIRPATROL_TEST_POSTGRES_URL"',
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "AIRPATROL_TEST_POSTGRES_URL")}
    proc = subprocess.run(
        ["bash", str(tmp_path / ".ci/run")], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == rc, (proc.stdout, proc.stderr)
    assert output in proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("ci", "chromium_ok", "rc", "output"),
    [
        (True, False, 1, "chromium could not be installed for the browser tests"),
        (False, False, 0, "chromium could not be installed: the browser tests will be skipped"),
        (True, True, 0, "pytest ran with AIRPATROL_TEST_CHROMIUM=/stub/chromium"),
    ],
)
def test_ci_run_fails_when_chromium_cannot_be_installed(
    tmp_path: Path, ci: bool, chromium_ok: bool, rc: int, output: str
) -> None:
    """The real .ci/run (CI) or scripts/test.sh (not CI); installer, PostgreSQL, chromium and pytest stubbed."""
    for rel in (".ci/run", "scripts/test.sh"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, tmp_path / rel)
    _stub(tmp_path / "scripts/install.sh", "exit 0")
    _stub(tmp_path / ".ci/postgres.sh", "echo 'export AIRPATROL_TEST_POSTGRES_URL=postgresql://stub'")
    if chromium_ok:
        _stub(
            tmp_path / ".ci/chromium.sh",
            "echo 'export AIRPATROL_TEST_CHROMIUM=/stub/chromium AIRPATROL_TEST_CHROMEDRIVER=/stub/chromedriver'",
        )
    else:
        _stub(tmp_path / ".ci/chromium.sh", "echo 'chromium.sh: no apt here' >&2; exit 1")
    _stub(
        tmp_path / ".venv/bin/python",
        'echo "pytest ran with AIRPATROL_TEST_CHROMIUM=$AIRPATROL_TEST_CHROMIUM"',
    )
    hidden = ("CI", "AIRPATROL_TEST_POSTGRES_URL", "AIRPATROL_TEST_CHROMIUM", "AIRPATROL_TEST_CHROMEDRIVER")
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    script = ".ci/run" if ci else "scripts/test.sh"
    proc = subprocess.run(
        ["bash", str(tmp_path / script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == rc, (proc.stdout, proc.stderr)
    assert output in proc.stdout + proc.stderr
