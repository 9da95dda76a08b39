"""The ticket on a live stream: simulated flights streamed in real time to ``airpatrol serve`` (WebRTC,
telemetry from the flight's .SRT on the data channel), their violations read back over the REST API
and scored against the flights' ground truth - what an officer would see from a server that drops
frames (run it under ``taskset -c 0``: server and publisher share one core).

    taskset -c 0 python -m eval.live_tickets runs/ticket_slice/sims/alt100_* --json live.json

Each violation is matched to the ground-truth vehicle whose box, on the frame its snapshot was
taken from (``base.snapshot_time_s``), overlaps its box the most (IoU >= 0.3, :func:`eval.metrics.tickets.vehicle_at`); its true speed over
the base is the mean of that vehicle's true speeds over the base's times. Printed: frames received
/ processed / dropped, violations (with a ticket speed, enforceable, matched), the ticket's signed
error (median, max |error|), the share within the tolerance, wrong tickets (enforceable violations of
a vehicle whose true speed never exceeded the limit) and the per-frame peak's error beside the
ticket's. A benchmark, not a test: it needs the shipped detector and takes real time.

``--speeds``: the server also records every processed frame's tracks and speeds
(``record_tracks``); each flight's are matched to its ground truth as the offline evaluator
matches them (a frame's media time gives its frame of the flight) and the per-frame speed MAE is
printed, pooled over the flights: the live figure to compare with an unconstrained run's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from edge_client.bench import cpu_list
from eval.groundtruth import GroundTruth, GtSpeeds, load_gt_speeds, load_mot_gt
from eval.metrics.matching import prepare_sequence
from eval.metrics.predictions import PredTracks
from eval.metrics.speed import SpeedSamples, speed_samples, summarize_speed
from eval.metrics.tickets import vehicle_at
from pipelines.vehicle_height import ON_THE_ROAD

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Flight:
    path: Path
    camera: str
    fps: float
    limit_kmh: float
    gt: GroundTruth
    speeds: GtSpeeds
    flat_vehicles: bool = True  # flat sprites (FlightSpec.vehicle_height false): measured on the road

    @staticmethod
    def load(path: Path) -> Flight:
        spec = yaml.safe_load((path / "flight.yaml").read_text())
        return Flight(
            path,
            str(spec["camera"]),
            float(spec.get("fps", 30.0)),
            float(spec.get("speed_limit_kmh", 50.0)),
            load_mot_gt(path / "gt" / "gt.txt"),
            load_gt_speeds(path / "gt" / "speeds.csv"),
            not spec.get("vehicle_height", False),
        )

    def frame_at(self, t: float) -> int:
        return int(round(t * self.fps)) + 1

    def match(self, bbox: list[float], t: float) -> int | None:
        """The ground-truth vehicle under ``bbox`` at stream time ``t`` (None: none overlaps enough)."""
        return vehicle_at(self.gt, self.frame_at(t), bbox)

    def true_over(self, gid: int, start_s: float, end_s: float) -> float | None:
        frames = range(self.frame_at(start_s), self.frame_at(end_s) + 1)
        mine = (self.speeds.ids == gid) & np.isin(self.speeds.frames, list(frames))
        return float(self.speeds.speed_kmh[mine].mean()) if mine.any() else None

    def max_true(self, gid: int) -> float:
        seen = set(self.gt.frames[self.gt.ids == gid].tolist())
        mine = (self.speeds.ids == gid) & np.isin(self.speeds.frames, list(seen))
        return float(self.speeds.speed_kmh[mine].max()) if mine.any() else float("nan")


def score_violation(flight: Flight, v: dict[str, Any]) -> dict[str, Any]:
    """One violation (as the API returns it) scored against the flight's truth."""
    base = v.get("base")
    out: dict[str, Any] = {
        "flight": flight.path.name,
        "status": v["status"],
        "ticket_kmh": v.get("ticket_speed_kmh"),
        "sigma_kmh": v.get("ticket_sigma_kmh"),
        "tolerance_kmh": v.get("tolerance_kmh"),
        "peak_kmh": v["peak_speed_kmh"],
        "gt_id": None,
    }
    if not base or base.get("snapshot_time_s") is None or out["ticket_kmh"] is None:
        return out
    gid = flight.match(v["bbox_xyxy"], base["snapshot_time_s"])
    if gid is None:
        return out
    true = flight.true_over(gid, base["start_time_s"], base["end_time_s"])
    out.update(gt_id=gid, true_kmh=true, true_max_kmh=flight.max_true(gid))
    if true is not None:
        out["error_kmh"] = out["ticket_kmh"] - true
        out["within_tolerance"] = abs(out["error_kmh"]) <= out["tolerance_kmh"]
    out["wrong_ticket"] = v["status"] == "enforceable" and out["true_max_kmh"] <= flight.limit_kmh
    # the peak against the vehicle's highest true speed over the violation's frames
    peak_true = flight.true_over(gid, v["start_time_s"], v["end_time_s"])
    out["peak_error_kmh"] = None if peak_true is None else v["peak_speed_kmh"] - peak_true
    return out


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if r.get("error_kmh") is not None]
    err = np.array([r["error_kmh"] for r in scored])
    peak = np.array([r["peak_error_kmh"] for r in scored if r.get("peak_error_kmh") is not None])
    enforceable = [r for r in rows if r["status"] == "enforceable"]
    return {
        "violations": len(rows),
        "with_ticket_speed": sum(r["ticket_kmh"] is not None for r in rows),
        "enforceable": len(enforceable),
        "enforceable_unmatched": sum(r["gt_id"] is None for r in enforceable),
        "scored": len(scored),
        "within_tolerance": float(np.mean([r["within_tolerance"] for r in scored])) if scored else None,
        "outside_tolerance": sum(not r["within_tolerance"] for r in scored),
        "error_median_kmh": float(np.median(err)) if len(err) else None,
        "error_max_abs_kmh": float(np.abs(err).max()) if len(err) else None,
        "wrong_tickets": sum(bool(r.get("wrong_ticket")) for r in rows),
        "peak_error_median_kmh": float(np.median(peak)) if len(peak) else None,
        "peak_error_max_kmh": float(peak.max()) if len(peak) else None,
    }


