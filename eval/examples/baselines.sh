#!/usr/bin/env bash
# The baseline matrix of docs/lab/2026-11-23-pipeline-accuracy-models.md, end to end (about 15-25
# min on a 2-core CPU; its six flights also give docs/RESULTS.md its six-flight row):
#
#   bash eval/examples/baselines.sh [OUT]          # default OUT: runs/baselines
#
# 1. six simulated flights (altitude 40 / 80 / 120 m x gimbal -90 / -60 deg), drifting and
#    yawing, vehicles drawn from real crops of the held-out aerial-cars video DJI-00760 (never
#    seen by the shipped detector) and procedurally; scored with the shipped detector and with
#    the oracle detector (exact boxes), road mask on (shipped U-Net) / off;
# 2. the real UAVDT M1303 clip (third-party boxes burned into its pixels, see its SOURCE.md)
#    with the COCO int8 detector, the shipped aerial detector and the oracle; mask on / off.
#
# Needs ../shared/data (the aerial-cars frames, the UAVDT clip and the COCO int8 detector).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/baselines}
SHARED=${AIRPATROL_SHARED_DATA:-../shared/data}
AP=${AIRPATROL:-.venv/bin/airpatrol}
FRAMES="$SHARED/aerial_cars_dji_frames/dji_video_frames"
COCO="$SHARED/yolov8n_coco_int8/yolov8n_int8_openvino_model"
for need in "$FRAMES" "$COCO" "$SHARED/uavdt_M1303_overlay_clip"; do
  [ -e "$need" ] || { echo "baselines.sh: missing $need (third-party material in ../shared/data)" >&2; exit 2; }
done

mkdir -p "$OUT/sprites-DJI-00760" "$OUT/sims"
for f in "$FRAMES"/DJI-00760-*; do ln -sf "$(realpath "$f")" "$OUT/sprites-DJI-00760/"; done

seed=100
for alt in 40 80 120; do
  for pitch in -90 -60; do
    seed=$((seed + 1))
    name="alt${alt}_pitch${pitch#-}"
    if [ ! -f "$OUT/sims/$name/gt/gt.txt" ]; then
      layout=$([ $((seed % 3)) = 0 ] && echo intersection || ([ $((seed % 3)) = 1 ] && echo curved || echo straight))
      "$AP" simulate "$OUT/sims/$name" --seed "$seed" --altitude "$alt" --pitch "$pitch" --duration 10 \
        --size 1280x720 --drift 1.5,0.5 --yaw-rate 2 --layout "$layout" --vehicles 14 \
        --sprites "$OUT/sprites-DJI-00760" -q
    fi
  done
done

# Simulated flights: shipped detector (imgsz 960) as the base; oracle; each without the mask.
"$AP" eval "$OUT/sims" --imgsz 960 --ablate "mask=off,oracle,oracle+mask=off" --out "$OUT/eval-sims" -q

# UAVDT M1303: COCO int8 as the base; shipped aerial detector; oracle; each without the mask.
"$AP" eval eval/examples/uavdt_m1303.yaml --detector "$COCO" --classes coco \
  --ablate "mask=off,detector=weights/airpatrol_vehicles_n_openvino_model+detector.classes=auto+detector.imgsz=1024,detector=weights/airpatrol_vehicles_n_openvino_model+detector.classes=auto+detector.imgsz=1024+mask=off,oracle,oracle+mask=off" \
  --out "$OUT/eval-uavdt" -q

echo "reports: $OUT/eval-sims/report.md $OUT/eval-uavdt/report.md"
