#!/usr/bin/env bash
# Redraw the figures docs/ shows (docs/figures/*.png) from the current code: each one is the
# output of the command written beside it in the docs. Deterministic (analytic model, seeded
# simulation), so a rerun changes a figure only when the code or the catalog changed.
set -euo pipefail
cd "$(dirname "$0")/.."
R=${BIN:-.venv/bin}/ridgeline
F=docs/figures
mkdir -p "$F"
$R compare --model llama-3.1-70b --plot "$F/compare-llama-3.1-70b.png" > /dev/null
$R tile --hw ibm-spyre --hw h100-sxm --m 2048 --k 4096 --n 14336 --plot "$F/tile_spyre_h100_prefill.png" > /dev/null
$R flash --model llama-3.1-8b --context 32768 --plot "$F/flash_llama.png" > /dev/null
$R schedule --hw ibm-spyre --model llama-3.1-8b --batch 1 --context 4096 --ideal \
  --timeline "$F/spyre_decode_timeline.png" > /dev/null
$R schedule --hw ibm-spyre --model llama-3.1-8b --phase prefill --batch 1 --context 2048 --ideal \
  --timeline "$F/spyre_prefill_timeline.png" > /dev/null
$R layout --plot "$F/layout.png" > /dev/null
$R simulate compare --hw a100-80gb --model llama-2-7b --workload shared-prefix --rate 4 \
  --requests 1000 --prompt lognormal:512 --output lognormal:256 --max-model-len 4096 \
  --configs paged,contiguous,static,prefix,no-chunk,spec,swap,host-tier,disagg --plot "$F" > /dev/null
echo "redrew $(ls "$F" | wc -l) figures in $F"
