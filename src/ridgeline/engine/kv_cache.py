"""The paged KV cache: per layer one preallocated K tensor and one V tensor.

Layout of one layer's K (V is the same)::

    k[l] : [num_blocks, block_size, kv_heads, head_dim]
    flat : [num_blocks * block_size, kv_heads, head_dim]     (a view, no copy)

    slot = block_id * block_size + offset

           block 0          block 1          block 2
        +--+--+--+--+   +--+--+--+--+   +--+--+--+--+
        | 0| 1| 2| 3|   | 4| 5| 6| 7|   | 8| 9|10|11|   <- slots (block_size = 4)
        +--+--+--+--+   +--+--+--+--+   +--+--+--+--+

Tensors are allocated once, sized from a memory budget; a step only writes the slots its block
table gives (``index_copy_``) and never reallocates or concatenates.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ridgeline.engine.huge_pages import huge_page_empty
from ridgeline.errors import CapacityError
from ridgeline.specs.model import ModelSpec


@dataclass(frozen=True, slots=True)
class CacheShape:
    """The geometry of a paged cache: what one block holds and how many there are."""

    num_layers: int
    num_blocks: int
    block_size: int
    kv_heads: int
    head_dim: int
    dtype: torch.dtype

    @property
    def bytes_per_block(self) -> int:
        """K and V of one block over every layer: 2 × L × bs × kv_heads × d × bytes."""
        element = torch.empty((), dtype=self.dtype).element_size()
        return 2 * self.num_layers * self.block_size * self.kv_heads * self.head_dim * element

    @property
    def total_bytes(self) -> int:
        return self.num_blocks * self.bytes_per_block


def cache_shape(
    spec: ModelSpec, block_size: int, budget_bytes: float, dtype: torch.dtype
) -> CacheShape:
    """The largest cache of ``block_size`` blocks that fits ``budget_bytes``.

    Raises:
        CapacityError: when the budget does not hold a single block.
    """
    probe = CacheShape(spec.num_layers, 1, block_size, spec.num_kv_heads, spec.head_dim, dtype)
    num_blocks = int(budget_bytes // probe.bytes_per_block)
    if num_blocks < 1:
        raise CapacityError(
            f"KV budget {budget_bytes:.0f} B holds no block of {probe.bytes_per_block} B "
            f"(block_size {block_size}); raise the budget or lower block_size"
        )
    return CacheShape(
        spec.num_layers, num_blocks, block_size, spec.num_kv_heads, spec.head_dim, dtype
    )


def _blocks(dims: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """One layer's zeroed K or V blocks; on the CPU on huge pages, since attention jumps from
    block to block and each jump on 4 KiB pages is a TLB miss (``huge_pages``)."""
    if device.type == "cpu":
        return huge_page_empty(dims, dtype)
    return torch.zeros(dims, dtype=dtype, device=device)


class KVCache:
    """Per-layer K and V block tensors, plus a host tier for swapped-out blocks.

    The tier holds one ``[2, num_layers, block_size, kv_heads, head_dim]`` host tensor per
    occupied tier slot (the scheduler's tier accounting bounds how many).

    Args:
        shape: the geometry (``cache_shape`` sizes it from a budget).
        device: where the blocks live.
    """

    def __init__(self, shape: CacheShape, device: torch.device) -> None:
        self.shape = shape
        dims = (shape.num_blocks, shape.block_size, shape.kv_heads, shape.head_dim)
        self.k = [_blocks(dims, shape.dtype, device) for _ in range(shape.num_layers)]
        self.v = [_blocks(dims, shape.dtype, device) for _ in range(shape.num_layers)]
        self.tier: dict[int, torch.Tensor] = {}

    @classmethod
    def sharing(cls, other: KVCache, num_layers: int) -> KVCache:
        """A cache whose layers are ``other``'s first ``num_layers`` (a self-draft model's)."""
        view = cls.__new__(cls)
        s = other.shape
        view.shape = CacheShape(
            num_layers, s.num_blocks, s.block_size, s.kv_heads, s.head_dim, s.dtype
        )
        view.k, view.v = other.k[:num_layers], other.v[:num_layers]
        view.tier = {}
        return view

    def flat(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of ``layer`` as ``[num_slots, kv_heads, head_dim]`` views."""
        s = self.shape
        k = self.k[layer].view(s.num_blocks * s.block_size, s.kv_heads, s.head_dim)
        v = self.v[layer].view(s.num_blocks * s.block_size, s.kv_heads, s.head_dim)
        return k, v

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store new keys/values ``[T, kv_heads, head_dim]`` at ``slots`` ``[T]`` in place."""
        k_flat, v_flat = self.flat(layer)  # [num_slots, kv_heads, head_dim]
        k_flat.index_copy_(0, slots, k.to(k_flat.dtype))
        v_flat.index_copy_(0, slots, v.to(v_flat.dtype))

    def copy_blocks(self, pairs: tuple[tuple[int, int], ...]) -> None:
        """Copy-on-write: block ``src`` → block ``dst`` in every layer."""
        if not pairs:
            return
        src = torch.tensor([p[0] for p in pairs], device=self.k[0].device)  # [n]
        dst = torch.tensor([p[1] for p in pairs], device=self.k[0].device)  # [n]
        for tensors in (self.k, self.v):
            for t in tensors:
                t.index_copy_(0, dst, t.index_select(0, src))  # [n, bs, kv_heads, d]

    def swap_out(self, moves: tuple[tuple[int, int], ...]) -> None:
        """(tier slot, device block) pairs: copy each block, every layer, to the host tier."""
        for slot, block in moves:
            k = torch.stack([t[block] for t in self.k])  # [L, bs, kv_heads, d]
            v = torch.stack([t[block] for t in self.v])  # [L, bs, kv_heads, d]
            self.tier[slot] = torch.stack([k, v]).to("cpu")  # [2, L, bs, kv_heads, d]

    def swap_in(self, moves: tuple[tuple[int, int], ...]) -> None:
        """(tier slot, device block) pairs: bring each swapped block back, then free the slot."""
        for slot, block in moves:
            kv = self.tier.pop(slot)  # [2, L, bs, kv_heads, d]
            for layer in range(self.shape.num_layers):
                self.k[layer][block].copy_(kv[0, layer])
                self.v[layer][block].copy_(kv[1, layer])
