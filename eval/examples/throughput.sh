#!/usr/bin/env bash
# The live-throughput figures of docs/RESULTS.md (issue 12), end to end (a benchmark, not
# CI; about 17 min on a 2-core CPU):
#
#   bash eval/examples/throughput.sh [OUT] [SECONDS]     # default OUT: runs/throughput, 30 s runs
#
# 1. two 1080p simulated flights at 60 m (15 and 60 vehicles, real crops of DJI-00760) and UAVDT
#    M1303 upscaled to 1920x1012, each re-encoded as a phone relays it over WebRTC (libx264
#    baseline, no B-frames, GOP 30, crf 20);
# 2. `airpatrol bench` on the two flights, the detector on every frame and on keyframes;
# 3. `airpatrol serve-bench` with the shipped models: one stream of each, four sparse streams (at full
#    width and at process_max_width 960), and one sparse and one dense stream with keyframes off.
#
# Needs ../shared/data (the aerial-cars frames and the UAVDT clip).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/throughput}
SECONDS_PER_RUN=${2:-30}
SHARED=${AIRPATROL_SHARED_DATA:-../shared/data}
AP=${AIRPATROL:-.venv/bin/airpatrol}
PY=${PYTHON:-.venv/bin/python}
FRAMES="$SHARED/aerial_cars_dji_frames/dji_video_frames"
UAVDT="$SHARED/uavdt_M1303_overlay_clip/demo_M1303.mp4"
for need in "$FRAMES" "$UAVDT"; do
  [ -e "$need" ] || { echo "throughput.sh: missing $need (third-party material in ../shared/data)" >&2; exit 2; }
done
mkdir -p "$OUT/sprites-DJI-00760"
for f in "$FRAMES"/DJI-00760-*; do ln -sf "$(realpath "$f")" "$OUT/sprites-DJI-00760/"; done

# WebRTC needs frames in order: re-encode without B-frames (optionally resized), as a drone app relays
reencode() {  # SRC DST [WIDTH HEIGHT]
  "$PY" - "$@" <<'EOF'
import sys
from fractions import Fraction

import av
import cv2

src, dst = sys.argv[1], sys.argv[2]
size = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else None
with av.open(src) as inp, av.open(dst, "w") as out:
    v = inp.streams.video[0]
    s = out.add_stream("libx264", rate=30)
    s.width, s.height = size or (v.width, v.height)
    s.pix_fmt, s.time_base = "yuv420p", Fraction(1, 30)
    s.options = {"crf": "20", "g": "30", "bf": "0", "profile": "baseline", "preset": "veryfast"}
    for k, frame in enumerate(inp.decode(video=0)):
        img = frame.to_ndarray(format="bgr24")
        if size:
            img = cv2.resize(img, size, interpolation=cv2.INTER_CUBIC)
        f = av.VideoFrame.from_ndarray(img, format="bgr24").reformat(format="yuv420p")
        f.pts, f.time_base = k, Fraction(1, 30)
        out.mux(s.encode(f))
    out.mux(s.encode())
EOF
}

for n in 15 60; do
  sim="$OUT/sim1080_v$n"
  if [ ! -f "$sim/gt/gt.txt" ]; then
    "$AP" simulate "$sim" --seed 7 --altitude 60 --size 1920x1080 --duration 20 --vehicles "$n" --lanes 3 \
      --drift 1.0,0.3 --yaw-rate 1 --sprites "$OUT/sprites-DJI-00760" -q
  fi
  [ -f "$OUT/v$n.mp4" ] || reencode "$sim/video.mp4" "$OUT/v$n.mp4"
  cp "$sim/video.SRT" "$OUT/v$n.SRT"
done
[ -f "$OUT/uavdt_1080.mp4" ] || reencode "$UAVDT" "$OUT/uavdt_1080.mp4" 1920 1012

for n in 15 60; do
  for every in 1 3; do
    echo "== bench: $n vehicles, --detect-every $every"
    "$AP" bench "$OUT/sim1080_v$n/video.mp4" --srt "$OUT/sim1080_v$n/video.SRT" --camera dji_mavic_3 \
      --max-frames 300 -q --detect-every "$every" --json "$OUT/bench_v${n}_every$every.json"
  done
done

bench() {  # NAME [serve-bench options...]
  local name=$1
  shift
  echo "== serve-bench: $name"
  "$AP" serve-bench --duration "$SECONDS_PER_RUN" --detector-factory none --json "$OUT/serve_$name.json" "$@"
}
V15=(--video "$OUT/v15.mp4" --srt "$OUT/v15.SRT" --camera dji_mavic_3)
V60=(--video "$OUT/v60.mp4" --srt "$OUT/v60.SRT" --camera dji_mavic_3)
bench sparse --streams 1 "${V15[@]}"
bench dense --streams 1 "${V60[@]}"
bench uavdt --streams 1 --video "$OUT/uavdt_1080.mp4" --altitude 60 --pitch -90 --camera dji_phantom_4_pro
bench sparse_x4 --streams 4 "${V15[@]}"
bench sparse_x4_960 --streams 4 "${V15[@]}" --process-max-width 960
AIRPATROL_KEYFRAMES=false AIRPATROL_PREPARE_AHEAD=false bench sparse_every_frame --streams 1 "${V15[@]}"
AIRPATROL_KEYFRAMES=false AIRPATROL_PREPARE_AHEAD=false bench dense_every_frame --streams 1 "${V60[@]}"
echo "results: $OUT/bench_*.json $OUT/serve_*.json"
