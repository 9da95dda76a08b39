#!/usr/bin/env bash
# Issue 42's GPU figure, on a box with a CUDA GPU (a benchmark, not CI; at most ~8 min):
#
#   bash eval/examples/gpu_streams.sh [OUT] [VIDEO SRT]
#
# How many 1080p30 streams the engine keeps at 30 fps with the detector on the GPU, every stream's
# frames batched per step (the run of `airpatrol bench --streams`: pipelines.streams_bench, the frames
# decoded once into memory, so receiving and decoding are left out), and what holds the next count back
# (the detector's busy share, the cores, or the streams' serial work on one interpreter lock). Twice:
# with keyframes as a live server runs (--detect-every 3) and the detector on every frame. Then, with
# keyframes, a process per stream around one detector service, as a server with engine_processes and
# engine_detector_service runs them (eval.streams_processes: no interpreter lock shared by streams).
#
# On a bare GPU box (PyTorch and CUDA, no registry, 64 MiB for code and wheels): make the kit here
# first, `bash eval/examples/gpu_kit.sh` (.gpu/: the wheels the box lacks and a 150-frame dense
# 1080p flight), carry .gpu, and run this from the repository root: it installs the wheels into
# $SITE (/tmp/ap-site) and reads the kit's flight. The frames are read with OpenCV
# (eval/examples/gpu_streams.py; PyAV is not in the kit). On a box with the project installed
# (scripts/install.sh and a CUDA build of torch) it runs as it is; VIDEO and SRT give another flight.
# DEVICE=cpu, COUNTS, PROC_COUNTS, EVERY, GIVE_UP, ENGINE_THREADS and MAX_FRAMES try it anywhere (tests/eval/test_gpu_kit.py does, in a
# virtual environment holding only a bare box's packages: eval/examples/bare_box.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/gpu_streams}
KIT=${KIT:-.gpu}
DEVICE=${DEVICE:-cuda}
COUNTS=${COUNTS:-1 2 4 8 12 16 24 32}
PROC_COUNTS=${PROC_COUNTS:-1 2 4 8 12 16}
GIVE_UP=${GIVE_UP:-2}  # leave the larger counts out once this many in a row missed 30 fps and added no frames
EVERY=${EVERY-3 1}     # the threads runs: the detector every 3 frames (keyframes, as live), then every frame
# each engine's threads (engine_threads), a run for each: a number, or "none" (the libraries' own: every
# core). engine_threads caps OpenCV's, torch's and the BLAS libraries' pools: at one, 16 streams on a
# 16-core GPU box gave 1.32x the frames of one OpenCV thread alone (docs/lab/2026-11-30-issue-42-gpu-streams.md)
ENGINE_THREADS=${ENGINE_THREADS:-1}
MAX_FRAMES=${MAX_FRAMES:-150}
if [ -x .venv/bin/python ]; then PY=${PYTHON:-.venv/bin/python}; else PY=${PYTHON:-python3}; fi
mkdir -p "$OUT"
if [ $# -ge 3 ]; then
  VIDEO=$2 SRT=$3
else
  VIDEO=$KIT/flight/video.mp4 SRT=$KIT/flight/video.SRT
  [ -e "$VIDEO" ] || { echo "gpu_streams.sh: no flight: give VIDEO SRT, or make the kit (eval/examples/gpu_kit.sh)" >&2; exit 2; }
fi
if ! "$PY" -c "
import importlib.util, sys
sys.exit(any(importlib.util.find_spec(m) is None for m in ('ultralytics', 'supervision', 'segmentation_models_pytorch', 'pydantic', 'trackers')))"; then
  [ -d "$KIT/wheels" ] || { echo "gpu_streams.sh: the project's packages are missing and there is no $KIT/wheels" >&2; exit 2; }
  SITE=${SITE:-/tmp/ap-site}
  "${PIP_PYTHON:-$PY}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$KIT"/wheels/*.whl
  export PYTHONPATH="$SITE"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c "
import torch
if '$DEVICE'.startswith('cuda'):
    assert torch.cuda.is_available(), 'no CUDA GPU here'
    print(torch.cuda.get_device_name(0), 'torch', torch.__version__)"
# at most 140 + 100 + 200 s with the defaults (the issue's budget is 8 min); a run cut short says so and the next runs;
# each count is logged as it ends
for every in $EVERY; do
  echo "== detector every $every frame(s)"
  # shellcheck disable=SC2086 # COUNTS is a list
  timeout $((every == 3 ? 140 : 100)) "$PY" eval/examples/gpu_streams.py "$VIDEO" --srt "$SRT" --camera dji_mavic_3 --max-frames "$MAX_FRAMES" \
    --detect-every "$every" --device "$DEVICE" --streams $COUNTS --target-fps 30 -q ${BENCH_ARGS:-} \
    --give-up-after "$GIVE_UP" --json "$OUT/streams_every$every.json" || echo "gpu_streams.sh: that run ended with $? (124: cut at its time)"
done
# each engine holds up to three 1080p frame slots in /dev/shm (~19 MB; a container's default is 64 MB)
shm_mb=$(df -Pm /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')
if [ -n "$shm_mb" ]; then
  fit=$((shm_mb / 20)) kept=""
  for n in $PROC_COUNTS; do [ "$n" -le "$fit" ] && kept="$kept $n"; done
  [ "$kept" = " $(echo $PROC_COUNTS)" ] || echo "gpu_streams.sh: /dev/shm has $shm_mb MB free: engine processes up to $fit (counts:$kept)"
  PROC_COUNTS=${kept:-1}
fi
for threads in $ENGINE_THREADS; do
  echo "== a process per stream, one detector service, engine threads $threads; detector every 3 frames"
  # "none": the libraries' own thread counts; the first is the default run's, named without a suffix
  [ "$threads" = none ] && cap=(--engine-threads 0) || cap=(--engine-threads "$threads")
  [ "$threads" = "${ENGINE_THREADS%% *}" ] && name=streams_processes || name=streams_processes_t$threads
  # shellcheck disable=SC2086 # PROC_COUNTS is a list
  timeout 200 "$PY" eval/examples/gpu_streams.py "$VIDEO" --srt "$SRT" --camera dji_mavic_3 --max-frames "$MAX_FRAMES" \
    --detect-every 3 --device "$DEVICE" --streams $PROC_COUNTS --target-fps 30 -q ${BENCH_ARGS:-} \
    --engine-processes "${cap[@]}" --give-up-after "$GIVE_UP" --json "$OUT/$name.json" ||
    echo "gpu_streams.sh: that run ended with $? (124: cut at its time)"
done
