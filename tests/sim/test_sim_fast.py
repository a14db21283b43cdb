"""The fast mode gives the step-by-step result: same finished and rejected requests, TTFT and
TPOT to 1e-9, KV peak, preemptions and steps — on fixed seeds for every policy and feature, and
on workloads and configurations drawn by Hypothesis.

``fast_forward=True`` runs ``sim.fast`` where it applies (one mixed instance without prefix
caching, tiers, speculative decoding or disaggregation) and the event loop's closed-form decode
runs elsewhere; ``fast_forward=False`` schedules, prices and applies one step at a time.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ridgeline.analytic import Deployment
from ridgeline.analytic.pricing import Pricing
from ridgeline.serving.disagg import Disagg
from ridgeline.serving.policies import StaticOptions
from ridgeline.serving.scheduler import PreemptionMode, SchedulerConfig
from ridgeline.serving.spec_decode import SpecDecodeConfig
from ridgeline.serving.tiers import TierSpec
from ridgeline.sim import (
    LengthDist,
    Lengths,
    RequestSpec,
    SimConfig,
    SimResult,
    Simulation,
    Tokens,
    WorkloadSpec,
    fast,
    generate,
    simulate,
)
from ridgeline.sim.fast_cache import outputs_reused
from ridgeline.sim.fast_off import FastModeOff
from ridgeline.sim.workload import output_tokens, prompt_tokens
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.calibration import CostMode

A100 = get_accelerator("a100-80gb")
IDEAL = Pricing.ideal(A100)  # these runs' figures are the ideal roofline's
LLAMA = get_model("llama-2-7b")
REL = 1e-9


def _close(a: Any, b: Any, path: str = "") -> None:
    """Equal, floats to ``REL`` relative (NaN equals NaN)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        same = a == b or (math.isnan(a) and math.isnan(b))
        assert same or abs(a - b) <= REL * max(abs(a), abs(b)), (path, a, b)
    else:
        assert a == b, (path, a, b)


def _both(cfg: SimConfig, workload: list[RequestSpec]) -> tuple[SimResult, SimResult]:
    fast_run = simulate(replace(cfg, fast_forward=True), workload)
    steps = simulate(replace(cfg, fast_forward=False), workload)
    return fast_run, steps


def _assert_same(cfg: SimConfig, workload: list[RequestSpec]) -> SimResult:
    got, want = _both(cfg, workload)
    assert (got.num_completed, got.num_rejected) == (want.num_completed, want.num_rejected)
    assert (got.num_preemptions, got.num_steps) == (want.num_preemptions, want.num_steps)
    assert got.kv_peak_frac == want.kv_peak_frac
    for a, b in zip(got.requests, want.requests, strict=True):
        assert (a.request_id, a.output_len, a.rejected) == (b.request_id, b.output_len, b.rejected)
        _close([a.ttft_s, a.tpot_s, a.e2e_s, a.queue_s], [b.ttft_s, b.tpot_s, b.e2e_s, b.queue_s])
    assert want.fast_mode_off is FastModeOff.TURNED_OFF
    _close(_metrics(got), _metrics(want))
    return got


def _metrics(r: SimResult) -> dict[str, Any]:
    """Everything ``r`` measured (not which loop ran it)."""
    d = r.to_dict(with_requests=True)
    del d["fast_mode"]
    return d


WORKLOAD = generate(
    WorkloadSpec(
        num_requests=250,
        rate_per_s=25,
        prompt=Lengths(LengthDist.LOGNORMAL, 500),
        output=Lengths(LengthDist.UNIFORM, 70),
        seed=3,
    )
)
SHARED = generate(
    WorkloadSpec(
        num_requests=150,
        rate_per_s=20,
        prompt=Lengths(LengthDist.LOGNORMAL, 300),
        output=Lengths(LengthDist.UNIFORM, 50),
        num_prefixes=4,
        prefix_len=512,
        seed=4,
    )
)
BASE = SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=32, max_model_len=4096)
WHOLE = replace(BASE, max_num_batched_tokens=4096)
# no tier eviction (a prefix hit evicted mid-admission is a case of test_serving_faults.py)
HOST = TierSpec("host", 1e12, 32e9)

