"""The bare GPU box's kit (eval/examples/gpu_kit.sh, gpu_streams.sh, gpu_streams.py, bare_box.py): the
streams benchmark runs where only a bare box's packages and the kit's are installed, and says what is
missing where the kit's are not. Run here on the CPU (CI has no GPU), in a virtual environment whose
packages are linked from this one (bare_box.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from shared_material import REPO

EXAMPLES = REPO / "eval" / "examples"
sys.path.insert(0, str(EXAMPLES))
import bare_box  # noqa: E402 - an example script, not a package

WEIGHTS_PT = REPO / "weights" / "airpatrol_vehicles_n.pt"
pytestmark = pytest.mark.slow  # the bare-box streams bench: ~25 s


def kit_wheels() -> list[str]:
    """GPU_WHEELS of gpu_kit.sh: what the kit carries."""
    text = (EXAMPLES / "gpu_kit.sh").read_text()
    match = re.search(r'^GPU_WHEELS="([^"]+)"', text, re.M)
    assert match, "gpu_kit.sh names its wheels in GPU_WHEELS"
    return match.group(1).split()


@pytest.fixture(scope="module")
def road_torch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The road U-Net through torch on the CPU (a bare box has no OpenVINO; on CUDA torch is the default)."""
    path = tmp_path_factory.mktemp("cfg") / "road_torch.yaml"
    path.write_text("road:\n  backend: torch\n")
    return path


def run_kit(
    python: Path, flight: Path, out: Path, road_torch: Path, kit: Path
) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHON": str(python),
        "KIT": str(kit),
        "DEVICE": "cpu",
        "COUNTS": "1 2",
        "EVERY": "3",  # the keyframes' run only: the detector-on-every-frame run is the same loop (CI time)
        "PROC_COUNTS": "1 2",
        "ENGINE_THREADS": "1",
        "MAX_FRAMES": "12",
        "BENCH_ARGS": f"--detector {WEIGHTS_PT} --config {road_torch}",
    }
    env.pop("PYTHONPATH", None)
    script = EXAMPLES / "gpu_streams.sh"
    args = ["bash", str(script), str(out), str(flight / "video.mp4"), str(flight / "video.SRT")]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)


def test_kit_names_installed_distributions():
    """gpu_kit.sh pins each wheel to the version installed here: each must be a distribution here, and
    none is one a bare box already has."""
    import importlib.metadata as md

    box = bare_box.box_packages()
    for name in kit_wheels():
        assert md.version(name)
        assert bare_box.normalise(name) not in box, f"{name} is on the bare box already"


def test_bare_box_lacks_the_projects_packages(tmp_path):
    python = tmp_path / "bare" / "bin" / "python"
    bare_box.make(tmp_path / "bare", set())
    probe = (
        "import importlib.util as u; print([m for m in ('torch', 'cv2', 'numpy', 'scipy', 'av', 'openvino', "
    )
    probe += "'ultralytics', 'supervision', 'pydantic', 'fastapi') if u.find_spec(m) is None])"
    missing = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert eval(missing) == ["av", "openvino", "ultralytics", "supervision", "pydantic", "fastapi"]  # noqa: S307


def test_streams_bench_runs_on_a_bare_box_with_the_kit(tmp_path, small_flight_dir, road_torch):
    """The kit's packages (as if installed from its wheels) beside a bare box's: keyframes on threads
    and a process per stream around the detector service run every count, frames read by OpenCV, no
    PyAV and no OpenVINO there; EVERY chooses the threads' runs."""
    bare_box.make(tmp_path / "bare", set(kit_wheels()))
    out = tmp_path / "out"
    done = run_kit(
        tmp_path / "bare" / "bin" / "python", small_flight_dir, out, road_torch, tmp_path / "no-kit"
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "== detector every 3 frame(s)" in done.stdout and "streams kept at 30 fps" in done.stdout
    assert "a process per stream around the detector service" in done.stdout
    assert not (out / "streams_every1.json").exists()
    for name, mode in (("every3", "threads"), ("processes", "processes")):
        report = json.loads((out / f"streams_{name}.json").read_text())
        assert report["decoder"].startswith("OpenCV") and report["mode"] == mode
        assert report["frames"] == 12 and report["size"] == [640, 360]
        assert [r["streams"] for r in report["runs"]] == [1, 2]
        assert all(min(r["fps"]) > 0 for r in report["runs"])


def test_bare_box_without_the_kit_says_what_is_missing(tmp_path, small_flight_dir, road_torch):
    bare_box.make(tmp_path / "bare", set())
    done = run_kit(
        tmp_path / "bare" / "bin" / "python",
        small_flight_dir,
        tmp_path / "out",
        road_torch,
        tmp_path / "no-kit",
    )
    assert done.returncode == 2
    assert "the project's packages are missing and there is no" in done.stderr
    assert "Traceback" not in done.stderr
