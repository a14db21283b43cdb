"""Regression tests of the serving faults valid input used to reach: a tier prefix hit evicted
during its own admission, speculative EOS overshoot, a prompt over the step budget without
chunked prefill, ``LLM.generate`` on a rejected prompt, and NaN or infinite workload numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline.analytic.pricing import Pricing
from ridgeline.cli import app
from ridgeline.errors import ConfigError
from ridgeline.serving import (
    BlockPool,
    FinishReason,
    KVCacheManager,
    KVTiers,
    PreemptionMode,
    Request,
    RequestStatus,
    SamplingParams,
    ScheduledBatch,
    Scheduler,
    SchedulerConfig,
    ServingLoop,
    SpecDecodeConfig,
    StepResult,
    TierSpec,
)
from ridgeline.sim import (
    LengthDist,
    Lengths,
    SimConfig,
    WorkloadSpec,
    generate,
    load_trace,
    simulate,
)
from ridgeline.specs import get_accelerator, get_model
from serving_helpers import make_scheduler, req

runner = CliRunner()


def _compute_and_free(kv: KVCacheManager, r: Request) -> None:
    """Admit ``r`` whole (with its prefix hit), compute it, cache its blocks, free it."""
    hit = kv.find_prefix(r)
    assert kv.allocate_slots(r, r.num_tokens - hit.num_tokens, hit) is not None
    r.num_computed_tokens = r.num_tokens
    kv.cache_full_blocks(r)
    kv.free(r)


def test_a_tier_prefix_hit_stays_in_its_tier_while_its_own_admission_evicts() -> None:
    # 4 device blocks of 2 tokens; a tier of one block. A's second block is offloaded to the
    # tier by B; then A' (A's prefix) hits A0 on the device and A1 in the tier, and allocating
    # its new blocks evicts B1 into the tier, which used to push A1 out before it was loaded.
    tiers = KVTiers((TierSpec("tiny", 1.0, 1e9),), block_bytes=1.0)
    kv = KVCacheManager(BlockPool(4, 2, on_evict=tiers.offload), True, tiers)
    _compute_and_free(kv, Request("a", [1, 2, 3, 4, 5], SamplingParams(1)))
    _compute_and_free(kv, Request("b", [21, 22, 23, 24, 25], SamplingParams(1)))
    a2 = Request("a2", [1, 2, 3, 4, 9], SamplingParams(1))
    hit = kv.find_prefix(a2)
    assert (len(hit.device_blocks), len(hit.tier_hashes)) == (1, 1)
    table = kv.allocate_slots(a2, 1, hit)
    assert table is not None and len(table) == 3
    assert table[1].block_hash == a2.block_hashes[1]  # A1's KV came back from the tier
    assert tiers.traffic()[0].hit_blocks == 1
    assert all(not t.pinned for t in tiers.tiers)  # unpinned once loaded
    kv.pool.check()


@pytest.mark.slow
def test_the_tier_reproducer_of_the_issue_finishes_every_request() -> None:
    # memory_utilization 0.22: about 2.8 GB of KV after the weights and the reserve (the pool
    # the reproducer had at 0.2 before the KV-pool rule named its reserve)
    code = runner.invoke(
        app,
        [
            "simulate",
            "--hw",
            "a100-80gb",
            "-m",
            "llama-2-7b",
            "--workload",
            "shared-prefix",
            "--prefixes",
            "16",
            "--prefix-len",
            "1024",
            "--prefix-caching",
            "--tiers",
            "small:2e9:1e10",
            "--memory-utilization",
            "0.22",
            "--rate",
            "8",
            "-n",
            "400",
            "--json",
        ],
    )
    assert code.exit_code == 0, code.stderr
    result = json.loads(code.stdout)["results"][0]
    assert result["num_completed"] + result["num_rejected"] == 400
    assert result["num_completed"] > 300


class _EosInTheDrafts:
    """Accepts every draft but answers token 5 (EOS) as the second one."""

    def execute(self, batch: ScheduledBatch) -> StepResult:
        out = {}
        for r in batch.requests:
            if r.sample:
                out[r.request_id] = (7, 5, 7, 7, 7)[: 1 + r.num_draft_tokens]
        return StepResult(sampled=out, time_s=1.0)


def test_eos_among_accepted_drafts_rolls_computed_back_to_the_kept_tokens() -> None:
    sched, _ = make_scheduler(
        32, block_size=4, prefix_caching=True, spec=SpecDecodeConfig(4), max_num_batched_tokens=64
    )
    ex = _EosInTheDrafts()
    r = Request("r", list(range(100, 107)), SamplingParams(16, eos_token_id=5))
    sched.add_request(r)
    batch = sched.schedule()
    sched.update(batch, StepResult({"r": (7,)}, 1.0))  # the prefill samples 7
    batch = sched.schedule()
    assert batch.requests[0].num_draft_tokens == 4
    finished = sched.update(batch, ex.execute(batch))  # used to raise IndexError
    assert finished == [r] and r.finish_reason is FinishReason.STOP
    assert r.output_token_ids == [7, 7, 5]
    assert r.num_computed_tokens == r.num_tokens - 1 == 9
    sched.kv.pool.check()
    assert sched.kv.pool.num_used == 0


def test_without_chunked_prefill_a_prompt_over_the_budget_is_rejected() -> None:
    sched, ex = make_scheduler(64, max_num_batched_tokens=8, enable_chunked_prefill=False)
    long, short = req("long", 10), req("short", 4)
    assert not sched.add_request(long)
    assert long.status is RequestStatus.REJECTED
    assert "over the step budget without chunked prefill" in long.reject_reason
    assert sched.add_request(short)
    assert [r.request_id for r in ServingLoop(sched, ex).run()] == ["short"]


def test_without_chunked_prefill_the_simulator_rejects_instead_of_losing() -> None:
    model, hw = get_model("llama-2-7b"), get_accelerator("a100-80gb")
    cfg = SimConfig(
        model,
        Pricing.ideal(hw),
        SchedulerConfig(max_num_batched_tokens=256, enable_chunked_prefill=False),
    )
    spec = WorkloadSpec(
        10, 5.0, prompt=Lengths(LengthDist.FIXED, 512), output=Lengths(LengthDist.FIXED, 4)
    )
    result = simulate(cfg, generate(spec))
    assert (result.num_completed, result.num_rejected) == (0, 10)


def test_a_preempted_request_too_long_to_recompute_whole_is_refused_up_front() -> None:
    # prompt 6 fits a budget of 8, but prompt + output reaches 9 tokens: after a preemption by
    # recompute it could never run again in one step
    sched, _ = make_scheduler(64, max_num_batched_tokens=8, enable_chunked_prefill=False)
    r = req("r", 6, max_new=4)
    assert not sched.add_request(r) and "= 9 > 8" in r.reject_reason


@pytest.mark.parametrize(
    "option",
    [
        ("--rate", "nan"),
        ("--overhead", "nan"),
        ("--cv", "nan"),
        ("--rate", "inf"),
        ("--cv", "-inf"),
    ],
)
def test_nan_or_infinite_workload_numbers_are_refused(option: tuple[str, str]) -> None:
    args = ["simulate", "-n", "20", "--workload", "gamma", *option]
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.stdout
    assert f"option {option[0]}: must be a finite number" in r.stderr
    assert r.stderr.count("\n") == 1 and r.stdout == ""


@pytest.mark.parametrize(("field", "value"), [("rate_per_s", math.nan), ("cv", math.inf)])
def test_nan_or_infinite_workload_numbers_are_refused_by_the_library(
    field: str, value: float
) -> None:
    with pytest.raises(ConfigError, match=f"must be a finite number, got {value}"):
        WorkloadSpec(20, **{field: value})


@pytest.mark.parametrize("arrival", ["NaN", "Infinity", "1e999"])
def test_a_trace_with_a_non_finite_arrival_is_refused(tmp_path: Path, arrival: str) -> None:
    trace = tmp_path / "t.jsonl"
    lines = ['{"arrival_s": 0, "prompt_len": 8, "output_len": 2}']
    lines.append(f'{{"arrival_s": {arrival}, "prompt_len": 8, "output_len": 2}}')
    trace.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"t\.jsonl:2: "):
        load_trace(trace)
    csv = tmp_path / "t.csv"
    csv.write_text(f"arrived_at,num_prefill_tokens,num_decode_tokens\n0,8,2\n{arrival},8,2\n")
    with pytest.raises(ConfigError, match=r"t\.csv:3: field arrived_at: must be a finite number"):
        load_trace(csv)


def test_a_negative_prefix_len_in_a_trace_is_refused(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"arrival_s": 0, "prompt_len": 10, "output_len": 2, "prefix_id": 1, "prefix_len": -5}\n'
    )
    with pytest.raises(ConfigError, match=r"t\.jsonl:1: field prefix_len: must be >= 0, got -5"):
        load_trace(trace)


def test_abort_frees_blocks_and_swap_room() -> None:
    tiers = KVTiers((TierSpec("host", 1e6, 1e9),), block_bytes=1.0)
    kv = KVCacheManager(BlockPool(3, 4), tiers=tiers)
    sched = Scheduler(
        SchedulerConfig(max_num_batched_tokens=64, preemption=PreemptionMode.SWAP), kv
    )
    a, b = req("a", 4, max_new=8), req("b", 4, max_new=8)
    sched.add_request(a)
    sched.add_request(b)
    for _ in range(20):  # a and b grow until the newest, b, is swapped out
        if b.swapped:
            break
        batch = sched.schedule()
        sched.update(batch, StepResult({r.request_id: (7,) for r in batch.requests}, 1.0))
    assert tiers.tiers[0].reserved > 0
    assert sched.abort("b") is b and b.finish_reason is FinishReason.ABORTED
    assert tiers.tiers[0].reserved == 0 and sched.abort("b") is None
    assert sched.abort("a") is a and kv.pool.num_used == 0 and not sched.has_unfinished
    kv.pool.check()


@pytest.mark.torch
def test_llm_generate_returns_a_rejected_prompt_with_its_reason() -> None:
    pytest.importorskip("torch")
    from engine_support import gpt2_config, spec_of
    from ridgeline.engine.llm import LLM
    from ridgeline.engine.sampling import SamplingParams as EngineParams

    llm = LLM(spec_of(gpt2_config()), block_size=4, num_blocks=4, max_num_batched_tokens=32)
    too_long, fits = list(range(1, 30)), [1, 2, 3]  # 29 + 2 tokens > 16 slots
    outs = llm.generate([fits, too_long], EngineParams(max_output_tokens=2))  # used to raise
    assert [o.finish_reason for o in outs] == ["length", "rejected"]
    assert "larger than the KV pool: 31 tokens > 16 slots" in outs[1].reject_reason
    assert len(outs[0].token_ids) == 2 and outs[1].token_ids == ()
    outs = llm.generate([too_long], EngineParams(max_output_tokens=2))  # alone, the last one
    assert outs[0].finish_reason == "rejected"
