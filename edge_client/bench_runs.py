"""The stream runs of ``airpatrol serve-bench``: N concurrent streams (the server's per-session
numbers, its RSS and CPU), one long stream sampling RSS, and ``--churn`` short streams in a row
(the server's resources after each). Each publishes with :func:`edge_client.publish.publish`."""

from __future__ import annotations

import argparse
import time
from typing import Any

from edge_client.bench_fault import Fault
from edge_client.bench_server import ServerProcess


def telemetry(args: argparse.Namespace):
    from edge_client.publish import telemetry_source

    return telemetry_source(
        args.video, args.srt, altitude_m=args.altitude, pitch_deg=args.pitch, camera=args.camera
    )


def tracks_with_speed(session: dict[str, Any]) -> int:
    """Tracks the server gave a speed: 0 means the stream ran with speeds disabled."""
    return sum(1 for t in session.get("tracks") or () if t.get("peak_speed_kmh") is not None)


def evidence_lags(events: list[dict[str, Any]], times: list[float]) -> dict[str, Any]:
    """From a stream's events as its publisher received them: each violation's evidence pack after
    its clip (ms between ``violation.clip_ready`` and ``violation.evidence_ready``)."""
    clips: dict[int, float] = {}
    lags: list[float] = []
    packs = 0
    for event, t in zip(events, times, strict=True):
        if event.get("type") == "violation.clip_ready":
            clips[event["violation_id"]] = t
        elif event.get("type") == "violation.evidence_ready":
            packs += 1
            if event["violation_id"] in clips:
                lags.append(1000.0 * (t - clips[event["violation_id"]]))
    lags.sort()

    def pct(q: float) -> float | None:
        return round(lags[min(len(lags) - 1, int(q * len(lags)))], 1) if lags else None

    return {
        "packs": packs,
        "after_clip_ms_p50": pct(0.5),
        "after_clip_ms_p95": pct(0.95),
        "after_clip_ms_max": pct(1.0),
    }


async def run_streams(
    url: str, token: str, n: int, args: argparse.Namespace, server: ServerProcess
) -> dict[str, Any]:
    import asyncio

    import httpx

    from edge_client.publish import publish

    tel = telemetry(args)
    passthrough = not args.encode  # a video file must then be H.264 without B-frames
    rss_samples: list[float] = []

    seen: dict[
        int, dict
    ] = {}  # every process under the server, as last sampled (engines end with their stream)
    fault = Fault(args.fault, args.fault_at, n) if getattr(args, "fault", None) and n >= 2 else None
    args.fault = None  # one fault, in the first run of several streams

    async def sample_rss() -> None:
        while True:
            rss_samples.append(server.rss_mb())
            seen.update(await asyncio.to_thread(server.processes, False))  # RSS only: cheap
            await asyncio.sleep(1.0)

    detector0, udp0 = await server_health(url)
    sampler = asyncio.create_task(sample_rss())
    started = time.monotonic()
    server_cpu0, own_cpu0 = server.cpu_s(), time.process_time()
    procs0 = server.processes()
    firing = asyncio.create_task(fault.fire()) if fault is not None else None
    results = await asyncio.gather(
        *(
            publish(
                args.source,
                url,
                token,
                loop_playback=True,
                max_seconds=args.duration,
                return_video=args.return_video,
                telemetry=tel,
                passthrough=passthrough,
                on_event=fault.on_event(k) if fault is not None else None,
            )
            for k in range(n)
        )
    )
    if firing is not None:
        await firing  # raises when the fault could not be injected
    wall = time.monotonic() - started
    server_cores = (server.cpu_s() - server_cpu0) / wall
    seen.update(server.processes())
    processes = process_use(procs0, seen, wall)
    publisher_cores = (time.process_time() - own_cpu0) / wall
    detector1, udp1 = await server_health(url)
    sampler.cancel()
    rows = []
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        for r in results:
            s = (await c.get(f"/api/v1/sessions/{r.session_id}")).json()
            rows.append(session_row(s, r))
    out = {
        "streams": n,
        "wall_s": round(wall, 1),
        "rss_mb_max": round(max(rss_samples), 1) if rss_samples else None,
        "rss_mb_after": round(server.rss_mb(), 1),
        "server_cpu_cores": round(server_cores, 2),
        # the server and every process under it (engine processes): role, cores used, RSS and PSS
        "processes": processes,
        "all_cpu_cores": round(sum(p["cores"] for p in processes), 2),
        "publishers_cpu_cores": round(publisher_cores, 2),
        # UDP datagrams this box dropped at full receive buffers during the run (None: not Linux)
        "udp_receive_buffer_errors": None if udp0 is None or udp1 is None else udp1 - udp0,
        "sessions": rows,
        "detector": detector_use(detector0, detector1),
    }
    if fault is not None:
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
            out["fault"] = fault.report((await c.get(f"/api/v1/sessions/{results[0].session_id}")).json())
    return out


