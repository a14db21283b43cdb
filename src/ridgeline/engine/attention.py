"""Paged attention over a mixed batch: prefill chunks and decode tokens in one forward pass.

A step's new tokens are laid out back to back, one request after the other::

    tokens  | r0: prefill chunk (5) | r1: decode (1) | r2: decode (1) | r3: chunk (3) |
    rows      0 1 2 3 4               5                6                7 8 9

Every new token's K and V are first written to its slot (``slot_mapping``); then each query
reads its request's keys through the block table:

- **long rows** (prefill chunks of more than ``PAGED_MAX_NEW`` tokens): one SDPA call per
  request, with the causal mask shifted by ``start_position``. A fresh prefill (start 0)
  attends to its own new keys directly; a later chunk gathers its cached keys by slot.
- **paged rows** (decode tokens, speculative verification, short chunks): one batched call for
  all of them, each row with its request's block table and its own context length (its
  position + 1, which makes it causal). The reference path gathers ``k[block_tables]`` to
  ``[R, max_blocks * block_size, kv_heads, d]`` and masks the tail; the index-based kernel
  (``paged_kernel``) reads the blocks in place without that copy.

The metadata is built once per step and shared by every layer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F

from ridgeline.engine.kv_cache import KVCache


class SeqInput(Protocol):
    """What attention needs to know of one request of a step (``ScheduledRequest`` fits)."""

    @property
    def token_ids(self) -> tuple[int, ...]: ...

    @property
    def start_position(self) -> int: ...

    @property
    def block_ids(self) -> tuple[int, ...]: ...


PAGED_MAX_NEW = 8  # requests with at most this many new tokens take the paged-row path


class DecodeKernel(Protocol):
    """Attention of one query row over its block table's first ``context_len`` keys, in place."""

    def __call__(
        self,
        q: torch.Tensor,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        block_tables: torch.Tensor,
        context_lens: torch.Tensor,
    ) -> torch.Tensor: ...

    def write(
        self,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slots: torch.Tensor,
        k_new: torch.Tensor,
        v_new: torch.Tensor,
    ) -> None:
        """Store a step's keys/values [T, kv_heads, d] at ``slots`` [T], in place."""
        ...


@dataclass(frozen=True, slots=True)
class MultiTokenSlice:
    """A request with several new tokens: rows ``[row, row + num_new)`` of the step.

    ``context_slots`` [ctx] are the slots of all its keys (None for a fresh prefill, which
    attends to its own new keys); ``mask`` [num_new, ctx] is the shifted causal mask (None
    when plain ``is_causal`` applies).
    """

    row: int
    num_new: int
    context_slots: torch.Tensor | None
    mask: torch.Tensor | None


@dataclass(frozen=True, slots=True)
class AttentionMetadata:
    """Everything attention needs for one step, shared by every layer.

    Attributes:
        positions: [T] position of every new token.
        slot_mapping: [T] KV slot of every new token.
        multi: requests on the long-row path.
        paged_rows: [R] rows on the paged-row path.
        block_tables: [R, max_blocks] each such row's block table, padded with block 0.
        context_lens: [R] keys each such row sees (its position + 1).
        paged_mask: [R, 1, 1, max_blocks * block_size] True where a key is visible (gather path).
        all_paged: every row takes the paged path in order (a pure decode step): attention
            returns the kernel's output as is, with no scatter into a step-sized buffer.
    """

    positions: torch.Tensor
    slot_mapping: torch.Tensor
    multi: tuple[MultiTokenSlice, ...]
    paged_rows: torch.Tensor
    block_tables: torch.Tensor
    context_lens: torch.Tensor
    paged_mask: torch.Tensor
    all_paged: bool = False


