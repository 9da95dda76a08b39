"""pipelines.threads: one cap on every thread pool of a process (OpenCV, torch, the BLAS under numpy),
and the engine processes and the detector service applying ``engine_threads`` through it. Each case
runs in a process of its own: a cap is for the life of a process, and this one's tests need their
cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pipelines.threads import limit_threads

PROBE = """
import json, sys
import cv2, numpy, torch
from threadpoolctl import threadpool_info
{setup}
blas = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
print(json.dumps({{"opencv": cv2.getNumThreads(), "torch": torch.get_num_threads(), "blas": blas}}))
"""


# Set by what ran before in this process (a local Ray sets OMP_NUM_THREADS in its driver's environment,
# which the probe would inherit): each probe starts with the libraries left alone.
POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _probe(setup: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in POOL_VARIABLES}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(setup=setup)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("threads", [2])  # 1: the engine's and the service's cases below
def test_every_pool_is_capped(threads: int) -> None:
    seen = _probe(
        f"from pipelines.threads import limit_threads; print(limit_threads({threads}), file=sys.stderr)"
    )
    assert seen["opencv"] == threads and seen["torch"] == threads
    assert seen["blas"] and all(n == threads for n in seen["blas"])


def test_uncapped_pools_are_the_libraries_own() -> None:
    """What the cap changes: left alone, torch and OpenCV take several threads (the tests around are
    no tautology where the box has more than one core)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: a cap of one changes nothing to see")
    seen = _probe("")
    if seen["torch"] < 2:  # torch counts physical cores: two hyperthreads of one core give it one
        pytest.skip(f"torch takes one thread here by itself ({seen})")
    assert seen["opencv"] >= 2


@pytest.mark.parametrize(
    ("setup", "what"),
    [
        (
            "from edge_server.engines.child import EngineSpec, _setup\n"
            "from pipelines.config import PipelineConfig\n"
            "_setup(EngineSpec(PipelineConfig(), threads=1))",
            "an engine process",
        ),
        (
            "from edge_server.engines.detector_service import ServiceSpec, _setup\n"
            "from pipelines.config import DetectorConfig\n"
            "_setup(ServiceSpec(DetectorConfig(), None, threads=1))",
            "the detector service",
        ),
    ],
)
def test_engine_threads_caps_torch_and_blas_too(setup: str, what: str) -> None:
    seen = _probe(setup)
    assert seen["opencv"] == 1 and seen["torch"] == 1 and all(n == 1 for n in seen["blas"]), what


@pytest.mark.parametrize("bad", [0, -1])
def test_a_cap_below_one_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="threads must be >= 1"):
        limit_threads(bad)


BATCH_PROBE = """
import json
import cv2, torch
from threadpoolctl import threadpool_info
from batch.jobs import configure_worker
from pipelines.config import PipelineConfig
seen = {}
for threads, weights in ((1, "weights/detector_openvino_model"), (2, "weights/detector.pt")):
    configure_worker(PipelineConfig.from_dict({"detector": {"threads": threads, "weights": weights}}))
    blas = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
    seen[weights] = {"opencv": cv2.getNumThreads(), "torch": torch.get_num_threads(), "blas": blas}
print(json.dumps(seen))
"""


def test_a_batch_worker_caps_every_pool_torch_only_where_it_runs_the_detector() -> None:
    """batch.jobs.configure_worker (``detector.threads`` of a batch task) through the same cap; torch
    keeps them where it runs the detector (PyTorch weights, ``device: auto`` on a CPU), and one where
    OpenVINO does (its idle OpenMP threads spun against OpenVINO's under Ray). One process: a worker
    set up for a flight of each, one thread for the first (below the libraries' own on two cores or
    more), two for the second (above the first's)."""
    env = {k: v for k, v in os.environ.items() if k not in POOL_VARIABLES}
    out = subprocess.run(
        [sys.executable, "-c", BATCH_PROBE], capture_output=True, text=True, timeout=120, check=True, env=env
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    for weights, threads, torch_threads in (
        ("weights/detector_openvino_model", 1, 1),
        ("weights/detector.pt", 2, 2),
    ):
        pools = seen[weights]
        assert pools["opencv"] == threads and pools["torch"] == torch_threads, (weights, pools)
        assert pools["blas"] and all(n == threads for n in pools["blas"]), (weights, pools)
