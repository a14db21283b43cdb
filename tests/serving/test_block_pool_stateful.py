"""Hypothesis stateful test of the KV manager: random allocate / append / fork / free / evict.

Invariants after every rule: no block leaked or double-freed (``BlockPool.check``), ref counts
never negative and equal to the number of tables holding the block, used + free = total, and every
live request's table covers its tokens.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ridgeline.serving.block_pool import BlockPool
from ridgeline.serving.kv_manager import KVCacheManager
from ridgeline.serving.request import Request, SamplingParams

BLOCK = 4
NUM_BLOCKS = 24


class KVMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.kv = KVCacheManager(BlockPool(NUM_BLOCKS, BLOCK), enable_prefix_caching=True)
        self.live: dict[str, Request] = {}
        self.n = 0

    def _new_id(self) -> str:
        self.n += 1
        return f"r{self.n}"

    @rule(prefix=st.integers(0, 2), length=st.integers(1, 20))
    def allocate(self, prefix: int, length: int) -> None:
        """A new request whose tokens start with one of three shared prefixes."""
        tokens = [prefix * 1000 + i for i in range(length)]
        r = Request(self._new_id(), tokens, SamplingParams(64))
        hit = self.kv.find_prefix(r)
        if self.kv.allocate_slots(r, length - hit.num_tokens, hit) is None:
            assert r.request_id not in self.kv.tables
            return
        r.num_computed_tokens = length
        self.kv.cache_full_blocks(r)
        self.live[r.request_id] = r

    @precondition(lambda self: self.live)
    @rule(data=st.data(), n=st.integers(1, 6))
    def append(self, data: st.DataObject, n: int) -> None:
        rid = data.draw(st.sampled_from(sorted(self.live)))
        r = self.live[rid]
        if self.kv.allocate_slots(r, n) is None:
            return
        r.output_token_ids.extend([7] * n)
        r.num_computed_tokens += n
        self.kv.cache_full_blocks(r)

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        parent = self.live[data.draw(st.sampled_from(sorted(self.live)))]
        child = Request(self._new_id(), parent.prompt_token_ids, SamplingParams(64))
        child.output_token_ids = list(parent.output_token_ids)
        child.num_computed_tokens = parent.num_computed_tokens
        self.kv.fork(parent.request_id, child.request_id)
        self.live[child.request_id] = child

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(sorted(self.live)))
        self.kv.free(self.live.pop(rid))

    @rule(n=st.integers(1, NUM_BLOCKS))
    def evict(self, n: int) -> None:
        """Another owner grabs blocks (evicting cached ones) and gives them back."""
        blocks = self.kv.pool.allocate(n)
        if blocks is not None:
            assert all(b.block_hash is None and b.ref_cnt == 1 for b in blocks)
            self.kv.pool.free(blocks)

    @invariant()
    def pool_is_consistent(self) -> None:
        pool = self.kv.pool
        pool.check()
        held = Counter(b.block_id for t in self.kv.tables.values() for b in t)
        assert all(b.ref_cnt == held[b.block_id] for b in pool.blocks)
        assert pool.num_used + pool.num_free == NUM_BLOCKS
        assert pool.num_used == len(held)

    @invariant()
    def tables_cover_tokens(self) -> None:
        assert set(self.kv.tables) == set(self.live)
        for rid, r in self.live.items():
            assert len(self.kv.tables[rid]) * BLOCK >= r.num_computed_tokens
            assert list(self.kv.block_ids(rid)) == [b.block_id for b in self.kv.tables[rid]]


KVMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestKVMachine = pytest.mark.slow(KVMachine.TestCase)
