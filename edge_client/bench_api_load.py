"""``airpatrol serve-bench --api-load``: API reads from a client process of its own during a live
stream, and what they cost the stream (its processed fps before, during and after the load)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from edge_client.bench_runs import telemetry
from edge_client.bench_server import ServerProcess

API_LOAD_PATH = "/api/v1/violations"


def _get_load(url: str, token: str, requests: int, concurrency: int) -> dict[str, Any]:
    """The load client, in a process of its own: ``requests`` GETs at ``concurrency`` with one
    ``httpx.AsyncClient``. Its times are ``time.monotonic`` (one clock for every process)."""
    import asyncio
    import resource

    import httpx

    async def run() -> dict[str, Any]:
        statuses: dict[str, int] = {}
        latencies: list[float] = []
        gate = asyncio.Semaphore(concurrency)
        headers = {"Authorization": f"Bearer {token}"}
        limits = httpx.Limits(max_connections=concurrency)
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300, limits=limits) as client:

            async def one() -> None:
                async with gate:
                    t = time.monotonic()
                    try:
                        key = str((await client.get(API_LOAD_PATH, params={"limit": 50})).status_code)
                    except httpx.HTTPError as exc:
                        key = type(exc).__name__
                    latencies.append(time.monotonic() - t)
                    statuses[key] = statuses.get(key, 0) + 1

            t0 = time.monotonic()
            await asyncio.gather(*(one() for _ in range(requests)))
            t1 = time.monotonic()
        latencies.sort()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return {
            "t0": t0,
            "t1": t1,
            "statuses": statuses,
            "latency_ms": {
                "p50": round(1000 * latencies[len(latencies) // 2], 1),
                "p95": round(1000 * latencies[int(0.95 * (len(latencies) - 1))], 1),
                "max": round(1000 * latencies[-1], 1),
            },
            "client_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        }

    return asyncio.run(run())


async def api_load(url: str, token: str, args: argparse.Namespace, server: ServerProcess) -> dict[str, Any]:
    """One live stream; after a warm-up and a baseline window, ``args.api_load`` GETs at
    ``args.api_concurrency`` from a client process of its own. The stream's processed fps (from its
    ``stats`` events, which come over WebRTC, not HTTP) during the load against the baseline
    window just before it, and the server's CPU in both."""
    import asyncio
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from edge_client.publish import publish

    samples: list[tuple[float, int]] = []

    def on_event(event: dict[str, Any]) -> None:
        if event.get("type") == "stats":
            samples.append((time.monotonic(), int(event["frames_processed"])))

    stop = asyncio.Event()
    stream = asyncio.create_task(
        publish(args.source, url, token, loop_playback=True, max_seconds=36000.0, on_event=on_event,
                return_video=False, telemetry=telemetry(args), passthrough=not args.encode, stop=stop)
    )  # fmt: skip
    await asyncio.sleep(args.api_warmup)
    cpu_base = server.cpu_s()
    base0 = time.monotonic()
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        await asyncio.get_running_loop().run_in_executor(pool, time.sleep, 0)  # the client process starts
        await asyncio.sleep(max(0.0, base0 + args.api_baseline - time.monotonic()))
        cpu_t0 = server.cpu_s()
        load = await asyncio.get_running_loop().run_in_executor(
            pool, _get_load, url, token, args.api_load, args.api_concurrency
        )
    cpu_t1 = server.cpu_s()
    t0, t1 = load["t0"], load["t1"]
    # the same window again after the load: a stream whose fps drifts on its own (a scene that
    # gets busier, a growing database) shows here rather than passing for the load's effect
    await asyncio.sleep(args.api_baseline + 0.6)
    stop.set()
    await stream

    def fps(a: float, b: float) -> float | None:
        inside = [(t, n) for t, n in samples if a <= t <= b]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return round((inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]), 2)

    before, during = fps(t0 - args.api_baseline, t0), fps(t0, max(t1, t0 + 3.0))
    after = fps(t1, t1 + args.api_baseline)
    statuses = load["statuses"]
    return {
        "requests": args.api_load,
        "concurrency": args.api_concurrency,
        "path": f"GET {API_LOAD_PATH}?limit=50",
        "client": "httpx.AsyncClient in a process of its own on the same machine (shares the cores)",
        "window": f"fps before: the {args.api_baseline:g} s before the first request (after a "
        f"{args.api_warmup:g} s warm-up); during: first request sent -> last answer received; after: "
        f"the {args.api_baseline:g} s after it",
        "seconds": round(t1 - t0, 2),
        "requests_per_s": round(args.api_load / max(t1 - t0, 1e-6), 1),
        "statuses": statuses,
        "errors": sum(v for k, v in statuses.items() if k != "200"),
        "latency_ms": load["latency_ms"],
        "client_cpu_s": load["client_cpu_s"],
        "server_cpu_cores_before": round((cpu_t0 - cpu_base) / max(t0 - base0, 1e-6), 2),
        "server_cpu_cores_during": round((cpu_t1 - cpu_t0) / max(t1 - t0, 1e-6), 2),
        "stream_fps_before": before,
        "stream_fps_during": during,
        "stream_fps_after": after,
        "fps_drop": None if not before or during is None else round(1 - during / before, 3),
    }