def without_b_frames(video: Path, out: Path) -> Path:
    """``video`` re-encoded as a drone app sends it (H.264, no B-frames, a keyframe a second, CRF 18)
    for the publisher to relay as is; made once into ``out``."""
    import av

    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".part.mp4")
    with av.open(str(video)) as src, av.open(str(tmp), "w") as dst:
        vin = src.streams.video[0]
        vout = dst.add_stream("libx264", rate=vin.average_rate)
        vout.width, vout.height, vout.pix_fmt = vin.codec_context.width, vin.codec_context.height, "yuv420p"
        vout.options = {"preset": "veryfast", "tune": "zerolatency", "g": "30", "bf": "0", "crf": "18"}
        for frame in src.decode(vin):
            frame.pict_type = 0  # let the encoder choose
            dst.mux(vout.encode(frame))
        dst.mux(vout.encode(None))
    tmp.rename(out)
    return out


async def _stream(flight: Flight, url: str, token: str, encode: bool, work: Path) -> dict[str, Any]:
    import httpx

    from edge_client.publish import publish, telemetry_source

    video = flight.path / "video.mp4"
    if not encode:
        video = without_b_frames(video, work / f"{flight.path.name}.mp4")
    tel = telemetry_source(flight.path / "video.mp4", flight.path / "video.SRT", camera=flight.camera)
    result = await publish(video, url, token, telemetry=tel, return_video=False, passthrough=not encode)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as c:
        for _ in range(100):  # the session's last writes
            s = (await c.get(f"/api/v1/sessions/{result.session_id}")).json()
            if s["status"] != "active":
                break
            await asyncio.sleep(0.3)
        items, cursor = [], None
        while True:
            params = {"session_id": result.session_id, "limit": 200, **({"cursor": cursor} if cursor else {})}
            page = (await c.get("/api/v1/violations", params=params)).json()
            items += page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
    return {"session": s, "violations": items}


def read_track_record(path: Path, fps: float) -> PredTracks:
    """A live session's recorded tracks and speeds (``record_tracks``: the offline ``speeds.csv``
    columns) as predicted tracks, each row on the flight's frame its media time falls on."""
    import csv

    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))

    def col(name: str, cast=float, empty=float("nan")) -> np.ndarray:
        return np.array([cast(r[name]) if r[name] != "" else empty for r in rows])

    if not rows:
        return PredTracks.empty()
    frames = np.array([round(float(r["time_s"]) * fps) + 1 for r in rows], int)
    return PredTracks(
        frames,
        col("track_id", int),
        np.stack([col("x1"), col("y1"), col("x2"), col("y2")], axis=1),
        col("speed_kmh"),
        np.array([r["class"] for r in rows], dtype=object),
        col("sigma_kmh"),
        np.array([r["trusted"] != "0" for r in rows], bool),
        col("scale_sigma_pct") / 100.0,
        np.full(len(rows), "", dtype=object),
    )


def score_speeds(flight: Flight, tracks: PredTracks) -> SpeedSamples:
    """The live tracks' per-frame speeds matched to the flight's true ones (as ``airpatrol eval``)."""
    n_frames = int(flight.gt.frames.max()) if len(flight.gt.frames) else 0
    matched = prepare_sequence(flight.gt, tracks, n_frames)
    return speed_samples(flight.path.name, matched, tracks, flight.speeds)


