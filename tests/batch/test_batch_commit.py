"""batch.commit: the exactly-once protocol - resume, re-running changed inputs, and a second
attempt of a committed item."""

from __future__ import annotations

import json
import time

from batch_helpers import WriteJob, write_items

from batch.commit import PARTIAL_DIR, RUNNING_DIR, fingerprint, run_item
from batch.run import run_batch


def test_batch_resumes_reruns_changed_inputs_and_reports_failures(tmp_path) -> None:
    items = write_items(tmp_path)
    out = tmp_path / "out"
    first = run_batch(WriteJob(fail={"f1"}), items, out, progress=False)
    assert [r["status"] for r in first.items] == ["done", "failed", "done"]
    assert "ValueError: f1.mp4 is corrupt" in first.items[1]["error"]
    assert (out / "f0" / "out.txt").read_text() == "x"
    assert not (out / "f1").exists() and not (out / PARTIAL_DIR).exists() and not (out / RUNNING_DIR).exists()
    report = json.loads((out / "batch.json").read_text())
    assert report["totals"]["failed"] == 1 and report["totals"]["done"] == 2
    assert "failed: ValueError: f1.mp4 is corrupt" in (out / "batch.md").read_text()

    again = WriteJob()
    second = run_batch(again, items, out, progress=False)
    assert again.calls == ["f1"]  # only the failed one re-runs
    assert [r["status"] for r in second.items] == ["skipped", "done", "skipped"]

    time.sleep(0.01)
    items[2].video.write_text("changed")  # a re-recorded input: its outputs are redone and replaced
    third = WriteJob()
    run_batch(third, items, out, progress=False)
    assert third.calls == ["f2"]
    assert (out / "f2" / "out.txt").read_text() == "changed"
    assert sorted(p.name for p in out.iterdir()) == [
        ".batch.lock",
        "batch.json",
        "batch.md",
        "f0",
        "f1",
        "f2",
    ]


def test_a_second_attempt_of_a_committed_item_discards_its_own_output(tmp_path) -> None:
    """Two attempts of one item (a retry racing a straggler): the first to commit wins, the other's
    folder is removed, and both return the winner's record."""
    (item,) = write_items(tmp_path, 1)
    job = WriteJob()
    fp = fingerprint(item.inputs, [job.settings(), None])
    first = run_item(job, item, tmp_path / "out", fp)
    item.video.write_text("xx")  # (same fingerprint passed: a straggler that started before)
    late = run_item(WriteJob(), item, tmp_path / "out", fp)
    assert first["status"] == "done" and late["status"] == "skipped"
    assert late["worker"] == first["worker"]
    assert (tmp_path / "out" / "f0" / "out.txt").read_text() == "x"
