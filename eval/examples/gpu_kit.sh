#!/usr/bin/env bash
# What a bare GPU box needs to run eval/examples/gpu_streams.sh, made here into .gpu/ (ignored by git):
#
#   bash eval/examples/gpu_kit.sh [PYTHON_VERSION]        # default 3.12, the GPU box's Python
#
# A "bare" GPU box has PyTorch and CUDA and the usual scientific stack (numpy, OpenCV headless, SciPy,
# matplotlib, PyYAML, timm, huggingface_hub, ...), nothing of this project's own, no package registry,
# and room for 64 MiB of code and wheels in all (this repository is ~25 MB of it). This makes:
#   .gpu/wheels/  the project's imports such a box lacks, as wheels without their dependencies, at the
#                 versions this .venv runs (the list: GPU_WHEELS below; ~7 MB): no PyAV (36 MB), the
#                 streams benchmark decodes with OpenCV;
#   .gpu/flight/  a 150-frame 1080p30 flight and its .SRT (video.mp4, video.SRT; ~6 MB): prepare_1080.sh's
#                 dense one (40 vehicles at 60 m, real car crops from ../shared/data), 5 s of it.
# Then, on the GPU box, from the repository root with .gpu carried:  bash eval/examples/gpu_streams.sh OUT
# (it installs the wheels into /tmp/site first). Checked here by `--dry-run` of gpu_streams.sh, which
# runs the same install and benchmark on the CPU in a virtual environment holding only a bare box's
# packages (tests/eval/test_gpu_kit.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
PYVER=${1:-3.12}
KIT=${KIT:-.gpu}
PY=${PYTHON:-.venv/bin/python}
# The project's imports a bare GPU box lacks (its packages: gpu_box_packages.txt); each with --no-deps,
# so every one the run imports is named. GPU_NEWER: on the box, but pydantic needs a newer one.
GPU_WHEELS="ultralytics ultralytics-thop supervision defusedxml pydeprecate segmentation-models-pytorch
trackers lap pydantic pydantic-core annotated-types typing-inspection pydantic-settings python-dotenv"
GPU_NEWER="typing-extensions"
mkdir -p "$KIT/wheels" "$KIT/flight"
rm -f "$KIT"/wheels/*.whl
pins=()
for name in $GPU_WHEELS $GPU_NEWER; do
  version=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$name")
  pins+=("$name==$version")
done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$KIT/wheels" "${pins[@]}"
SHARED=${AIRPATROL_SHARED_DATA:-../shared/data}
FRAMES="$SHARED/aerial_cars_dji_frames/dji_video_frames"
if [ ! -e "$KIT/flight/video.mp4" ]; then
  [ -e "$FRAMES" ] || { echo "gpu_kit.sh: missing $FRAMES (third-party material in ../shared/data)" >&2; exit 2; }
  sprites=$(mktemp -d)
  for f in "$FRAMES"/DJI-00760-*; do ln -s "$(realpath "$f")" "$sprites/"; done
  # prepare_1080.sh's dense flight (60 m, real car crops of DJI-00760), 5 s: 150 frames, ~6 MB
  "${AIRPATROL:-.venv/bin/airpatrol}" simulate "$KIT/flight" --seed 7 --altitude 60 --size 1920x1080 --duration 5 \
    --vehicles 60 --lanes 3 --drift 1.0,0.3 --yaw-rate 1 --sprites "$sprites" -q
  rm -rf "$sprites" "$KIT/flight/gt" "$KIT/flight/road_mask"
fi
du -sh "$KIT/wheels" "$KIT/flight"
tree=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
kit=$(du -sb "$KIT" | cut -f1)
echo "travels: tracked files $((tree / 1048576)) MiB + $KIT $((kit / 1048576)) MiB = $(((tree + kit) / 1048576)) MiB of 64"
[ $((tree + kit)) -lt $((64 * 1048576)) ] || { echo "over the device's 64 MiB" >&2; exit 1; }
