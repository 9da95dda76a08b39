"""Packaging beyond what pyproject.toml can say: the shipped models.

The models live in the top-level ``weights/`` folder of a checkout; in a wheel they are the package
``airpatrol_weights`` (``package_dir`` maps it onto ``weights/``), read through
``importlib.resources`` (``pipelines.config.DEFAULT_WEIGHTS_DIR``). Everything else is in
pyproject.toml.
"""

from setuptools import find_packages, setup

PACKAGES = ["airpatrol*", "pipelines*", "eval*", "edge_server*", "edge_client*", "training*"]

setup(
    packages=[*find_packages(include=PACKAGES), "airpatrol_weights"],
    package_dir={"airpatrol_weights": "weights"},
    package_data={
        "edge_server": ["migrations/*", "migrations/**/*", "alembic.ini"],
        "pipelines": ["*.yaml"],
        "airpatrol_weights": ["*.md", "*.pt", "*_openvino_model/*"],
    },
)
