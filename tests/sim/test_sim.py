"""Simulator tests: exact single-request timing, closed form = step by step, overload, traces,
tiers and disaggregation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ridgeline.analytic.pricing import Pricing
from ridgeline.errors import ConfigError
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.serving.tiers import TierSpec
from ridgeline.sim import (
    Arrival,
    Disagg,
    LengthDist,
    Lengths,
    RequestSpec,
    SimConfig,
    Simulation,
    StepCostModel,
    Tokens,
    WorkloadSpec,
    generate,
    load_trace,
    simulate,
)
from ridgeline.specs import get_accelerator, get_model

DATA = Path(__file__).parent.parent / "data"
A100 = get_accelerator("a100-80gb")
IDEAL = Pricing.ideal(A100)  # these runs' figures are the ideal roofline's
LLAMA = get_model("llama-2-7b")


def one(prompt: int, output: int, at: float = 0.0, rid: str = "r0", base: int = 0) -> RequestSpec:
    """A request whose prompt is tokens base, base+1, ... (distinct bases share nothing)."""
    return RequestSpec(rid, at, Tokens([range(base, base + prompt)]), range(10**9, 10**9 + output))


def test_single_request_ttft_is_its_prefill_step_and_tpot_the_decode_steps() -> None:
    res = simulate(SimConfig(LLAMA, IDEAL), [one(1000, 50)])
    cost = StepCostModel(LLAMA, IDEAL)
    (r,) = res.requests
    assert r.ttft_s == pytest.approx(cost.step_time_s([1000], [0]), rel=1e-12)
    decode = [cost.step_time_s([1], [1000 + j]) for j in range(49)]
    assert r.tpot_s == pytest.approx(sum(decode) / 49, rel=1e-9)
    # hand check: (6.74e9 params − 0.13e9 embedding rows not read) × 2 B = 13.2 GB, plus ~0.53 GB
    # of KV at ~1,025 tokens × 524,288 B, at 2.039 TB/s: 6.48 + 0.26 ms
    assert r.tpot_s == pytest.approx(0.00674, rel=0.01)
    assert r.queue_s == 0.0 and r.e2e_s == pytest.approx(r.ttft_s + 49 * r.tpot_s, rel=1e-9)


@pytest.mark.slow
def test_closed_form_decode_runs_give_the_step_by_step_result() -> None:
    spec = WorkloadSpec(
        num_requests=120,
        rate_per_s=20,
        prompt=Lengths(LengthDist.LOGNORMAL, 300),
        output=Lengths(LengthDist.UNIFORM, 60),
        seed=3,
    )
    wl = generate(spec)
    cfg = SimConfig(LLAMA, IDEAL, SchedulerConfig(max_num_batched_tokens=512), num_blocks=400)
    fast = simulate(cfg, wl)
    slow = simulate(SimConfig(LLAMA, IDEAL, cfg.scheduler, num_blocks=400, fast_forward=False), wl)
    assert fast.num_preemptions == slow.num_preemptions > 0
    assert fast.num_steps == slow.num_steps
    for a, b in zip(fast.requests, slow.requests, strict=True):
        assert (a.request_id, a.output_len, a.num_preemptions) == (
            b.request_id,
            b.output_len,
            b.num_preemptions,
        )
        assert a.e2e_s == pytest.approx(b.e2e_s, rel=1e-9)
        assert a.ttft_s == pytest.approx(b.ttft_s, rel=1e-9)


def _requests(rate: float) -> list[RequestSpec]:
    spec = WorkloadSpec(
        num_requests=300,
        rate_per_s=rate,
        prompt=Lengths(LengthDist.UNIFORM, 400, lo=50),
        output=Lengths(LengthDist.FIXED, 100),
        seed=5,
    )
    return generate(spec)


@pytest.mark.slow
def test_overload_completes_or_rejects_every_request_and_never_exceeds_memory() -> None:
    # what the machine sustains: the same requests all queued at once, completed per second
    saturated = simulate(SimConfig(LLAMA, IDEAL, num_blocks=400), _requests(1e6))
    sustained = saturated.requests_per_s
    wl = _requests(3.0 * sustained)
    wl[7] = one(7000, 10, wl[7].arrival_s, "too-long")  # can never fit 400 blocks of 16
    sim = Simulation(SimConfig(LLAMA, IDEAL, num_blocks=400), wl)
    res = sim.run()
    assert res.num_completed + res.num_rejected == 300
    assert res.num_rejected == 1 and res.reject_reasons == ("1× larger than the KV pool",)
    assert res.requests[7].rejected == "larger than the KV pool: 7010 tokens > 6400 slots"
    assert res.num_preemptions > 0 and res.queue_s.p99 > 1.0  # it really was overloaded
    assert res.requests_per_s == pytest.approx(sustained, rel=0.15)  # it ran at capacity
    assert max(res.timeline.used_frac) <= 1.0 and res.kv_peak_frac > 0.9
    for inst in sim.instances:
        inst.scheduler.kv.pool.check()
        assert inst.scheduler.kv.pool.num_used == 0 and not inst.scheduler.has_unfinished


def test_a_simulation_is_deterministic_for_a_seed() -> None:
    spec = WorkloadSpec(num_requests=40, rate_per_s=10, output=Lengths(LengthDist.ZIPF, 40), seed=9)
    a = simulate(SimConfig(LLAMA, IDEAL), generate(spec))
    b = simulate(SimConfig(LLAMA, IDEAL), generate(spec))
    assert a.to_dict() == b.to_dict()


def test_traces_jsonl_and_csv() -> None:
    reqs = load_trace(DATA / "trace_tiny.jsonl")
    assert [r.prompt_len for r in reqs] == [300, 280, 18, 64]
    assert list(reqs[0].prompt[:256]) == list(reqs[1].prompt[:256])  # shared prefix sys-a
    assert reqs[0].prompt[256] != reqs[1].prompt[256]
    assert reqs[2].prompt[:3] == (1, 2, 3)
    csv = load_trace(DATA / "trace_tiny.csv")
    assert [(r.prompt_len, r.output_len) for r in csv] == [
        (480, 10),
        (318, 8),
        (110, 27),
        (743, 14),
    ]
    assert csv[3].arrival_s == pytest.approx(0.140684)
    with pytest.raises(ConfigError, match=r"trace_bad.jsonl:2: field prompt_len: not a number"):
        load_trace(DATA / "trace_bad.jsonl")


def test_prefix_blocks_offloaded_to_host_come_back_on_a_hit() -> None:
    shared = [
        RequestSpec(
            f"s{i}",
            i * 2.0,
            Tokens([range(512), range(10**6 * (i + 1), 10**6 * (i + 1) + 64)]),
            range(4),
        )
        for i in range(2)
    ]
    filler = [one(1000, 4, 0.5 + 0.1 * i, f"f{i}", base=10**8 * (i + 1)) for i in range(3)]
    host = TierSpec("host", 1e12, 32e9)
    wl = sorted([*shared, *filler], key=lambda r: r.arrival_s)
    res = simulate(SimConfig(LLAMA, IDEAL, num_blocks=70, prefix_caching=True, tiers=(host,)), wl)
    (traffic,) = res.tier_traffic
    assert traffic.hit_blocks == 32  # the whole 512-token prefix came back from host memory
    assert traffic.bytes_out == pytest.approx(32 * 16 * 524288)
    by_id = {r.request_id: r for r in res.requests}
    assert by_id["s1"].cached_tokens == 512


def test_disaggregation_adds_the_kv_transfer_before_decode() -> None:
    link = Disagg(1, 1, link_bandwidth_bytes_per_s=10e9, link_latency_s=0.002)
    res = simulate(SimConfig(LLAMA, IDEAL, disagg=link), [one(1000, 20)])
    mixed = simulate(SimConfig(LLAMA, IDEAL), [one(1000, 20)])
    (d,), (m,) = res.requests, mixed.requests
    assert d.ttft_s == pytest.approx(m.ttft_s, rel=1e-12)  # the prefill instance samples token 1
    transfer = 0.002 + 1000 * 524288 / 10e9
    assert d.e2e_s - m.e2e_s == pytest.approx(transfer, rel=1e-6)


def test_multi_turn_prompts_contain_the_previous_answer_and_hit_the_cache() -> None:
    spec = WorkloadSpec(
        num_requests=12,
        rate_per_s=1,
        prompt=Lengths(LengthDist.FIXED, 100),
        output=Lengths(LengthDist.FIXED, 40),
        turns=3,
        think_s=2.0,
        seed=1,
    )
    wl = generate(spec)
    by_id = {r.request_id: r for r in wl}
    t0, t1 = by_id["c0t0"], by_id["c0t1"]
    assert t1.prompt_len == 100 + 40 + 100 and t1.arrival_s > t0.arrival_s
    assert list(t1.prompt[:140]) == [*t0.prompt, *t0.output]
    res = simulate(SimConfig(LLAMA, IDEAL, prefix_caching=True), wl)
    hits = {r.request_id: r.cached_tokens for r in res.requests}
    assert hits["c0t0"] == 0 and hits["c0t1"] == 128  # 140 shared tokens → 8 full blocks
    assert hits["c0t2"] == 272  # 100 + 40 + 100 + 40 = 280 shared → 17 blocks


@pytest.mark.slow
def test_gamma_arrivals_keep_the_mean_rate_and_are_burstier() -> None:
    poisson = generate(WorkloadSpec(num_requests=4000, rate_per_s=10, seed=2))
    gamma = generate(
        WorkloadSpec(num_requests=4000, rate_per_s=10, arrival=Arrival.GAMMA, cv=3.0, seed=2)
    )
    for wl, cv in ((poisson, 1.0), (gamma, 3.0)):
        gaps = np.diff([0.0] + [r.arrival_s for r in wl])
        assert gaps.mean() == pytest.approx(0.1, rel=0.1)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.15)


def test_disaggregation_rejects_before_prefill_what_decode_cannot_hold() -> None:
    cfg = SimConfig(LLAMA, IDEAL, SchedulerConfig(max_model_len=1024), disagg=Disagg(1, 1))
    res = simulate(cfg, [one(1000, 100), one(200, 10, 0.0, "ok", base=10**7)])
    assert res.num_rejected == 1 and res.requests[0].rejected.startswith(
        "longer than max_model_len"
    )
    assert res.num_steps == 1 + 9  # only "ok" ran: 1 prefill step, then 9 decode steps


def test_per_request_acceptance_overrides_the_global_rate() -> None:
    from ridgeline.serving.spec_decode import SpecDecodeConfig

    sure = RequestSpec("sure", 0.0, Tokens([range(100)]), range(5000, 5100), spec_acceptance=1.0)
    never = RequestSpec(
        "never", 0.0, Tokens([range(10**6, 10**6 + 100)]), range(9000, 9100), spec_acceptance=0.0
    )
    cfg = SimConfig(LLAMA, IDEAL, SchedulerConfig(spec=SpecDecodeConfig(4, 0.5)))
    res = simulate(cfg, [sure, never])
    # "sure" arrives first and prefills alone (step 1), then takes 5 tokens per verify step
    # (20 steps for its other 99); "never" prefills in step 2 and then takes 1 token per step
    assert res.num_steps == 1 + 1 + 99
    assert res.tokens_per_step_per_seq == pytest.approx((99 + 99) / (20 + 99))


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fcfs", "contiguous"])
def test_closed_form_matches_steps_when_admission_waits_for_memory(policy: str) -> None:
    """Regression: a preemption frees blocks, so a head-of-line request blocked on memory may be
    admitted at the next step; the closed form must not skip that step."""
    wl = generate(
        WorkloadSpec(
            80,
            30,
            prompt=Lengths(LengthDist.LOGNORMAL, 300),
            output=Lengths(LengthDist.UNIFORM, 80),
            seed=2,
        )
    )
    sched = SchedulerConfig(
        max_num_batched_tokens=256, max_num_seqs=16, policy=policy, max_model_len=2048
    )
    fast = simulate(SimConfig(LLAMA, IDEAL, sched, num_blocks=170), wl)
    slow = simulate(SimConfig(LLAMA, IDEAL, sched, num_blocks=170, fast_forward=False), wl)
    assert (fast.num_steps, fast.num_preemptions) == (slow.num_steps, slow.num_preemptions)
    assert [r.e2e_s for r in fast.requests] == pytest.approx(
        [r.e2e_s for r in slow.requests], rel=1e-9, nan_ok=True
    )


def test_request_table_reads_compares_and_pickles_as_its_rows() -> None:
    """``SimResult.requests`` keeps columns and makes ``RequestMetrics`` when read."""
    import pickle
    from dataclasses import asdict, astuple

    from ridgeline.sim.metrics import RequestMetrics, RequestTable

    rows = (
        RequestMetrics("a", 0.0, 10, 4, 0.1, 0.02, 0.16, 0.01, 0, 0),
        RequestMetrics(
            "b",
            0.5,
            20,
            0,
            float("nan"),
            float("nan"),
            float("nan"),
            float("nan"),
            0,
            0,
            "larger than the KV pool",
        ),
    )
    table = RequestTable(list(zip(*map(astuple, rows), strict=True)))
    assert len(table) == 2 and table[1].rejected == "larger than the KV pool"
    assert table[:1] == rows[:1] and list(table) == list(rows)
    assert table == rows[:1] + (table[1],)  # NaN equals itself only as the same object
    copy = pickle.loads(pickle.dumps(table))  # its NaNs are new objects, so unequal, as a
    assert copy[:1] == rows[:1] and repr(list(copy)) == repr(list(rows))  # tuple's would be
    assert hash(table) == hash(RequestTable(table._columns))
    assert repr(table) == "RequestTable(2 requests)"
    assert [asdict(r) for r in table] == [asdict(r) for r in (rows[0], table[1])]


def test_a_run_pauses_the_collector_and_restores_it() -> None:
    import gc

    from ridgeline.sim.loop import gc_paused

    workload = generate(WorkloadSpec(num_requests=5, rate_per_s=2.0))
    simulate(SimConfig(LLAMA, IDEAL), workload)
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # an inner block leaves it as it found it: off
    assert gc.isenabled()