CASES = {
    "paged": (SimConfig(LLAMA, IDEAL, BASE, num_blocks=400), WORKLOAD),
    "priority": (SimConfig(LLAMA, IDEAL, replace(BASE, policy="priority"), num_blocks=300), None),
    "contiguous": (
        SimConfig(LLAMA, IDEAL, replace(WHOLE, policy="contiguous"), num_blocks=600),
        WORKLOAD,
    ),
    "static": (
        SimConfig(LLAMA, IDEAL, replace(WHOLE, policy="static", static_slots=12), num_blocks=500),
        WORKLOAD,
    ),
    "chunk-cap": (
        SimConfig(LLAMA, IDEAL, replace(BASE, long_prefill_token_threshold=96), num_blocks=170),
        WORKLOAD,
    ),
    "no-chunk": (
        SimConfig(
            LLAMA,
            IDEAL,
            replace(BASE, enable_chunked_prefill=False, max_num_batched_tokens=2048),
            num_blocks=300,
        ),
        WORKLOAD,
    ),
    "prefix": (SimConfig(LLAMA, IDEAL, BASE, num_blocks=300, prefix_caching=True), SHARED),
    "host-tier": (
        SimConfig(LLAMA, IDEAL, BASE, num_blocks=300, prefix_caching=True, tiers=(HOST,)),
        SHARED,
    ),
    "swap": (
        SimConfig(
            LLAMA,
            IDEAL,
            replace(BASE, preemption=PreemptionMode.SWAP),
            num_blocks=300,
            tiers=(HOST,),
        ),
        WORKLOAD,
    ),
    "spec": (
        SimConfig(
            LLAMA,
            IDEAL,
            replace(BASE, spec=SpecDecodeConfig(3, 0.6)),
            num_blocks=400,
            draft_model=get_model("distilgpt2"),
        ),
        WORKLOAD,
    ),
    "disagg": (SimConfig(LLAMA, IDEAL, BASE, num_blocks=400, disagg=Disagg(1, 2)), WORKLOAD),
}


def _prioritised(workload: list[RequestSpec]) -> list[RequestSpec]:
    return [replace(r, priority=i % 3) for i, r in enumerate(workload)]


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES)
def test_fast_mode_gives_the_step_by_step_result(name: str) -> None:
    cfg, workload = CASES[name]
    got = _assert_same(cfg, workload if workload is not None else _prioritised(WORKLOAD))
    assert got.num_completed > 0
    if name in ("paged", "priority", "chunk-cap"):
        assert got.num_preemptions > 0  # the pool is small enough to preempt


@pytest.mark.parametrize(
    "name", ["paged", "contiguous", "static", "chunk-cap", "no-chunk", "prefix"]
)
def test_the_configurations_it_covers_run_in_the_fast_mode(name: str) -> None:
    cfg, workload = CASES[name]
    assert fast.covers(Simulation(cfg, workload or WORKLOAD))
    assert not fast.covers(Simulation(CASES["host-tier"][0], SHARED))


def test_prompts_that_repeat_outputs_keep_prefix_caching_out_of_the_fast_mode() -> None:
    """Multi-turn prompts carry the previous turn's answer: a running request's output blocks
    may be found by another, which the fast mode's late hashes do not allow."""
    spec = WorkloadSpec(num_requests=12, rate_per_s=4, turns=3, num_prefixes=2, prefix_len=64)
    turns = generate(spec)
    assert outputs_reused(turns) and not outputs_reused(SHARED)
    assert not fast.covers(Simulation(CASES["prefix"][0], turns))
    assert fast.covers(Simulation(replace(CASES["prefix"][0], prefix_caching=False), turns))


