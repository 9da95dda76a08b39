"""Memory admission (edge_server.streams.memory, issue 42): the kernel's MemAvailable read from a
real /proc/meminfo-format file; a new stream refused, with the figures, when it would leave less than
``min_free_memory_mb`` free; the check off without the settings or the file; over HTTP a refused
WHIP offer is a 503 at_capacity naming the memory, counted in the metrics."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from edge_helpers import TOKEN
from test_edge_ingest import _offer

from edge_server.streams.memory import available_mb, memory_refusal

pytestmark = pytest.mark.parallel_safe  # API, store, files and child processes: no stream (tests/conftest.py)

MEMINFO = """MemTotal:       24576000 kB
MemFree:         1000000 kB
MemAvailable:    {kb} kB
Buffers:          100000 kB
"""


def meminfo(tmp_path: Path, available_mb_: float) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(MEMINFO.format(kb=int(available_mb_ * 1024)))
    return path


def test_available_memory_is_the_kernels(tmp_path: Path) -> None:
    assert available_mb(meminfo(tmp_path, 3000)) == pytest.approx(3000, abs=0.01)
    assert available_mb(tmp_path / "none") is None
    (tmp_path / "odd").write_text("MemTotal: 1 kB\n")
    assert available_mb(tmp_path / "odd") is None
    assert available_mb() is None or available_mb() > 0  # this box's own, where it has one


@pytest.mark.parametrize(
    ("free", "stream", "keep", "refused"),
    [
        (3000, 400, 512, False),
        (912, 400, 512, False),  # exactly enough
        (911, 400, 512, True),
        (200, 400, 0, True),
        (3000, None, 512, False),  # the check off
        (10, 400, None, False),
    ],
)
def test_a_stream_that_would_leave_too_little_is_refused(tmp_path, free, stream, keep, refused) -> None:
    why = memory_refusal(stream, keep, meminfo(tmp_path, free))
    assert (why is not None) is refused
    if refused:
        assert f"{free:.0f} MB available" in why and "min_free_memory_mb" in why


def test_no_meminfo_no_check(tmp_path: Path) -> None:
    assert memory_refusal(400, 512, tmp_path / "missing") is None


@pytest.mark.skipif(
    available_mb() is None, reason="this box has no /proc/meminfo (not Linux): the check is off there"
)
async def test_a_refused_offer_over_http(server_factory) -> None:
    srv = server_factory(min_free_memory_mb=10.0**9)  # more than any box has
    pc, sdp = await _offer()
    try:
        async with httpx.AsyncClient(
            base_url=srv.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        ) as c:
            answer = await c.post("/whip", content=sdp, headers={"Content-Type": "application/sdp"})
            assert answer.status_code == 503 and answer.json()["error"] == "at_capacity"
            assert "not enough memory for another stream" in answer.json()["detail"]
            metrics = (await c.get("/metrics")).text
        assert "airpatrol_streams_refused_memory_total 1.0" in metrics
        assert srv.manager.active_count == 0
    finally:
        await pc.close()
