"""KV tiers below device memory: host memory, disk. Each has a capacity and a bandwidth.

Two uses (vLLM ``OffloadingConnector``, ``vllm/distributed/kv_transfer``; SGLang HiCache):

- **Prefix offload**: a cached prefix block evicted from the device is written to the first
  tier (LRU); when that tier is full its least recently used block cascades to the next tier,
  and falls off the last. A later prefix hit may find the block in a tier and load it back.
- **Swap preemption**: a preempted request's blocks move to the first tier and come back when
  it is readmitted, instead of being recomputed.

Transfer time (bytes ÷ the tier's bandwidth, plus its latency per transfer) is accumulated and
charged to the next step (``take_transfer``). NOTE: cascades between lower tiers run in the
background and are counted as traffic but not charged to a step.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from ridgeline.errors import ConfigError
from ridgeline.specs.inputs import check_real
from ridgeline.specs.limits import MAX_BYTES, MAX_BYTES_PER_S, MAX_SECONDS


@dataclass(frozen=True, slots=True)
class TierSpec:
    """One KV tier: ``capacity_bytes`` reached at ``bandwidth_bytes_per_s`` from the device;
    ``async_writes``: evicted prefix blocks are stored in the background, charged to no step
    (vLLM's CPU offloading copies them on a stream of their own; loads on a hit are charged)."""

    name: str
    capacity_bytes: float
    bandwidth_bytes_per_s: float
    latency_s: float = 0.0
    async_writes: bool = False

    def __post_init__(self) -> None:
        try:
            check_real("capacity_bytes", self.capacity_bytes, 0, MAX_BYTES)
            # NOTE: the engine's host tier is priced at an infinite bandwidth (it measures copies)
            if self.bandwidth_bytes_per_s != math.inf:
                check_real("bandwidth", self.bandwidth_bytes_per_s, 0, MAX_BYTES_PER_S, True)
            check_real("latency_s", self.latency_s, 0, MAX_SECONDS)
        except ConfigError as e:
            raise ConfigError(f"tier {self.name}: {e}") from None


@dataclass(frozen=True, slots=True)
class TierTraffic:
    """Bytes moved into and out of one tier and the prefix blocks it served."""

    name: str
    bytes_in: float
    bytes_out: float
    hit_blocks: int


class _Tier:
    __slots__ = (
        "spec",
        "num_blocks",
        "blocks",
        "reserved",
        "bytes_in",
        "bytes_out",
        "hits",
        "pinned",
    )

    def __init__(self, spec: TierSpec, block_bytes: float) -> None:
        self.spec = spec
        self.num_blocks = int(spec.capacity_bytes // block_bytes)
        self.blocks: OrderedDict[int, None] = OrderedDict()  # prefix hashes, LRU first
        self.reserved = 0  # blocks held by swapped-out requests
        self.bytes_in = 0.0
        self.bytes_out = 0.0
        self.hits = 0
        self.pinned: set[int] = set()  # hashes a request is admitting with; never evicted

    @property
    def room(self) -> int:
        return self.num_blocks - self.reserved - len(self.blocks)

    def victim(self) -> int | None:
        """The least recently used block that is not pinned (None: every block is pinned)."""
        return next((h for h in self.blocks if h not in self.pinned), None)


class KVTiers:
    """The tiers below the device, fastest first, holding blocks of ``block_bytes``."""

    def __init__(self, specs: tuple[TierSpec, ...], block_bytes: float) -> None:
        if not specs:
            raise ConfigError("field tiers: give at least one tier below the device")
        self.block_bytes = block_bytes
        self.tiers = [_Tier(s, block_bytes) for s in specs]
        self._pending_s = 0.0
        self._pending_bytes = 0.0

    def offload(self, block_hash: int) -> None:
        """A cached prefix block was evicted from the device: write it to the first tier."""
        top = self.tiers[0]
        if top.num_blocks - top.reserved <= 0:
            return
        if not top.spec.async_writes:
            self._charge(top, self.block_bytes)
        top.bytes_in += self.block_bytes
        self._insert(0, block_hash)

    def _insert(self, level: int, block_hash: int) -> None:
        tier = self.tiers[level]
        tier.blocks[block_hash] = None
        tier.blocks.move_to_end(block_hash)
        while tier.room < 0 and (victim := tier.victim()) is not None:
            del tier.blocks[victim]
            tier.bytes_out += self.block_bytes
            nxt = level + 1
            if nxt < len(self.tiers) and self.tiers[nxt].num_blocks - self.tiers[nxt].reserved > 0:
                self.tiers[nxt].bytes_in += self.block_bytes
                self._insert(nxt, victim)

    def find(self, block_hash: int) -> int | None:
        """Index of the fastest tier holding ``block_hash``, or None."""
        for i, tier in enumerate(self.tiers):
            if block_hash in tier.blocks:
                return i
        return None

    def pin(self, block_hashes: list[int]) -> None:
        """Keep prefix blocks found by a hit in their tiers until ``load`` (an admission
        allocates device blocks in between, whose evictions offload into the tiers)."""
        for h in block_hashes:
            level = self.find(h)
            assert level is not None, h
            self.tiers[level].pinned.add(h)

    def load(self, block_hashes: list[int]) -> None:
        """Bring prefix blocks back to the device (they stay in their tier as copies) and
        unpin them."""
        for tier in self.tiers:
            tier.pinned.difference_update(block_hashes)
        for h in block_hashes:
            level = self.find(h)
            assert level is not None, h
            tier = self.tiers[level]
            tier.blocks.move_to_end(h)
            tier.hits += 1
            tier.bytes_out += self.block_bytes
            self._charge(tier, self.block_bytes)

    def reserve_swap(self, num_blocks: int) -> bool:
        """Hold room for a swapped-out request in the first tier (dropping cached prefix
        blocks if needed); False when it cannot fit. Charges the write."""
        top = self.tiers[0]
        if top.num_blocks - top.reserved < num_blocks:
            return False
        top.reserved += num_blocks
        while top.room < 0 and (victim := top.victim()) is not None:
            del top.blocks[victim]
        top.bytes_in += num_blocks * self.block_bytes
        self._charge(top, num_blocks * self.block_bytes)
        return True

    def release_swap(self, num_blocks: int, read: bool = True) -> None:
        """A swapped request comes back (``read``: its blocks are read, and charged) or is
        aborted (they are dropped); either way their room is free again."""
        top = self.tiers[0]
        assert top.reserved >= num_blocks
        top.reserved -= num_blocks
        if read:
            top.bytes_out += num_blocks * self.block_bytes
            self._charge(top, num_blocks * self.block_bytes)

    def _charge(self, tier: _Tier, nbytes: float) -> None:
        self._pending_s += tier.spec.latency_s + nbytes / tier.spec.bandwidth_bytes_per_s
        self._pending_bytes += nbytes

    def take_transfer(self) -> tuple[float, float]:
        """(bytes, seconds) of transfers since the last call (charged to the next step)."""
        out = (self._pending_bytes, self._pending_s)
        self._pending_bytes = self._pending_s = 0.0
        return out

    def traffic(self) -> tuple[TierTraffic, ...]:
        return tuple(TierTraffic(t.spec.name, t.bytes_in, t.bytes_out, t.hits) for t in self.tiers)
