#!/usr/bin/env bash
# Issue 42's GPU figure, on a box with a CUDA GPU (a benchmark, not CI; at most ~8 min):
#
#   bash eval/examples/gpu_streams.sh [OUT] [VIDEO SRT]
#
# How many 1080p30 streams the engine keeps at 30 fps with the detector on the GPU, every stream's
# frames batched per step (pipelines.streams_bench: `airpatrol bench --streams`, the frames decoded
# once into memory, so receiving and decoding are left out), and what holds the next count back
# (the detector's busy share, the cores, or the streams' serial work on one interpreter lock). Twice:
# with keyframes as a live server runs (--detect-every 3) and the detector on every frame.
#
# Needs the project installed with a CUDA build of torch (scripts/install.sh, then
# `pip install torch==<the box's CUDA build>`), and a 1080p flight: by default the sparse one of
# eval/examples/throughput.sh (made by prepare_1080.sh from ../shared/data), else give VIDEO and SRT.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/gpu_streams}
AP=${AIRPATROL:-.venv/bin/airpatrol}
mkdir -p "$OUT"
if [ $# -ge 3 ]; then
  VIDEO=$2 SRT=$3
else
  [ -e "$OUT/v15.mp4" ] || . eval/examples/prepare_1080.sh
  VIDEO=$OUT/v15.mp4 SRT=$OUT/v15.SRT
fi
"${PYTHON:-.venv/bin/python}" -c "import torch; assert torch.cuda.is_available(), 'no CUDA GPU here'; print(torch.cuda.get_device_name(0))"
for every in 3 1; do
  echo "== detector every $every frame(s)"
  timeout 230 "$AP" bench "$VIDEO" --srt "$SRT" --camera dji_mavic_3 --max-frames 150 --detect-every "$every" \
    --device cuda --streams 1 2 4 8 12 16 24 32 --target-fps 30 -q --json "$OUT/streams_every$every.json"
done
