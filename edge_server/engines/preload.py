"""Imported once by the fork server that engine processes start from (never by the server
itself): the engine and the libraries its models load lazily, so that each stream's process starts
with them in memory (shared with the others until written). A library that is not installed is
left out; the pipeline then says what is missing when it is built. ultralytics is imported the way
the engine imports it (:func:`pipelines.ultralytics_env.prepare_ultralytics` first: offline, no
auto-installs, quiet), or every engine would inherit it as imported plain: it read its settings once,
at that import, and then logged at INFO on every frame."""

from __future__ import annotations

import contextlib
import gc
import importlib

import pipelines.builder  # noqa: F401 - the engine: numpy, OpenCV, torch, supervision
from pipelines.ultralytics_env import prepare_ultralytics

with contextlib.suppress(ImportError):
    prepare_ultralytics()  # imports ultralytics, its environment set first

for _name in ("ultralytics", "openvino", "segmentation_models_pytorch"):
    with contextlib.suppress(ImportError):
        importlib.import_module(_name)

# What was imported stays out of the collector's passes in every engine process: a collection
# there would write to each object's header and copy every page of them into that process.
gc.freeze()
