#!/usr/bin/env bash
# The detector's scoreboard (issue 9 targets, the model card's tables): AP50 / precision / recall at
# conf 0.25, class-agnostic, IoU 0.5, at the engine's default size for still images (`imgsz auto`
# -> its no-GSD fallback), on data never trained on:
#   - VisDrone-DET held-out clips (`@visdrone-det`), per view (oblique / nadir / day / night), all
#     vehicles and four-wheel only (motorcycles ignored);
#   - the held-out nadir aerial-cars video DJI-00760;
#   - AU-AIR (low oblique, 5-30 m; evaluation only).
#
#   bash training/recipes/detector_scoreboard.sh [WEIGHTS] [OUT]   # default: the engine default (NNCF int8 OpenVINO)
#
# IMGSZ=1280 scores at a fixed size instead. Writes OUT/*.json (default runs/scoreboard) and prints
# one line per set and view. Needs ../shared/data.
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${1:-weights/airpatrol_vehicles_n_int8_openvino_model}  # the engine default
OUT=${2:-runs/scoreboard}
SHARED=${AIRPATROL_SHARED_DATA:-../shared/data}
AP=${AIRPATROL:-.venv/bin/airpatrol}
PY=${PYTHON:-.venv/bin/python}
IMGSZ=${IMGSZ:-auto}
mkdir -p "$OUT"
ev() { "$AP" train eval-detector --weights "$W" --imgsz "$IMGSZ" "$@" >/dev/null; }
ev --dataset "visdrone-det=$SHARED/visdrone_det" --groups @visdrone-det --json "$OUT/visdrone_all.json"
ev --dataset "visdrone-det=$SHARED/visdrone_det" --groups @visdrone-det --vehicles four-wheel \
  --json "$OUT/visdrone_four_wheel.json"
ev --dataset "aerial-cars=$SHARED/aerial_cars_dji_frames/dji_video_frames" --groups DJI-00760 \
  --json "$OUT/dji_00760.json"
ev --dataset "auair=$SHARED/auair_subset" --json "$OUT/auair.json"
"$PY" - "$OUT" "$W" <<'EOF'
import json, sys
from pathlib import Path
out, weights = Path(sys.argv[1]), sys.argv[2]
print(f"{weights}")
print(f"{'set':<24}{'view':<9}{'images':>7}{'gt':>7}{'P':>7}{'R':>7}{'AP50':>7}{'imgsz':>7}{'ms':>7}")
for name in ("visdrone_all", "visdrone_four_wheel", "dji_00760", "auair"):
    (views,) = json.loads((out / f"{name}.json").read_text()).values()
    for view, m in views.items():
        print(f"{name:<24}{view:<9}{m['images']:>7}{m['gt']:>7}{m['precision']:>7.3f}{m['recall']:>7.3f}"
              f"{m['ap50']:>7.3f}{m['imgsz']:>7.0f}{m['ms_per_image']:>7.1f}")
EOF
