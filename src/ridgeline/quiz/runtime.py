"""Module 7's answers from the serving runtime itself: block tables, reservations and prefix hits
come from ``serving``'s ``KVCacheManager`` over a ``BlockPool`` — the allocator the simulator and
the engine share — not from a formula.

Each function builds a fresh pool, admits requests the way the scheduler does (find the cached
prefix, allocate slots, mark the tokens computed, register full blocks) and reads what the
allocator did.
"""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline.serving.block_pool import BlockPool
from ridgeline.serving.kv_manager import KVCacheManager
from ridgeline.serving.request import Request, SamplingParams
from ridgeline.serving.tiers import KVTiers, TierSpec


def _request(request_id: str, token_ids: list[int]) -> Request:
    return Request(request_id, token_ids, SamplingParams(max_output_tokens=1))


def _pool_for(num_tokens: int, block_size: int) -> BlockPool:
    return BlockPool(num_blocks=-(-num_tokens // block_size) + 1, block_size=block_size)


def _admit(mgr: KVCacheManager, req: Request, reserve_tokens: int = 0) -> None:
    """Admit a whole prompt: reuse the cached prefix, allocate the rest, register full blocks."""
    hit = mgr.find_prefix(req)
    new = req.num_tokens - hit.num_tokens
    table = mgr.allocate_slots(req, new, hit, reserve_tokens=reserve_tokens)
    assert table is not None, "the pool is sized to fit"
    req.num_computed_tokens = req.num_tokens
    mgr.cache_full_blocks(req)


def paged_table_blocks(num_tokens: int, block_size: int) -> int:
    """Blocks in a request's table once its ``num_tokens`` tokens are in the cache."""
    mgr = KVCacheManager(_pool_for(num_tokens, block_size))
    req = _request("r", list(range(num_tokens)))
    _admit(mgr, req)
    return len(mgr.table("r"))


@dataclass(frozen=True, slots=True)
class Reservation:
    """Token slots a request holds and leaves unused, reserved up front or paged."""

    num_tokens: int
    reserved_slots: int
    paged_slots: int

    @property
    def reserved_waste_tokens(self) -> int:
        return self.reserved_slots - self.num_tokens

    @property
    def paged_waste_tokens(self) -> int:
        return self.paged_slots - self.num_tokens


def reservation(num_tokens: int, max_len: int, block_size: int) -> Reservation:
    """Slots of one request under a contiguous ``max_len`` reservation and under paging (the
    runtime's ``reserve_tokens``, which the contiguous policy uses)."""
    reserved = KVCacheManager(_pool_for(max_len, block_size))
    _admit(reserved, _request("r", list(range(num_tokens))), reserve_tokens=max_len)
    return Reservation(
        num_tokens, reserved.num_slots("r"), paged_table_blocks(num_tokens, block_size) * block_size
    )


def prefix_cache_blocks(
    num_requests: int, prefix_len: int, suffix_len: int, block_size: int
) -> tuple[int, int]:
    """Blocks in use after admitting ``num_requests`` requests that share a ``prefix_len``-token
    prefix and differ after it, without and with prefix caching.

    Returns:
        (blocks without caching, blocks with caching).
    """
    per_request = -(-(prefix_len + suffix_len) // block_size)
    used = []
    for caching in (False, True):
        pool = BlockPool(num_requests * per_request + 1, block_size)
        mgr = KVCacheManager(pool, enable_prefix_caching=caching)
        for i in range(num_requests):
            own = [10_000_000 + i * suffix_len + j for j in range(suffix_len)]
            _admit(mgr, _request(f"r{i}", list(range(prefix_len)) + own))
        used.append(pool.num_used)
    return used[0], used[1]


def static_batch_slot_steps(outputs: tuple[int, ...]) -> tuple[int, int]:
    """(slot-steps held, slot-steps used) when ``outputs`` decode as one static batch: every
    slot is held until the longest output finishes (Orca, Yu et al., OSDI 2022, §2)."""
    return len(outputs) * max(outputs), sum(outputs)


def tier_load_seconds(
    tokens: int, block_size: int, kv_bytes_per_token: float, tier: TierSpec
) -> float:
    """Seconds to bring a cached prefix of ``tokens`` back from ``tier``: offload its full
    blocks into ``serving``'s ``KVTiers``, then load them (only full blocks are cached)."""
    tiers = KVTiers((tier,), block_size * kv_bytes_per_token)
    hashes = list(range(tokens // block_size))
    for h in hashes:
        tiers.offload(h)
    tiers.take_transfer()  # the write happened when the blocks were evicted
    tiers.load(hashes)
    return tiers.take_transfer()[1]
