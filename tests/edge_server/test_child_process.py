"""Ports for listeners started a moment later (nginx, Mosquitto, the test servers)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from edge_server import child_process
from edge_server.child_process import alive, ephemeral_range, free_port, group_alive

pytestmark = pytest.mark.parallel_safe  # API, store, files and child processes: no stream (tests/conftest.py)


def _bind(port: int) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_free_ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice() -> None:
    lo, hi = ephemeral_range()
    assert 1024 < lo < hi <= 65535
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(child_process.LOWEST_PORT <= p < lo for p in ports)  # outgoing connections draw from lo-hi
    for p in ports:
        _bind(p)  # free


@pytest.mark.parametrize(
    "content, expected",
    [("32768\t60999\n", (32768, 60999)), ("1024 65000", (1024, 65000)), ("garbage", (32768, 60999))],
)
def test_the_ephemeral_range_is_read_from_the_kernel(tmp_path: Path, monkeypatch, content, expected) -> None:
    f = tmp_path / "ip_local_port_range"
    f.write_text(content)
    monkeypatch.setattr(child_process, "EPHEMERAL_RANGE", f)
    assert ephemeral_range() == expected


def test_no_room_below_the_range_falls_back_to_any_free_port(tmp_path: Path, monkeypatch) -> None:
    f = tmp_path / "ip_local_port_range"
    f.write_text("10500 60999")
    monkeypatch.setattr(child_process, "EPHEMERAL_RANGE", f)
    ports = {free_port() for _ in range(5)}
    assert len(ports) == 5
    for p in ports:
        _bind(p)


def test_group_alive_waits_for_every_process_of_the_group() -> None:
    """A leftover nginx is its master and its workers, one process group: the workers hold the
    listening socket too, so a stop waits for the whole group, not only the pid it read."""
    proc = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while len(_group_pids(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        (worker,) = (p for p in _group_pids(proc.pid) if p != proc.pid)
        os.kill(proc.pid, signal.SIGKILL)  # the master alone dies: its worker still holds on
        proc.wait(5)
        assert not alive(proc.pid) and alive(worker) and group_alive(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not group_alive(proc.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _group_pids(pgid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[2] == str(pgid) and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out
