"""The known effects, reproduced with numbers: paged vs contiguous reservation, prefix caching on
a shared-prefix workload, chunked prefill on the decode tail, speculative decoding vs its formula.
The bounds are loose on purpose (about half the measured effect) so they test direction and size,
not noise; the measured values are in docs/serving.md."""

from __future__ import annotations

import pytest

from ridgeline.analytic.pricing import Pricing
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.serving.spec_decode import SpecDecodeConfig, expected_tokens_per_step
from ridgeline.sim import LengthDist, Lengths, SimConfig, WorkloadSpec, generate, simulate
from ridgeline.specs import get_accelerator, get_model

A100 = get_accelerator("a100-80gb")
IDEAL = Pricing.ideal(A100)  # these runs' figures are the ideal roofline's
LLAMA = get_model("llama-2-7b")


@pytest.mark.slow
def test_paged_beats_contiguous_reservation_on_waste_and_concurrency() -> None:
    wl = generate(
        WorkloadSpec(
            num_requests=150,
            rate_per_s=200,
            prompt=Lengths(LengthDist.UNIFORM, 300, lo=50),
            output=Lengths(LengthDist.UNIFORM, 100, lo=10),
            seed=1,
        )
    )
    sched = SchedulerConfig(max_model_len=2048, max_num_batched_tokens=4096)
    paged = simulate(SimConfig(LLAMA, IDEAL, sched, num_blocks=1000), wl)
    contig = simulate(
        SimConfig(
            LLAMA,
            IDEAL,
            SchedulerConfig(max_model_len=2048, max_num_batched_tokens=4096, policy="contiguous"),
            num_blocks=1000,
        ),
        wl,
    )
    assert contig.max_running == 7  # 1000 blocks × 16 slots ÷ 2048 reserved per request
    assert paged.max_running >= 4 * contig.max_running
    assert contig.unused_allocated_frac > 0.7  # reserved but unused
    assert paged.unused_allocated_frac < 0.05  # only the last partial block of each request
    assert paged.requests_per_s > 2 * contig.requests_per_s
    static = simulate(
        SimConfig(
            LLAMA,
            IDEAL,
            SchedulerConfig(
                max_model_len=2048, max_num_batched_tokens=4096, policy="static", static_slots=16
            ),
            num_blocks=1000,
        ),
        wl,
    )
    assert static.max_running <= 16 and 0.0 < static.idle_slot_frac < 1.0
    assert paged.idle_slot_frac == 0.0


@pytest.mark.slow
def test_prefix_caching_cuts_ttft_and_raises_throughput_on_shared_prefixes() -> None:
    wl = generate(
        WorkloadSpec(
            num_requests=120,
            rate_per_s=40,
            prompt=Lengths(LengthDist.FIXED, 128),
            output=Lengths(LengthDist.FIXED, 16),
            num_prefixes=4,
            prefix_len=2048,
            seed=2,
        )
    )
    off = simulate(SimConfig(LLAMA, IDEAL), wl)
    on = simulate(SimConfig(LLAMA, IDEAL, prefix_caching=True), wl)
    assert on.prefix_hit_rate > 0.85  # all but the first request per prefix reuse 2,048 tokens
    assert off.prefix_hit_rate == 0.0
    assert on.ttft_s.mean < 0.3 * off.ttft_s.mean
    assert on.requests_per_s > 1.2 * off.requests_per_s


@pytest.mark.slow
def test_chunked_prefill_shortens_the_inter_token_latency_tail() -> None:
    wl = generate(
        WorkloadSpec(
            num_requests=60,
            rate_per_s=4,
            prompt=Lengths(LengthDist.LOGNORMAL, 3000, sigma=0.5, hi=7000),
            output=Lengths(LengthDist.FIXED, 200),
            seed=3,
        )
    )
    whole = SchedulerConfig(max_num_batched_tokens=8192, enable_chunked_prefill=False)
    chunked = SchedulerConfig(max_num_batched_tokens=512)
    a = simulate(SimConfig(LLAMA, IDEAL, whole), wl)
    b = simulate(SimConfig(LLAMA, IDEAL, chunked), wl)
    assert b.itl_s.p99 < 0.5 * a.itl_s.p99  # no decode waits behind a whole 3,000-token prompt
    assert b.tpot_s.p99 < a.tpot_s.p99


@pytest.mark.slow
@pytest.mark.parametrize(("alpha", "k"), [(0.7, 4), (0.5, 2)])
def test_spec_decode_tokens_per_step_match_the_formula(alpha: float, k: int) -> None:
    wl = generate(
        WorkloadSpec(num_requests=40, rate_per_s=50, output=Lengths(LengthDist.FIXED, 400), seed=4)
    )
    cfg = SchedulerConfig(spec=SpecDecodeConfig(k, alpha))
    res = simulate(SimConfig(LLAMA, IDEAL, cfg, seed=11), wl)
    want = expected_tokens_per_step(alpha, k)
    # drafts are capped near the end of each output, which lowers the mean by < 1 %
    assert res.tokens_per_step_per_seq == pytest.approx(want, rel=0.03)
    plain = simulate(SimConfig(LLAMA, IDEAL), wl)
    assert res.tpot_s.mean < plain.tpot_s.mean / (0.7 * want)  # free drafts: time per token falls
