"""Server benchmark: latency, processed fps, dropped frames and memory with 1..N concurrent streams.

``airpatrol serve-bench`` (or ``python -m edge_client.bench``) starts ``airpatrol serve`` in a
subprocess on 127.0.0.1 with a fresh data folder, streams to it from this process with the
reference publisher (real time, telemetry on the data channel), and reads the per-session
numbers the server measured itself (received -> result latency percentiles, processed fps,
dropped-frame ratio) plus the server process's RSS. The publishers' video encoding runs on the
same machine and competes with the server for CPU; on a real deployment the drones' phones do it.

By default the footage is the synthetic scene with the bright-blob detector, which isolates the
server + engine cost from the detector model; pass ``--config site.yaml`` with detector weights
and ``--detector-factory none`` to include a real model.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_DETECTOR = "edge_client.synthetic:BrightBlobDetector"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--streams",
        type=int,
        nargs="+",
        default=[1, 2, 4],
        help="concurrent stream counts to run (0: none, e.g. with --churn)",
    )
    p.add_argument("--duration", type=float, default=30.0, help="seconds of video per run")
    p.add_argument(
        "--video",
        default="synthetic:1280x720",
        help="video file (H.264 without B-frames unless --encode), or synthetic[:WxH] (default synthetic:1280x720)",
    )
    p.add_argument("--srt", type=Path, default=None, help="telemetry for a video file")
    p.add_argument(
        "--encode",
        action="store_true",
        help="encode the video live in the publishers (default: relay pre-encoded H.264 like a drone app, "
        "so the publishers' CPU stays out of the server's numbers)",
    )
    p.add_argument("--config", type=Path, default=None, help="site pipeline config YAML for the server")
    p.add_argument(
        "--detector-factory",
        default=DEFAULT_DETECTOR,
        help=f"server detector 'module:callable', or 'none' to load it from --config (default {DEFAULT_DETECTOR})",
    )
    p.add_argument("--return-video", action="store_true", help="also receive the annotated return video")
    p.add_argument("--process-max-width", type=int, default=None, help="server setting process_max_width")
    p.add_argument(
        "--long-run",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="then one stream this long, sampling RSS",
    )
    p.add_argument("--camera", help="camera profile for the telemetry (DJI .SRT files do not name it)")
    p.add_argument("--altitude", type=float, help="altitude in metres for the telemetry (overrides the SRT)")
    p.add_argument(
        "--pitch", type=float, help="gimbal pitch in degrees for the telemetry (overrides the SRT)"
    )
    p.add_argument(
        "--churn",
        type=int,
        default=0,
        help="after the runs, open and close this many short streams in a row and report the server's "
        "RSS, threads and open files after the first and after the last (a per-session leak check)",
    )
    p.add_argument("--churn-seconds", type=float, default=2.0, help="video seconds per --churn stream")
    p.add_argument(
        "--api-load",
        type=int,
        default=0,
        help="during one live stream, send this many GET /api/v1/violations from a client process and compare "
        "the stream's processed fps with a window before (API isolation)",
    )
    p.add_argument(
        "--api-warmup", type=float, default=10.0, help="--api-load: seconds of stream left out at its start"
    )
    p.add_argument(
        "--api-baseline",
        type=float,
        default=20.0,
        help="--api-load: seconds of stream without load measured just before the load, and again after it",
    )
    p.add_argument("--api-concurrency", type=int, default=50, help="concurrent requests of --api-load")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--port", type=int, default=0, help="server port (default: a free one)")


class ServerProcess:
    def __init__(self, args: argparse.Namespace, data_dir: Path, token: str) -> None:
        import socket

        port = args.port
        if not port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        env = dict(os.environ)
        env.update(
            {
                "AIRPATROL_API_TOKEN": token,
                "AIRPATROL_MAX_STREAMS": str(max(max(args.streams), 1)),
                "AIRPATROL_STREAM_IDLE_TIMEOUT_S": "15",
                "AIRPATROL_STATS_INTERVAL_S": "0.5",
                # WebRTC streams only: no nginx or Mosquitto beside the measured server
                "AIRPATROL_RTMP_PORT": "null",
                "AIRPATROL_MQTT_PORT": "null",
            }
        )
        if args.process_max_width:
            env["AIRPATROL_PROCESS_MAX_WIDTH"] = str(args.process_max_width)
        if args.detector_factory and args.detector_factory.lower() != "none":
            env["AIRPATROL_DETECTOR_FACTORY"] = args.detector_factory
        cmd = [
            sys.executable,
            "-m",
            "airpatrol.cli",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
        ]
        cmd += ["--ice-host", "127.0.0.1"]
        if args.config:
            cmd += ["--config", str(args.config)]
        self.log_path = data_dir / "server.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 120.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"server not ready in {timeout:.0f} s; see {self.log_path}")

    def rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return float("nan")

    def threads_and_files(self) -> tuple[int, int]:
        """The server process's thread count and open file descriptors (-1 when unreadable)."""
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
            threads = int(status.split("Threads:")[1].split()[0])
            return threads, len(os.listdir(f"/proc/{self.proc.pid}/fd"))
        except (OSError, IndexError, ValueError):
            return -1, -1

    def cpu_s(self) -> float:
        """User + system CPU seconds of the server process so far."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return float("nan")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()


def _telemetry(args: argparse.Namespace):
    from edge_client.publish import telemetry_source

    return telemetry_source(
        args.video, args.srt, altitude_m=args.altitude, pitch_deg=args.pitch, camera=args.camera
    )


def _tracks_with_speed(session: dict[str, Any]) -> int:
    """Tracks the server gave a speed: 0 means the stream ran with speeds disabled."""
    return sum(1 for t in session.get("tracks") or () if t.get("peak_speed_kmh") is not None)


async def _run_streams(
    url: str, token: str, n: int, args: argparse.Namespace, server: ServerProcess
) -> dict[str, Any]:
    import asyncio

    import httpx

    from edge_client.publish import publish

    tel = _telemetry(args)
    passthrough = not args.encode  # a video file must then be H.264 without B-frames
    rss_samples: list[float] = []

    async def sample_rss() -> None:
        while True:
            rss_samples.append(server.rss_mb())
            await asyncio.sleep(1.0)

    sampler = asyncio.create_task(sample_rss())
    started = time.monotonic()
    server_cpu0, own_cpu0 = server.cpu_s(), time.process_time()
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
            )
            for _ in range(n)
        )
    )
    wall = time.monotonic() - started
    server_cores = (server.cpu_s() - server_cpu0) / wall
    publisher_cores = (time.process_time() - own_cpu0) / wall
    sampler.cancel()
    rows = []
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        for r in results:
            s = (await c.get(f"/api/v1/sessions/{r.session_id}")).json()
            received = s["frames_received"] or 1
            rows.append(
                {
                    "session_id": s["id"],
                    "frames_sent": r.frames_sent,
                    "frames_skipped_by_publisher": r.frames_skipped,
                    "frames_received": s["frames_received"],
                    "frames_processed": s["frames_processed"],
                    "frames_dropped": s["frames_dropped"],
                    "dropped_ratio": round(s["frames_dropped"] / received, 3),
                    "processed_fps": s["processed_fps"],
                    "latency_p50_ms": s["latency_p50_ms"],
                    "latency_p95_ms": s["latency_p95_ms"],
                    "violations": s["violations_count"],
                    "tracks": len(s.get("tracks") or ()),
                    "tracks_with_speed": _tracks_with_speed(s),
                    "return_frames": r.return_frames,
                    "stage_ms_mean": (s.get("info") or {}).get("stage_ms_mean"),
                    "detection": ((s.get("info") or {}).get("pipeline") or {}).get("keyframes"),
                }
            )
    return {
        "streams": n,
        "wall_s": round(wall, 1),
        "rss_mb_max": round(max(rss_samples), 1) if rss_samples else None,
        "rss_mb_after": round(server.rss_mb(), 1),
        "server_cpu_cores": round(server_cores, 2),
        "publishers_cpu_cores": round(publisher_cores, 2),
        "sessions": rows,
    }


async def _long_run(url: str, token: str, args: argparse.Namespace, server: ServerProcess) -> dict[str, Any]:
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
        telemetry=_telemetry(args),
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
    stats["tracks_with_speed"] = _tracks_with_speed(s)
    return {"seconds": args.long_run, "session_id": result.session_id, "rss_mb": samples, "session": stats}


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


async def _api_load(url: str, token: str, args: argparse.Namespace, server: ServerProcess) -> dict[str, Any]:
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
                return_video=False, telemetry=_telemetry(args), passthrough=not args.encode, stop=stop)
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


async def _churn(url: str, token: str, args: argparse.Namespace, server: ServerProcess) -> dict[str, Any]:
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


def _print_table(runs: list[dict[str, Any]], out: Any) -> None:
    """skip: frames the publisher left out to stay real time (its encoder fell behind); speeds:
    tracks the server measured a speed for (0: speeds disabled, e.g. no camera profile)."""
    out.write(
        f"{'streams':>7} {'stream':>6} {'skip':>5} {'recv':>6} {'proc':>6} {'drop%':>6} {'fps':>6} "
        f"{'p50 ms':>7} {'p95 ms':>7} {'speeds':>6} {'viol':>5} {'RSS max MB':>10}\n"
    )
    for run in runs:
        for i, s in enumerate(run["sessions"]):
            out.write(
                f"{run['streams']:>7} {i + 1:>6} {s['frames_skipped_by_publisher']:>5} "
                f"{s['frames_received']:>6} {s['frames_processed']:>6} "
                f"{100 * s['dropped_ratio']:>6.1f} {s['processed_fps'] or 0:>6.1f} "
                f"{s['latency_p50_ms'] or 0:>7.1f} {s['latency_p95_ms'] or 0:>7.1f} {s['tracks_with_speed']:>6} "
                f"{s['violations']:>5} "
                f"{run['rss_mb_max'] if i == 0 else '':>10}\n"
            )


def run_from_args(args: argparse.Namespace) -> int:
    import asyncio
    import platform
    import secrets

    from edge_server.ice import restrict_ice_host_addresses

    restrict_ice_host_addresses(["127.0.0.1"])
    token = secrets.token_urlsafe(16)
    data_dir = Path(tempfile.mkdtemp(prefix="airpatrol-bench-"))
    server = ServerProcess(args, data_dir, token)
    report: dict[str, Any] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs ({_cpu_model()})",
        "video": args.video,
        "publisher": "live encoding" if args.encode else "pre-encoded H.264 relayed (no publisher encoding)",
        "duration_s": args.duration,
        "detector": args.detector_factory,
        "return_video": args.return_video,
        "loadavg_before": _loadavg(),
        "runs": [],
    }
    source = args.video
    if not args.encode:
        from edge_client.tracks import synthetic_size

        size = synthetic_size(args.video)
        if size is not None:  # render the scene once as WebRTC-ready H.264 and relay it
            from edge_client.synthetic import write_video

            source = str(write_video(data_dir / f"synthetic_{size[0]}x{size[1]}.mp4", 10.0, 30, *size))
    args.source = source
    try:
        server.wait_ready()
        report["rss_mb_idle"] = round(server.rss_mb(), 1)
        for n in (n for n in args.streams if n > 0):  # --streams 0: no concurrency runs
            log.info("bench: %d concurrent stream(s) for %.0f s", n, args.duration)
            run = asyncio.run(_run_streams(server.url, token, n, args, server))
            run["loadavg_after"] = _loadavg()
            report["runs"].append(run)
            time.sleep(2.0)
        if args.long_run > 0:
            log.info("bench: long run, one stream for %.0f s", args.long_run)
            report["long_run"] = asyncio.run(_long_run(server.url, token, args, server))
        if args.api_load > 0:
            log.info("bench: %d API reads during a live stream", args.api_load)
            report["api_load"] = asyncio.run(_api_load(server.url, token, args, server))
        if args.churn > 0:
            log.info("bench: %d short streams in a row", args.churn)
            report["churn"] = asyncio.run(_churn(server.url, token, args, server))
    finally:
        server.stop()
    _print_report(report, args, sys.stdout)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def _print_report(report: dict[str, Any], args: argparse.Namespace, out: Any) -> None:
    out.write(
        f"machine: {report['machine']}, load average before: {report['loadavg_before']}\n"
        f"video: {args.video}, {args.duration:g} s per run, detector {args.detector_factory}, "
        f"process_max_width {args.process_max_width}, return video {args.return_video}, "
        f"publishers: {report['publisher']}\n"
    )
    out.write(f"server RSS idle: {report.get('rss_mb_idle')} MB\n")
    _print_table(report["runs"], out)
    for run in report["runs"]:
        stages = run["sessions"][0].get("stage_ms_mean") if run["sessions"] else None
        if stages:
            out.write(
                f"{run['streams']} stream(s): server used {run['server_cpu_cores']} cores, the publishers "
                f"{run['publishers_cpu_cores']}; load average after {run.get('loadavg_after')}; "
                f"stream 1 mean stage ms (per processed frame): {stages}; detector runs: "
                f"{run['sessions'][0].get('detection') or 'every frame'}\n"
            )
    if "long_run" in report:
        lr = report["long_run"]
        rss = lr["rss_mb"]
        out.write(
            f"long run {lr['seconds']:g} s of video, one stream: {lr['session']}\n"
            f"  RSS start {rss[0][1]} MB, max {max(r for _, r in rss)} MB, end {rss[-1][1]} MB "
            f"(samples every 15 s: {[r for _, r in rss]})\n"
        )
    if "api_load" in report:
        al = report["api_load"]
        out.write(
            f"API load: {al['requests']} x {al['path']} at concurrency {al['concurrency']} in {al['seconds']} s "
            f"({al['requests_per_s']}/s), statuses {al['statuses']}, latency ms {al['latency_ms']}; "
            f"client: {al['client']}, {al['client_cpu_s']} CPU s; the stream processed "
            f"{al['stream_fps_before']} fps before, {al['stream_fps_during']} fps during "
            f"(drop {al['fps_drop']}) and {al['stream_fps_after']} fps after; server CPU cores {al['server_cpu_cores_before']} before, "
            f"{al['server_cpu_cores_during']} during; windows: {al['window']}\n"
        )
    if "churn" in report:
        ch = report["churn"]
        out.write(
            f"churn: {ch['streams']} streams of {ch['seconds_each']:g} s in a row: after the first "
            f"{ch['after_first']}, after the last {ch['after_last']}, RSS growth {ch['rss_growth_mb']} MB\n"
        )


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edge_client.bench", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    for ours in ("edge_client", "edge_server"):
        logging.getLogger(ours).setLevel(logging.INFO)
    for noisy in ("aioice", "aiortc", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return run_from_args(args)


if __name__ == "__main__":
    sys.exit(main())
