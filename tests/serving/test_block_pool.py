"""Block pool and KV manager scenarios with exact block ids (vLLM-style scenario tests)."""

from __future__ import annotations

import pytest

from ridgeline.errors import ConfigError, UnknownNameError
from ridgeline.serving.block_pool import BlockPool
from ridgeline.serving.eviction import LFUEviction, make_eviction
from ridgeline.serving.kv_manager import KVCacheManager
from ridgeline.serving.prefix import NONE_HASH, hash_block, longest_hit, update_block_hashes
from ridgeline.serving.request import Request, SamplingParams


def ids(blocks: list | None) -> list[int]:
    assert blocks is not None
    return [b.block_id for b in blocks]


def test_blocks_handed_out_in_id_order_and_freed_blocks_reused_first_in_given_order() -> None:
    pool = BlockPool(8, 4)
    a = pool.allocate(3)
    b = pool.allocate(2)
    assert ids(a) == [0, 1, 2] and ids(b) == [3, 4]
    assert a is not None
    pool.free(a[::-1])  # a table is freed tail first
    assert pool.num_free == 6 and pool.num_used == 2
    assert ids(pool.allocate(4)) == [2, 1, 0, 5]
    pool.check()


def test_allocation_that_does_not_fit_is_none_and_changes_nothing() -> None:
    pool = BlockPool(4, 4)
    assert pool.allocate(5) is None
    assert pool.num_free == 4
    assert ids(pool.allocate(4)) == [0, 1, 2, 3]
    assert pool.allocate(1) is None


def test_double_free_is_caught() -> None:
    pool = BlockPool(2, 4)
    blocks = pool.allocate(1)
    assert blocks is not None
    pool.free(blocks)
    with pytest.raises(AssertionError, match="double free"):
        pool.free(blocks)


def test_cached_blocks_are_kept_and_evicted_lru_only_after_uncached_ones() -> None:
    pool = BlockPool(4, 4)
    blocks = pool.allocate(4)
    assert blocks is not None
    pool.cache(blocks[0], 111)
    pool.cache(blocks[1], 222)
    pool.free([blocks[1]])  # freed first: least recently used
    pool.free([blocks[0], blocks[2], blocks[3]])
    assert pool.num_free == 4 and pool.num_cached_free == 2
    assert ids(pool.allocate(2)) == [2, 3]  # uncached first
    assert pool.num_evictions == 0
    assert ids(pool.allocate(1)) == [1]  # then LRU among cached: 222 was freed first
    assert pool.lookup(222) is None and pool.lookup(111) is blocks[0]
    pool.check()


def test_prefix_hit_revives_a_free_cached_block() -> None:
    pool = BlockPool(2, 4)
    blocks = pool.allocate(1)
    assert blocks is not None
    pool.cache(blocks[0], 5)
    pool.free(blocks)
    pool.touch([blocks[0]])
    assert blocks[0].ref_cnt == 1 and pool.num_free == 1 and blocks[0].hit_count == 1
    pool.check()


def test_lfu_evicts_the_least_hit_block() -> None:
    pool = BlockPool(3, 4, eviction=LFUEviction())
    blocks = pool.allocate(3)
    assert blocks is not None
    for b, h in zip(blocks, (10, 20, 30), strict=True):
        pool.cache(b, h)
    pool.free(blocks)
    pool.touch([blocks[0]])  # 10 hit once
    pool.free([blocks[0]])
    pool.touch([blocks[1]])
    pool.free([blocks[1]])
    pool.touch([blocks[1]])  # 20 hit twice
    pool.free([blocks[1]])
    assert ids(pool.allocate(1)) == [2]  # 30: never hit
    assert ids(pool.allocate(1)) == [0]  # 10: one hit
    with pytest.raises(UnknownNameError, match="lru"):
        make_eviction("mru")


def test_chained_hashes_cover_full_blocks_only() -> None:
    r = Request("a", list(range(10)), SamplingParams(1))
    update_block_hashes(r, 4)
    h0 = hash_block(NONE_HASH, (0, 1, 2, 3))
    assert r.block_hashes == [h0, hash_block(h0, (4, 5, 6, 7))]
    cached = set(r.block_hashes)
    assert longest_hit(r.block_hashes, 10, 4, cached.__contains__) == 2
    assert longest_hit(r.block_hashes, 8, 4, cached.__contains__) == 1  # leave one token to compute
    assert longest_hit(r.block_hashes[1:], 10, 4, cached.__contains__) == 1
    assert longest_hit([999, *r.block_hashes], 13, 4, cached.__contains__) == 0  # first miss stops


def _request(rid: str, tokens: list[int]) -> Request:
    return Request(rid, tokens, SamplingParams(4))


def test_prefix_hit_reuses_exactly_the_shared_full_blocks() -> None:
    kv = KVCacheManager(BlockPool(16, 4), enable_prefix_caching=True)
    shared = list(range(8))
    a = _request("a", [*shared, 50, 51, 52])  # 11 tokens: blocks [0 1] shared, [2] partial
    assert ids(kv.allocate_slots(a, 11)) == [0, 1, 2]
    a.num_computed_tokens = 11
    kv.cache_full_blocks(a)
    b = _request("b", [*shared, 60, 61, 62, 63, 64])
    hit = kv.find_prefix(b)
    assert ids(hit.device_blocks) == [0, 1] and hit.num_tokens == 8
    assert ids(kv.allocate_slots(b, 5, hit)) == [0, 1, 3, 4]
    assert [blk.ref_cnt for blk in kv.pool.blocks[:5]] == [2, 2, 1, 1, 1]
    kv.free(a)
    assert [blk.ref_cnt for blk in kv.pool.blocks[:3]] == [1, 1, 0]
    kv.pool.check()


def test_copy_on_write_of_a_shared_partial_block() -> None:
    kv = KVCacheManager(BlockPool(8, 4))
    parent = _request("p", list(range(6)))
    kv.allocate_slots(parent, 6)
    parent.num_computed_tokens = 6
    kv.fork("p", "c")
    child = _request("c", list(range(6)))
    child.num_computed_tokens = 6
    assert kv.block_ids("c") == (0, 1)
    assert kv.allocate_slots(child, 1) is not None  # writes position 6, inside shared block 1
    assert kv.block_ids("c") == (0, 2) and kv.take_copies() == ((1, 2),)
    assert kv.pool.blocks[0].ref_cnt == 2 and kv.pool.blocks[1].ref_cnt == 1
    kv.pool.check()


def test_pool_rejects_bad_sizes() -> None:
    with pytest.raises(ConfigError, match="num_blocks"):
        BlockPool(0, 16)
