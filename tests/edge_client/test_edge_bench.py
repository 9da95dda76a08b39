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
    # the synthetic scene's telemetry carries altitude and camera: the server measured speeds
    assert session["tracks"] >= 1 and session["tracks_with_speed"] >= 1, session
    assert run["rss_mb_max"] > 0 and run["server_cpu_cores"] > 0
    table = capsys.readouterr().out
    header = next(line.split() for line in table.splitlines() if line.split()[:1] == ["streams"])
    assert "speeds" in header and "p95" in header
    # the per-session leak check: three streams in a row, the server's resources after each
    churn = report["churn"]
    assert churn["streams"] == 3 and len(churn["rss_mb"]) == 3
    assert churn["after_last"]["threads"] > 0 and churn["after_last"]["open_files"] > 0
    assert "churn: 3 streams" in table
    # API reads during a live stream: all answered, the stream measured before and during them
    load = report["api_load"]
    assert load["statuses"] == {"200": 60} and load["errors"] == 0
    assert load["stream_fps_before"] and load["stream_fps_during"] is not None and load["stream_fps_after"]
    assert load["server_cpu_cores_before"] > 0 and load["client_cpu_s"] > 0
    assert load["latency_ms"]["p50"] <= load["latency_ms"]["p95"] <= load["latency_ms"]["max"]
    assert "API load: 60 x GET /api/v1/violations" in table