async def run(
    flights: list[Flight],
    encode: bool,
    work: Path,
    server_cpus: list[int] | None = None,
    speeds: bool = False,
) -> list[dict[str, Any]]:
    """Each flight streamed in turn to one server; with ``speeds`` each run also carries its
    ``speed_samples`` (the server recording every frame's tracks)."""
    from edge_client.bench_server import ServerProcess

    token = secrets.token_urlsafe(16)
    out = []
    with tempfile.TemporaryDirectory(prefix="airpatrol-live-tickets-") as tmp:
        # the simulated pilots took off on the road and say so (docs/calibration.md): a site value
        site = Path(tmp) / "site.yaml"
        config: dict[str, Any] = {"camera": {"takeoff_above_road_m": 0.0}}
        if all(f.flat_vehicles for f in flights):  # flat sprites: their boxes and flow are on the road
            config["speed"] = {"point_height_m": ON_THE_ROAD}
        site.write_text(yaml.safe_dump(config))
        server_args = argparse.Namespace(
            port=0,
            streams=[1],
            process_max_width=None,
            detector_factory=None,
            config=site,
            server_cpus=server_cpus,
        )
        record_tracks = {"AIRPATROL_RECORD_TRACKS": "true"} if speeds else None
        server = ServerProcess(server_args, Path(tmp), token, settings=record_tracks)
        try:
            server.wait_ready()
            for flight in flights:
                t0 = time.monotonic()
                got = await _stream(flight, server.url, token, encode, work)
                s = got["session"]
                rows = [score_violation(flight, v) for v in got["violations"]]
                out.append(
                    {
                        "flight": flight.path.name,
                        "frames_received": s["frames_received"],
                        "frames_processed": s["frames_processed"],
                        "frames_dropped": s["frames_dropped"],
                        "wall_s": round(time.monotonic() - t0, 1),
                        "rows": rows,
                    }
                )
                record = Path(tmp) / "tracks" / f"{s['id']}.csv"
                if speeds and record.exists():
                    out[-1]["speed_samples"] = score_speeds(flight, read_track_record(record, flight.fps))
                log.info("%s: %d violations, %s", flight.path.name, len(rows), summarize(rows))
        finally:
            server.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "flights", nargs="+", type=Path, help="simulated flight folders (video.mp4, video.SRT, gt/)"
    )
    p.add_argument("--encode", action="store_true", help="encode in the publisher (default: relay as is)")
    p.add_argument(
        "--work",
        type=Path,
        default=Path("runs/live_tickets"),
        help="where the flights' videos re-encoded without B-frames are kept (made once)",
    )
    p.add_argument("--json", type=Path, help="also write every scored violation here")
    p.add_argument(
        "--speeds",
        action="store_true",
        help="also score every processed frame's speeds against the flights' truth (per-frame MAE)",
    )
    p.add_argument(
        "--server-cpus",
        type=cpu_list,
        default=None,
        metavar="LIST",
        help="confine the server to these CPUs (e.g. 0: a one-core box; the publisher keeps the others)",
    )
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    flights = [Flight.load(f) for f in args.flights if (f / "gt" / "gt.txt").exists()]
    if not flights:
        sys.stderr.write("live_tickets: no simulated flight with gt/ among the arguments\n")
        return 2
    runs = asyncio.run(run(flights, args.encode, args.work, args.server_cpus, args.speeds))
    rows = [r for run_ in runs for r in run_["rows"]]
    received = sum(r["frames_received"] for r in runs)
    dropped = sum(r["frames_dropped"] for r in runs)
    summary = summarize(rows)
    lines = [
        f"{len(runs)} flights, {received} frames received, {dropped} dropped ({dropped / max(received, 1):.0%})"
    ]
    lines += [f"  {k:24s} {round(v, 3) if isinstance(v, float) else v}" for k, v in summary.items()]
    if args.speeds:
        pooled = summarize_speed(
            SpeedSamples.concat([r["speed_samples"] for r in runs if "speed_samples" in r])
        )
        summary["per_frame_speed"] = {
            k: pooled.get(k) for k in ("n", "mae_kmh", "rmse_kmh", "p95_abs_kmh", "bias_kmh", "coverage")
        }
        lines.append(
            f"  per-frame speeds: {pooled.get('n', 0)} matched, MAE {pooled.get('mae_kmh', float('nan')):.3f} km/h, "
            f"p95 |error| {pooled.get('p95_abs_kmh', float('nan')):.2f}, bias {pooled.get('bias_kmh', float('nan')):+.3f}, "
            f"coverage {pooled.get('coverage', 0.0):.2f}"
        )
        for r in runs:
            r.pop("speed_samples", None)
    sys.stdout.write("\n".join(lines) + "\n")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
