"""Shared fixtures. Third-party material is read from ../shared/data when present."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from shared_material import shared_path

# Keep ultralytics offline and its config inside the test session's temp space.
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "false")
# scripts/test.sh's parallel pass: each pytest-xdist worker its own ultralytics settings file (two
# processes writing one JSON at their first import on a fresh machine would race)
if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("YOLO_CONFIG_DIR", str(Path.home() / ".config" / f"airpatrol-yolo-test-{worker}"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return shared_path()


@pytest.fixture(scope="session")
def uavdt_clip() -> Path:
    return shared_path("uavdt_M1303_overlay_clip")


@pytest.fixture(scope="session")
def coco_openvino() -> Path:
    return shared_path("yolov8n_coco_int8", "yolov8n_int8_openvino_model")


SERIAL_DIRS = ("edge_server", "edge_client")  # live streams, servers, browsers: timing matters


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """scripts/test.sh runs the suite in two passes: the tests that may share the CPU in parallel
    (pytest-xdist), then the ``serial`` ones alone. Every test of the edge packages is serial (a
    live stream's frame rate, latency and drops, a browser's page load, a killed process noticed in
    seconds: a second test on the other core would change what they measure), unless its module
    says ``pytestmark = pytest.mark.parallel_safe`` (API and store calls only)."""
    here = Path(__file__).parent
    for item in items:
        try:
            top = item.path.relative_to(here).parts[0]
        except ValueError:
            continue
        if top in SERIAL_DIRS and item.get_closest_marker("parallel_safe") is None:
            item.add_marker(pytest.mark.serial)
    # the slow modules first: a 30 s test handed out last keeps one worker busy while the others idle
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="module")
def ray_alone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One Ray on the box at a time, across the parallel pass's workers: a module that starts Ray
    holds an exclusive lock on a file in the folder the workers' temporary folders share."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    with open(root / "ray.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything imported by now (torch, OpenVINO, the app's modules: over a million objects) lives
    for the whole run: out of the garbage collector's full passes (``gc.freeze``), which otherwise
    scan it again and again (0.7-1.0 s a pass by the edge tests, measured with a gc callback)."""
    import gc

    gc.collect()
    gc.freeze()
