"""Frames lost before the server's code (media-time gaps) and the box's UDP receive-buffer overflows."""

from __future__ import annotations

import numpy as np
import pytest

from edge_server.receive_loss import BoxOverflow, ReceiveGaps, udp_receive_buffer_errors

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)


def _count(times) -> list[int]:
    gaps = ReceiveGaps()
    return [gaps.add(t) for t in times]


@pytest.mark.parametrize("fps", [30.0, 29.97, 25.0, 60.0])
@pytest.mark.parametrize("loss", [0.0, 0.1, 0.4, 0.7])
def test_frames_missing_between_received_ones_are_counted_whatever_the_loss(fps: float, loss: float) -> None:
    rng = np.random.default_rng(int(fps * 10 + loss * 100))
    sent = np.arange(900) / fps
    kept = np.sort(
        np.concatenate([sent[:12], rng.choice(sent[12:], round((900 - 12) * (1 - loss)), replace=False)])
    )
    counted = _count(kept)
    true_lost = 900 - len(kept) - round(sent[-1] * fps - kept[-1] * fps)  # not counting those after the last
    assert sum(counted) == true_lost


@pytest.mark.parametrize(
    ("times", "counted"),
    [
        ([k / 30 for k in range(10)] + [12 / 30], [0] * 10 + [2]),  # two frames missing
        ([k / 30 for k in range(10)] + [9 / 30 + 0.045], [0] * 11),  # a late frame, not a lost one
        (
            [k / 30 for k in range(10)] + [0.0, 1 / 30],
            [0] * 12,
        ),  # a restarted sender: its first frame counts nothing
        ([0.0, 0.5], [0, 0]),  # too few gaps to know the interval yet
    ],
)
def test_gap_cases(times, counted) -> None:
    assert _count(times) == counted


def test_a_sender_that_lowers_its_frame_rate_is_followed() -> None:
    """30 fps, then 15 fps: the interval follows once nine in ten of the gaps held are at the new
    rate; the frames the lower rate does not send are counted as missing only until then."""
    times = [k / 30 for k in range(90)] + [3.0 + k / 15 for k in range(1, 120)]
    counted = _count(times)
    assert 0 < sum(counted[90:]) <= 60 and sum(counted[90 + 60 :]) == 0


def test_the_box_overflow_is_read_at_most_once_a_second_and_held_for_seconds() -> None:
    readings = iter([100, 100, 130, 130, 131])
    calls = []

    def read() -> int:
        calls.append(1)
        return next(readings)

    box = BoxOverflow(read, hold_s=4.0, min_interval_s=1.0)
    assert box.overflowing(0.0) is False and box.total == 100  # the first reading: nothing to compare
    assert box.overflowing(0.5) is False and len(calls) == 1  # not read again within a second
    assert box.overflowing(1.0) is False  # 100 -> 100
    assert box.overflowing(2.0) is True and box.total == 130  # grew
    assert box.overflowing(5.9) is True  # 130 -> 130, within 4 s of the growth
    assert box.overflowing(6.5) is False
    assert box.overflowing(7.0) is True  # 130 -> 131
    assert BoxOverflow(lambda: None).overflowing(0.0) is False  # not Linux: never


def test_the_box_udp_receive_buffer_overflows_are_read_from_proc(tmp_path) -> None:
    snmp = tmp_path / "snmp"
    snmp.write_text(
        "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
        "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors\n"
        "Udp: 942013 1726 77139 1020821 77139 0 0\n"
        "UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors\n"
        "UdpLite: 0 0 0 0 5 0 0\n"
    )
    assert udp_receive_buffer_errors(snmp) == 77139
    assert udp_receive_buffer_errors(tmp_path / "missing") is None
    snmp.write_text("Udp: InDatagrams\nUdp: 1\n")  # a kernel without the counter
    assert udp_receive_buffer_errors(snmp) is None
