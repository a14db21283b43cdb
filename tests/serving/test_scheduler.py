"""Scheduler scenarios: token budget, chunked prefill, preemption order, policies, spec decode."""

from __future__ import annotations

import random

import pytest
from tests.serving_helpers import FixedTokenExecutor, make_scheduler, req, step

from ridgeline.errors import UnknownNameError
from ridgeline.serving.request import RequestStatus
from ridgeline.serving.scheduler import PreemptionMode, admitted_tokens, scheduled_tokens
from ridgeline.serving.spec_decode import SpecDecodeConfig, draw_accepted, expected_tokens_per_step


def shares(batch) -> dict[str, int]:
    return {r.request_id: r.num_new_tokens for r in batch.requests}


def test_running_first_then_admission_and_chunked_prefill_from_the_budget() -> None:
    s, ex = make_scheduler(64, max_num_batched_tokens=8)
    s.add_request(req("A", 3, max_new=5))
    s.add_request(req("B", 3, max_new=5))
    b1, _ = step(s, ex)
    assert shares(b1) == {"A": 3, "B": 3}
    s.add_request(req("C", 10))
    b2, _ = step(s, ex)
    assert shares(b2) == {"A": 1, "B": 1, "C": 6}  # C's prompt is chunked to the budget
    assert [r.sample for r in b2.requests] == [True, True, False]
    b3, _ = step(s, ex)
    assert shares(b3) == {"A": 1, "B": 1, "C": 4}
    assert b3.requests[2].start_position == 6 and b3.requests[2].sample
    assert s.requests["C"].output_token_ids == [7]


def test_block_table_and_slots_of_a_scheduled_request() -> None:
    s, ex = make_scheduler(64, block_size=4)
    s.add_request(req("A", 6, max_new=3))
    b1, _ = step(s, ex)
    assert b1.requests[0].block_ids == (0, 1)
    assert b1.requests[0].slot(5, 4) == 5
    b2, _ = step(s, ex)  # position 6 fits block 1
    assert b2.requests[0].block_ids == (0, 1) and b2.requests[0].start_position == 6
    b3, done = step(s, ex)  # position 7 fits too; third token finishes A
    assert done[0].request_id == "A" and done[0].output_token_ids == [7, 7, 7]
    assert s.kv.pool.num_free == 64


def test_fcfs_preempts_the_newest_running_request_and_requeues_it_first() -> None:
    s, ex = make_scheduler(4, block_size=4, max_num_batched_tokens=64)
    for rid in ("A", "B"):
        s.add_request(req(rid, 8, max_new=8))  # 2 blocks each: the pool is full
    step(s, ex)  # prefill both; both sample their first token
    b2, _ = step(s, ex)  # A needs a third block: B (newest) is preempted
    assert shares(b2) == {"A": 1}
    b_req = s.waiting.peek()
    assert b_req.request_id == "B" and b_req.status is RequestStatus.PREEMPTED
    assert b_req.num_computed_tokens == 0 and b_req.output_token_ids == [7]
    assert s.stats.num_preemptions == 1 and s.kv.block_ids("A") == (0, 1, 3)


def test_priority_policy_preempts_the_least_urgent_request() -> None:
    s, ex = make_scheduler(4, block_size=4, max_num_batched_tokens=64, policy="priority")
    s.add_request(req("low", 8, max_new=8, priority=5))
    s.add_request(req("high", 8, max_new=8, priority=0))
    b1, _ = step(s, ex)
    assert [r.request_id for r in b1.requests] == ["high", "low"]  # urgency order at admission
    b2, _ = step(s, ex)
    assert shares(b2) == {"high": 1}
    assert s.waiting.peek().request_id == "low"
    with pytest.raises(UnknownNameError, match="priority"):
        make_scheduler(4, policy="lifo")


