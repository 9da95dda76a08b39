#!/usr/bin/env bash
# Detector v2, an experiment that never shipped (v3 replaced it; see weights/airpatrol_vehicles_n.md):
# the v1 detector (aerial-cars only) fine-tuned on aerial-cars + simulated flights, so that it also
# finds vehicles at other altitudes, scales and gimbal pitches than the three training videos show.
# Its --init, v1's int8 ONNX, is no longer in weights/: take it from git (commit 649ca09).
#
#   bash training/recipes/detector_v2.sh [OUT]      # default OUT: runs/detector_v2; ~1 h on 2 CPU cores
#
# Held out, never trained on (not even as simulator sprites): aerial-cars video DJI-00760 and the
# simulated flights val_00 / val_01. Needs ../shared/data/aerial_cars_dji_frames.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/detector_v2}
SHARED=${AIRPATROL_SHARED_DATA:-../shared/data}
AP=${AIRPATROL:-.venv/bin/airpatrol}
FRAMES="$SHARED/aerial_cars_dji_frames/dji_video_frames"
[ -d "$FRAMES" ] || { echo "detector_v2.sh: missing $FRAMES" >&2; exit 2; }

# Real vehicle crops for the simulator: the training videos only.
mkdir -p "$OUT/sprites-train" "$OUT/sims"
for f in "$FRAMES"/DJI_0005-* "$FRAMES"/DJI_0762-* "$FRAMES"/DJI_0013-*; do ln -sf "$(realpath "$f")" "$OUT/sprites-train/"; done

sim() {  # name seed altitude pitch layout size sprites(yes/no)
  [ -f "$OUT/sims/$1/gt/gt.txt" ] && return 0
  local extra=()
  [ "$7" = yes ] && extra=(--sprites "$OUT/sprites-train")
  "$AP" simulate "$OUT/sims/$1" --seed "$2" --altitude "$3" --pitch "$4" --layout "$5" --size "$6" \
    --duration 8 --fps 5 --vehicles 18 --mask-every 0 --drift 1.5,0.5 --yaw-rate 3 "${extra[@]}" -q
}
alts=(35 50 70 90 120 150 45 110)
pitches=(-90 -75 -60 -45)
layouts=(straight curved intersection)
for i in $(seq 0 15); do
  sizes=(1280x720 960x540)
  sim "$(printf 'train_%02d' "$i")" $((200 + i)) "${alts[$((i % 8))]}" "${pitches[$((i % 4))]}" \
    "${layouts[$((i % 3))]}" "${sizes[$((i % 2))]}" "$([ $((i % 2)) = 0 ] && echo yes || echo no)"
done
sim val_00 300 60 -90 intersection 1280x720 no
sim val_01 301 100 -60 curved 960x540 no

# Stage 1: v1 -> both domains (6 epochs in 0.8 h here). Sim frames outnumber the real ones 1.6:1
# and the learning rate is ultralytics' default: held-out real AP50 fell 0.91 -> 0.79 at 640.
if [ ! -f "$OUT/v2a/weights/last.pt" ]; then
  "$AP" -v train detector \
    --dataset "aerial-cars=$FRAMES" --dataset "mot=$OUT/sims" --every 5 \
    --val-groups DJI-00760,val_00,val_01 --init "${INIT:?INIT=v1 int8 ONNX, e.g. from git show 649ca09:weights/airpatrol_vehicles_n.onnx}" \
    --time-h "${TIME_H1:-0.8}" --epochs 12 --imgsz 640 --batch 8 \
    --tile 640 --overlap 0.2 --scales 1.0,0.6,0.35 --copy-paste 4 --transpose 0.5 --empty-fraction 0.3 \
    --checkpoint last --export "" --out "$OUT" --name v2a
fi
# Stage 2: rebalance towards the real videos (3x, fewer sim frames) at a quarter of the rate.
"$AP" -v train detector \
  --dataset "aerial-cars=$FRAMES" --oversample aerial-cars=3 --dataset "mot=$OUT/sims" --every 8 \
  --val-groups DJI-00760,val_00,val_01 --init "$OUT/v2a/weights/last.pt" --lr0 0.0003 \
  --time-h "${TIME_H2:-0.6}" --epochs 8 --imgsz 640 --batch 8 \
  --tile 640 --overlap 0.2 --scales 1.0,0.6,0.35 --copy-paste 4 --transpose 0.5 --empty-fraction 0.3 \
  --checkpoint last --export onnx,onnx-int8,openvino --out "$OUT" --name v2
