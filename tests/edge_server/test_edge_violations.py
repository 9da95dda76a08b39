"""A stream's violation recorder (edge_server/violations.py): the stored row, its snapshot and its
clip, encoded as the settings say, with a real store and a real clip writer."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import re
from concurrent.futures import ThreadPoolExecutor

import av
import numpy as np
import pytest

from edge_server.events import EventBus
from edge_server.metrics import Metrics
from edge_server.settings import ServerSettings
from edge_server.store import Store
from edge_server.violations import ViolationRecorder
from pipelines.types import MeasuringBase, PitchCheckResult, ScaleCheckResult, Violation

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)


@pytest.mark.parametrize(
    ("preset", "crf", "motion_search"),
    [
        ("superfast", 27, "me=dia"),  # the default
        ("veryfast", 26, "me=hex"),  # the setting before clip_preset existed
        ("ultrafast", 30, "me=dia"),
    ],
)
def test_violation_clip_is_encoded_with_the_configured_preset(tmp_path, preset, crf, motion_search) -> None:
    settings = ServerSettings(data_dir=tmp_path, clip_preset=preset, clip_crf=crf, clip_fps=10.0)
    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    store.create_session("s1", "test")
    with ThreadPoolExecutor(1) as clips:
        recorder = ViolationRecorder(
            "s1",
            settings=settings,
            store=store,
            bus=EventBus(),
            metrics=Metrics(),
            clip_executor=clips,
            snapshot_margin_px=20,
        )
        rng = np.random.default_rng(0)
        for k in range(136):  # 4.5 s at 30 fps; the ring keeps 10 a second
            t = k / 30
            if recorder.frame_due(t):
                image = rng.integers(0, 255, (360, 640, 3), dtype=np.uint8)
                recorder.add_frame(t, image)
        v = Violation(
            track_id=7,
            zone="global",
            speed_limit_kmh=50.0,
            peak_speed_kmh=71.0,
            mean_speed_kmh=68.0,
            sigma_kmh=1.0,
            start_frame=60,
            end_frame=66,
            start_time_s=2.0,
            end_time_s=2.2,
            bbox_xyxy=(100.0, 100.0, 160.0, 140.0),
        )
        row = recorder.record(v, np.zeros((360, 640, 3), np.uint8), None, dt.datetime.now(dt.timezone.utc))
        recorder.flush(None)
        assert recorder.wait_for_clips(60) == 0
    stored = store.get_violation(row.id)
    assert stored is not None and stored.clip_path and stored.snapshot_path
    clip = settings.resolved_media_dir / stored.clip_path
    with av.open(str(clip)) as container:
        frames = list(container.decode(video=0))
    # clip_pre_s 3 before the start (the ring starts at 0) to clip_post_s 2 after the end, 10 a second
    assert len(frames) == 43 and (frames[0].width, frames[0].height) == (640, 360)
    options = re.search(rb"options: ([^\x00]*)", clip.read_bytes())
    assert options is not None
    assert f"crf={crf:.1f}".encode() in options.group(1) and motion_search.encode() in options.group(1)
    store.close()


@pytest.mark.parametrize(
    ("ticket", "expected"),
    [
        (
            {"ticket_speed_kmh": 61.04, "ticket_sigma_kmh": 0.83, "tolerance_kmh": 3.0, "confidence_k": 1.645,
             "base": MeasuringBase(2.0, 3.4, 61, 103, 23.7, 42), "status": "enforceable"},
            {"ticket_speed_kmh": 61.04, "ticket_sigma_kmh": 0.83, "tolerance_kmh": 3.0, "confidence_k": 1.645,
             "status": "enforceable", "status_reason": ""},
        ),
        (
            {"tolerance_kmh": 3.0, "confidence_k": 1.645, "status": "not_enforceable",
             "status_reason": "no measuring base of 1.0 s and 15 m"},
            {"ticket_speed_kmh": None, "ticket_sigma_kmh": None, "tolerance_kmh": 3.0, "confidence_k": 1.645,
             "status": "not_enforceable", "status_reason": "no measuring base of 1.0 s and 15 m"},
        ),
    ],
)  # fmt: skip
async def test_the_live_violation_event_carries_the_ticket(tmp_path, ticket: dict, expected: dict) -> None:
    """The ``violation`` event a stream's recorder publishes is the stored violation as the API shows
    it: the ticket speed, its sigma, the status and its reason, with the peak as information."""
    settings = ServerSettings(data_dir=tmp_path)
    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    store.create_session("s1", "test")
    bus = EventBus(asyncio.get_running_loop())
    sub = bus.subscribe("s1")
    with ThreadPoolExecutor(1) as clips:
        recorder = ViolationRecorder(
            "s1", settings=settings, store=store, bus=bus, metrics=Metrics(), clip_executor=clips,
            snapshot_margin_px=20,
        )  # fmt: skip
        v = Violation(7, "global", 50.0, 66.5, 63.0, 2.0, 60, 110, 2.0, 3.6, **ticket)
        row = await asyncio.to_thread(recorder.record, v, None, None, dt.datetime.now(dt.timezone.utc))
    event = await asyncio.wait_for(sub.get(), 5)
    assert (event["type"], event["session_id"], event["violation"]["id"]) == ("violation", "s1", row.id)
    shown = event["violation"]
    assert {k: shown[k] for k in expected} == expected
    assert shown["peak_speed_kmh"] == 66.5
    assert shown["base"] == (None if "base" not in ticket else ticket["base"].to_dict())
    json.dumps(event)  # as the WebSocket sends it
    store.close()


@pytest.mark.parametrize(
    ("check", "reason"),
    [
        (
            ScaleCheckResult("suspect", 1.12, 0.01, 40, "the cars measure 1.12 times their usual size"),
            "held for review: scale check suspect: 1.120 +- 0.010 from 40 vehicles",
        ),
        (
            PitchCheckResult(
                "suspect", 2.63, 0.45, 17, "the traffic's speeds say the pitch used is +2.6 ..."
            ),
            "held for review: pitch check suspect: the pitch used is +2.63 +- 0.45 deg off the traffic's",
        ),
    ],
    ids=["scale check", "pitch check"],
)
def test_a_session_found_suspect_holds_the_tickets_it_stored_before(tmp_path, check, reason) -> None:
    """The scale (or the pitch) check turns suspect after two violations were stored: the enforceable
    one is held for review (not enforceable, the check in its reason and its column), announced as
    violation.updated; the other keeps its reason; another session's ticket is untouched."""
    settings = ServerSettings(data_dir=tmp_path)
    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    loop = asyncio.new_event_loop()
    bus = EventBus()
    bus.bind(loop)
    sub = bus.subscribe("s1")
    recorders = {}
    with ThreadPoolExecutor(1) as clips:
        for sid in ("s1", "s2"):
            store.create_session(sid, "test")
            recorders[sid] = ViolationRecorder(
                sid, settings=settings, store=store, bus=bus, metrics=Metrics(), clip_executor=clips,
                snapshot_margin_px=20,
            )  # fmt: skip
        now = dt.datetime.now(dt.timezone.utc)
        ticket = Violation(7, "global", 50.0, 71.0, 68.0, 1.0, 60, 66, 2.0, 2.2, ticket_speed_kmh=70.0)
        enforceable = dataclasses.replace(ticket, status="enforceable")
        rows = [
            recorders["s1"].record(enforceable, None, None, now),
            recorders["s1"].record(dataclasses.replace(ticket, status_reason="no base"), None, None, now),
            recorders["s2"].record(enforceable, None, None, now),
        ]
        assert recorders["s1"].hold_recorded(check) == [rows[0].id]
    loop.run_until_complete(asyncio.sleep(0))
    events = [sub.queue.get_nowait() for _ in range(sub.queue.qsize())]
    loop.close()
    held = store.get_violation(rows[0].id)
    assert held.ticket_status == "not_enforceable" and held.status_reason.startswith(reason)
    stored = held.pitch_check if isinstance(check, PitchCheckResult) else held.scale_check
    assert stored == check.to_dict()
    if isinstance(check, ScaleCheckResult):
        assert held.scale_check_status == "suspect" and held.pitch_check is None
    else:
        assert held.scale_check is None
    assert held.status_reason.endswith("(found after it closed)")
    assert store.get_violation(rows[1].id).status_reason == "no base"
    assert store.get_violation(rows[2].id).ticket_status == "enforceable"
    assert [e["type"] for e in events][-1] == "violation.updated"
    assert (
        events[-1]["violation"]["id"] == rows[0].id and events[-1]["violation"]["status"] == "not_enforceable"
    )
    store.close()


def test_the_worker_holds_the_stored_tickets_each_time_a_check_turns_to_a_held_status() -> None:
    """StreamWorker._check_turned, frame after frame: a check that turns to a status the site holds
    (from none or another status) holds what the session stored; one that stays there or leaves it
    does nothing; the scale and the pitch check alike."""
    from types import SimpleNamespace

    from edge_server.worker import StreamWorker

    held: list = []
    worker = SimpleNamespace(outputs=SimpleNamespace(violations=SimpleNamespace(hold_recorded=held.append)))
    for ok, suspect in (
        (ScaleCheckResult("ok", 1.0, 0.01, 30), ScaleCheckResult("suspect", 1.12, 0.01, 40)),
        (PitchCheckResult("ok", 0.1, 0.3, 20), PitchCheckResult("suspect", 2.6, 0.4, 17)),
    ):
        held.clear()
        for before, now in ((None, ok), (ok, suspect), (suspect, suspect), (suspect, ok), (ok, suspect)):
            StreamWorker._check_turned(worker, before, now, ("suspect",))
        assert held == [suspect, suspect]
        StreamWorker._check_turned(worker, None, suspect, ())  # a site that holds nothing
        assert held == [suspect, suspect]
