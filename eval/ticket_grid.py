"""The ticket grid (issue 38): what an officer sees - wrong tickets, the ticket speed's error, missed
violations - per cell of simulated flights and pooled, from the ``metrics.json`` of ``airpatrol eval``.

``eval/examples/ticket_grid.sh`` simulates near-limit traffic (normal 45-50 km/h, speeding 50-55,
clear speeders 58-75; limit 50) at altitude 30 / 60 / 100 / 150 m x gimbal -90 / -60 / -45, several
seeds per cell, the drone hovering or drifting and the traffic steady or accelerating in turn; this
module reads the flights' names (``alt100_pitch45_drift_accel_s03``), pools each cell's ticket
records (:mod:`eval.metrics.tickets`) and prints per cell, then pooled (all flights; steady and
accelerating traffic apart): the vehicles at or below the limit, the wrong tickets (enforceable, the
vehicle never above the limit) with their rate per 1,000 such vehicles and its exact 95 % upper
bound, the violations with a ticket speed, the share within the tolerance, the median |error|, the
median bias on accelerating vehicles, the missed clear speeders (per 1,000 and share), the wrong
share of the lower-bound rule applied offline (speed - k sigma > limit), and the ticket's signed
error (median / max) beside the peak's, whose upward bias the ticket removed.

    python -m eval.ticket_grid runs/ticket_grid/eval/metrics.json [--markdown]
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eval.bands import format_table, metric_value, table_main
from eval.metrics.tickets import TicketSamples, format_why, summarize_tickets

log = logging.getLogger(__name__)

_NAME = re.compile(r"alt(?P<alt>\d+)_pitch(?P<pitch>\d+)_(?P<motion>[a-z]+)_(?P<traffic>steady|accel)")
TRAFFIC = {"steady": "steady", "accel": "accelerating"}


@dataclass(frozen=True)
class FlightTickets:
    """One scored flight's ticket records under one configuration."""

    sequence: str
    variant: str
    altitude_m: float | None
    pitch_deg: float | None
    motion: str
    traffic: str  # steady | accelerating | ?
    samples: TicketSamples


@dataclass(frozen=True)
class TicketRow:
    """A cell (or a pool of cells) under one configuration: its flights' records summarised."""

    cell: str
    variant: str
    flights: int
    summary: dict


def flights(metrics: Mapping) -> list[FlightTickets]:
    """The flights of a ``metrics.json`` that carry ticket records (others are left out)."""
    out = []
    for s in metrics.get("sequences", []):
        records = s.get("ticket_records")
        if not records:
            continue
        m = _NAME.search(s["sequence"])
        out.append(
            FlightTickets(
                sequence=s["sequence"],
                variant=s["variant"],
                altitude_m=s.get("altitude_m"),
                pitch_deg=s.get("pitch_deg"),
                motion=m["motion"] if m else "?",
                traffic=TRAFFIC.get(m["traffic"], "?") if m else "?",
                samples=TicketSamples.from_json(records),
            )
        )
    return out


def _cell(f: FlightTickets) -> str:
    alt = "?" if f.altitude_m is None else f"{f.altitude_m:g} m"
    pitch = "?" if f.pitch_deg is None else f"{f.pitch_deg:g}"
    return f"{alt}, {pitch}"


def _row(cell: str, variant: str, group: list[FlightTickets]) -> TicketRow:
    return TicketRow(
        cell, variant, len(group), summarize_tickets(TicketSamples.concat(f.samples for f in group))
    )


