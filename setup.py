"""Packaging beyond what pyproject.toml can say: the shipped models and guides.

The models live in the top-level ``weights/`` folder of a checkout; in a wheel they are the package
``airpatrol_weights`` (``package_dir`` maps it onto ``weights/``), read through
``importlib.resources`` (``pipelines.config.DEFAULT_WEIGHTS_DIR``). The guides (``docs/``) are the
package ``airpatrol_docs`` the same way, served by the edge server at ``/guide``. Everything else
is in pyproject.toml.

The build stamps the commit it was built from into ``airpatrol/BUILD_COMMIT`` (from git, else the
environment's ``AIRPATROL_BUILD_COMMIT``, as the image passes it): evidence packs name the software
they were made with (``edge_server.evidence.provenance``).
"""

import os
import subprocess
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py


def _commit() -> str | None:
    here = Path(__file__).resolve().parent
    if (here / ".git").exists():
        try:
            head = subprocess.run(
                ["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
            ).stdout.strip()
            dirty = subprocess.run(
                ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            return head + ("+dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            pass
    return os.environ.get("AIRPATROL_BUILD_COMMIT") or None


class StampCommit(build_py):
    def run(self) -> None:
        super().run()
        commit = _commit()
        if commit:
            target = Path(self.build_lib) / "airpatrol" / "BUILD_COMMIT"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(commit + "\n", encoding="utf-8")


PACKAGES = ["airpatrol*", "pipelines*", "batch*", "eval*", "edge_server*", "edge_client*", "training*"]

setup(
    cmdclass={"build_py": StampCommit},
    packages=[*find_packages(include=PACKAGES), "airpatrol_weights", "airpatrol_docs"],
    package_dir={"airpatrol_weights": "weights", "airpatrol_docs": "docs"},
    package_data={
        "edge_server": [
            # the scripts it ships, never a __pycache__ beside them ("**/*" would take one along)
            "migrations/*.py",
            "migrations/*.mako",
            "migrations/versions/*.py",
            "alembic.ini",
            "console_assets/*",
            "console_assets/**/*",
        ],
        "pipelines": ["*.yaml"],
        "airpatrol_weights": ["*.md", "*.pt", "*_openvino_model/*"],
        "airpatrol_docs": ["*.md", "lab/*.md"],
    },
)
