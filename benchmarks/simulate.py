"""Simulator speed: 10,000 requests of llama-2-7b on an A100-80GB, paged KV, chunked prefill.

Workload (as issue 3 asks): Poisson arrivals, lognormal prompt lengths (mean 1,000 tokens) and
output lengths (mean 200). The rate, 4 requests/s, is the setting of vidur's published speed figure
(Llama-2-7B on an A100, Poisson 4 req/s, ~1,165/220 tokens: ~3 s of loop for 1,000 requests;
reference/serving.md). The same run is repeated with the closed-form decode runs switched off, as
the baseline, and both are checked to give the same result.

Usage: python benchmarks/simulate.py [--requests N] [--rate R] [--repeat K] [--no-baseline]
"""

from __future__ import annotations

import argparse
import statistics
import time

from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import LengthDist, Lengths, SimConfig, WorkloadSpec, generate, simulate
from ridgeline.specs import get_accelerator, get_model


def _run(cfg: SimConfig, workload: list) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = simulate(cfg, workload)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-baseline", action="store_true")
    args = ap.parse_args()
    spec = WorkloadSpec(
        num_requests=args.requests,
        rate_per_s=args.rate,
        prompt=Lengths(LengthDist.LOGNORMAL, 1000, sigma=0.8),
        output=Lengths(LengthDist.LOGNORMAL, 200, sigma=0.8),
        seed=0,
    )
    t = time.perf_counter()
    workload = generate(spec)
    gen_s = time.perf_counter() - t
    cfg = SimConfig(
        get_model("llama-2-7b"),
        get_accelerator("a100-80gb"),
        SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=256, enable_chunked_prefill=True),
    )
    runs = [_run(cfg, workload) for _ in range(args.repeat)]
    wall = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[1] for r in runs)
    res = runs[0][2]
    decode_tokens = sum(r.output_len for r in res.requests)  # type: ignore[attr-defined]
    print(
        f"workload: {args.requests} requests, Poisson {args.rate}/s, lognormal prompt mean 1000, output mean 200 (generated in {gen_s:.2f} s)"
    )
    print(
        f"config: llama-2-7b on a100-80gb, paged (block 16, {res.kv_blocks} blocks), chunked prefill, budget 2048"
    )  # type: ignore[attr-defined]
    print(
        f"simulated: {res.num_completed} completed, {res.num_rejected} rejected, {res.num_steps} steps, makespan {res.makespan_s:.1f} s, TTFT p50 {res.ttft_s.p50 * 1e3:.1f} ms, TPOT p50 {res.tpot_s.p50 * 1e3:.1f} ms"
    )  # type: ignore[attr-defined]
    print(
        f"wall time (median of {args.repeat}): {wall:.2f} s   cpu time: {cpu:.2f} s   runs: {', '.join(f'{r[0]:.2f}' for r in runs)}"
    )
    print(
        f"simulated requests per second: {args.requests / wall:,.0f} of wall time, "
        f"{args.requests / cpu:,.0f} of cpu time"
    )
    print(
        f"decode tokens per second: {decode_tokens / wall:,.0f} of wall time, "
        f"{decode_tokens / cpu:,.0f} of cpu time"
    )
    print(f"cpu/wall: {cpu / wall:.0%} (below 100%: other processes share this core)")
    if not args.no_baseline:
        base = _run(SimConfig(cfg.model, cfg.hw, cfg.scheduler, fast_forward=False), workload)
        same = abs(base[2].ttft_s.mean - res.ttft_s.mean) <= 1e-9 * max(res.ttft_s.mean, 1.0)  # type: ignore[attr-defined]
        print(
            f"baseline (one step at a time): {base[0]:.2f} s wall, {base[1]:.2f} s cpu; "
            f"closed-form speedup {base[1] / cpu:.1f}x in cpu time; same TTFT mean: {same}"
        )


if __name__ == "__main__":
    main()
