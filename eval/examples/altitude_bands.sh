#!/usr/bin/env bash
# Detector accuracy and fps per altitude band (issue 9): eight simulated 1080p flights, 30 / 60 /
# 100 / 150 m x straight down / oblique (gimbal -45), drifting and yawing, vehicles cut from the
# held-out aerial-cars video DJI-00760 (never trained on), each scored with the engine's default
# (`detector.imgsz: auto`, chosen per frame from the GSD) and with a fixed 640 and 1280:
#
#   bash eval/examples/altitude_bands.sh [OUT]    # default OUT: runs/bands; about 25 min on 2 cores
#
# Prints one row per flight and configuration (band, input size used, MOTA / HOTA / recall /
# precision, speed MAE, detector and pipeline ms per frame, fps) from `python -m eval.bands`.
# DETECTOR=path scores another detector (default: the shipped one). Needs ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/bands}
SHARED=${AIRPATROL_SHARED_DATA:-../shared/data}
AP=${AIRPATROL:-.venv/bin/airpatrol}
PY=${PYTHON:-.venv/bin/python}
FRAMES="$SHARED/aerial_cars_dji_frames/dji_video_frames"
[ -d "$FRAMES" ] || { echo "altitude_bands.sh: missing $FRAMES (third-party material in ../shared/data)" >&2; exit 2; }

mkdir -p "$OUT/sprites-DJI-00760" "$OUT/sims"
for f in "$FRAMES"/DJI-00760-*; do ln -sf "$(realpath "$f")" "$OUT/sprites-DJI-00760/"; done

seed=300
for alt in 30 60 100 150; do
  for pitch in -90 -45; do
    seed=$((seed + 1))
    name="alt${alt}_pitch${pitch#-}"
    if [ ! -f "$OUT/sims/$name/gt/gt.txt" ]; then
      "$AP" simulate "$OUT/sims/$name" --seed "$seed" --altitude "$alt" --pitch "$pitch" --duration 6 \
        --size 1920x1080 --drift 1.5,0.5 --yaw-rate 2 --layout straight --lanes 2 --vehicles 16 \
        --sprites "$OUT/sprites-DJI-00760" -q
    fi
  done
done

det=()
[ -n "${DETECTOR:-}" ] && det=(--detector "$DETECTOR")
"$AP" eval "$OUT/sims" "${det[@]}" --imgsz auto \
  --ablate "detector.imgsz=640,detector.imgsz=1280" --out "$OUT/eval" -q
"$PY" -m eval.bands "$OUT/eval/metrics.json"