async def server_health(url: str) -> tuple[dict[str, Any] | None, int | None]:
    """From the server's ``/healthz``: its shared detector's figures so far (the threads' shared
    detector, or the engine processes' detector service once it has served; None where it has none),
    and the box's UDP datagrams dropped at full receive buffers so far (``receiving``; None off Linux)."""
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        health = (await c.get("/healthz")).json()
    service = (health.get("engines") or {}).get("detector_service")
    detector = health.get("detector") or (service if service and "calls" in service else None)
    return detector, (health.get("receiving") or {}).get("udp_receive_buffer_errors")


def detector_use(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the shared detector did between two /healthz readings: frames, runs, the batch sizes, a
    frame's mean wait for it and a run's mean time (ms), and the wait's p95 over its last frames."""
    from pipelines.batching import stats_between

    if after is None:
        return None
    use = stats_between(before, after)
    calls, batches = use["calls"], use["batches"]
    return {
        "device": after["device"],
        "max_batch": after["max_batch"],
        "frames": calls,
        "runs": batches,
        "mean_batch": round(calls / batches, 2) if batches else None,
        "batch_sizes": use["batch_sizes"],
        "queue_ms_mean": round(1000 * use["queue_s_total"] / calls, 1) if calls else None,
        "queue_ms_p95_recent": after["queue_ms_p95"],
        "run_ms_mean": round(1000 * use["run_s_total"] / batches, 1) if batches else None,
    }


def steady_state(
    events: list[dict[str, Any]], times: list[float], last: float = 0.5
) -> dict[str, Any] | None:
    """A stream's figures over the ``last`` share of its run, from the ``stats`` events its publisher
    received (once the server has settled on what to give up): processed fps, the latency p95 of
    the last 5 s, and the received frames dropped and skipped on purpose; None without two events."""
    stats = [(t, e) for e, t in zip(events, times, strict=True) if e.get("type") == "stats"]
    if len(stats) < 2:
        return None
    t_end = stats[-1][0]
    window = [(t, e) for t, e in stats if t >= t_end - last * (t_end - stats[0][0])]
    (ta, a), (tb, b) = window[0], window[-1]
    if tb <= ta:
        return None
    received = max(b["frames_received"] - a["frames_received"], 1)
    lost = (b.get("frames_lost_before_server") or 0) - (a.get("frames_lost_before_server") or 0)
    effort = b.get("effort") or {}
    return {
        "seconds": round(tb - ta, 1),
        "processed_fps": round((b["frames_processed"] - a["frames_processed"]) / (tb - ta), 2),
        "latency_p95_ms": b.get("latency_p95_recent_ms"),
        "dropped_ratio": round((b["frames_dropped"] - a["frames_dropped"]) / received, 3),
        # frames missing between received ones (the server's count), a share of those sent meanwhile
        "lost_ratio": round(lost / (received + lost), 3),
        "skipped_ratio": round(
            ((b.get("frames_skipped") or 0) - (a.get("frames_skipped") or 0)) / received, 3
        ),
        "effort_level": effort.get("level"),
        "effort": effort.get("text"),
    }


def session_row(s: dict[str, Any], r: Any) -> dict[str, Any]:
    """One stream's figures: the server's session record ``s`` and the publisher's result ``r``."""
    return {
        "session_id": s["id"],
        "frames_sent": r.frames_sent,
        "frames_skipped_by_publisher": r.frames_skipped,
        "frames_received": s["frames_received"],
        # sent but never reached the server's code: packets lost (a full socket buffer), frames the
        # decoder could not make whole, or still on the way when the stream ended
        "frames_lost_before_server": max(0, r.frames_sent - s["frames_received"]),
        # the receive delay and the capture-to-result latency (edge_server.stream_stats.delays_ms)
        "delays_ms": (s.get("info") or {}).get("delays_ms"),
        "frames_processed": s["frames_processed"],
        "frames_dropped": s["frames_dropped"],
        "dropped_ratio": round(s["frames_dropped"] / (s["frames_received"] or 1), 3),
        "processed_fps": s["processed_fps"],
        "latency_p50_ms": s["latency_p50_ms"],
        "latency_p95_ms": s["latency_p95_ms"],
        # the tail (the session's info): a stall on one frame in 60 shows only here
        **{
            f"latency_{q}_ms": ((s.get("info") or {}).get("latency_tail_ms") or {}).get(q)
            for q in ("p99", "max")
        },
        "violations": s["violations_count"],
        "tracks": len(s.get("tracks") or ()),
        "tracks_with_speed": tracks_with_speed(s),
        "return_frames": r.return_frames,
        "stage_ms_mean": (s.get("info") or {}).get("stage_ms_mean"),
        "detection": ((s.get("info") or {}).get("pipeline") or {}).get("keyframes"),
        "evidence": evidence_lags(r.events, r.event_times),
        "steady": steady_state(r.events, r.event_times),
        # what the server gave up to keep up (edge_server.adapt): the last rung, the highest, changes
        "effort": {
            k: v
            for k, v in ((s.get("info") or {}).get("effort") or {}).items()
            if k in ("level", "stride", "highest_level", "frames_skipped")
        }
        | {"changes": len(((s.get("info") or {}).get("effort") or {}).get("changes") or ())},
    }


def process_use(before: dict[int, dict], after: dict[int, dict], wall: float) -> list[dict[str, Any]]:
    """Each process seen during the run: its role, the cores it used over the run, its memory as last seen."""
    out = []
    for pid, p in after.items():
        used = p["cpu_s"] - before.get(pid, {}).get("cpu_s", 0.0)
        out.append(
            {
                "pid": pid,
                "role": p["role"],
                "cores": round(used / wall, 2),
                "rss_mb": p.get("rss_mb"),
                "pss_mb": p.get("pss_mb"),
            }
        )
    return out


async def long_run(url: str, token: str, args: argparse.Namespace, server: ServerProcess) -> dict[str, Any]:
    import asyncio

    from edge_client.publish import publish

    samples: list[tuple[float, float]] = []
    t0 = time.monotonic()

    async def sample() -> None:
        while True:
            samples.append((round(time.monotonic() - t0, 1), round(server.rss_mb(), 1)))
            await asyncio.sleep(15.0)

    task = asyncio.create_task(sample())
    result = await publish(
        args.source,
        url,
        token,
        loop_playback=True,
        max_seconds=args.long_run,
        return_video=args.return_video,
        telemetry=telemetry(args),
        passthrough=not args.encode,
    )
    task.cancel()
    samples.append((round(time.monotonic() - t0, 1), round(server.rss_mb(), 1)))
    import httpx

    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        s = (await c.get(f"/api/v1/sessions/{result.session_id}")).json()
    keys = (
        "frames_received",
        "frames_processed",
        "frames_dropped",
        "processed_fps",
        "latency_p50_ms",
        "latency_p95_ms",
    )
    stats = {k: s.get(k) for k in keys}
    stats["dropped_ratio"] = round(s["frames_dropped"] / max(s["frames_received"], 1), 3)
    stats["violations"] = s.get("violations_count")
    stats["tracks_with_speed"] = tracks_with_speed(s)
    return {"seconds": args.long_run, "session_id": result.session_id, "rss_mb": samples, "session": stats}


async def churn(url: str, token: str, args: argparse.Namespace, server: ServerProcess) -> dict[str, Any]:
    """``args.churn`` short streams one after the other; the server's resources after each."""
    import asyncio

    from edge_client.publish import publish

    samples: list[dict[str, Any]] = []
    for _ in range(args.churn):
        await publish(args.source, url, token, max_seconds=args.churn_seconds, passthrough=not args.encode)
        await asyncio.sleep(0.5)  # the session's last writes
        threads, files = server.threads_and_files()
        samples.append({"rss_mb": round(server.rss_mb(), 1), "threads": threads, "open_files": files})
    first, last = samples[0], samples[-1]
    return {
        "streams": args.churn,
        "seconds_each": args.churn_seconds,
        "after_first": first,
        "after_last": last,
        "rss_growth_mb": round(last["rss_mb"] - first["rss_mb"], 1),
        "rss_mb": [x["rss_mb"] for x in samples],
    }
