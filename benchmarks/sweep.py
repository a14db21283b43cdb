"""Benchmark: a sweep of >= 1,000,000 (batch, context) decode points for one model on one
accelerator, vectorised (numpy arrays through ``ridgeline.sweep``) against a Python loop over the
single-point API (``ridgeline.step_cost``) — the same formulas, two paths.

Prints points per second of each path (median of several runs) and their ratio. Target: the
vectorised path above one million points per second on one core.

    python benchmarks/sweep.py [--points N] [--repeats R] [--model M] [--hw H]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the target says

import numpy as np  # noqa: E402

import ridgeline as rl  # noqa: E402


def _vectorised(
    model: rl.ModelSpec, acc: rl.Accelerator, batch: np.ndarray, ctx: np.ndarray
) -> float:
    start = time.perf_counter()
    result = rl.sweep(model, acc, rl.Phase.DECODE, batch, ctx)
    elapsed = time.perf_counter() - start
    assert result.step_time_s.shape == batch.shape
    return elapsed


def _loop(model: rl.ModelSpec, acc: rl.Accelerator, batch: np.ndarray, ctx: np.ndarray) -> float:
    start = time.perf_counter()
    total_s = 0.0
    for b, c in zip(batch.tolist(), ctx.tolist(), strict=True):
        total_s += rl.step_cost(model, acc, rl.Workload(rl.Phase.DECODE, b, c)).step_time_s
    elapsed = time.perf_counter() - start
    assert total_s > 0
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--loop-points", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default="llama-3.1-8b")
    parser.add_argument("--hw", default="h100-sxm")
    args = parser.parse_args()
    model, acc = rl.get_model(args.model), rl.get_accelerator(args.hw)
    rng = np.random.default_rng(0)
    batch = rng.integers(1, 513, args.points)
    ctx = rng.integers(1, 131_073, args.points)
    vec = [args.points / _vectorised(model, acc, batch, ctx) for _ in range(args.repeats)]
    sub = slice(0, args.loop_points)
    loop = [args.loop_points / _loop(model, acc, batch[sub], ctx[sub]) for _ in range(3)]
    # the two paths agree on the loop's points
    s = rl.sweep(model, acc, rl.Phase.DECODE, batch[sub], ctx[sub])
    one = rl.step_cost(model, acc, rl.Workload(rl.Phase.DECODE, int(batch[0]), int(ctx[0])))
    assert abs(s.step_time_s[0] - one.step_time_s) <= 1e-12 * one.step_time_s
    v, lp = statistics.median(vec), statistics.median(loop)
    print(
        f"model {model.name} on {acc.name}, decode, {args.points:,} points (batch 1-512 x context 1-131072)"
    )
    print(
        f"vectorised sweep : {v:>12,.0f} points/s  (median of {args.repeats}; runs: "
        f"{', '.join(f'{x:,.0f}' for x in vec)})"
    )
    print(
        f"single-point loop: {lp:>12,.0f} points/s  (median of 3 runs over {args.loop_points:,} points)"
    )
    print(
        f"ratio vectorised / loop: {v / lp:,.0f}x   target >= 1,000,000 points/s: "
        f"{'met' if v >= 1e6 else 'NOT met'}   load average: {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
