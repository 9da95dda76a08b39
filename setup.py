"""Packaging beyond what pyproject.toml can say: the shipped models and guides.

The models live in the top-level ``weights/`` folder of a checkout; in a wheel they are the package
``airpatrol_weights`` (``package_dir`` maps it onto ``weights/``), read through
``importlib.resources`` (``pipelines.config.DEFAULT_WEIGHTS_DIR``). The guides (``docs/``) are the
package ``airpatrol_docs`` the same way, served by the edge server at ``/guide``. Everything else
is in pyproject.toml.
"""

from setuptools import find_packages, setup

PACKAGES = ["airpatrol*", "pipelines*", "batch*", "eval*", "edge_server*", "edge_client*", "training*"]

setup(
    packages=[*find_packages(include=PACKAGES), "airpatrol_weights", "airpatrol_docs"],
    package_dir={"airpatrol_weights": "weights", "airpatrol_docs": "docs"},
    package_data={
        "edge_server": [
            "migrations/*",
            "migrations/**/*",
            "alembic.ini",
            "console_assets/*",
            "console_assets/**/*",
        ],
        "pipelines": ["*.yaml"],
        "airpatrol_weights": ["*.md", "*.pt", "*_openvino_model/*"],
        "airpatrol_docs": ["*.md", "lab/*.md"],
    },
)
