#!/usr/bin/env bash
# Recipe of detector v3 (see weights/airpatrol_vehicles_n.md): the shipped detector fine-tuned on
# real oblique + nadir, day + night drone images (VisDrone2019-DET, 14 cities) and the aerial-cars
# nadir frames, on native-resolution 640 px tiles, so small far vehicles keep their pixels.
#
#   bash training/recipes/detector_v3.sh [OUT]     # default OUT: runs/detector_v3; TIME_H hours (2.0)
#   RESUME=1 bash training/recipes/detector_v3.sh  # a run that was cut off goes on from its last epoch
#
# Training comes in time-capped chunks that each fine-tune the model the previous one installed
# (INIT, default: the shipped fp16 checkpoint weights/airpatrol_vehicles_n.pt; an int8 ONNX such as
# v1's is dequantised): the work tree is laid anew between sessions, so what carries a run over is
# the committed model, not runs/. The model card lists each chunk's exact settings.
#   INIT       start weights (.pt or .onnx)
#   TIME_H     wall-clock hours of this chunk (the LR schedule fits it)
#   LR0, LRF   AdamW start rate and its final fraction (default 5e-4, 0.1)
#   SIM        a folder of simulated training flights (training/recipes/sim_train_flights.sh: real
#              crops only) to mix in, every 20th frame; unset: none
#   AC_TIMES   how many times the aerial-cars frames are used (default 2)
#   PRECISION  auto (default: bf16 autocast where the CPU/GPU has bfloat16 natively, ~2x faster
#              steps on an AVX512-BF16 CPU), bf16 or fp32 (chunks 1 and 2 were fp32)
#
# Held out, never trained on: the committed VisDrone-DET clip rule (`@visdrone-det`: clip ids
# sorted, every 5th; training/datasets.py visdrone_det_holdout) and aerial-cars video DJI-00760.
# Needs ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/detector_v3}
SHARED=${AIRPATROL_SHARED_DATA:-../shared/data}
AP=${AIRPATROL:-.venv/bin/airpatrol}
for d in visdrone_det aerial_cars_dji_frames/dji_video_frames; do
  [ -d "$SHARED/$d" ] || { echo "detector_v3.sh: missing $SHARED/$d" >&2; exit 2; }
done
INIT=${INIT:-weights/airpatrol_vehicles_n.pt}
extra=()
[ "${RESUME:-0}" = 1 ] && extra=(--resume)
[ -n "${SIM:-}" ] && extra+=(--dataset "mot=$SIM" --every 20)
# Fine-tuning, not re-training: AdamW at lr 5e-4 falling to 5e-5, no warm-up (its bias LR of 0.1
# undoes the start; a default-LR epoch left held-out oblique AP50 at 0.23 from 0.25), few vertical
# flips and transposes (oblique views have an up), no copy-paste (VisDrone is dense already).
"$AP" -v train detector \
  --dataset "visdrone-det=$SHARED/visdrone_det" \
  --dataset "aerial-cars=$SHARED/aerial_cars_dji_frames/dji_video_frames" --oversample "aerial-cars=${AC_TIMES:-2}" \
  --val-groups @visdrone-det,DJI-00760 --init "$INIT" \
  --lr0 "${LR0:-0.0005}" --lrf "${LRF:-0.1}" --warmup-epochs 0 --flipud 0.2 --transpose 0.2 --copy-paste 0 \
  --time-h "${TIME_H:-2.0}" --epochs 30 --imgsz 640 --batch 8 \
  --tile 640 --overlap 0.2 --scales 1.0,0.5 --empty-fraction 0.1 \
  --precision "${PRECISION:-auto}" \
  --checkpoint last --export openvino,openvino-int8 --out "$OUT" --name v3 "${extra[@]}"
