"""Time to compile and simulate the schedule of one decode step of llama-3.1-8b on ibm-spyre.

Target: under one second. Prints the median (and min/max) of several runs, plus a prefill step
and a batch-32 decode step for scale.

    .venv/bin/python benchmarks/schedule.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

from ridgeline.analytic import Phase, Workload
from ridgeline.analytic.dataflow import compile_schedule
from ridgeline.specs import get_accelerator, get_model

TARGET_S = 1.0


def _time(workload: Workload, runs: int) -> list[float]:
    model, spyre = get_model("llama-3.1-8b"), get_accelerator("ibm-spyre")
    compile_schedule(model, spyre, workload)  # warm the catalog caches
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        compile_schedule(model, spyre, workload)
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    cases = (
        ("decode b=1 T=4096", Workload(Phase.DECODE, 1, 4096)),
        ("decode b=32 T=4096", Workload(Phase.DECODE, 32, 4096)),
        ("prefill b=1 T=2048", Workload(Phase.PREFILL, 1, 2048)),
    )
    for label, w in cases:
        ts = _time(w, runs)
        med = statistics.median(ts)
        verdict = "ok" if med < TARGET_S else "OVER TARGET"
        print(
            f"{label:20s} median {med * 1e3:8.1f} ms  min {min(ts) * 1e3:8.1f}  "
            f"max {max(ts) * 1e3:8.1f}  ({runs} runs; target < {TARGET_S:.0f} s: {verdict})"
        )


if __name__ == "__main__":
    main()
