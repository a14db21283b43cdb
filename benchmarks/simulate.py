"""Simulator speed: 10,000 requests of llama-2-7b on an A100-80GB, against stepping and vidur.

1. The ten-thousand-request run: Poisson arrivals at 4 requests/s (vidur's published setting),
   lognormal prompt lengths (mean 1,000 tokens) and outputs (mean 200); paged KV, chunked prefill,
   a 2,048-token budget. The fast mode runs ``--repeat`` times (median wall and CPU time); the
   baseline is the same run one step at a time, once, and the two must agree: the same finished
   and rejected requests, per-request TTFT and TPOT to 1e-9, KV peak, preemptions and steps.
2. The same requests vidur simulates (``benchmarks/data/vidur_conv_4qps_10k.csv``: Splitwise
   conversation lengths, Poisson 4 QPS), with vidur's vLLM setting (whole prompts, 4,096 tokens
   per batch, batch cap 128): ridgeline's loop time for the first 1,000 and for all 10,000, and
   the whole ``ridgeline simulate`` process, each as a ratio to vidur's stored timing.
3. Start-up: a fresh process from its start to the first simulation step (imports, catalog,
   workload, cost model), beside a bare interpreter's start.

The fast mode runs compiled where ``ridgeline native build`` has built it (``make`` does); part 1
then also times the interpreted modules in a child process (``RIDGELINE_NATIVE=0``).

Usage: python benchmarks/simulate.py [--requests N] [--repeat K] [--no-baseline] [--no-vidur]
       [--no-startup]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from ridgeline.analytic.pricing import Pricing
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import (
    LengthDist,
    Lengths,
    RequestSpec,
    SimConfig,
    SimResult,
    WorkloadSpec,
    generate,
    load_trace,
    native,
    simulate,
)
from ridgeline.specs import get_accelerator, get_model

DATA = Path(__file__).resolve().parent / "data"
VIDUR_TRACE = DATA / "vidur_conv_4qps_10k.csv"
# vidur (microsoft/vidur at 7d47513) on VIDUR_TRACE, vLLM scheduler, batch cap 128, llama-2-7b
# on an A100, TP1, on a 2-core AMD EPYC (Zen 1) VM: its simulation loop and its whole process,
# in seconds, by number of requests (benchmarks/data/README.md)
VIDUR_LOOP_S = {1000: 1.03, 10000: 10.63}
VIDUR_PROCESS_S = {1000: 3.83, 10000: 15.8}
VIDUR_TTFT_P50_S, VIDUR_RPS = 0.0879, 3.99  # its first 1,000 requests


def _timed(cfg: SimConfig, workload: list[RequestSpec]) -> tuple[float, float, SimResult]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = simulate(cfg, workload)
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _median_runs(
    cfg: SimConfig, workload: list[RequestSpec], repeat: int
) -> tuple[float, float, list[float], SimResult]:
    runs = [_timed(cfg, workload) for _ in range(repeat)]
    walls = [r[0] for r in runs]
    return statistics.median(walls), statistics.median(r[1] for r in runs), walls, runs[0][2]


def _rel(a: float, b: float) -> float:
    if math.isnan(a) and math.isnan(b):
        return 0.0
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def compare(fast: SimResult, steps: SimResult) -> tuple[bool, str]:
    """Whether the two runs agree as the fast mode promises, and the figures that say so."""
    pairs = list(zip(fast.requests, steps.requests, strict=True))
    ttft = max(_rel(a.ttft_s, b.ttft_s) for a, b in pairs)
    tpot = max(_rel(a.tpot_s, b.tpot_s) for a, b in pairs)
    same = (
        (fast.num_completed, fast.num_rejected) == (steps.num_completed, steps.num_rejected)
        and fast.num_preemptions == steps.num_preemptions
        and fast.num_steps == steps.num_steps
        and fast.kv_peak_frac == steps.kv_peak_frac
        and all(a.rejected == b.rejected for a, b in pairs)
        and ttft <= 1e-9
        and tpot <= 1e-9
    )
    note = (
        f"finished/rejected {fast.num_completed}/{fast.num_rejected} vs "
        f"{steps.num_completed}/{steps.num_rejected}, preemptions {fast.num_preemptions} vs "
        f"{steps.num_preemptions}, steps {fast.num_steps} vs {steps.num_steps}, KV peak "
        f"{fast.kv_peak_frac:.4f} vs {steps.kv_peak_frac:.4f}, largest relative difference: "
        f"TTFT {ttft:.1e}, TPOT {tpot:.1e}"
    )
    return same, note


def lognormal_case(n: int) -> tuple[SimConfig, list[RequestSpec]]:
    """Part 1's configuration and workload."""
    spec = WorkloadSpec(
        num_requests=n,
        rate_per_s=4.0,
        prompt=Lengths(LengthDist.LOGNORMAL, 1000, sigma=0.8),
        output=Lengths(LengthDist.LOGNORMAL, 200, sigma=0.8),
        seed=0,
    )
    cfg = SimConfig(
        get_model("llama-2-7b"),
        Pricing.ideal(get_accelerator("a100-80gb")),  # the docs' figures: the ideal roofline's
        SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=256),
    )
    return cfg, generate(spec)