def ticket_rows(metrics: Mapping) -> list[TicketRow]:
    """Per configuration (in the order they were run): a row per cell in grid order (altitude, then
    pitch from nadir), then the pools: every flight, steady and accelerating traffic."""
    order = {v["name"]: i for i, v in enumerate(metrics.get("variants", []))}
    fl = sorted(
        flights(metrics),
        key=lambda f: (order.get(f.variant, len(order)), f.altitude_m or 0.0, -(f.pitch_deg or 0.0)),
    )
    rows: list[TicketRow] = []
    for variant in dict.fromkeys(f.variant for f in fl):
        mine = [f for f in fl if f.variant == variant]
        cells: dict[str, list[FlightTickets]] = {}
        for f in mine:
            cells.setdefault(_cell(f), []).append(f)
        rows += [_row(cell, variant, group) for cell, group in cells.items()]
        rows.append(_row("pooled: all", variant, mine))
        for traffic in ("steady", "accelerating"):
            group = [f for f in mine if f.traffic == traffic]
            if group:
                rows.append(_row(f"pooled: {traffic}", variant, group))
    return rows


COLUMNS = (
    "cell (alt, pitch)", "configuration", "flights", "at/below limit", "wrong", "per 1,000",
    "upper 95 %", "unmatched", "ticket viol.", "enforceable", "within tol.", "median |err|",
    "bias accel.", "clear speeders", "missed", "missed /1,000", "missed share", "LB wrong share",
    "ticket err med/max", "peak err med/max",
)  # fmt: skip


def _fmt(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _pair(d: Mapping, *keys: str) -> str:
    med, top = metric_value(d, *keys, "median_kmh"), metric_value(d, *keys, "max_kmh")
    return "-" if med is None else f"{med:+.2f} / {top:+.2f}"


def _cells(r: TicketRow) -> list[str]:
    t = r.summary
    return [
        r.cell,
        r.variant,
        str(r.flights),
        str(t["at_or_below_limit"]),
        str(t["wrong_tickets"]),
        _fmt(metric_value(t, "wrong_per_1000")),
        _fmt(metric_value(t, "wrong_per_1000_upper95")),
        str(t["unmatched_tickets"]),
        str(t["with_ticket_speed"]),
        str(t["enforceable"]),
        _fmt(metric_value(t, "ticket_error", "within_tolerance"), 3),
        _fmt(metric_value(t, "ticket_error", "median_abs_kmh")),
        _fmt(metric_value(t, "ticket_error_accelerating", "median_kmh")),
        str(t["clear_speeders"]),
        str(t["missed_violations"]),
        _fmt(metric_value(t, "missed_per_1000"), 1),
        _fmt(metric_value(t, "missed_share"), 3),
        _fmt(metric_value(t, "lower_bound", "wrong_share"), 3),
        _pair(t, "ticket_error"),
        _pair(t, "peak_error"),
    ]


def format_rows(rows: Iterable[TicketRow], markdown: bool = False) -> str:
    """The rows as a Markdown table, or aligned plain text."""
    return format_table(COLUMNS, [_cells(r) for r in rows], markdown)


def render(metrics: Mapping, markdown: bool = False) -> str:
    """The table of a ``metrics.json``, and a line per configuration: its pooled wrong tickets."""
    rows = ticket_rows(metrics)
    if not rows:
        return "no flight with ticket records (true speeds) in this metrics.json"
    text = format_rows(rows, markdown=markdown)
    for r in rows:
        if r.cell == "pooled: all":
            t = r.summary
            text += (
                f"\n{r.variant}: {t['wrong_tickets']} wrong ticket(s) on {t['at_or_below_limit']} vehicles at or"
                f" below the limit ({_fmt(metric_value(t, 'wrong_per_1000'))} per 1,000, 95 % upper bound"
                f" {_fmt(metric_value(t, 'wrong_per_1000_upper95'))}), {t['missed_violations']} of"
                f" {t['clear_speeders']} clear speeders missed, over {r.flights} flights"
            )
            why = t.get("not_enforceable")  # metrics.json files from before reasons were kept: none
            if why:
                text += f"; not enforceable: {format_why(why)}"
    return text


def main(argv: list[str] | None = None) -> int:
    return table_main(argv, "eval.ticket_grid", __doc__.split("\n\n")[0], render)


if __name__ == "__main__":
    sys.exit(main())
