"""The four known serving effects, measured by the simulator on llama-2-7b / a100-80gb with the
same workloads as tests/sim/test_sim_effects.py, printed with their sizes.

Usage: python benchmarks/serving_effects.py
"""

from __future__ import annotations

from ridgeline.analytic.pricing import Pricing
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.serving.spec_decode import SpecDecodeConfig, expected_tokens_per_step
from ridgeline.sim import LengthDist, Lengths, SimConfig, WorkloadSpec, generate, simulate
from ridgeline.specs import get_accelerator, get_model

A100 = get_accelerator("a100-80gb")
IDEAL = Pricing.ideal(A100)  # these runs' figures are the ideal roofline's
LLAMA = get_model("llama-2-7b")


def paged_vs_contiguous() -> None:
    wl = generate(
        WorkloadSpec(
            150,
            200,
            prompt=Lengths(LengthDist.UNIFORM, 300, lo=50),
            output=Lengths(LengthDist.UNIFORM, 100, lo=10),
            seed=1,
        )
    )
    res = {}
    for policy in ("fcfs", "contiguous"):
        sched = SchedulerConfig(max_model_len=2048, max_num_batched_tokens=4096, policy=policy)
        res[policy] = simulate(SimConfig(LLAMA, IDEAL, sched, num_blocks=1000), wl)
    p, c = res["fcfs"], res["contiguous"]
    print("paged vs contiguous (1,000 blocks, 150 requests at once, max_model_len 2048):")
    print(
        f"  allocated-but-unused KV: paged {p.unused_allocated_frac:.1%}, contiguous {c.unused_allocated_frac:.1%}"
    )
    print(
        f"  max concurrent requests: paged {p.max_running}, contiguous {c.max_running} ({p.max_running / c.max_running:.1f}x)"
    )
    print(
        f"  throughput: paged {p.requests_per_s:.1f} req/s, contiguous {c.requests_per_s:.1f} req/s ({p.requests_per_s / c.requests_per_s:.2f}x)"
    )


def prefix_caching() -> None:
    wl = generate(
        WorkloadSpec(
            120,
            40,
            prompt=Lengths(LengthDist.FIXED, 128),
            output=Lengths(LengthDist.FIXED, 16),
            num_prefixes=4,
            prefix_len=2048,
            seed=2,
        )
    )
    off = simulate(SimConfig(LLAMA, IDEAL), wl)
    on = simulate(SimConfig(LLAMA, IDEAL, prefix_caching=True), wl)
    print("prefix caching (4 system prompts of 2,048 tokens + 128-token questions, 40 req/s):")
    print(
        f"  hit rate {on.prefix_hit_rate:.1%}; TTFT mean {off.ttft_s.mean * 1e3:.0f} -> {on.ttft_s.mean * 1e3:.0f} ms ({off.ttft_s.mean / on.ttft_s.mean:.1f}x lower)"
    )
    print(
        f"  throughput {off.requests_per_s:.1f} -> {on.requests_per_s:.1f} req/s ({on.requests_per_s / off.requests_per_s:.2f}x)"
    )


def chunked_prefill() -> None:
    wl = generate(
        WorkloadSpec(
            60,
            4,
            prompt=Lengths(LengthDist.LOGNORMAL, 3000, sigma=0.5, hi=7000),
            output=Lengths(LengthDist.FIXED, 200),
            seed=3,
        )
    )
    a = simulate(
        SimConfig(
            LLAMA, IDEAL, SchedulerConfig(max_num_batched_tokens=8192, enable_chunked_prefill=False)
        ),
        wl,
    )
    b = simulate(SimConfig(LLAMA, IDEAL, SchedulerConfig(max_num_batched_tokens=512)), wl)
    print("chunked prefill (lognormal 3,000-token prompts, 200-token outputs, 4 req/s):")
    print(
        f"  ITL p99 whole prompts {a.itl_s.p99 * 1e3:.1f} ms -> chunks of 512 {b.itl_s.p99 * 1e3:.1f} ms ({a.itl_s.p99 / b.itl_s.p99:.1f}x lower)"
    )
    print(
        f"  TPOT p99 {a.tpot_s.p99 * 1e3:.2f} -> {b.tpot_s.p99 * 1e3:.2f} ms; TTFT p50 {a.ttft_s.p50 * 1e3:.0f} -> {b.ttft_s.p50 * 1e3:.0f} ms"
    )


def spec_decode() -> None:
    wl = generate(WorkloadSpec(40, 50, output=Lengths(LengthDist.FIXED, 400), seed=4))
    plain = simulate(SimConfig(LLAMA, IDEAL), wl)
    print(
        "speculative decoding (free drafts; tokens per verify step per sequence vs (1 - a^(k+1))/(1 - a)):"
    )
    for alpha, k in ((0.5, 2), (0.7, 4), (0.9, 4)):
        res = simulate(
            SimConfig(LLAMA, IDEAL, SchedulerConfig(spec=SpecDecodeConfig(k, alpha)), seed=11), wl
        )
        want = expected_tokens_per_step(alpha, k)
        print(
            f"  a={alpha} k={k}: measured {res.tokens_per_step_per_seq:.3f}, formula {want:.3f} ({res.tokens_per_step_per_seq / want - 1:+.1%}); TPOT {plain.tpot_s.mean * 1e3:.2f} -> {res.tpot_s.mean * 1e3:.2f} ms"
        )


if __name__ == "__main__":
    paged_vs_contiguous()
    prefix_caching()
    chunked_prefill()
    spec_decode()
