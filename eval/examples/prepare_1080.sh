# Sourced by eval/examples/throughput.sh and evidence_bench.sh (from the repository root, after they
# set OUT): the 1080p30 flights their live benchmarks stream, made once into $OUT. Sets SHARED, AP,
# PY (overridable by AIRPATROL_SHARED_DATA, AIRPATROL, PYTHON), FRAMES and UAVDT, and stops when the
# third-party material is missing.
# 1. two 1080p simulated flights at 60 m (15 and 60 vehicles, real crops of DJI-00760): $OUT/v15.mp4,
#    $OUT/v60.mp4 with their .SRT; 2. UAVDT M1303 upscaled to 1920x1012: $OUT/uavdt_1080.mp4; each
#    re-encoded as a phone relays it over WebRTC (libx264 baseline, no B-frames, GOP 30, crf 20).
SHARED=${AIRPATROL_SHARED_DATA:-../shared/data}
AP=${AIRPATROL:-.venv/bin/airpatrol}
PY=${PYTHON:-.venv/bin/python}
FRAMES="$SHARED/aerial_cars_dji_frames/dji_video_frames"
UAVDT="$SHARED/uavdt_M1303_overlay_clip/demo_M1303.mp4"
for need in "$FRAMES" "$UAVDT"; do
  [ -e "$need" ] || { echo "$(basename "$0"): missing $need (third-party material in ../shared/data)" >&2; exit 2; }
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