def test_swap_preemption_keeps_computed_tokens_and_charges_the_transfer() -> None:
    from ridgeline.serving.block_pool import BlockPool
    from ridgeline.serving.kv_manager import KVCacheManager
    from ridgeline.serving.scheduler import Scheduler, SchedulerConfig
    from ridgeline.serving.tiers import KVTiers, TierSpec

    tiers = KVTiers((TierSpec("host", 1000.0, 100.0),), block_bytes=10.0)
    s = Scheduler(
        SchedulerConfig(max_num_batched_tokens=64, preemption=PreemptionMode.SWAP),
        KVCacheManager(BlockPool(4, 4), tiers=tiers),
    )
    ex = FixedTokenExecutor()
    for rid in ("A", "B"):
        s.add_request(req(rid, 8, max_new=8))
    step(s, ex)
    b2, _ = step(s, ex)
    assert s.stats.num_swaps == 1 and len(b2.swap_out) == 2
    assert b2.transfer_s == pytest.approx(2 * 10.0 / 100.0) and b2.transfer_bytes == 20.0
    assert b2.swap_out == ((0, 2), (1, 3))  # (tier slot, device block) of B's table (2, 3)
    assert s.waiting.peek().num_computed_tokens == 8  # kept: its KV sits in host memory
    while "B" not in {r.request_id for r in s.running}:
        batch, _ = step(s, ex)
    assert len(batch.swap_in) == 2 and [t for t, _ in batch.swap_in] == [0, 1]
    assert batch.transfer_s == pytest.approx(2 * 10.0 / 100.0)  # read back at admission


def test_a_request_that_can_never_fit_is_rejected_with_a_reason() -> None:
    s, _ = make_scheduler(4, block_size=4)
    r = req("huge", 15, max_new=2)
    assert not s.add_request(r)
    assert r.status is RequestStatus.REJECTED
    assert r.reject_reason == "larger than the KV pool: 17 tokens > 16 slots"


def test_rejected_requests_are_counted_not_kept() -> None:
    """Regression: the scheduler appended every rejected request to a list nobody read, so a
    long-lived server held each one for its life."""
    import gc

    s, _ = make_scheduler(4, block_size=4)
    for i in range(200):
        r = req(f"huge-{i}", 15, max_new=2)
        assert not s.add_request(r)
    held = [o for o in gc.get_referrers(r) if isinstance(o, list | dict | tuple)]
    assert s.stats.num_rejected == 200 and held == [], held[:1]


def test_contiguous_reserves_max_model_len_at_admission() -> None:
    s, ex = make_scheduler(64, block_size=4, policy="contiguous", max_model_len=32)
    s.add_request(req("A", 5, max_new=3))
    step(s, ex)
    assert len(s.kv.block_ids("A")) == 8  # 32 slots reserved for 6 tokens
    rejected = req("B", 30, max_new=5)
    assert not s.add_request(rejected) and rejected.reject_reason.endswith("= 35 > 32")


def test_static_policy_uses_slots_and_the_smallest_bucket() -> None:
    s, ex = make_scheduler(
        64, block_size=4, policy="static", static_buckets=(16, 64), static_slots=2
    )
    for rid in ("A", "B", "C"):
        s.add_request(req(rid, 5, max_new=3))
    b1, _ = step(s, ex)
    assert shares(b1) == {"A": 5, "B": 5}  # two slots
    assert len(s.kv.block_ids("A")) == 4  # bucket 16 = 4 blocks
    assert s.max_running == 2


def test_spec_decode_allocates_lookahead_and_rolls_back_rejected_slots() -> None:
    s, _ = make_scheduler(
        64, block_size=4, spec=SpecDecodeConfig(num_draft_tokens=3, acceptance_rate=0.5)
    )
    s.add_request(req("A", 6, max_new=10))
    b1 = s.schedule()
    s.update(b1, _result(b1, {"A": (7,)}))
    b2 = s.schedule()
    (sr,) = b2.requests
    assert sr.num_draft_tokens == 3 and sr.num_new_tokens == 4 and len(sr.block_ids) == 3
    s.update(b2, _result(b2, {"A": (8,)}))  # all three drafts rejected: the target's token only
    a = s.requests["A"]
    assert a.num_computed_tokens == 7 and a.num_tokens == 8 and a.output_token_ids == [7, 8]
    assert s.kv.block_ids("A") == (0, 1)  # the lookahead block (positions 8..11) rolled back
    b3 = s.schedule()
    s.update(b3, _result(b3, {"A": (9, 9, 9, 9)}))  # all accepted: 4 tokens in one step
    assert a.num_computed_tokens == 11 and a.num_tokens == 12


def _result(batch, sampled):
    from ridgeline.serving.executor import StepResult

    return StepResult(sampled=sampled, time_s=1.0)


def test_expected_tokens_per_step_formula_and_draws() -> None:
    assert expected_tokens_per_step(0.0, 4) == 1.0
    assert expected_tokens_per_step(1.0, 4) == 5.0
    assert expected_tokens_per_step(0.5, 2) == pytest.approx(1.75)
    rng = random.Random(1)
    draws = [1 + draw_accepted(rng, 0.6, 4) for _ in range(40_000)]
    assert sum(draws) / len(draws) == pytest.approx(expected_tokens_per_step(0.6, 4), rel=0.02)


