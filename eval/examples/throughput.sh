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
. eval/examples/prepare_1080.sh  # the flights below, made once into $OUT

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
