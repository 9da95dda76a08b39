"""What a batch did: :class:`BatchReport`, each item's record and the totals, written as
``batch.json`` and ``batch.md`` in the batch's output folder."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batch.commit import _write_json


@dataclass
class BatchReport:
    out_dir: Path
    executor: str
    items: list[dict[str, Any]]
    wall_s: float
    threads: int | None = None  # CPU threads per task (None: the libraries' defaults, every core)
    machine: str = field(default_factory=lambda: f"{platform.node()} ({os.cpu_count()} CPUs)")

    def count(self, status: str) -> int:
        return sum(1 for r in self.items if r["status"] == status)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.items if r["status"] == "failed"]

    def totals(self) -> dict[str, Any]:
        ran = [r for r in self.items if r["status"] in ("done", "skipped")]
        frames = sum(int((r.get("summary") or {}).get("frames") or 0) for r in ran)
        fresh = [r for r in self.items if r["status"] == "done"]
        fresh_frames = sum(int((r.get("summary") or {}).get("frames") or 0) for r in fresh)
        return {
            "items": len(self.items),
            "done": self.count("done"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            "frames": frames,
            "violations": sum(int((r.get("summary") or {}).get("violations") or 0) for r in ran),
            "wall_s": round(self.wall_s, 2),
            "frames_per_s": round(fresh_frames / self.wall_s, 2) if self.wall_s > 0 else None,
            "workers": len({(r["worker"]["host"], r["worker"]["pid"]) for r in fresh if r.get("worker")}),
            "detector_loads": sum(int((r.get("models_loaded") or {}).get("detector", 0)) for r in fresh),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "executor": self.executor,
            "threads_per_task": self.threads,
            "machine": self.machine,
            "totals": self.totals(),
            "items": self.items,
        }

    def markdown(self) -> str:
        t = self.totals()
        lines = [
            f"# Batch {self.out_dir.name}",
            "",
            f"{t['items']} item(s): {t['done']} run, {t['skipped']} already done (skipped), {t['failed']} failed; "
            f"{t['frames']} frames, {t['violations']} violations; {t['wall_s']} s wall on {self.executor}, "
            f"{self.threads or 'default'} thread(s) per task "
            f"({self.machine}); {t['workers']} worker process(es), the detector loaded {t['detector_loads']} time(s).",
            "",
            "| item | status | frames | tracks | violations | fps | task s | worker |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for r in self.items:
            s = r.get("summary") or {}
            w = r.get("worker") or {}
            worker = f"{w.get('host', '')}:{w.get('pid', '')}" if w else ""
            status = r["status"] if r["status"] != "failed" else f"failed: {r.get('error', '')}"
            lines.append(
                f"| {r['name']} | {status.replace('|', '/')} | {s.get('frames', '')} | {s.get('tracks', '')} | "
                f"{s.get('violations', '')} | {s.get('fps', '')} | {r.get('task_wall_s', '')} | {worker} |"
            )
        return "\n".join(lines) + "\n"

    def write(self) -> None:
        _write_json(self.out_dir / "batch.json", self.to_dict())
        (self.out_dir / "batch.md").write_text(self.markdown(), encoding="utf-8")