def test_serving_loop_runs_explicit_token_ids_to_completion_with_eos() -> None:
    from ridgeline.serving import Request, SamplingParams, ServingLoop

    s, ex = make_scheduler(32, block_size=4, max_num_batched_tokens=6)
    loop = ServingLoop(s, ex)
    assert loop.add(Request("a", [5, 6, 7, 8, 9, 10, 11, 12], SamplingParams(3)))
    assert loop.add(Request("b", [5, 6, 7], SamplingParams(10, eos_token_id=7)))
    done = loop.run()
    assert [(r.request_id, r.output_token_ids, r.finish_reason.value) for r in done] == [
        ("b", [7], "stop"),
        ("a", [7, 7, 7], "length"),
    ]
    first = ex.batches[0].requests
    assert [(r.request_id, r.token_ids) for r in first] == [("a", (5, 6, 7, 8, 9, 10))]
    assert loop.elapsed_s == len(ex.batches) and s.kv.pool.num_free == 32


def test_kv_received_from_a_prefill_instance_is_admitted_as_computed() -> None:
    from ridgeline.serving.disagg import decode_request, prefill_request

    s, ex = make_scheduler(16, block_size=4)
    original = req("a", 8, max_new=3)
    first = prefill_request(original)
    first.output_token_ids.append(7)
    s.add_request(decode_request(original, first))
    (sr,) = s.schedule().requests
    assert (sr.start_position, sr.token_ids, sr.block_ids) == (8, (7,), (0, 1, 2))


def test_eos_among_accepted_drafts_ends_the_request_there() -> None:
    s, _ = make_scheduler(
        64, block_size=4, spec=SpecDecodeConfig(num_draft_tokens=3, acceptance_rate=1.0)
    )
    r = req("A", 6, max_new=10)
    r.params = type(r.params)(10, eos_token_id=2)
    s.add_request(r)
    b1 = s.schedule()
    s.update(b1, _result(b1, {"A": (7,)}))
    b2 = s.schedule()
    done = s.update(b2, _result(b2, {"A": (5, 2, 9, 9)}))
    assert done == [r] and r.output_token_ids == [7, 5, 2] and r.finish_reason.value == "stop"
    assert s.kv.pool.num_free == 64


def test_a_duplicate_request_id_is_refused() -> None:
    from ridgeline.errors import ConfigError

    s, _ = make_scheduler(16)
    s.add_request(req("A", 4))
    with pytest.raises(ConfigError, match="'A' is already queued or running"):
        s.add_request(req("A", 4))


def test_the_token_rules_over_plain_numbers() -> None:
    """What a request is given (``scheduled_tokens``) and admitted with (``admitted_tokens``): the
    rules the scheduler and the simulator's fast mode both apply."""
    assert [scheduled_tokens(10, 0, 8), scheduled_tokens(10, 4, 8), scheduled_tokens(3, 4, 8)] == [
        8,
        4,
        3,
    ]
    assert admitted_tokens(10, 0, 8, chunked=False) is None  # a whole prompt waits for room
    assert admitted_tokens(10, 0, 8, chunked=True) == 8
    assert admitted_tokens(10, 6, 12, chunked=False) == 6  # fits whole: the cap still chunks it


def test_plain_decode_next_is_the_rule_of_decode_runs() -> None:
    """The next step is plain decode when nothing can be admitted and the budget holds every
    running request's token; ``decode_run_limit`` follows it."""
    s, ex = make_scheduler(num_blocks=64, max_num_batched_tokens=3, max_num_seqs=2)
    assert not s.plain_decode_next(0, 0, False)  # nothing runs
    assert s.plain_decode_next(2, 0, False)
    assert not s.plain_decode_next(1, 1, False)  # a slot is free and a request waits
    assert s.plain_decode_next(1, 1, True)  # ... but the queue's head is blocked on memory
    assert s.plain_decode_next(2, 5, False)  # every slot taken
    assert not s.plain_decode_next(4, 0, False)  # four tokens over a budget of three
    s.add_request(req("a", 2, max_new=6))
    step(s, ex)
    assert s.decode_run_limit(100) == 5
    s.add_request(req("b", 2, max_new=6))
    assert not s.plain_decode_next(1, 1, False) and s.decode_run_limit(100) == 0
