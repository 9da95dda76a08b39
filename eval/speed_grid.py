"""The speed-accuracy grid (issue 10): one row per simulated flight and configuration, with the
issue's targets checked, from the ``metrics.json`` of ``airpatrol eval``.

``eval/examples/speed_grid.sh`` simulates the grid (altitude 30 / 60 / 100 / 150 m x gimbal -90 /
-60 / -45 x drone hovering / drifting and yawing / flying forward at 10 m/s) and scores each
flight with the shipped detector and the oracle (exact boxes); this module reads the flights'
names (``alt100_pitch45_drift``) and prints speed MAE, p95, bias, coverage, the detector's
recall, how honest the sigma is (share of errors within 1 sigma: of the measurement's own sigma,
which the target applies to as a simulator's altitude is exact, and of the reported one, whose
altitude term - ``speed.altitude_sigma_frac`` - covers a real flight's height error) and the
ego-motion error (and the share of speeds the speed stage flagged as untrusted), marking every
figure that misses its target with ``!``. Beside the 1-sigma share, its 90 % interval over the
cell's vehicles (a cluster bootstrap): one cell has 14-16 vehicles, whose frames' errors are alike,
so its share is measured to about +-5 points; the last line counts the cells in the target band
and those whose interval reaches it.

    python -m eval.speed_grid runs/speed_grid/eval/metrics.json [--markdown]
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eval.bands import format_table, metric_entry, metric_value, table_main

log = logging.getLogger(__name__)

# The targets (default config, shipped detector, 2-core CPU).
MAX_MAE_KMH = 1.0
MAX_ORACLE_MAE_KMH = 0.5
MAX_P95_KMH = 3.0
MAX_ABS_BIAS_KMH = 0.5
MIN_COVERAGE = 0.85
SIGMA_SHARE = (0.60, 0.75)  # share of errors within 1 sigma
MAX_EGO_PX = 0.05
MIN_RECALL = 0.8  # below: the cell is reported as the detector's to close

MOTIONS = {"hover": "hovering", "drift": "drifting + yawing", "forward": "forward 10 m/s"}
_NAME = re.compile(r"alt(?P<alt>\d+)_pitch(?P<pitch>\d+)_(?P<motion>[a-z]+)")


@dataclass(frozen=True)
class GridRow:
    sequence: str
    variant: str
    altitude_m: float | None
    pitch_deg: float | None
    motion: str
    oracle: bool
    recall: float | None
    mae: float | None
    p95: float | None
    bias: float | None
    coverage: float | None
    within_1sigma: float | None  # of the measurement's own sigma (the simulator's altitude is exact)
    ego_px: float | None
    untrusted: float | None = None  # share of reported speeds the speed stage flagged
    within_1sigma_reported: float | None = None  # of the reported sigma, altitude term included
    within_1sigma_90: tuple[float, float] | None = None  # within_1sigma's 90 % interval over vehicles


def grid_rows(metrics: Mapping) -> list[GridRow]:
    """One row per (sequence, configuration), sorted by altitude, pitch, motion, configuration."""
    variants = {v["name"]: v for v in metrics.get("variants", [])}
    order = {name: i for i, name in enumerate(variants)}
    rows = []
    for s in metrics.get("sequences", []):
        m = _NAME.search(s["sequence"])
        motion = MOTIONS.get(m["motion"], m["motion"]) if m else "?"
        speed = s.get("speed")
        rows.append(
            GridRow(
                sequence=s["sequence"],
                variant=s["variant"],
                altitude_m=s.get("altitude_m"),
                pitch_deg=s.get("pitch_deg"),
                motion=motion,
                oracle=bool(variants.get(s["variant"], {}).get("oracle")),
                recall=metric_value(s.get("tracking"), "recall"),
                mae=metric_value(speed, "mae_kmh"),
                p95=metric_value(speed, "p95_abs_kmh"),
                bias=metric_value(speed, "bias_kmh"),
                coverage=metric_value(speed, "coverage"),
                within_1sigma=metric_value(speed, "measurement_sigma", "within_1sigma"),
                ego_px=metric_value(s.get("egomotion"), "mean_px"),
                untrusted=metric_value(speed, "untrusted_share"),
                within_1sigma_reported=metric_value(speed, "sigma", "within_1sigma"),
                within_1sigma_90=_interval(speed, "measurement_sigma", "within_1sigma_90"),
            )
        )
    return sorted(
        rows,
        key=lambda r: (
            r.altitude_m or 0.0,
            -(r.pitch_deg or 0.0),
            r.motion,
            order.get(r.variant, len(order)),
        ),
    )


def _interval(d: Mapping | None, *keys: str) -> tuple[float, float] | None:
    v = metric_entry(d, *keys)
    return None if v is None else (float(v[0]), float(v[1]))


def reaches_sigma_band(r: GridRow) -> bool:
    """Whether the 1-sigma share's interval over vehicles overlaps the target band."""
    if r.within_1sigma_90 is None:
        return False
    lo, hi = r.within_1sigma_90
    return lo <= SIGMA_SHARE[1] and hi >= SIGMA_SHARE[0]


