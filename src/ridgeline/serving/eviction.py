"""Which cached free block to evict when the pool needs a block: LRU (default) or LFU.

Cached free blocks (ref count 0, still holding a prefix hash) are kept as long as possible and
evicted only when no uncached free block is left (vLLM v1 ``BlockPool.get_new_blocks``; PR #42656
"apply LRU only to proper cache entries"). The policy decides the order among them.

- LRU: least recently freed first. Within one request the pool frees the tail first, so the tail
  of a prompt goes before its shared prefix.
- LFU: fewest prefix hits first, ties by least recently freed (SGLang ``evict_policy.py``).
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Iterator
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

from ridgeline.errors import UnknownNameError

if TYPE_CHECKING:
    from ridgeline.serving.block_pool import KVBlock


class EvictionPolicy(Protocol):
    """A set of cached free blocks with an eviction order."""

    def add(self, block: KVBlock) -> None:
        """A cached block's ref count fell to 0: it becomes evictable."""
        ...

    def remove(self, block: KVBlock) -> None:
        """A prefix hit revived the block: it is no longer evictable."""
        ...

    def pop(self) -> KVBlock | None:
        """The next victim, or None when there is none."""
        ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[KVBlock]:
        """The evictable blocks (any order; for checks)."""
        ...


class LRUEviction:
    """Least recently freed first: an insertion-ordered map, O(1) add/remove/pop."""

    __slots__ = ("_blocks",)

    def __init__(self) -> None:
        self._blocks: OrderedDict[int, KVBlock] = OrderedDict()

    def add(self, block: KVBlock) -> None:
        self._blocks[block.block_id] = block

    def remove(self, block: KVBlock) -> None:
        del self._blocks[block.block_id]

    def pop(self) -> KVBlock | None:
        return self._blocks.popitem(last=False)[1] if self._blocks else None

    def __len__(self) -> int:
        return len(self._blocks)

    def __iter__(self) -> Iterator[KVBlock]:
        return iter(self._blocks.values())


class LFUEviction:
    """Fewest hits first, ties by least recently freed: a heap with lazy deletion."""

    __slots__ = ("_heap", "_live", "_stamp")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int]] = []  # (hits, freed stamp, block id)
        self._live: dict[int, tuple[KVBlock, int]] = {}  # block id -> (block, stamp)
        self._stamp = 0

    def add(self, block: KVBlock) -> None:
        self._stamp += 1
        self._live[block.block_id] = (block, self._stamp)
        heapq.heappush(self._heap, (block.hit_count, self._stamp, block.block_id))

    def remove(self, block: KVBlock) -> None:
        del self._live[block.block_id]

    def pop(self) -> KVBlock | None:
        while self._heap:
            _, stamp, block_id = heapq.heappop(self._heap)
            entry = self._live.get(block_id)
            if entry is not None and entry[1] == stamp:
                del self._live[block_id]
                return entry[0]
        return None

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[KVBlock]:
        return (block for block, _ in self._live.values())


class EvictionKind(StrEnum):
    """Eviction policies by name."""

    LRU = "lru"
    LFU = "lfu"

    @classmethod
    def parse(cls, name: str | EvictionKind) -> EvictionKind:
        """The eviction policy called ``name``; an unknown name is a ``UnknownNameError``."""
        try:
            return cls(name)
        except ValueError:
            raise UnknownNameError("eviction policy", str(name), [k.value for k in cls]) from None


def make_eviction(name: str | EvictionKind) -> EvictionPolicy:
    """An eviction policy by name (``lru`` or ``lfu``)."""
    kind = EvictionKind.parse(name)
    return LRUEviction() if kind is EvictionKind.LRU else LFUEviction()