# a child process: part 1's fast mode with the interpreted modules (RIDGELINE_NATIVE=0); prints
# its median wall time
_INTERPRETED = """
import runpy, sys
bench = runpy.run_path(sys.argv[1])
cfg, workload = bench["lognormal_case"](int(sys.argv[2]))
print(bench["_median_runs"](cfg, workload, int(sys.argv[3]))[0])
"""


def _interpreted_wall(n: int, repeat: int) -> float:
    env = {**os.environ, native.DISABLE_ENV: "0"}
    args = [sys.executable, "-c", _INTERPRETED, __file__, str(n), str(repeat)]
    return float(subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout)


def lognormal_run(n: int, repeat: int, baseline: bool) -> None:
    """Part 1: the ten-thousand-request run, fast mode against stepping (and, where the fast
    mode runs compiled, against its interpreted modules)."""
    cfg, workload = lognormal_case(n)
    wall, cpu, walls, res = _median_runs(cfg, workload, repeat)
    print(f"[1] {n} requests, Poisson 4/s, lognormal prompt mean 1000 and output mean 200;")
    print(f"    paged ({res.kv_blocks} blocks of 16), chunked prefill, budget 2048")
    print(
        f"    simulated: {res.num_completed} completed, {res.num_rejected} rejected, "
        f"{res.num_steps} steps, {res.num_preemptions} preemptions, makespan "
        f"{res.makespan_s:.1f} s, TTFT p50 {res.ttft_s.p50 * 1e3:.1f} ms, TPOT p50 "
        f"{res.tpot_s.p50 * 1e3:.1f} ms, KV peak {res.kv_peak_frac:.1%}"
    )
    print(
        f"    fast mode: {wall:.3f} s wall (median of {repeat}: "
        f"{', '.join(f'{w:.3f}' for w in walls)}), {cpu:.3f} s cpu; "
        f"{n / wall:,.0f} requests and {res.num_steps / wall:,.0f} steps per second of wall"
    )
    if native.mode() == "compiled":
        slow = _interpreted_wall(n, repeat)
        print(
            f"    interpreted modules (RIDGELINE_NATIVE=0): {slow:.3f} s wall (median of "
            f"{repeat}): the compiled ones are {slow / wall:.2f}x faster"
        )
    if baseline:
        step_wall, step_cpu, steps = _timed(replace(cfg, fast_forward=False), workload)
        same, note = compare(res, steps)
        print(
            f"    step by step: {step_wall:.2f} s wall, {step_cpu:.2f} s cpu "
            f"({step_cpu / cpu:.1f}x the fast mode's cpu)"
        )
        print(f"    identical metrics: {same} ({note})")


