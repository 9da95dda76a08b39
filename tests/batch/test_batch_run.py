"""batch.run and batch.executors: one driver per output folder, and a local batch that keeps going
after an item fails."""

from __future__ import annotations

import threading
import time

from batch_helpers import WriteJob, write_items

from batch.commit import RUNNING_DIR
from batch.errors import BatchError
from batch.executors import LocalExecutor
from batch.run import run_batch


def test_one_driver_per_output_folder(tmp_path) -> None:
    items = write_items(tmp_path, 1)
    gate = threading.Event()
    errors: list[Exception] = []

    def first() -> None:
        run_batch(WriteJob(gate=gate), items, tmp_path / "out", progress=False)

    t = threading.Thread(target=first)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "out" / RUNNING_DIR).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            run_batch(WriteJob(), items, tmp_path / "out", progress=False)
        except BatchError as exc:
            errors.append(exc)
    finally:
        gate.set()
        t.join()
    assert errors and "in use by another batch" in str(errors[0])


def test_local_executor_keeps_going_after_an_unexpected_error(tmp_path) -> None:
    class Boom(WriteJob):
        def __call__(self, item, out_dir):
            if item.name == "f0":
                raise RuntimeError("decoder crashed")
            return super().__call__(item, out_dir)

    report = run_batch(Boom(), write_items(tmp_path), tmp_path / "out", LocalExecutor(), progress=False)
    assert [r["status"] for r in report.items] == ["failed", "done", "done"]
    assert report.items[0]["error"] == "RuntimeError: decoder crashed"
