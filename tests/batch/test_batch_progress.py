"""batch.progress: items and frames across a whole batch."""

from __future__ import annotations

from batch.progress import BatchProgress, Outcome


def test_progress_counts_running_attempts_once() -> None:
    """A retried item's frames count from its new attempt; a finished item counts its summary's
    frames; a late report of a finished item changes nothing."""
    p = BatchProgress(items=2, total_frames=100, show=False)
    p.running("a", "1", 30)
    p.running("b", "1", 10)
    assert p.frames == 40
    p.running("a", "2", 5)  # a's worker died after 30 frames; its retry has done 5
    assert p.frames == 15
    p.done(Outcome("a", record={"status": "done", "summary": {"frames": 50}}))
    p.running("a", "2", 50)
    assert p.frames == 60 and p.line().startswith("1/2 items (0 failed), 60/100 frames")
    p.done(Outcome("b", error="SourceError: damaged"))
    assert p.frames == 50 and p.failed == 1 and "left" not in p.line()
