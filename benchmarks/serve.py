"""The server under a request-rate sweep: TTFT, TPOT and throughput against the rate.

``ridgeline serve`` (distilgpt2's shape, random weights, a character tokenizer, one engine
thread) is driven by guidellm with Poisson arrivals at each rate; beside each measured figure,
the simulator's prediction for the same arrivals and lengths with the engine's calibrated cost
model (``ridgeline.lab.serve_check``), and their ratio. guidellm's own reports (JSON and its
console tables) are kept in the output folder.

Usage: python benchmarks/serve.py [--fractions 0.2,0.4,...] [--requests N] [--out DIR]
  rates are fractions of the capacity the calibrated cost model gives (prefill + decode share)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ridgeline.lab.serve_check import (
    Calibrator,
    CheckSpec,
    capacity_per_s,
    machine,
    model_config,
    run_check,
)

KEYS = ("ttft_p50_s", "ttft_p90_s", "tpot_p50_s", "tpot_p90_s", "output_tokens_per_s")


def _cell(key: str, value: float) -> str:
    return f"{value:.1f}" if key.startswith("output") else f"{value * 1e3:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fractions", default="0.2,0.4,0.6,0.8,1.0,1.5")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--rates", default="", help="explicit requests/s (overrides --fractions)")
    ap.add_argument("--out", type=Path, default=Path("out/serve-bench"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    base = CheckSpec(model_config(args.out), num_requests=args.requests)
    rates = tuple(float(x) for x in args.rates.split(",") if x)
    if not rates:
        cap = _capacity(base)
        rates = tuple(round(float(f) * cap, 2) for f in args.fractions.split(","))
    check = CheckSpec(base.model_config, num_requests=args.requests, rates=rates)
    result = run_check(check, args.out, lambda m: print(f"# {m}", flush=True))
    print(f"# load average {os.getloadavg()}; capacity estimate {result.capacity_per_s:.2f} req/s")
    print("| rate/s | " + " | ".join(f"{k} meas | sim | ratio" for k in KEYS) + " |")
    print("|---" * (1 + 3 * len(KEYS)) + "|")
    for row in result.rows:
        m, s, q = row.measured, row.simulated, row.ratios()
        cells = [
            f"{_cell(k, getattr(m, k))} | {_cell(k, getattr(s, k))} | {q[k]:.2f}" for k in KEYS
        ]
        print(f"| {row.rate_per_s:.2f} | " + " | ".join(cells) + " |")


def _capacity(check: CheckSpec) -> float:
    """The calibrated capacity, for choosing rates (a calibration run of its own)."""

    def say(message: str) -> None:
        print(f"# {message}", flush=True)

    cal = Calibrator(check, machine(say), say)
    cal.fit("capacity")
    return capacity_per_s(cal.config("capacity"), check)


if __name__ == "__main__":
    main()