@st.composite
def _workloads(draw: st.DrawFn) -> list[RequestSpec]:
    n = draw(st.integers(1, 30))
    # arrivals on a coarse grid, so ties (with each other and with idle instants) happen
    times = sorted(draw(st.lists(st.integers(0, 400), min_size=n, max_size=n)))
    out = []
    for i, t in enumerate(times):
        prompt = draw(st.integers(1, 700))
        output = draw(st.integers(1, 90))
        prio = draw(st.integers(0, 2))
        base = i << 20
        out.append(
            RequestSpec(
                f"q{i}",
                t / 100,
                Tokens([range(base, base + prompt)]),
                range(1 << 40, (1 << 40) + output),
                prio,
            )
        )
    return out


@st.composite
def _configs(draw: st.DrawFn) -> SimConfig:
    policy = draw(st.sampled_from(["fcfs", "priority", "contiguous", "static"]))
    whole = policy in ("contiguous", "static")
    budget = draw(st.integers(16, 1024))
    sched = SchedulerConfig(
        max_num_batched_tokens=max(budget, 1024) if whole else budget,
        max_num_seqs=draw(st.integers(1, 24)),
        max_model_len=1024,
        long_prefill_token_threshold=draw(st.sampled_from([0, 0, 7, 64])),
        enable_chunked_prefill=draw(st.booleans()),
        policy=policy,
        static_slots=draw(st.sampled_from([None, 3, 8])) if policy == "static" else None,
        async_scheduling=draw(st.booleans()),
    )
    block = draw(st.sampled_from([1, 4, 16]))
    return SimConfig(
        LLAMA,
        Pricing.of(A100, draw(st.sampled_from(CostMode))),  # calibrated: GEMM tile padding
        sched,
        block_size=block,
        num_blocks=draw(st.integers(1, 60)) * 16 // block + 8,
    )


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_workloads(), _configs())
def test_fast_mode_matches_stepping_on_drawn_workloads(
    workload: list[RequestSpec], cfg: SimConfig
) -> None:
    _assert_same(cfg, workload)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _workloads(),
    st.sampled_from(["prefix", "host-tier", "swap", "spec", "disagg"]),
    st.integers(40, 400),
)
def test_closed_form_runs_match_stepping_with_caching_tiers_spec_and_disagg(
    workload: list[RequestSpec], name: str, num_blocks: int
) -> None:
    cfg = replace(CASES[name][0], num_blocks=num_blocks)
    _assert_same(replace(cfg, scheduler=replace(cfg.scheduler, max_model_len=1024)), workload)


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(CostMode))
def test_a_split_deployment_gives_the_step_by_step_result(mode: CostMode) -> None:
    """Tensor and pipeline splits add link time to every step (DeploymentStepCost): the fast
    mode prices its grouped steps and decode stretches with them too."""
    dep = Deployment(get_accelerator("h100-sxm"), 2, 2)
    cfg = SimConfig(LLAMA, Pricing.of(dep, mode), BASE, num_blocks=400)
    got = simulate(cfg, WORKLOAD)
    want = simulate(replace(cfg, fast_forward=False), WORKLOAD)
    assert (got.num_preemptions, got.num_steps) == (want.num_preemptions, want.num_steps)
    assert got.num_preemptions > 0
    _close(_metrics(got), _metrics(want))


def test_a_new_head_of_the_priority_queue_ends_a_decode_run() -> None:
    """Regression: a request blocked on memory kept decode runs going after a more urgent,
    smaller request arrived, which stepping admits at once."""
    from serving_helpers import make_scheduler, req, step

    s, ex = make_scheduler(num_blocks=8, block_size=4, policy="priority")
    s.add_request(req("a", 8, max_new=12, priority=1))
    step(s, ex)  # a: 2 blocks, prefilled
    s.add_request(req("big", 21, max_new=4, priority=1))
    step(s, ex)  # a grows to 3 blocks; big needs 6, 5 are free: blocked
    assert s.decode_run_limit(100) > 1
    s.add_request(req("small", 2, max_new=2, priority=0))
    assert s.decode_run_limit(100) == 0  # the new head may fit: the next step tries it
    batch, _ = step(s, ex)
    assert [r.request_id for r in batch.requests] == ["a", "small"]