def _process_s(n: int) -> float:
    """Wall time of a whole ``ridgeline simulate`` process on the first ``n`` vidur requests."""
    exe = Path(sys.executable).with_name("ridgeline")
    cmd = (
        [str(exe)]
        if exe.exists()
        else [sys.executable, "-c", "from ridgeline.cli import main; main()"]
    )
    args = [
        "simulate",
        "--hw",
        "a100-80gb",
        "--model",
        "llama-2-7b",
        "--trace",
        str(VIDUR_TRACE),
        "--requests",
        str(n),
        "--max-seqs",
        "128",
        "--max-model-len",
        "4096",
        "--chunk",
        "0",
        "--json",
    ]
    t = time.perf_counter()
    subprocess.run(cmd + args, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def vidur_run(repeat: int) -> None:
    """Part 2: the requests vidur simulates, against vidur's stored timing."""
    workload = load_trace(VIDUR_TRACE)
    sched = SchedulerConfig(
        max_num_batched_tokens=4096,
        max_num_seqs=128,
        max_model_len=4096,
        enable_chunked_prefill=False,
    )
    cfg = SimConfig(get_model("llama-2-7b"), Pricing.ideal(get_accelerator("a100-80gb")), sched)
    print("[2] vidur's requests (Splitwise conversation lengths, Poisson 4 QPS), whole prompts,")
    print("    4096 tokens per batch, batch cap 128 (vidur's vLLM scheduler setting)")
    for n in sorted(VIDUR_LOOP_S):
        wall, cpu, _, res = _median_runs(cfg, workload[:n], repeat)
        proc = statistics.median(_process_s(n) for _ in range(3))
        print(
            f"    {n:>6} requests: loop {wall:.3f} s wall (cpu {cpu:.3f} s) vs vidur "
            f"{VIDUR_LOOP_S[n]:.2f} s: {VIDUR_LOOP_S[n] / wall:.1f}x faster; whole process "
            f"{proc:.2f} s vs {VIDUR_PROCESS_S[n]:.2f} s: {VIDUR_PROCESS_S[n] / proc:.1f}x"
        )
        if n == 1000:
            print(
                f"           simulated TTFT p50 {res.ttft_s.p50 * 1e3:.1f} ms (vidur "
                f"{VIDUR_TTFT_P50_S * 1e3:.1f} ms), {res.requests_per_s:.2f} req/s (vidur "
                f"{VIDUR_RPS:.2f}); {res.num_steps} steps"
            )


# a child process: the simulate path (``ridgeline simulate``'s defaults without the CLI) up to
# its first step; prints the wall clock there
_TO_FIRST_STEP = """
import time
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import Simulation, SimConfig, WorkloadSpec, generate
from ridgeline.analytic.pricing import Pricing
from ridgeline.specs import get_accelerator, get_model
cfg = SimConfig(get_model("llama-2-7b"), Pricing.expected(get_accelerator("a100-80gb")),
                SchedulerConfig())
sim = Simulation(cfg, generate(WorkloadSpec(num_requests=1000, rate_per_s=4.0)))
print(time.time())  # the first step starts now
"""


def startup_run(repeat: int) -> None:
    """Part 3: from process start to the first simulation step, and the modules it loaded."""
    waits = []
    for _ in range(repeat):
        t = time.time()
        out = subprocess.run(
            [sys.executable, "-c", _TO_FIRST_STEP], check=True, capture_output=True, text=True
        )
        waits.append(float(out.stdout) - t)
    bare = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t)
    print(
        f"[3] process start to the first step (1,000 requests, defaults): "
        f"{statistics.median(waits):.3f} s (median of {repeat}: "
        f"{', '.join(f'{w:.3f}' for w in waits)}); a bare interpreter {statistics.median(bare):.3f} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-baseline", action="store_true", help="skip the step-by-step run")
    ap.add_argument("--no-vidur", action="store_true", help="skip the comparison with vidur")
    ap.add_argument("--no-startup", action="store_true", help="skip the start-up timing")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(
        f"simulator speed, llama-2-7b on a100-80gb; load average {load:.2f} on {os.cpu_count()} "
        f"cores; fast mode {native.decide()}"
    )
    lognormal_run(args.requests, args.repeat, not args.no_baseline)
    if not args.no_vidur:
        vidur_run(args.repeat)
    if not args.no_startup:
        startup_run(args.repeat)


if __name__ == "__main__":
    main()
