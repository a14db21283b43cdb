"""The block pool: fixed-size KV blocks with ids, ref counts and a prefix-hash map.

Follows vLLM v1 ``vllm/v1/core/block_pool.py`` (https://github.com/vllm-project/vllm)::

    free blocks = uncached (front, reused first)  +  cached (kept, evicted by the policy)

    allocate(n): pop uncached blocks first (lowest id first at start), then evict cached ones
                 (their hash leaves the map, the eviction hook may offload them to a lower tier)
    touch(b):    prefix hit: a free cached block leaves the free set; ref_cnt += 1
    free(bs):    ref_cnt -= 1; at 0 an uncached block goes back to the front (reused next,
                 in the order given), a cached block goes to the eviction policy

"Doesn't fit" is ``None``, never a sentinel. Cached free blocks count as free (vLLM usage).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence

from ridgeline.errors import ConfigError
from ridgeline.serving.eviction import EvictionPolicy, LRUEviction


class KVBlock:
    """One block of ``block_size`` token slots.

    Attributes:
        block_id: index into the KV tensors.
        ref_cnt: requests whose table holds this block.
        block_hash: chained prefix hash once the block is full and cached, else None.
        hit_count: prefix hits since it was cached (LFU).
    """

    __slots__ = ("block_id", "ref_cnt", "block_hash", "hit_count")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self.block_hash: int | None = None
        self.hit_count = 0

    def __repr__(self) -> str:
        return f"KVBlock({self.block_id}, ref={self.ref_cnt}, hash={self.block_hash})"


class BlockPool:
    """``num_blocks`` blocks of ``block_size`` slots, with prefix caching when enabled.

    Args:
        num_blocks: blocks in the pool.
        block_size: token slots per block.
        eviction: order among cached free blocks (LRU by default).
        on_evict: called with the hash of every cached block evicted (tier offload).
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int = 16,
        eviction: EvictionPolicy | None = None,
        on_evict: Callable[[int], None] | None = None,
    ) -> None:
        if num_blocks < 1:
            raise ConfigError(f"field num_blocks: must be >= 1, got {num_blocks}")
        if block_size < 1:
            raise ConfigError(f"field block_size: must be >= 1, got {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        # NOTE: blocks are made on first use, in id order (a pool of 10^5 blocks a simulation
        # never fills costs nothing); never-used ones come after every freed one, as if the
        # free queue started with all of them in id order
        self.blocks: list[KVBlock] = []
        self._uncached: deque[KVBlock] = deque()
        self._cached_free = eviction if eviction is not None else LRUEviction()
        self._hash_to_block: dict[int, KVBlock] = {}
        self._on_evict = on_evict
        self.num_evictions = 0

    @property
    def num_free(self) -> int:
        """Blocks an allocation can take (uncached free plus evictable cached)."""
        return len(self._uncached) + self.num_blocks - len(self.blocks) + len(self._cached_free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - self.num_free

    @property
    def num_cached_free(self) -> int:
        return len(self._cached_free)

    @property
    def num_uncached_free(self) -> int:
        """Free blocks holding no prefix: what ``allocate`` takes before it evicts any."""
        return len(self._uncached) + self.num_blocks - len(self.blocks)

    def allocate(self, n: int) -> list[KVBlock] | None:
        """``n`` fresh blocks with ref count 1, or None when fewer than ``n`` are free."""
        if n > self.num_free:
            return None
        uncached = self._uncached
        # NOTE: uncached free blocks have ref count 0 and no hash by construction (``free``)
        out = [uncached.popleft() for _ in range(min(n, len(uncached)))]
        made = len(self.blocks)
        fresh = [KVBlock(i) for i in range(made, min(made + n - len(out), self.num_blocks))]
        self.blocks += fresh
        out += fresh
        out += [self._evict() for _ in range(n - len(out))]
        for block in out:
            block.ref_cnt = 1
        return out

    def _evict(self) -> KVBlock:
        block = self._cached_free.pop()
        assert block is not None and block.block_hash is not None and block.ref_cnt == 0
        h = block.block_hash
        if self._hash_to_block.get(h) is block:
            del self._hash_to_block[h]
        block.block_hash = None
        block.hit_count = 0
        self.num_evictions += 1
        if self._on_evict is not None:
            self._on_evict(h)
        return block

    def touch(self, blocks: Iterable[KVBlock]) -> None:
        """Take a reference on blocks found by a prefix hit (reviving free cached ones)."""
        for block in blocks:
            if block.ref_cnt == 0:
                self._cached_free.remove(block)
            block.ref_cnt += 1
            block.hit_count += 1

    def share(self, blocks: Iterable[KVBlock]) -> None:
        """Take one more reference on blocks already in use (fork)."""
        for block in blocks:
            assert block.ref_cnt > 0, block
            block.ref_cnt += 1

    def free(self, blocks: Sequence[KVBlock]) -> None:
        """Drop one reference on each block, in eviction-priority order (tail first)."""
        uncached = []
        add_cached = self._cached_free.add
        for block in blocks:
            assert block.ref_cnt > 0, f"double free of {block}"
            block.ref_cnt -= 1
            if block.ref_cnt:
                continue
            if block.block_hash is None:
                uncached.append(block)
            else:
                add_cached(block)
        self._uncached.extendleft(reversed(uncached))

    def cache(self, block: KVBlock, block_hash: int) -> None:
        """Record that full ``block`` holds the tokens hashed to ``block_hash``.

        NOTE: a hash already mapped keeps its first block (vLLM keeps duplicates so block
        tables stay append-only); the duplicate is cached-free later and evicted normally.
        """
        assert block.ref_cnt > 0 and block.block_hash is None, block
        block.block_hash = block_hash
        self._hash_to_block.setdefault(block_hash, block)

    def lookup(self, block_hash: int) -> KVBlock | None:
        """The cached block holding ``block_hash``, or None."""
        return self._hash_to_block.get(block_hash)

    def check(self) -> None:
        """Assert the pool's invariants (tests and debugging)."""
        free_ids = [b.block_id for b in self._uncached] + [b.block_id for b in self._cached_free]
        assert len(free_ids) == len(set(free_ids)), "a block is twice in the free sets"
        assert all(b.ref_cnt == 0 and b.block_hash is None for b in self._uncached)
        assert all(b.ref_cnt == 0 and b.block_hash is not None for b in self._cached_free)
        assert all(b.ref_cnt >= 0 for b in self.blocks)
        in_use = sum(1 for b in self.blocks if b.ref_cnt > 0)
        assert in_use + self.num_free == self.num_blocks, (in_use, self.num_free)
        for h, b in self._hash_to_block.items():
            assert b.block_hash == h, (h, b)
