"""Accuracy and speed per altitude band, from the ``metrics.json`` of ``airpatrol eval``.

``eval/examples/altitude_bands.sh`` simulates flights from 30 to 150 m, straight down and oblique,
and scores them with the default detector settings (``detector.imgsz: auto``) and a fixed size;
this module turns the per-sequence results into one row per flight and configuration: the band,
the input size(s) the detector ran at, MOTA / HOTA / recall / precision, speed MAE, the detector's
and the whole pipeline's milliseconds per frame.

    python -m eval.bands runs/bands/eval/metrics.json [--markdown]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

# Upper edges (m) of the altitude bands the targets speak of: low, mid, high, very high.
BAND_EDGES_M: tuple[tuple[float, str], ...] = ((45.0, "30-45 m"), (80.0, "45-80 m"), (120.0, "80-120 m"))
TOP_BAND = "120-150 m"


def altitude_band(altitude_m: float | None) -> str:
    """The band label of an altitude (``"?"`` when unknown)."""
    if altitude_m is None:
        return "?"
    for edge, label in BAND_EDGES_M:
        if altitude_m < edge:
            return label
    return TOP_BAND


def view_of(pitch_deg: float | None) -> str:
    """``nadir`` within 10 degrees of straight down, else ``oblique`` (``"?"`` when unknown)."""
    if pitch_deg is None:
        return "?"
    return "nadir" if pitch_deg <= -80 else "oblique"


def describe_sizes(detector_imgsz: object) -> str:
    """``detector_imgsz`` of a run's pipeline metadata: a fixed size, or ``{size: frames}`` of auto."""
    if isinstance(detector_imgsz, Mapping):
        sizes = sorted(((int(k), int(v)) for k, v in detector_imgsz.items()), key=lambda kv: -kv[1])
        if len(sizes) == 1:
            return f"auto {sizes[0][0]}"
        total = sum(v for _, v in sizes) or 1
        return "auto " + "/".join(f"{k} ({100 * v / total:.0f}%)" for k, v in sizes)
    return str(detector_imgsz)


@dataclass(frozen=True)
class BandRow:
    sequence: str
    variant: str
    band: str
    view: str
    altitude_m: float | None
    pitch_deg: float | None
    imgsz: str
    mota: float | None
    hota: float | None
    recall: float | None
    precision: float | None
    speed_mae_kmh: float | None
    detect_ms: float | None
    total_ms: float | None
    fps: float | None


def metric_entry(d: Mapping | None, *keys: str):
    """``d[k1][k2]...`` of a ``metrics.json`` entry, or None where any level is missing."""
    for k in keys:
        if not isinstance(d, Mapping) or d.get(k) is None:
            return None
        d = d[k]
    return d


def metric_value(d: Mapping | None, *keys: str) -> float | None:
    """:func:`metric_entry` as a float."""
    v = metric_entry(d, *keys)
    return None if v is None else float(v)


def band_rows(metrics: Mapping) -> list[BandRow]:
    """One row per (sequence, configuration) of an eval ``metrics.json``, sorted by altitude, view,
    sequence and configuration (in the order the configurations were run)."""
    order = {v["name"]: i for i, v in enumerate(metrics.get("variants", []))}
    rows = []
    for s in metrics.get("sequences", []):
        alt, pitch = s.get("altitude_m"), s.get("pitch_deg")
        rows.append(
            BandRow(
                sequence=s["sequence"],
                variant=s["variant"],
                band=altitude_band(alt),
                view=view_of(pitch),
                altitude_m=alt,
                pitch_deg=pitch,
                imgsz=describe_sizes((s.get("pipeline") or {}).get("detector_imgsz", "?")),
                mota=metric_value(s.get("tracking"), "MOTA"),
                hota=metric_value(s.get("tracking"), "HOTA"),
                recall=metric_value(s.get("tracking"), "recall"),
                precision=metric_value(s.get("tracking"), "precision"),
                speed_mae_kmh=metric_value(s.get("speed"), "mae_kmh"),
                detect_ms=metric_value(s.get("timings_ms"), "detect", "mean_ms"),
                total_ms=metric_value(s.get("timings_ms"), "total", "mean_ms"),
                fps=metric_value(s, "fps"),
            )
        )
    return sorted(
        rows, key=lambda r: (r.altitude_m or 0.0, r.view, r.sequence, order.get(r.variant, len(order)))
    )


def _fmt(v: float | None, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


COLUMNS = (
    "band", "view", "flight", "configuration", "imgsz", "MOTA", "HOTA", "recall", "precision",
    "speed MAE km/h", "detect ms", "pipeline ms", "fps",
)  # fmt: skip


def format_rows(rows: Iterable[BandRow], markdown: bool = False) -> str:
    """The rows as a Markdown table, or aligned plain text."""
    cells = [
        [
            r.band,
            r.view,
            r.sequence,
            r.variant,
            r.imgsz,
            _fmt(r.mota),
            _fmt(r.hota),
            _fmt(r.recall),
            _fmt(r.precision),
            _fmt(r.speed_mae_kmh, 2),
            _fmt(r.detect_ms, 1),
            _fmt(r.total_ms, 1),
            _fmt(r.fps, 1),
        ]
        for r in rows
    ]
    return format_table(COLUMNS, cells, markdown)


def format_table(columns: Sequence[str], cells: Sequence[Sequence[str]], markdown: bool = False) -> str:
    """Rows of text cells under ``columns``: a Markdown table, or aligned plain text."""
    if markdown:
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(c) + " |" for c in cells]
        return "\n".join(lines)
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(columns)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)) for c in cells]
    return "\n".join(lines)


def table_main(
    argv: list[str] | None, prog: str, description: str, render: Callable[[Mapping, bool], str]
) -> int:
    """The command line of a table module: read a ``metrics.json``, print ``render(metrics, markdown)``."""
    p = argparse.ArgumentParser(prog=f"python -m {prog}", description=description)
    p.add_argument("metrics", type=Path, help="metrics.json of `airpatrol eval`")
    p.add_argument("--markdown", action="store_true", help="a Markdown table (for the lab notes, docs/lab/)")
    args = p.parse_args(argv)
    try:
        metrics = json.loads(args.metrics.read_text())
    except (OSError, ValueError) as exc:
        print(f"{prog}: cannot read {args.metrics}: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    print(render(metrics, args.markdown))  # noqa: T201 - the table
    return 0


def main(argv: list[str] | None = None) -> int:
    return table_main(
        argv,
        "eval.bands",
        __doc__.split("\n\n")[0],
        lambda metrics, markdown: format_rows(band_rows(metrics), markdown=markdown),
    )


if __name__ == "__main__":
    sys.exit(main())
