"""pipelines.procfs: a process's CPU time and memory from /proc, and a gone process's NaN and None."""

from __future__ import annotations

import math
import os
import select
import subprocess
import sys
import time

import pytest

from pipelines.procfs import cpu_seconds, memory_mb

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs Linux /proc")


def test_cpu_seconds_counts_this_process_s_work():
    before = cpu_seconds(os.getpid())
    spin_until = time.process_time() + 0.3
    while time.process_time() < spin_until:
        pass
    after = cpu_seconds(os.getpid())
    assert before > 0 and 0.2 <= after - before <= 2.0  # clock ticks are 10 ms


GROW = """
import mmap, sys
sys.stdin.readline()
m = mmap.mmap(-1, 200 * 2**20)
for offset in range(0, len(m), mmap.PAGESIZE):
    m[offset] = 1
print("touched", flush=True)
sys.stdin.readline()
"""


def test_memory_is_a_process_s_resident_set():
    with_pss = memory_mb(os.getpid())
    rss_only = memory_mb(os.getpid(), pss=False)
    assert set(with_pss) == {"rss_mb", "pss_mb"} and set(rss_only) == {"rss_mb"}
    # a share of the pages it shares is less than all of them; statm and smaps_rollup agree
    assert 0 < with_pss["pss_mb"] <= with_pss["rss_mb"]
    assert rss_only["rss_mb"] == pytest.approx(with_pss["rss_mb"], rel=0.1)
    # 200 MB touched, in a process that does nothing else: this one's resident set moves with
    # whatever its other threads and the garbage collector free meanwhile (in the whole suite it
    # once did not move at all around a 200 MB bytearray)
    child = subprocess.Popen(
        [sys.executable, "-c", GROW], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        before = memory_mb(child.pid, pss=False)["rss_mb"]
        child.stdin.write("go\n")
        child.stdin.flush()
        ready, _, _ = select.select([child.stdout], [], [], 60.0)
        assert ready and child.stdout.readline().strip() == "touched"
        after = memory_mb(child.pid)
        assert after["rss_mb"] >= before + 190 and after["pss_mb"] >= before + 190  # its own pages
    finally:
        child.kill()
        child.wait()


def test_a_gone_process_reads_nan_and_none():
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pid = int(done.stdout)  # exited and reaped: no /proc entry (unless the pid was reused at once)
    if os.path.exists(f"/proc/{pid}"):
        pytest.skip(f"pid {pid} was reused at once")
    assert math.isnan(cpu_seconds(pid))
    assert memory_mb(pid) is None and memory_mb(pid, pss=False) is None