def test_a_decode_run_does_not_hide_its_last_requests_from_the_router() -> None:
    """Regression: a closed-form decode run finished its requests when it started, so a request
    arriving at another decode instance's KV during the run saw the instance empty and went to
    it, where stepping sends it to the idle instance."""
    rows = [
        (0.45, 128, 27),
        (1.59, 217, 74),
        (2.28, 477, 88),
        (2.4, 512, 41),
        (2.44, 158, 42),
        (2.78, 83, 12),
        (2.84, 297, 67),
        (2.97, 237, 19),
        (3.03, 83, 86),
    ]
    workload = [
        RequestSpec(
            f"q{i}", t, Tokens([range(i << 20, (i << 20) + p)]), range(1 << 40, (1 << 40) + o)
        )
        for i, (t, p, o) in enumerate(rows)
    ]
    cfg = replace(CASES["disagg"][0], num_blocks=377)
    _assert_same(replace(cfg, scheduler=replace(cfg.scheduler, max_model_len=1024)), workload)


@st.composite
def _shared_workloads(draw: st.DrawFn) -> list[RequestSpec]:
    """Requests sharing system prompts, some repeating whole prompts: prefix hits, revived
    and evicted cached blocks, shared blocks freed while another request still holds them."""
    n = draw(st.integers(1, 40))
    times = sorted(draw(st.lists(st.integers(0, 300), min_size=n, max_size=n)))
    prefix_lens = draw(st.lists(st.integers(0, 70), min_size=3, max_size=3))
    questions = draw(st.lists(st.integers(1, 200), min_size=4, max_size=4))
    out = []
    for i, t in enumerate(times):
        p = draw(st.integers(0, 2))
        q = draw(st.integers(0, 5))  # 0-3: one of four recurring questions; 4, 5: its own
        qlen = questions[q] if q < 4 else draw(st.integers(1, 200))
        prompt = prompt_tokens(q if q < 4 else 100 + i, qlen, p, prefix_lens[p])
        output = output_tokens(i, draw(st.integers(1, 60)))
        out.append(RequestSpec(f"s{i}", t / 100, prompt, output, draw(st.integers(0, 2))))
    return out


@st.composite
def _caching_configs(draw: st.DrawFn) -> SimConfig:
    policy = draw(st.sampled_from(["fcfs", "fcfs", "priority", "reserve", "contiguous", "static"]))
    whole = policy in ("contiguous", "static")
    budget = draw(st.integers(16, 512))
    sched = SchedulerConfig(
        max_num_batched_tokens=max(budget, 1024) if whole else budget,
        max_num_seqs=draw(st.integers(1, 24)),
        max_model_len=1024,
        long_prefill_token_threshold=draw(st.sampled_from([0, 0, 7, 64])),
        enable_chunked_prefill=draw(st.booleans()),
        policy=policy,
        static_slots=draw(st.sampled_from([None, 3, 8])) if policy == "static" else None,
        static=StaticOptions(prefix_copy=draw(st.booleans())) if policy == "static" else None,
        async_scheduling=draw(st.booleans()),
    )
    block = draw(st.sampled_from([1, 4, 16]))
    return SimConfig(
        LLAMA,
        Pricing.of(A100, draw(st.sampled_from(CostMode))),
        sched,
        block_size=block,
        num_blocks=draw(st.integers(1, 60)) * 16 // block + 8,
        prefix_caching=True,
        eviction=draw(st.sampled_from(["lru", "lfu"])),
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_shared_workloads(), _caching_configs())
def test_fast_mode_matches_stepping_with_prefix_caching(
    workload: list[RequestSpec], cfg: SimConfig
) -> None:
    assert fast.covers(Simulation(cfg, workload))
    _assert_same(cfg, workload)