def misses(r: GridRow) -> set[str]:
    """The columns of ``r`` that miss the issue's targets."""
    out = set()
    if r.mae is not None and r.mae > (MAX_ORACLE_MAE_KMH if r.oracle else MAX_MAE_KMH):
        out.add("mae")
    if r.p95 is not None and r.p95 > MAX_P95_KMH:
        out.add("p95")
    if r.bias is not None and abs(r.bias) > MAX_ABS_BIAS_KMH:
        out.add("bias")
    if r.coverage is not None and r.coverage < MIN_COVERAGE:
        out.add("coverage")
    if r.within_1sigma is not None and not SIGMA_SHARE[0] <= r.within_1sigma <= SIGMA_SHARE[1]:
        out.add("within_1sigma")
    if r.ego_px is not None and r.ego_px > MAX_EGO_PX:
        out.add("ego_px")
    if not r.oracle and r.recall is not None and r.recall < MIN_RECALL:
        out.add("recall")
    return out


COLUMNS = (
    "altitude", "pitch", "drone", "configuration", "recall", "MAE km/h", "p95", "bias", "coverage",
    "in 1 sigma", "90 % over vehicles", "in 1 sigma + alt.", "ego px/frame", "untrusted",
)  # fmt: skip


def _fmt(v: float | None, digits: int, miss: bool) -> str:
    return "-" if v is None else f"{v:.{digits}f}" + ("!" if miss else "")


def format_rows(rows: Iterable[GridRow], markdown: bool = False) -> str:
    """The rows as a Markdown table, or aligned plain text; ``!`` marks a missed target."""
    cells = []
    for r in rows:
        bad = misses(r)
        cells.append(
            [
                "?" if r.altitude_m is None else f"{r.altitude_m:g} m",
                "?" if r.pitch_deg is None else f"{r.pitch_deg:g}",
                r.motion,
                r.variant,
                _fmt(r.recall, 3, "recall" in bad),
                _fmt(r.mae, 2, "mae" in bad),
                _fmt(r.p95, 2, "p95" in bad),
                _fmt(r.bias, 2, "bias" in bad),
                _fmt(r.coverage, 3, "coverage" in bad),
                _fmt(r.within_1sigma, 3, "within_1sigma" in bad),
                "-" if r.within_1sigma_90 is None else "{:.2f}-{:.2f}".format(*r.within_1sigma_90),
                _fmt(r.within_1sigma_reported, 3, False),
                _fmt(r.ego_px, 3, "ego_px" in bad),
                _fmt(r.untrusted, 3, False),
            ]
        )
    return format_table(COLUMNS, cells, markdown)


def render(metrics: Mapping, markdown: bool = False) -> str:
    """The table of a ``metrics.json``, and a line counting the rows that miss a target."""
    rows = grid_rows(metrics)
    missed = sum(1 for r in rows if misses(r))
    text = f"{format_rows(rows, markdown=markdown)}\n{len(rows)} rows, {missed} miss a target (marked !)"
    for oracle, name in ((False, "detector"), (True, "oracle")):
        rated = [r for r in rows if r.oracle == oracle and r.within_1sigma is not None]
        if rated:
            inside = sum(1 for r in rated if "within_1sigma" not in misses(r))
            text += (
                f"\n{name} rows, errors within 1 sigma: {inside} of {len(rated)} in"
                f" {SIGMA_SHARE[0]:.0%}-{SIGMA_SHARE[1]:.0%}, {sum(map(reaches_sigma_band, rated))}"
                " with a 90 % interval over vehicles that reaches it"
            )
    return text


def main(argv: list[str] | None = None) -> int:
    return table_main(argv, "eval.speed_grid", __doc__.split("\n\n")[0], render)


if __name__ == "__main__":
    sys.exit(main())
