#!/usr/bin/env bash
# The evidence packs' figures of docs/RESULTS.md (issue 41): a benchmark, not CI (~6 min on a 2-core
# CPU once the flight exists; making the flight ~3 min more):
#
#   bash eval/examples/evidence_bench.sh [OUT] [SECONDS] [PAIRS]   # default runs/throughput, 30 s, 2
#
# 1. `python -m eval.evidence_bench`: a pack with a 20 MB clip made and verified (median of 5);
# 2. `airpatrol serve-bench` on the dense 1080p flight (60 vehicles: a violation every ~2 s) with
#    the shipped models, evidence packs on and off in turn (PAIRS times): the stream's processed fps
#    each way, and each pack's delay after its clip as the publisher's events channel sees it.
#
# Needs ../shared/data (the aerial-cars frames, for the flight; and the UAVDT clip, which the
# shared flight preparation also re-encodes).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/throughput}
SECONDS_PER_RUN=${2:-30}
PAIRS=${3:-2}
. eval/examples/prepare_1080.sh

"$PY" -m eval.evidence_bench --json "$OUT/evidence_pack.json"
V60=(--video "$OUT/v60.mp4" --srt "$OUT/v60.SRT" --camera dji_mavic_3)
echo "== serve-bench: warm-up (not counted: the first run after the flight is made runs slow)"
"$AP" serve-bench --duration 10 --detector-factory none --streams 1 "${V60[@]}" >/dev/null
for pair in $(seq 1 "$PAIRS"); do
  for packs in true false; do
    echo "== serve-bench: dense, evidence packs $packs (pair $pair)"
    AIRPATROL_EVIDENCE_PACKS=$packs "$AP" serve-bench --duration "$SECONDS_PER_RUN" --detector-factory none \
      --streams 1 "${V60[@]}" --json "$OUT/serve_dense_packs_${packs}_$pair.json"
  done
done
"$PY" -m eval.evidence_bench --compare "$OUT"/serve_dense_packs_*.json
