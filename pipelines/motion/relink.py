"""One vehicle, one track id: a new ByteTrack track that continues one just lost gets its id back.

ByteTrack re-finds a lost track only by IoU with its Kalman prediction. A box that changes shape
while the vehicle is missed - a bus seen whole, then only its front half; a car half hidden by a
tree - matches nothing after a few missed frames, and ByteTrack starts a new track for the same
vehicle. Every such break restarts the vehicle's speed (no speed until the new track is old
enough: lost coverage), splits its trajectory in the MOT output (an identity switch) and could
give it a second ticket.

:class:`TrackRelinker` keeps a map from ByteTrack's ids to the ids the pipeline puts out. A track
is linked only in the frame it is born, to a track lost within ``max_gap_s`` whose speed is known:
where that vehicle would be now - the static ground under its last anchor, carried to this frame
by the ego-motion, plus its fitted ground velocity times the gap - must lie within ``along_m``
(along its motion) and ``across_m`` (across it: a lane is 3-3.5 m wide) of the new track's anchor
on the ground, and where both boxes' ground sizes are known they must agree within
``max_size_change`` (a box on the front half of the vehicle is not the vehicle's track going on:
taking it let the whole box, found a moment later, start a track of its own). Several
candidates: the nearest pairs first, each track used once. The gate is in metres, so it means the
same at 30 m as at 150 m.

The linked id then carries on as if the vehicle had been missed for the gap: the ground
displacement is measured from where it was last seen, and its speed window goes on (the step
over the gap is checked like any other, so a box that now covers another part of the vehicle
marks the speed untrusted for a window instead of passing for motion).

Should ByteTrack re-find the old track while the linked one is alive, the two ids part again:
the old one keeps its id and the linked track gets its own from then on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipelines.speed import size_mismatch


@dataclass(frozen=True, slots=True)
class LostTrack:
    """A track not seen in this frame that a new one may continue."""

    track_id: int  # its output id
    predicted_xy_m: tuple[float, float]  # where it would be now on the ground (m)
    velocity_mps: tuple[float, float]  # its last fitted ground velocity (m/s)
    size_m: float = float("nan")  # its box's recent size on the ground (m; NaN: unknown)


def continuation_cost(
    new_xy: np.ndarray, predicted_xy: np.ndarray, velocity: np.ndarray, along_m: float, across_m: float
) -> np.ndarray:
    """(N, M) cost of new track i continuing lost track j: the offset of i's ground position
    ``new_xy`` (N, 2) from j's prediction ``predicted_xy`` (M, 2), along and across j's
    ``velocity`` (M, 2), each in units of its gate, combined as an ellipse's radius (1 = on the
    gate); inf outside either gate. A lost track slower than 0.5 m/s has no direction: both offsets
    are taken against the smaller (across) gate."""
    new_xy = np.asarray(new_xy, dtype=np.float64).reshape(-1, 2)
    predicted_xy = np.asarray(predicted_xy, dtype=np.float64).reshape(-1, 2)
    velocity = np.asarray(velocity, dtype=np.float64).reshape(-1, 2)
    d = new_xy[:, None, :] - predicted_xy[None, :, :]  # (N, M, 2)
    speed = np.hypot(velocity[:, 0], velocity[:, 1])
    moving = speed >= 0.5
    u = np.where(moving[:, None], velocity / np.maximum(speed, 1e-9)[:, None], [1.0, 0.0])  # (M, 2)
    along = d[..., 0] * u[None, :, 0] + d[..., 1] * u[None, :, 1]
    across = d[..., 1] * u[None, :, 0] - d[..., 0] * u[None, :, 1]
    a = np.abs(along) / np.where(moving, along_m, across_m)[None, :]
    c = np.abs(across) / across_m
    with np.errstate(invalid="ignore"):
        cost = np.hypot(a, c)
        return np.where((a <= 1.0) & (c <= 1.0) & np.isfinite(cost), cost, np.inf)


def greedy_pairs(cost: np.ndarray) -> list[tuple[int, int]]:
    """(row, column) pairs of finite cost, cheapest first, each row and column used once."""
    cost = np.asarray(cost, dtype=np.float64)
    if cost.size == 0:
        return []
    rows, cols = np.nonzero(np.isfinite(cost))
    order = np.argsort(cost[rows, cols], kind="stable")
    used_r: set[int] = set()
    used_c: set[int] = set()
    out = []
    for k in order:
        r, c = int(rows[k]), int(cols[k])
        if r in used_r or c in used_c:
            continue
        used_r.add(r)
        used_c.add(c)
        out.append((r, c))
    return out


class TrackRelinker:
    """ByteTrack's ids -> the pipeline's ids, relinking broken tracks (see module doc).

    Per frame: :meth:`output_ids` maps the tracker's ids (and says which are born now); for those,
    :meth:`link` with the tracks lost meanwhile. ``along_m`` 0 turns relinking off (ids pass
    through unchanged)."""

    def __init__(
        self,
        along_m: float = 5.0,
        across_m: float = 1.5,
        max_gap_s: float = 1.0,
        max_size_change: float = 0.3,
    ) -> None:
        self.along_m = float(along_m)
        self.across_m = float(across_m)
        self.max_gap_s = float(max_gap_s)
        self.max_size_change = float(max_size_change)
        self.reset()

    @property
    def enabled(self) -> bool:
        return self.along_m > 0 and self.across_m > 0 and self.max_gap_s > 0

    def reset(self) -> None:
        self._alias: dict[int, int] = {}  # tracker id -> output id (only the relinked ones)
        # ByteTrack numbers its tracks from a counter: an id above every one seen is a new track
        # (no set of every id of a stream, which would grow for as long as it runs)
        self._max_seen = 0
        self.n_relinked = 0

    def output_ids(self, raw_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """This frame's output ids for the tracker's ids, and which tracker ids are born now
        (numbered above every id seen: they may be linked). Where a relinked track and the track it
        continues are both in the frame, the relink is undone: each keeps its own id."""
        raw = np.asarray(raw_ids, dtype=int).reshape(-1)
        present = {int(r) for r in raw}
        for r in [r for r, o in self._alias.items() if r in present and o in present]:
            del self._alias[r]
        born = raw > self._max_seen
        self._max_seen = max(self._max_seen, int(raw.max(initial=0)))
        out = np.array([self._alias.get(int(r), int(r)) for r in raw], dtype=int)
        return out, born

    def link(
        self,
        new_ids: np.ndarray,
        new_xy_m: np.ndarray,
        lost: list[LostTrack],
        new_size_m: np.ndarray | None = None,
    ) -> dict[int, int]:
        """Link tracks born now (tracker ids ``new_ids``, ground positions ``new_xy_m``, box sizes
        on the ground ``new_size_m``, NaN or None: unknown) to lost ones: {tracker id: output id it
        continues}. Remembered for the frames that follow."""
        new_ids = np.asarray(new_ids, dtype=int).reshape(-1)
        if not self.enabled or not len(new_ids) or not lost:
            return {}
        cost = continuation_cost(
            new_xy_m,
            np.array([t.predicted_xy_m for t in lost]),
            np.array([t.velocity_mps for t in lost]),
            self.along_m,
            self.across_m,
        )
        if new_size_m is not None:
            sizes = np.array([t.size_m for t in lost], dtype=np.float64)
            cost[size_mismatch(new_size_m, sizes, self.max_size_change)] = np.inf
        links = {int(new_ids[r]): lost[c].track_id for r, c in greedy_pairs(cost)}
        self._alias.update(links)
        self.n_relinked += len(links)
        return links


__all__ = ["LostTrack", "TrackRelinker", "continuation_cost", "greedy_pairs"]
