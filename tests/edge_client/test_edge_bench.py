"""``airpatrol serve-bench`` end to end: a real server subprocess, a real publisher, its report."""

from __future__ import annotations

import json

import pytest

from airpatrol.cli import main

pytestmark = pytest.mark.timeout(180)


def test_serve_bench_reports_latency_drops_and_speeds(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    rc = main(["serve-bench", "--streams", "1", "--duration", "4", "--video", "synthetic:640x360",
               "--churn", "3", "--churn-seconds", "1", "--api-load", "60", "--api-concurrency", "10",
               "--api-warmup", "1", "--api-baseline", "2", "--json", str(out)])  # fmt: skip
    assert rc == 0
    report = json.loads(out.read_text())
    (run,) = report["runs"]
    (session,) = run["sessions"]
    assert session["frames_received"] >= 90 and session["frames_processed"] > 0
    assert session["frames_processed"] + session["frames_dropped"] <= session["frames_received"]
    assert 0 < session["latency_p50_ms"] <= session["latency_p95_ms"]
    assert session["latency_p95_ms"] <= session["latency_p99_ms"] <= session["latency_max_ms"]  # the tail
    # the synthetic scene's telemetry carries altitude and camera: the server measured speeds
    assert session["tracks"] >= 1 and session["tracks_with_speed"] >= 1, session
    assert run["rss_mb_max"] > 0 and run["server_cpu_cores"] > 0
    # before the server: frames that never reached it, the receive delay from the publisher's Sender
    # Reports (one clock on one box), the capture-to-result latency, the box's UDP buffer overflows
    assert 0 <= session["frames_lost_before_server"] <= session["frames_sent"]
    delays = session["delays_ms"]
    assert delays["frames"] >= 50  # every received frame after the first Sender Report (0.5-1.5 s)
    assert -50 < delays["receive_p50"] <= delays["receive_max"] < 5000, delays
    assert delays["capture_to_result_p50"] <= delays["capture_to_result_max"] < 10000, delays
    assert isinstance(run["udp_receive_buffer_errors"], int) and run["udp_receive_buffer_errors"] >= 0
    assert run["detector"] is None  # the synthetic scene's detector: no shared network
    table = capsys.readouterr().out
    header = next(line.split() for line in table.splitlines() if line.split()[:1] == ["streams"])
    assert "speeds" in header and "p95" in header and "max" in header
    # the per-session leak check: three streams in a row, the server's resources after each
    churn = report["churn"]
    assert churn["streams"] == 3 and len(churn["rss_mb"]) == 3
    assert churn["after_last"]["threads"] > 0 and churn["after_last"]["open_files"] > 0
    assert "churn: 3 streams" in table
    assert "frames sent never reached the server's code; receive delay p50" in table
    # API reads during a live stream: all answered, the stream measured before and during them
    load = report["api_load"]
    assert load["statuses"] == {"200": 60} and load["errors"] == 0
    assert load["stream_fps_before"] and load["stream_fps_during"] is not None and load["stream_fps_after"]
    assert load["server_cpu_cores_before"] > 0 and load["client_cpu_s"] > 0
    assert load["latency_ms"]["p50"] <= load["latency_ms"]["p95"] <= load["latency_ms"]["max"]
    assert "API load: 60 x GET /api/v1/violations" in table


def test_a_fault_is_reported_from_the_streams_stats() -> None:
    """--fault's report: the faulted stream's end from its session.ended event, every other
    stream's processed fps in the windows before and after the fault, from its stats events."""
    from edge_client.bench_fault import WINDOW_S, Fault, fault_line

    fault = Fault("kill", 10.0, 3)
    t0 = 1000.0
    for k, fps_before, fps_after in ((1, 6.0, 9.0), (2, 5.0, 0.0)):
        record = fault.on_event(k)
        for i in range(int(2 * WINDOW_S * 2) + 9):  # stats every 0.5 s, 8 s before to 10 s after
            t = t0 - WINDOW_S + 0.5 * i
            n = fps_before * (t - t0 + WINDOW_S) if t <= t0 else fps_before * WINDOW_S + fps_after * (t - t0)
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr("time.monotonic", lambda t=t: t)
                record({"type": "stats", "frames_processed": round(n), "engine_pid": None})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("time.monotonic", lambda: t0 + 0.3)
        fault.on_event(0)({"type": "stats", "frames_processed": 5, "engine_pid": 4711})
        fault.on_event(0)({"type": "session.ended"})
    fault.fired_at, fault.fired_wall = t0, 1.7e9
    report = fault.report({"status": "failed", "end_reason": "engine process 4711 was killed by SIGKILL",
                           "violations_count": 2})  # fmt: skip
    assert report["engine_pid"] == 4711 and report["ended_after_s"] == 0.3 and report["violations_kept"] == 2
    (one, two) = report["others"]
    assert one["fps_before"] == pytest.approx(6.0, abs=0.1) and one["fps_after"] == pytest.approx(
        9.0, abs=0.1
    )
    assert one["ratio"] == pytest.approx(1.5, abs=0.03)
    assert (
        two["fps_before"] == pytest.approx(5.0, abs=0.1) and two["fps_after"] == 0.0 and two["ratio"] == 0.0
    )
    line = fault_line(report)
    assert "kill of stream 1's engine 4711" in line and "0.3 s later, failed" in line
    assert "stream 2 6.0 -> 9.0 fps (1.5x)" in line


def test_the_steady_state_is_read_from_the_second_half_of_the_stats_events() -> None:
    """A stream that drops frames until the server settles, then skips every 2nd frame: its second
    half's fps, latency, drop and skip shares and the rung it ended on; the report's line."""
    from edge_client.bench_report import steady_line
    from edge_client.bench_runs import steady_state

    events, times = [], []
    received = processed = dropped = skipped = 0
    for k in range(41):  # 20 s of stats every 0.5 s
        t = 100.0 + 0.5 * k
        received += 15
        if t < 110:
            processed, dropped = processed + 5, dropped + 10
        else:
            processed, skipped = processed + 7, skipped + 8
        effort = (
            {"level": 2, "text": "level 2: every 2nd frame"} if t >= 110 else {"level": 1, "text": "level 1"}
        )
        events.append({"type": "stats", "frames_received": received, "frames_processed": processed,
                       "frames_dropped": dropped, "frames_skipped": skipped, "latency_p95_recent_ms": 120.0,
                       "effort": effort})  # fmt: skip
        times.append(t)
        events.append({"type": "violation.created"})
        times.append(t + 0.1)
    st = steady_state(events, times)
    assert st is not None and st["seconds"] == 10.0
    assert st["processed_fps"] == 14.0 and st["latency_p95_ms"] == 120.0
    assert st["dropped_ratio"] == 0.0 and st["skipped_ratio"] == pytest.approx(8 / 15, abs=0.01)
    assert st["effort_level"] == 2
    line = steady_line(
        1, {"steady": st, "effort": {"level": 2, "highest_level": 2, "changes": 2, "frames_skipped": 160}}
    )
    assert (
        "14.0 fps, latency p95 120.0 ms" in line
        and "0.0 % dropped" in line
        and "effort level 2 (highest 2" in line
    )
    assert steady_state(events[:1], times[:1]) is None
    assert "adapting off" in steady_line(1, {"steady": None, "effort": {}})


def _healthz_detector(calls, batches, sizes, queue_s, run_s, p95=3.0) -> dict:
    return {"device": "cuda:0", "max_batch": 8, "calls": calls, "batches": batches, "batch_sizes": sizes,
            "queue_s_total": queue_s, "run_s_total": run_s, "queue_ms_p95": p95}  # fmt: skip


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (None, None, None),  # no shared detector (injected detectors, engine processes)
        (
            None,  # loaded by the run's first stream
            _healthz_detector(10, 6, {"1": 4, "3": 2}, 0.05, 0.12),
            {"frames": 10, "runs": 6, "mean_batch": 1.67, "batch_sizes": {"1": 4, "3": 2},
             "queue_ms_mean": 5.0, "run_ms_mean": 20.0},
        ),
        (
            _healthz_detector(10, 6, {"1": 4, "3": 2}, 0.05, 0.12),  # a run before on the same server
            _healthz_detector(30, 10, {"1": 4, "3": 2, "4": 2, "6": 2}, 0.45, 0.32),
            {"frames": 20, "runs": 4, "mean_batch": 5.0, "batch_sizes": {"4": 2, "6": 2},
             "queue_ms_mean": 20.0, "run_ms_mean": 50.0},
        ),
    ],
)  # fmt: skip
def test_the_shared_detectors_share_of_a_run_is_what_changed_during_it(before, after, expected) -> None:
    import io
    from argparse import Namespace

    from edge_client.bench_report import print_report
    from edge_client.bench_runs import detector_use

    use = detector_use(before, after)
    if expected is None:
        assert use is None
        return
    assert {k: use[k] for k in expected} == expected
    assert use["device"] == "cuda:0" and use["max_batch"] == 8 and use["queue_ms_p95_recent"] == 3.0
    out = io.StringIO()
    args = Namespace(
        video="v.mp4", duration=20.0, detector_factory="none", process_max_width=None, return_video=False
    )
    report = {
        "machine": "m",
        "loadavg_before": "0",
        "publisher": "p",
        "runs": [{"streams": 4, "sessions": [], "detector": use}],
    }
    print_report(report, args, out)
    assert (
        f"shared detector (cuda:0, batches up to 8): {expected['frames']} frames in {expected['runs']} runs"
        in out.getvalue()
    )
