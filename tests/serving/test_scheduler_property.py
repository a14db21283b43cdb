"""Hypothesis: random request mixes through random scheduler configurations. Every request ends
finished or rejected with a reason, the pool stays consistent after every step, tables cover the
computed tokens, and every block is free at the end."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.serving_helpers import FixedTokenExecutor

from ridgeline.serving import (
    BlockPool,
    KVCacheManager,
    KVTiers,
    PreemptionMode,
    Request,
    SamplingParams,
    Scheduler,
    SchedulerConfig,
    ServingLoop,
    SpecDecodeConfig,
    TierSpec,
    make_eviction,
)

requests = st.lists(
    st.tuples(st.integers(0, 2), st.integers(1, 40), st.integers(1, 12), st.integers(0, 3)),
    min_size=1,
    max_size=12,
)
configs = st.fixed_dictionaries(
    {
        "policy": st.sampled_from(["fcfs", "priority", "contiguous", "static"]),
        "budget": st.integers(4, 64),
        "blocks": st.integers(4, 40),
        "caching": st.booleans(),
        "swap": st.booleans(),
        "spec": st.sampled_from([0, 2]),
        "eviction": st.sampled_from(["lru", "lfu"]),
    }
)


def _scheduler(c: dict) -> Scheduler:
    tiers = KVTiers((TierSpec("host", 64 * 100.0, 1e3),), block_bytes=100.0) if c["swap"] else None
    pool = BlockPool(c["blocks"], 4, make_eviction(c["eviction"]))
    cfg = SchedulerConfig(
        max_num_batched_tokens=c["budget"],
        max_num_seqs=6,
        max_model_len=64,
        policy=c["policy"],
        preemption=PreemptionMode.SWAP if c["swap"] else PreemptionMode.RECOMPUTE,
        static_buckets=(16, 32, 64),
        static_slots=3,
        spec=SpecDecodeConfig(c["spec"], 0.5) if c["spec"] else None,
    )
    return Scheduler(cfg, KVCacheManager(pool, c["caching"], tiers))


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(reqs=requests, c=configs)
def test_every_request_finishes_or_is_rejected_and_no_block_leaks(reqs, c) -> None:
    s = _scheduler(c)
    loop = ServingLoop(s, FixedTokenExecutor())
    made = []
    for i, (prefix, n, out, prio) in enumerate(reqs):
        tokens = [prefix * 100 + t for t in range(n)]
        r = Request(f"r{i}", tokens, SamplingParams(out, priority=prio))
        made.append(r)
        loop.add(r)
    for _ in range(2000):
        outcome = loop.step()
        if outcome is None:
            break
        s.kv.pool.check()
        for r in s.running:
            assert r.num_computed_tokens <= r.num_tokens
            assert s.kv.num_slots(r.request_id) >= r.num_computed_tokens
        assert s.kv.pool.num_used <= s.kv.pool.num_blocks
    assert not s.has_unfinished
    for r in made:
        assert r.is_finished
        if r.reject_reason:
            assert r.status.value == "rejected" and r.num_output_tokens == 0
        else:
            assert r.num_output_tokens == r.params.max_output_tokens
    assert s.kv.pool.num_used == 0 and not s.kv.tables
