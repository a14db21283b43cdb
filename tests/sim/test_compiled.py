"""Compiled shapes cost time: the simulator prices a step on a compiled-schedule accelerator at
its compiled shape, with the schedule's cost model (``sim.compiled``)."""

from __future__ import annotations

import itertools
from functools import cache

import pytest

from ridgeline.analytic import Phase, Workload
from ridgeline.analytic.dataflow import Bucket, ScheduleOptions, compile_schedule
from ridgeline.analytic.pallas import tpu_step
from ridgeline.analytic.pricing import Pricing
from ridgeline.errors import ConfigError
from ridgeline.serving import BlockPool, KVCacheManager, Request, SamplingParams, Scheduler
from ridgeline.serving.policies import StaticOptions
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import SimConfig, WorkloadSpec, generate, parse_lengths, simulate
from ridgeline.sim.buckets import CompileBudget, choose_buckets, max_buckets, padded_tokens
from ridgeline.sim.compiled import CompiledShapes, CompiledStepCost, Row
from ridgeline.sim.variants import variant
from ridgeline.specs import get_accelerator, get_model

SPYRE = "ibm-spyre"
LLAMA = "llama-3.1-8b"


def _cost(shapes: CompiledShapes, hw: str = SPYRE) -> CompiledStepCost:
    return CompiledStepCost(get_model(LLAMA), Pricing.ideal(get_accelerator(hw)), shapes)


def test_spyre_step_reads_the_bucket_and_matches_schedule_by_hand() -> None:
    """3 sequences of 3,000 tokens run the (4, 4096) program: the KV of 4 × 4096 tokens and
    the time of ``ridgeline schedule -b 3 -t 3000``."""
    cost = _cost(CompiledShapes(batch_sizes=(1, 2, 4, 8), seq_buckets=(1024, 2048, 4096)))
    rows = [Row(1, 3000)] * 3
    (program,) = cost.programs(rows, list(cost.buckets))
    assert (program.workload.batch, program.workload.context_len) == (4, 4096)
    # 2 (K and V) × 32 layers × 8 KV heads × 128 head dim × 2 B × 4 sequences × 4096 tokens
    assert program.kv_read_bytes == 2 * 32 * 8 * 128 * 2 * 4 * 4096 == 2_147_483_648
    schedule = compile_schedule(
        get_model(LLAMA), get_accelerator(SPYRE), Workload(Phase.DECODE, 3, 3000)
    )
    assert schedule.bucket == Bucket(4, 4096)
    assert cost.step_rows(rows) == pytest.approx(schedule.time_s, rel=1e-12)
    # the padding is tallied: useful KV is 3 × 3001 tokens × 131,072 B
    stats = cost.stats()
    assert stats.useful_kv_read_bytes == 3 * 3001 * 131_072
    assert stats.kv_ratio == pytest.approx(2_147_483_648 / (3 * 3001 * 131_072))


@pytest.mark.slow
def test_prefill_runs_one_program_per_compiled_chunk() -> None:
    """A 1,200-token prompt with 512-token chunks: three programs (1, 512, T) whose buckets hold
    each chunk's last real position (512, 1024, 1200 → 1024, 1024, 2048)."""
    cost = _cost(CompiledShapes((1, 2), (1024, 2048), chunk_tokens=512))
    progs = cost.programs([Row(1200, 0)], list(cost.buckets))
    shapes = [(p.workload.batch, p.workload.prompt_len, p.workload.context_len) for p in progs]
    assert shapes == [(1, 512, 1024), (1, 512, 1024), (1, 512, 2048)]
    opts = ScheduleOptions(keep_events=False)
    m, acc = get_model(LLAMA), get_accelerator(SPYRE)
    by_hand = sum(
        compile_schedule(m, acc, Workload(Phase.PREFILL, 1, t, 512), Bucket(1, t), opts).time_s
        for t in (1024, 1024, 2048)
    )
    assert cost.step_rows([Row(1200, 0)]) == pytest.approx(by_hand, rel=1e-12)


def test_a_missing_bucket_is_refused_or_compiled_once() -> None:
    refuse = _cost(CompiledShapes((1,), (1024,)))
    with pytest.raises(ConfigError, match="no compiled bucket holds 1501"):
        refuse.step_rows([Row(1, 1500)])
    shapes = CompiledShapes((1,), (1024,), recompile=True, compile_s_per_program=20.0)
    cost = _cost(shapes)
    first = cost.step_rows([Row(1, 1500)])
    second = cost.step_rows([Row(1, 1501)])
    # a new bucket (2048) needs its 1 decode + 1 prefill programs: 2 × 20 s, once
    assert first - second == pytest.approx(40.0, rel=1e-9)
    assert cost.buckets == [1024, 2048]
    assert (cost.stats().recompiles, cost.stats().compile_s) == (2, 40.0)


