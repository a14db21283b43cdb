"""The KV cache manager: block tables per request over one ``BlockPool``.

Follows vLLM v1 ``KVCacheManager`` (``vllm/v1/core/kv_cache_manager.py``): ``find_prefix``
finds the longest cached prefix (device, then lower tiers), ``allocate_slots`` makes a request's table cover its
computed tokens, this step's new tokens and any lookahead (speculative) slots — or returns None
without changing anything — and ``free`` releases a table tail first::

    table of r (block_size 4):  [7][2][9]     num_computed = 9, new = 3 -> needs 12 slots = 3 blocks
                                 full full 1/4 -> block 9 receives positions 8..11

Copy-on-write: after ``fork``, a shared partially filled last block is copied to a fresh block
before the child writes into it (the copy is reported in ``take_copies``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ridgeline.serving.block_pool import BlockPool, KVBlock
from ridgeline.serving.prefix import longest_hit, update_block_hashes
from ridgeline.serving.request import Request
from ridgeline.serving.tiers import KVTiers


@dataclass(slots=True)
class PrefixHit:
    """A cached prefix found for a request: device blocks to share, then tier blocks to load."""

    device_blocks: list[KVBlock] = field(default_factory=list)
    tier_hashes: list[int] = field(default_factory=list)
    block_size: int = 16

    @property
    def num_tokens(self) -> int:
        return (len(self.device_blocks) + len(self.tier_hashes)) * self.block_size


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class KVCacheManager:
    """Block tables over a pool, with optional prefix caching and lower tiers.

    Args:
        pool: the device block pool.
        enable_prefix_caching: hash full blocks and reuse them across requests.
        tiers: lower tiers for offloaded prefix blocks and swapped requests (optional).
    """

    def __init__(
        self, pool: BlockPool, enable_prefix_caching: bool = False, tiers: KVTiers | None = None
    ) -> None:
        self.pool = pool
        self.block_size = pool.block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.tiers = tiers
        self.tables: dict[str, list[KVBlock]] = {}
        self._ids: dict[str, list[int]] = {}  # block ids of each table (kept in step)
        self._num_cached: dict[str, int] = {}  # leading blocks of each table already hashed
        self._copies: list[tuple[int, int]] = []

    def table(self, request_id: str) -> list[KVBlock]:
        return self.tables.get(request_id, [])

    def block_ids(self, request_id: str) -> tuple[int, ...]:
        return tuple(self._ids.get(request_id, ()))

    def append_blocks(self, request_id: str, blocks: list[KVBlock]) -> None:
        """Extend a table with blocks just allocated for it."""
        self.tables[request_id].extend(blocks)
        self._ids[request_id].extend([b.block_id for b in blocks])

    def find_prefix(self, request: Request) -> PrefixHit:
        """Longest cached prefix of ``request``: device blocks first, then tier blocks."""
        hit = PrefixHit(block_size=self.block_size)
        if not self.enable_prefix_caching:
            return hit
        update_block_hashes(request, self.block_size)
        hashes, n = request.block_hashes, request.num_tokens
        lookup = self.pool.lookup
        num_dev = longest_hit(hashes, n, self.block_size, lambda h: lookup(h) is not None)
        hit.device_blocks = [b for b in map(lookup, hashes[:num_dev]) if b is not None]
        if self.tiers is not None:
            tiers = self.tiers
            rest = hashes[num_dev:]
            num_tier = longest_hit(
                rest,
                n - num_dev * self.block_size,
                self.block_size,
                lambda h: tiers.find(h) is not None,
            )
            hit.tier_hashes = rest[:num_tier]
        return hit

    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        hit: PrefixHit | None = None,
        num_lookahead_tokens: int = 0,
        reserve_tokens: int = 0,
    ) -> list[KVBlock] | None:
        """Grow ``request``'s table to cover computed + hit + new + lookahead tokens (or
        ``reserve_tokens`` if larger); None, changing nothing, when the pool is short."""
        rid, bs = request.request_id, self.block_size
        table = self.tables.get(rid)
        if table is not None and hit is None and reserve_tokens == 0:
            # fast path: a running request whose table already covers the step, nothing shared
            need = request.num_computed_tokens + num_new_tokens + num_lookahead_tokens
            if need <= len(table) * bs and (
                num_new_tokens == 0 or table[request.num_computed_tokens // bs].ref_cnt == 1
            ):
                return table
        if table is None:
            table = self.tables[rid] = []
            self._ids[rid] = []
        hit_blocks = hit.device_blocks if hit is not None else []
        tier_hashes = hit.tier_hashes if hit is not None else []
        tokens = request.num_computed_tokens + (hit.num_tokens if hit else 0)
        need = max(tokens + num_new_tokens + num_lookahead_tokens, reserve_tokens)
        num_new_blocks = _cdiv(need, bs) - len(table) - len(hit_blocks)
        cow_index = self._shared_write_index(table, request.num_computed_tokens, num_new_tokens)
        cow = 0 if cow_index is None else 1
        revived = sum(1 for b in hit_blocks if b.ref_cnt == 0)
        if max(num_new_blocks, 0) + cow + revived > self.pool.num_free:
            if not table:
                del self.tables[rid], self._ids[rid]
            return None
        if tier_hashes:  # the allocation below may evict device blocks into the tiers
            assert self.tiers is not None
            self.tiers.pin(tier_hashes)
        if hit_blocks:  # pinned first: the allocations below may evict free cached blocks
            self.pool.touch(hit_blocks)
        if cow_index is not None:
            self._copy_block(rid, table, cow_index)
        if hit_blocks:
            self.append_blocks(rid, hit_blocks)
        if num_new_blocks > 0:
            new = self.pool.allocate(num_new_blocks)
            assert new is not None
            self.append_blocks(rid, new)
        if tier_hashes:
            self._load_from_tiers(table, len(hit_blocks), tier_hashes)
        return table

    def _shared_write_index(
        self, table: list[KVBlock], num_computed: int, num_new: int
    ) -> int | None:
        """Index of the table block the next write lands in, when another table shares it."""
        i = num_computed // self.block_size
        if num_new == 0 or i >= len(table) or table[i].ref_cnt <= 1:
            return None
        return i

    def _copy_block(self, rid: str, table: list[KVBlock], i: int) -> None:
        """Copy-on-write: give the writer its own copy of shared block ``table[i]``."""
        new = self.pool.allocate(1)
        assert new is not None
        self._copies.append((table[i].block_id, new[0].block_id))
        self.pool.free([table[i]])
        table[i] = new[0]
        self._ids[rid][i] = new[0].block_id

    def _load_from_tiers(self, table: list[KVBlock], start: int, hashes: list[int]) -> None:
        """Blocks just allocated after the device hit receive the tier blocks' contents."""
        assert self.tiers is not None
        self.tiers.load(hashes)
        for i, h in enumerate(hashes):
            block = table[start + i]
            if block.block_hash is None:
                self.pool.cache(block, h)

    def cache_full_blocks(self, request: Request) -> None:
        """Hash and register the full blocks whose KV is computed (never draft tokens)."""
        if not self.enable_prefix_caching:
            return
        rid, bs = request.request_id, self.block_size
        table = self.tables.get(rid)
        if not table:
            return
        full = min(request.num_computed_tokens // bs, len(table))
        start = self._num_cached.get(rid, 0)
        if full <= start:
            return
        update_block_hashes(request, bs)
        for i in range(start, full):
            block = table[i]
            if block.block_hash is None:
                self.pool.cache(block, request.block_hashes[i])
        self._num_cached[rid] = full

    def free(self, request: Request) -> None:
        """Release ``request``'s table, tail first (so its tail is evicted before its prefix)."""
        table = self.tables.pop(request.request_id, None)
        self._ids.pop(request.request_id, None)
        self._num_cached.pop(request.request_id, None)
        if table:
            self.pool.free(table[::-1])

    def trim(self, request: Request, num_tokens: int) -> None:
        """Free trailing blocks not needed for ``num_tokens`` tokens (rejected draft slots)."""
        table = self.tables.get(request.request_id)
        if not table:
            return
        keep = _cdiv(num_tokens, self.block_size)
        if len(table) > keep:
            tail = table[keep:]
            del table[keep:]
            del self._ids[request.request_id][keep:]
            self.pool.free(tail[::-1])

    def fork(self, parent_id: str, child_id: str) -> None:
        """Share the parent's whole table with a child (parallel sampling, beam search)."""
        table = self.tables[parent_id]
        self.pool.share(table)
        self.tables[child_id] = list(table)
        self._ids[child_id] = list(self._ids[parent_id])
        self._num_cached[child_id] = self._num_cached.get(parent_id, 0)

    def take_copies(self) -> tuple[tuple[int, int], ...]:
        """Copy-on-write block copies (src, dst) made since the last call."""
        out, self._copies = tuple(self._copies), []
        return out

    def num_slots(self, request_id: str) -> int:
        return len(self.tables.get(request_id, ())) * self.block_size
