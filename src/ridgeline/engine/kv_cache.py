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


class KVCache:
    """Per-layer K and V block tensors, plus an optional host tier for swapped blocks.

    Args:
        shape: the geometry (``cache_shape`` sizes it from a budget).
        device: where the blocks live.
        num_swap_blocks: blocks of the lower tier that ``swap_out``/``swap_in`` move to/from.
    """

    def __init__(self, shape: CacheShape, device: torch.device, num_swap_blocks: int = 0) -> None:
        self.shape = shape
        dims = (shape.num_blocks, shape.block_size, shape.kv_heads, shape.head_dim)
        self.k = [
            torch.zeros(dims, dtype=shape.dtype, device=device) for _ in range(shape.num_layers)
        ]
        self.v = [
            torch.zeros(dims, dtype=shape.dtype, device=device) for _ in range(shape.num_layers)
        ]
        tier = (max(num_swap_blocks, 0), *dims[1:])
        self.swap_k = [torch.zeros(tier, dtype=shape.dtype) for _ in range(shape.num_layers)]
        self.swap_v = [torch.zeros(tier, dtype=shape.dtype) for _ in range(shape.num_layers)]

    @classmethod
    def sharing(cls, other: KVCache, num_layers: int) -> KVCache:
        """A cache whose layers are ``other``'s first ``num_layers`` (a self-draft model's)."""
        view = cls.__new__(cls)
        s = other.shape
        view.shape = CacheShape(
            num_layers, s.num_blocks, s.block_size, s.kv_heads, s.head_dim, s.dtype
        )
        view.k, view.v = other.k[:num_layers], other.v[:num_layers]
        view.swap_k, view.swap_v = other.swap_k[:num_layers], other.swap_v[:num_layers]
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

    def swap(self, moves: tuple[tuple[int, int], ...], to_device: bool) -> None:
        """Move (tier block, device block) pairs: tier → device when ``to_device``, else back."""
        for tier_block, block in moves:
            for dev, host in ((self.k, self.swap_k), (self.v, self.swap_v)):
                for layer in range(self.shape.num_layers):
                    if to_device:
                        dev[layer][block].copy_(host[layer][tier_block])
                    else:
                        host[layer][tier_block].copy_(dev[layer][block])