def _slots(block_ids: Sequence[int], start: int, end: int, block_size: int) -> list[int]:
    """Slots of positions ``[start, end)``: ``block_ids[p // bs] * bs + p % bs``."""
    return [block_ids[p // block_size] * block_size + p % block_size for p in range(start, end)]


def _multi_slice(seq: SeqInput, row: int, block_size: int, device: torch.device) -> MultiTokenSlice:
    n, start = len(seq.token_ids), seq.start_position
    if start == 0:
        return MultiTokenSlice(row, n, None, None)
    slots = _slots(seq.block_ids, 0, start + n, block_size)
    keys = torch.arange(start + n, device=device)  # [ctx]
    queries = torch.arange(start, start + n, device=device)  # [n]
    mask = keys[None, :] <= queries[:, None]  # [n, ctx]
    return MultiTokenSlice(row, n, torch.tensor(slots, device=device), mask)


def build_metadata(
    seqs: Sequence[SeqInput], block_size: int, device: torch.device
) -> AttentionMetadata:
    """The step's metadata from its requests, in batch order."""
    positions: list[int] = []
    slots: list[int] = []
    multi: list[MultiTokenSlice] = []
    paged: list[tuple[int, int, Sequence[int]]] = []  # (row, context_len, block_ids)
    for seq in seqs:
        n, start = len(seq.token_ids), seq.start_position
        row = len(positions)
        positions.extend(range(start, start + n))
        slots.extend(_slots(seq.block_ids, start, start + n, block_size))
        if n == 1 or (start > 0 and n <= PAGED_MAX_NEW):
            paged.extend((row + i, start + i + 1, seq.block_ids) for i in range(n))
        else:
            multi.append(_multi_slice(seq, row, block_size, device))
    tables, lens, mask = _paged_tables(paged, block_size, device)
    return AttentionMetadata(
        positions=torch.tensor(positions, dtype=torch.long, device=device),
        slot_mapping=torch.tensor(slots, dtype=torch.long, device=device),
        multi=tuple(multi),
        paged_rows=torch.tensor([p[0] for p in paged], dtype=torch.long, device=device),
        block_tables=tables,
        context_lens=lens,
        paged_mask=mask,
        all_paged=not multi,
    )


def _paged_tables(
    paged: Sequence[tuple[int, int, Sequence[int]]], block_size: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lens = [p[1] for p in paged]
    max_blocks = max(((n + block_size - 1) // block_size for n in lens), default=0)
    rows = [list(p[2][:max_blocks]) for p in paged]
    rows = [r + [0] * (max_blocks - len(r)) for r in rows]
    tables = torch.tensor(rows, dtype=torch.int32, device=device).view(len(paged), max_blocks)
    context_lens = torch.tensor(lens, dtype=torch.int32, device=device)  # [R]
    keys = torch.arange(max_blocks * block_size, device=device)  # [S]
    mask = (keys[None, :] < context_lens[:, None])[:, None, None, :]  # [R, 1, 1, S]
    return tables, context_lens, mask


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: object) -> torch.Tensor:
    """SDPA on token-major tensors: q [n, H, d], k/v [ctx, kv_heads, d] → [n, H, d]."""
    gqa = q.shape[1] != k.shape[1]
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1)[None],  # [1, H, n, d]
        k.transpose(0, 1)[None],  # [1, kv_heads, ctx, d]
        v.transpose(0, 1)[None],  # [1, kv_heads, ctx, d]
        enable_gqa=gqa,
        **kw,  # type: ignore[arg-type]
    )  # [1, H, n, d]
    return out[0].transpose(0, 1)  # [n, H, d]


def gather_paged(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    """Reference paged attention: gather each row's blocks, mask the tail, one SDPA.

    Args:
        q: [R, H, d] one query per row.
        k_cache, v_cache: [num_blocks, block_size, kv_heads, d].
        block_tables: [R, max_blocks]; mask: [R, 1, 1, max_blocks * block_size].
    Returns:
        [R, H, d].
    """
    r, max_blocks = block_tables.shape
    _, bs, kv_heads, d = k_cache.shape
    idx = block_tables.long()
    k = k_cache[idx].view(r, max_blocks * bs, kv_heads, d).transpose(1, 2)  # [R, kvh, S, d]
    v = v_cache[idx].view(r, max_blocks * bs, kv_heads, d).transpose(1, 2)  # [R, kvh, S, d]
    out = F.scaled_dot_product_attention(
        q[:, :, None, :], k, v, attn_mask=mask, enable_gqa=q.shape[1] != kv_heads
    )  # [R, H, 1, d]
    return out[:, :, 0, :]  # [R, H, d]


def paged_attention(
    q: torch.Tensor,
    k_new: torch.Tensor,
    v_new: torch.Tensor,
    cache: KVCache,
    layer: int,
    meta: AttentionMetadata,
    kernel: DecodeKernel | None = None,
) -> torch.Tensor:
    """Write this step's K/V to their slots, then attend every query to its request's keys.

    Args:
        q: [T, H, d]; k_new, v_new: [T, kv_heads, d] for the step's new tokens.
        kernel: in-place decode kernel; None uses the gather reference path.
    Returns:
        [T, H, d] attention outputs (before the output projection).
    """
    if meta.all_paged and kernel is not None:  # rows are already in step order
        k_cache, v_cache = cache.k[layer], cache.v[layer]
        kernel.write(k_cache, v_cache, meta.slot_mapping, k_new, v_new)
        o = kernel(q, k_cache, v_cache, meta.block_tables, meta.context_lens)
        return o.to(q.dtype)  # [T, H, d]
    cache.write(layer, meta.slot_mapping, k_new, v_new)
    k_flat, v_flat = cache.flat(layer)  # [num_slots, kv_heads, d]
    out = torch.empty_like(q)  # [T, H, d]
    for s in meta.multi:
        rows = slice(s.row, s.row + s.num_new)
        if s.context_slots is None:
            out[rows] = _sdpa(q[rows], k_new[rows], v_new[rows], is_causal=True)
        else:
            k = k_flat.index_select(0, s.context_slots)  # [ctx, kv_heads, d]
            v = v_flat.index_select(0, s.context_slots)  # [ctx, kv_heads, d]
            out[rows] = _sdpa(q[rows], k, v, attn_mask=s.mask)
    if meta.paged_rows.numel():
        q_rows = q.index_select(0, meta.paged_rows)  # [R, H, d]
        k_cache, v_cache = cache.k[layer], cache.v[layer]
        if kernel is None:
            o = gather_paged(q_rows, k_cache, v_cache, meta.block_tables, meta.paged_mask)
        else:
            o = kernel(q_rows, k_cache, v_cache, meta.block_tables, meta.context_lens)
        out.index_copy_(0, meta.paged_rows, o.to(out.dtype))  # [T, H, d]
    return out
