#!/usr/bin/env bash
# Run the whole lab into out/lab/: calibrate this machine, sweep distilgpt2's config over batch {1,4,16} ×
# context {128,512,1024} (dynamic and static cache, sdpa, and the ridgeline engine; eager on the
# corners), profile two points, check the KV formula, then compare, report and export.
#
#   benchmarks/lab_run.sh                 # measure (skips points already in the DB) and report
#   REPORT_ONLY=1 benchmarks/lab_run.sh   # rebuild out/lab from the existing DB
#   FRESH=1 benchmarks/lab_run.sh         # start from an empty DB (do this on a quiet machine)
#   RECALIBRATE=1 benchmarks/lab_run.sh   # calibrate again even if the DB has a calibration
#   TIMER=wall|cpu|auto                   # what the report compares (auto: cpu when the 1-minute
#                                         # load at the start exceeds the cores, else wall)
#
# The DB stays in out/lab-run/; out/lab gets the report, plots, CSV/JSON exports, the
# calibrated specs and the load average at the start and end of the run.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
OUT=${OUT:-out/lab}
RUN=${RUN:-out/lab-run}
DB=${DB:-$RUN/ridgeline-lab.db}
TIMER=${TIMER:-auto}
export RIDGELINE_HW_DIR=${RIDGELINE_HW_DIR:-$OUT/hardware}
export COLUMNS=200
mkdir -p "$OUT" "$RUN"
if [ "${FRESH:-0}" = 1 ]; then rm -f "$DB"; fi

has_calibration() {
  $BIN/ridgeline lab export --db "$DB" --kind calibrate --json-file "$RUN/cal.json" >/dev/null 2>&1 \
    && grep -q '"kind": "calibrate"' "$RUN/cal.json"
}

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  { date -u; uptime; nproc; } > "$OUT/load_start.txt"
  if [ "${RECALIBRATE:-0}" = 1 ] || ! has_calibration; then
    $BIN/ridgeline lab calibrate --db "$DB" > "$OUT/calibrate.txt"
  fi
  $BIN/ridgeline lab sweep --db "$DB" --backend hf:dynamic:sdpa --backend hf:static:sdpa \
    --batch 1,4,16 --context 128,512,1024
  $BIN/ridgeline lab sweep --db "$DB" --backend hf:dynamic:eager --batch 1,16 --context 128,1024
  $BIN/ridgeline lab sweep --db "$DB" --backend ridgeline --batch 1,4,16 --context 128,512,1024
  # The allocator experiment (docs/lab.md): glibc keeps big freed blocks instead of
  # unmapping them, so DynamicCache's per-step torch.cat stops faulting fresh pages in.
  MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=4294967296 MALLOC_TOP_PAD_=1073741824 \
    $BIN/ridgeline lab sweep --db "$DB" --backend hf:dynamic:sdpa --batch 4,16 --context 512,1024
  $BIN/ridgeline lab profile --db "$DB" -b 16 -t 1024 --steps 2 --trace "$RUN/trace_b16_t1024.json" \
    > "$OUT/profile_b16_t1024.txt"
  $BIN/ridgeline lab profile --db "$DB" -b 1 -t 128 --steps 3 --trace "$OUT/trace_b1_t128.json" \
    > "$OUT/profile_b1_t128.txt"
  gzip -9f "$OUT/trace_b1_t128.json"  # Perfetto and chrome://tracing open .json.gz
  $BIN/ridgeline lab kv --db "$DB" -b 4 -t 1024 > "$OUT/kv.txt"
  { date -u; uptime; } > "$OUT/load_end.txt"
fi

if [ "$TIMER" = auto ]; then
  load=$(cut -d' ' -f1 /proc/loadavg)
  if [ -f "$OUT/load_start.txt" ]; then
    load=$(grep -o 'load average: [0-9.]*' "$OUT/load_start.txt" | grep -o '[0-9.]*$' | tail -1)
  fi
  TIMER=$(awk -v l="$load" -v n="$(nproc)" 'BEGIN { print (l > n) ? "cpu" : "wall" }')
fi
echo "$TIMER" > "$OUT/timer.txt"
for t in wall cpu; do
  $BIN/ridgeline lab compare --db "$DB" --timer "$t" > "$OUT/compare_$t.txt"
  $BIN/ridgeline lab compare --db "$DB" --timer "$t" --json > "$OUT/compare_$t.json"
done
$BIN/ridgeline lab report --db "$DB" --out "$OUT" --timer "$TIMER"
$BIN/ridgeline lab export --db "$DB" --csv "$OUT/measurements.csv" --json-file "$OUT/measurements.json"
echo "$OUT written from $DB (timer: $TIMER)"
