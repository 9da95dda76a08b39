"""Where the third-party test material lives (``../shared/data`` beside the checkout).

A plain module, not a conftest: test modules import ``shared_path`` from here (``tests/`` is on
pytest's ``pythonpath``), while the conftests stay free to define fixtures per folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("AIRPATROL_SHARED_DATA", REPO.parent / "shared" / "data"))


def shared_path(*parts: str) -> Path:
    """Path under ../shared/data, or skip the test with a clear reason when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"third-party test material not present: {path} (only on machines with ../shared/data)")
    return path
