"""The text report of ``airpatrol serve-bench``: the machine, one table row per stream and run, and
the long run, API load and churn lines."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from edge_client.bench_fault import fault_line


def print_table(runs: list[dict[str, Any]], out: Any) -> None:
    """skip: frames the publisher left out to stay real time (its encoder fell behind); speeds:
    tracks the server measured a speed for (0: speeds disabled, e.g. no camera profile)."""
    out.write(
        f"{'streams':>7} {'stream':>6} {'skip':>5} {'recv':>6} {'proc':>6} {'drop%':>6} {'fps':>6} "
        f"{'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'max ms':>7} {'speeds':>6} {'viol':>5} {'RSS max MB':>10}\n"
    )
    for run in runs:
        for i, s in enumerate(run["sessions"]):
            out.write(
                f"{run['streams']:>7} {i + 1:>6} {s['frames_skipped_by_publisher']:>5} "
                f"{s['frames_received']:>6} {s['frames_processed']:>6} "
                f"{100 * s['dropped_ratio']:>6.1f} {s['processed_fps'] or 0:>6.1f} "
                f"{s['latency_p50_ms'] or 0:>7.1f} {s['latency_p95_ms'] or 0:>7.1f} "
                f"{s.get('latency_p99_ms') or 0:>7.1f} {s.get('latency_max_ms') or 0:>7.1f} {s['tracks_with_speed']:>6} "
                f"{s['violations']:>5} "
                f"{run['rss_mb_max'] if i == 0 else '':>10}\n"
            )


def steady_line(k: int, sess: dict[str, Any]) -> str:
    """A stream's second half (:func:`edge_client.bench_runs.steady_state`) and what it gave up."""
    st, effort = sess.get("steady"), sess.get("effort") or {}
    gave_up = (
        f"effort level {effort.get('level')} (highest {effort.get('highest_level')}, {effort.get('changes')} changes, "
        f"{effort.get('frames_skipped')} frames skipped on purpose)"
        if "level" in effort
        else "adapting off"
    )
    if not st:
        return f"  stream {k}: {gave_up}\n"
    return (
        f"  stream {k}, the last {st['seconds']:g} s: {st['processed_fps']} fps, latency p95 "
        f"{st['latency_p95_ms']} ms (last 5 s), {100 * st.get('lost_ratio', 0):.1f} % lost before the server, "
        f"{100 * st['dropped_ratio']:.1f} % dropped, "
        f"{100 * st['skipped_ratio']:.1f} % skipped; {gave_up}; now: {st['effort'] or 'full effort'}\n"
    )


def before_server_line(k: int, sess: dict[str, Any]) -> str:
    """What a stream's frames went through before the server's code saw them: frames lost on the
    way, the receive delay, and the latency from capture to result (the processing latency's start
    moved back to the capture)."""
    line = f"  stream {k}: {sess.get('frames_lost_before_server', 0)} of {sess['frames_sent']} frames sent never reached the server's code"
    d = sess.get("delays_ms")
    if d:
        line += (
            f"; receive delay p50 / p95 / max {d['receive_p50']} / {d['receive_p95']} / {d['receive_max']} ms, "
            f"capture to result {d['capture_to_result_p50']} / {d['capture_to_result_p95']} / "
            f"{d['capture_to_result_max']} ms"
        )
    return line + "\n"


def print_report(report: dict[str, Any], args: argparse.Namespace, out: Any) -> None:
    out.write(
        f"machine: {report['machine']}, load average before: {report['loadavg_before']}\n"
        f"video: {args.video}, {args.duration:g} s per run, detector {args.detector_factory}, "
        f"process_max_width {args.process_max_width}, return video {args.return_video}, "
        f"server CPUs {report.get('server_cpus') or 'all'}, "
        f"publishers: {report['publisher']}\n"
    )
    out.write(f"server RSS idle: {report.get('rss_mb_idle')} MB\n")
    print_table(report["runs"], out)
    for run in report["runs"]:
        stages = run["sessions"][0].get("stage_ms_mean") if run["sessions"] else None
        if stages:
            out.write(
                f"{run['streams']} stream(s): server used {run['server_cpu_cores']} cores, the publishers "
                f"{run['publishers_cpu_cores']}; load average after {run.get('loadavg_after')}; "
                f"stream 1 mean stage ms (per processed frame): {stages}; detector runs: "
                f"{run['sessions'][0].get('detection') or 'every frame'}\n"
            )
        if len(run.get("processes") or ()) > 1:
            out.write(
                f"  all processes {run['all_cpu_cores']} cores: "
                + "; ".join(
                    f"{p['role']} {p['pid']} {p['cores']} cores, RSS {p['rss_mb']} MB, PSS {p['pss_mb']} MB"
                    for p in run["processes"]
                )
                + "\n"
            )
        if det := run.get("detector"):
            out.write(
                f"  shared detector ({det['device']}, batches up to {det['max_batch']}): {det['frames']} frames in "
                f"{det['runs']} runs (mean batch {det['mean_batch']}, sizes {det['batch_sizes']}); a frame waited "
                f"{det['queue_ms_mean']} ms mean for it (p95 of its last frames {det['queue_ms_p95_recent']}), "
                f"a run took {det['run_ms_mean']} ms\n"
            )
        if run.get("fault"):
            out.write(fault_line(run["fault"]))
        if run.get("udp_receive_buffer_errors") is not None:
            out.write(
                f"  before the server: {run['udp_receive_buffer_errors']} UDP datagrams dropped at full "
                "receive buffers on this box during the run\n"
            )
        for k, sess in enumerate(run["sessions"], 1):
            out.write(steady_line(k, sess))
            out.write(before_server_line(k, sess))
            ev = sess.get("evidence") or {}
            if ev.get("packs"):
                out.write(
                    f"  stream {k}: {sess['violations']} violations, {ev['packs']} evidence packs, made "
                    f"{ev['after_clip_ms_p50']} / {ev['after_clip_ms_p95']} / {ev['after_clip_ms_max']} ms "
                    "(p50 / p95 / max) after their clips\n"
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


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"
