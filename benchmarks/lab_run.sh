#!/usr/bin/env bash
# Run the whole lab into out/lab/: calibrate this machine, sweep distilgpt2's config over batch ×
# context (dynamic and static cache, sdpa, and the ridgeline engine; eager on the corners),
# profile two points, check the KV formula, then compare, report and export.
#
#   benchmarks/lab_run.sh                 # measure (skips points already in the DB) and report
#   SIZE=full benchmarks/lab_run.sh       # the larger grid docs/lab.md reports (see below)
#   REPORT_ONLY=1 benchmarks/lab_run.sh   # rebuild out/lab from the existing DB
#   FRESH=1 benchmarks/lab_run.sh         # start from an empty DB (do this on a quiet machine)
#   RECALIBRATE=1 benchmarks/lab_run.sh   # calibrate again even if the DB has a calibration
#   TIMER=wall|cpu|auto                   # what the report compares (auto: cpu when the 1-minute
#                                         # load at the start exceeds the cores, else wall)
#
# SIZE=quick (the default) produces every figure and table of the full run at smaller sizes, in
# under ten minutes of wall time on a quiet 2-core machine: calibration up to 256 MiB, batch
# {1,4,16} x context {128,512}, 8 timed steps, the KV check at 4 x 512. SIZE=full: calibration
# up to 1 GiB, batch {1,4,16} x context {128,512,1024}, 12 timed steps, the KV check at
# 4 x 1024 (several times the quick run). Each size keeps its own database (out/lab-run-SIZE),
# so the two never mix in one fit. Every step says what it runs, the load average when it
# starts and how long it took (out/lab/timings.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
SIZE=${SIZE:-quick}
OUT=${OUT:-out/lab}
RUN=${RUN:-out/lab-run-$SIZE}
DB=${DB:-$RUN/ridgeline-lab.db}
TIMER=${TIMER:-auto}
export RIDGELINE_HW_DIR=${RIDGELINE_HW_DIR:-$OUT/hardware}
export COLUMNS=200

case "$SIZE" in
  quick)
    CAL=(--sizes 1,16,256 --repeats 3 --matmul-n 1024)
    B=1,4,16; T=128,512; T_BIG=512; T_EAGER=128,512; B_MALLOC=4,16; T_MALLOC=512
    STEPS=(--steps 8 --warmup 2 --memory-steps 2 --profile-steps 1)
    KV=(-b 4 -t 512) ;;
  full)
    CAL=()
    B=1,4,16; T=128,512,1024; T_BIG=1024; T_EAGER=128,1024; B_MALLOC=4,16; T_MALLOC=512,1024
    STEPS=()
    KV=(-b 4 -t 1024) ;;
  *) echo "SIZE must be quick or full, not '$SIZE'" >&2; exit 2 ;;
esac

mkdir -p "$OUT" "$RUN"
if [ "${FRESH:-0}" = 1 ]; then rm -f "$DB"; fi
: > "$OUT/timings.txt"
STEP=0
TOTAL=9

load() { cut -d' ' -f1 /proc/loadavg; }

# step NAME COMMAND...: say what runs and the load, run it, record how long it took.
step() {
  local name=$1 t0 t1 l0
  shift
  STEP=$((STEP + 1))
  t0=$(date +%s)
  l0=$(load)
  echo "== [$STEP/$TOTAL] $name (load $l0 on $(nproc) cores)" >&2
  "$@"
  t1=$(date +%s)
  echo "   $name: $((t1 - t0)) s" >&2
  printf '%-30s %5d s  load %s at the start, %s at the end\n' "$name" $((t1 - t0)) "$l0" "$(load)" \
    >> "$OUT/timings.txt"
}

has_calibration() {
  $BIN/ridgeline lab export --db "$DB" --kind calibrate --json-file "$RUN/cal.json" >/dev/null 2>&1 \
    && grep -q '"kind": "calibrate"' "$RUN/cal.json"
}

calibrate() {
  if [ "${RECALIBRATE:-0}" = 1 ] || ! has_calibration; then
    $BIN/ridgeline lab calibrate --db "$DB" "${CAL[@]}" > "$OUT/calibrate.txt"
  else
    echo "   (the database holds a calibration; RECALIBRATE=1 measures again)" >&2
  fi
}
sweep() { $BIN/ridgeline lab sweep --db "$DB" "${STEPS[@]}" "$@"; }
sweep_sdpa() { sweep --backend hf:dynamic:sdpa --backend hf:static:sdpa --batch "$B" --context "$T"; }
sweep_eager() { sweep --backend hf:dynamic:eager --batch 1,16 --context "$T_EAGER"; }
sweep_engine() { sweep --backend ridgeline --batch "$B" --context "$T"; }
# The allocator experiment (docs/lab.md): glibc keeps big freed blocks instead of unmapping them,
# so DynamicCache's per-step torch.cat stops faulting fresh pages in.
sweep_malloc() {
  MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=4294967296 MALLOC_TOP_PAD_=1073741824 \
    sweep --backend hf:dynamic:sdpa --batch "$B_MALLOC" --context "$T_MALLOC"
}
profiles() {
  $BIN/ridgeline lab profile --db "$DB" -b 16 -t "$T_BIG" --steps 2 \
    --trace "$RUN/trace_b16_t$T_BIG.json" > "$OUT/profile_b16_t$T_BIG.txt"
  $BIN/ridgeline lab profile --db "$DB" -b 1 -t 128 --steps 3 --trace "$OUT/trace_b1_t128.json" \
    > "$OUT/profile_b1_t128.txt"
  gzip -9f "$OUT/trace_b1_t128.json"  # Perfetto and chrome://tracing open .json.gz
}
kv() { $BIN/ridgeline lab kv --db "$DB" "${KV[@]}" > "$OUT/kv.txt"; }

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  { date -u; uptime; nproc; echo "SIZE=$SIZE"; } > "$OUT/load_start.txt"
  step "calibrate" calibrate
  step "sweep sdpa (dynamic, static)" sweep_sdpa
  step "sweep eager (corners)" sweep_eager
  step "sweep engine" sweep_engine
  step "sweep malloc-env" sweep_malloc
  step "profile" profiles
  step "kv" kv
  { date -u; uptime; } > "$OUT/load_end.txt"
fi

if [ "$TIMER" = auto ]; then
  start_load=$(load)
  if [ -f "$OUT/load_start.txt" ]; then
    start_load=$(grep -o 'load average: [0-9.]*' "$OUT/load_start.txt" | grep -o '[0-9.]*$' | tail -1)
  fi
  TIMER=$(awk -v l="$start_load" -v n="$(nproc)" 'BEGIN { print (l > n) ? "cpu" : "wall" }')
fi
echo "$TIMER" > "$OUT/timer.txt"
compare() {
  for t in wall cpu; do
    $BIN/ridgeline lab compare --db "$DB" --timer "$t" > "$OUT/compare_$t.txt"
    $BIN/ridgeline lab compare --db "$DB" --timer "$t" --json > "$OUT/compare_$t.json"
  done
}
report() {
  $BIN/ridgeline lab report --db "$DB" --out "$OUT" --timer "$TIMER"
  $BIN/ridgeline lab export --db "$DB" --csv "$OUT/measurements.csv" --json-file "$OUT/measurements.json"
}
step "compare (wall and cpu)" compare
step "report and export" report
echo "$OUT written from $DB (SIZE=$SIZE, timer: $TIMER); step times in $OUT/timings.txt" >&2