def test_the_static_policy_refuses_or_reserves_a_compiled_bucket() -> None:
    def sched(recompile: bool) -> Scheduler:
        cfg = SchedulerConfig(
            max_num_batched_tokens=4096,
            max_model_len=8192,
            policy="static",
            static_buckets=(1024,),
            static=StaticOptions(recompile=recompile),
        )
        return Scheduler(cfg, KVCacheManager(BlockPool(1000, 16)))

    req = Request("a", list(range(1400)), SamplingParams(100))
    assert "no static reservation holds it: 1500 tokens" in sched(False).never_fits(
        req.max_total_tokens
    )
    assert sched(True).policy.reserve_tokens(req.max_total_tokens) == 2048


def test_prefix_copy_costs_two_passes_over_the_prefix_kv() -> None:
    """Copying 1,024 cached tokens into a slot reads and writes 1,024 × 131,072 B at 200 GB/s."""
    cost = _cost(CompiledShapes((1, 2), (2048,)))
    plain = cost.step_rows([Row(100, 1024)])
    copied = cost.step_rows([Row(100, 1024)], copy_tokens=1024)
    assert copied - plain == pytest.approx(2 * 1024 * 131_072 / 200e9, rel=1e-9)


def test_tpu_programs_are_priced_by_the_pallas_pipeline() -> None:
    cost = _cost(CompiledShapes((1, 2, 4), (4096,)), hw="tpu-v5e")
    w = Workload(Phase.DECODE, 4, 4096)
    expected = tpu_step(get_model(LLAMA), get_accelerator("tpu-v5e"), w).time_s
    assert cost.step_rows([Row(1, 2000)] * 3) == pytest.approx(expected, rel=1e-12)


def test_bucket_search_is_optimal_against_brute_force() -> None:
    lengths = [130, 150, 300, 310, 700, 900, 1000, 2000, 2100, 4000]
    for count in (1, 2, 3, 4):
        got = choose_buckets(lengths, count, granule=64)
        cands = sorted({-(-x // 64) * 64 for x in lengths})
        best = min(
            padded_tokens(lengths, combo)
            for k in range(1, count + 1)
            for combo in itertools.combinations(cands, k)
            if combo[-1] >= max(lengths)
        )
        assert len(got) <= count and padded_tokens(lengths, got) == best
    # two buckets by hand: {130..1000} -> 1024, {2000..4000} -> 4032
    assert choose_buckets(lengths, 2, granule=64) == (1024, 4032)


def test_the_budget_limits_programs_by_time_and_memory() -> None:
    b = CompileBudget(
        compile_s_per_program=20,
        compile_budget_s=1200,
        program_bytes=2**25,
        program_memory_bytes=2**31,
    )
    assert b.max_programs == min(1200 // 20, 2**31 // 2**25) == 60
    assert max_buckets(b, programs_per_bucket=7) == 8
    with pytest.raises(ConfigError, match="cannot hold one bucket"):
        max_buckets(CompileBudget(20, 100), programs_per_bucket=7)


@cache
def _shared_prefix_runs() -> tuple[object, object]:
    """A shared-prefix workload: 4 system prompts of 1,024 tokens, lognormal prompts (mean 512) and
    outputs (mean 128), Poisson 0.5/s, 60 requests, max_model_len 4096, on Spyre."""
    spec = WorkloadSpec(
        num_requests=60,
        rate_per_s=0.5,
        prompt=parse_lengths("lognormal:512", 512),
        output=parse_lengths("lognormal:128", 128),
        num_prefixes=4,
        prefix_len=1024,
    )
    wl = generate(spec)
    sched = SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=256, max_model_len=4096)
    base = SimConfig(get_model(LLAMA), Pricing.ideal(get_accelerator(SPYRE)), sched)
    return simulate(variant(base, "paged", wl), wl), simulate(variant(base, "static", wl), wl)


@pytest.mark.slow
def test_static_tpot_is_above_paged_by_the_padding_ratio() -> None:
    paged, static = _shared_prefix_runs()
    c = static.compiled  # type: ignore[attr-defined]
    assert c is not None and c.time_ratio > 1.05  # padding costs time
    ratio = static.tpot_s.p50 / paged.tpot_s.p50  # type: ignore[attr-defined]
    assert ratio == pytest.approx(c.time_ratio, rel=0.10)
    # and bytes: the programs read more KV than the contexts hold
    assert c.kv_read_bytes > 1.5 * c.useful_kv_read_bytes
