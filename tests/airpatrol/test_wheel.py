"""The wheel carries the models and the guides: built from this tree, installed into a fresh virtual
environment with no source tree on its path (its dependencies reused from the project's environment,
not reinstalled), it finds the shipped models and guides, `airpatrol doctor` passes, `airpatrol demo`
runs and `airpatrol process` runs on the demo's recorded flight (video + .SRT)."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from shared_material import REPO

# scripts/test.sh's parallel pass hands out whole files (--dist loadfile): one worker builds the wheel
# once for both tests (two `pip wheel` runs in one source tree collide in build/: "File exists")
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

SHIPPED = [
    "airpatrol_weights/airpatrol_vehicles_n_int8_openvino_model/airpatrol_vehicles_n.xml",
    "airpatrol_weights/airpatrol_vehicles_n_int8_openvino_model/airpatrol_vehicles_n.bin",
    "airpatrol_weights/airpatrol_vehicles_n_int8_openvino_model/metadata.yaml",
    "airpatrol_weights/airpatrol_road_unet_mnv3s.pt",
    "airpatrol_weights/airpatrol_vehicles_n.md",
    "airpatrol_docs/api.md",
    "airpatrol_docs/dji-apps.md",
    "airpatrol_docs/telemetry-datachannel.md",
    "airpatrol_docs/RESULTS.md",
    "airpatrol_docs/lab/README.md",
    "edge_server/alembic.ini",
    "edge_server/console_assets/index.html",
    "edge_server/console_assets/console.css",
    "edge_server/console_assets/js/main.js",
    "edge_server/migrations/versions/0002_rtmp_keys.py",
]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(REPO),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (path,) = dist.glob("airpatrol-*.whl")
    return path


def test_the_wheel_holds_the_models_and_the_migrations(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [name for name in SHIPPED if name not in names]
    assert not missing, missing
    assert not any(name.startswith(("tests/", "runs/", "weights/")) for name in names)
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]  # no compiled file


def test_installed_wheel_runs_the_demo_without_the_source_tree(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    # no pip of its own (ensurepip takes seconds): the project's pip, on its path below, installs
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # the project's installed dependencies (pip among them), after the venv's own packages (a plain
    # path: the project's editable-install hook there is not run, so `pipelines` can only come from
    # the wheel)
    Path(purelib, "project_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    install = subprocess.run(
        [str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]

    where = subprocess.run(
        [
            str(py),
            "-c",
            "import pipelines, pipelines.config as c; from edge_server import guides;"
            "print(pipelines.__file__); print(c.DEFAULT_WEIGHTS_DIR); print(guides.guides_dir());"
            "assert '<h1' in guides.render('dji-apps');"
            "assert 'href=\"/guide/lab/' in guides.render('RESULTS');"
            "assert '<h1' in guides.render('README', sub=guides.LAB)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout.split()
    assert all(path.startswith(purelib) for path in where), where
    assert where[1].endswith("airpatrol_weights") and where[2].endswith("airpatrol_docs")

    env = {
        **os.environ,
        "AIRPATROL_DATA_DIR": str(tmp_path / "data"),
        "AIRPATROL_RTMP_PORT": "null",
        "AIRPATROL_MQTT_PORT": "null",
    }
    env.pop("AIRPATROL_SETTINGS_FILE", None)
    doctor = subprocess.run(
        [str(venv / "bin" / "airpatrol"), "doctor", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr[-2000:]
    models = next(c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "models")
    assert models["status"] == "ok" and f"{purelib}/airpatrol_weights" in models["detail"], models

    out = tmp_path / "demo"
    demo = subprocess.run(
        [str(venv / "bin" / "airpatrol"), "demo", "-q", "--duration", "2", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=400,
    )
    assert demo.returncode == 0, demo.stderr[-3000:]
    summary = (out / "result" / "summary.json").read_text()
    assert f"{purelib}/airpatrol_weights/" in summary  # the models the run used: the wheel's
    assert str(REPO) not in summary
    score = json.loads((out / "result" / "score.json").read_text())
    assert score["tracking"]["MOTA"] > 0.25, score["tracking"]

    # the recorded flight the demo wrote (video + DJI .SRT), processed as a user's flight is
    processed = tmp_path / "processed"
    process = subprocess.run(
        [
            str(venv / "bin" / "airpatrol"),
            "process",
            str(out / "flight" / "video.mp4"),
            "--srt",
            str(out / "flight" / "video.SRT"),
            "--max-frames",
            "15",
            "--no-video",
            "-q",
            "--out",
            str(processed),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=400,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    summary = json.loads((processed / "summary.json").read_text())
    assert summary["frames"] == 15, summary
    assert f"{purelib}/airpatrol_weights/" in json.dumps(summary)
    assert (processed / "tracks.txt").read_text().strip(), "no track"
