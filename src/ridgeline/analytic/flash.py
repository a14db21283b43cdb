"""FlashAttention from a memory-systems view: HBM traffic of standard vs tiled attention.

Source: T. Dao, D. Fu, S. Ermon, A. Rudra, C. Ré, "FlashAttention: Fast and Memory-Efficient
Exact Attention with IO-Awareness", NeurIPS 2022 — Algorithm 0 (standard), Algorithm 1
(tiled), Theorem 2 (Θ(Nd + N²) vs Θ(N²d²M⁻¹) HBM accesses). Decode follows Flash-Decoding
(T. Dao, D. Haziza, F. Massa, G. Sizov, "Flash-Decoding for long-context inference", 2023):
split the keys across cores, then reduce the partial outputs with their log-sum-exp.

Counts are per (sequence, query head), in elements of the activation dtype; the softmax
statistics (row max m and sum l, or log-sum-exp) are fp32. M is the on-chip memory in
*elements*, as in the paper.

Standard (Algorithm 0): read Q, K, write S; read S, write P; read P, V, write O:
    4·N·d + 4·N² elements.
Tiled (Algorithm 1, K/V blocks outer): Bc = ⌈M / 4d⌉, Br = min(Bc, d), Tc = ⌈N / Bc⌉,
Tr = ⌈N / Br⌉. K and V are read once; Q, O and (l, m) are read and O, (l, m) written once per
K/V block, i.e. Tc passes:
    2·N·d + Tc·3·N·d elements + Tc·4·N statistics.
Tiled with the loop order of FlashAttention-2 (Q blocks outer): Q read and O written once,
K and V read once per Q block (Tr passes over K/V), log-sum-exp written once:
    2·N·d + Tr·2·N·d elements + N statistics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ridgeline.analytic.tiling import scratchpad_level
from ridgeline.errors import ConfigError
from ridgeline.specs.dtypes import DType
from ridgeline.specs.hardware import Accelerator

STAT_DTYPE = DType.FP32  # softmax statistics m, l and log-sum-exp (Dao et al. 2022, Alg. 1)


class FlashOrder(StrEnum):
    KV_OUTER = "kv-outer"  # FlashAttention Algorithm 1: one pass over K/V, Tc over Q/O
    Q_OUTER = "q-outer"  # FlashAttention-2 order: one pass over Q/O, Tr over K/V


@dataclass(frozen=True, slots=True)
class Blocks:
    """Block sizes of Algorithm 1 for on-chip memory of ``memory_elems`` elements."""

    memory_elems: int
    bc: int
    br: int

    def tiles(self, n: int) -> tuple[int, int]:
        """(Tc, Tr): K/V blocks and Q blocks over a sequence of ``n``."""
        return math.ceil(n / self.bc), math.ceil(n / self.br)


def block_sizes(memory_bytes: float, head_dim: int, elem_bytes: float) -> Blocks:
    """Bc = ⌈M / 4d⌉, Br = min(⌈M / 4d⌉, d) with M in elements (Dao et al. 2022, Alg. 1 l.1)."""
    if head_dim < 1:
        raise ConfigError(f"field head_dim: must be at least 1, got {head_dim}")
    m = int(memory_bytes // elem_bytes)
    if m < 4 * head_dim:
        raise ConfigError(
            f"field memory_bytes: {memory_bytes:.0f} B holds fewer than 4·d = {4 * head_dim} "
            f"elements; no block of Algorithm 1 fits"
        )
    bc = math.ceil(m / (4 * head_dim))
    return Blocks(m, bc, min(bc, head_dim))


@dataclass(frozen=True, slots=True)
class AttentionIO:
    """HBM bytes of one (sequence, head) of prefill attention, standard and tiled."""

    n: int
    head_dim: int
    blocks: Blocks
    order: FlashOrder
    standard_bytes: float
    flash_bytes: float
    kv_passes: int
    q_passes: int

    @property
    def saving(self) -> float:
        """Standard bytes ÷ tiled bytes."""
        return self.standard_bytes / self.flash_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "head_dim": self.head_dim,
            "memory_elems": self.blocks.memory_elems,
            "bc": self.blocks.bc,
            "br": self.blocks.br,
            "order": self.order.value,
            "standard_bytes": self.standard_bytes,
            "flash_bytes": self.flash_bytes,
            "kv_passes": self.kv_passes,
            "q_passes": self.q_passes,
            "saving": self.saving,
        }


def standard_bytes(n: int, d: int, elem_bytes: float) -> float:
    """Algorithm 0: (4·N·d + 4·N²) elements (Dao et al. 2022)."""
    return (4.0 * n * d + 4.0 * n * n) * elem_bytes


def flash_bytes(n: int, d: int, blocks: Blocks, elem_bytes: float, order: FlashOrder) -> float:
    """Tiled attention bytes under a loop order (formulas in the module docstring)."""
    tc, tr = blocks.tiles(n)
    stat = STAT_DTYPE.bytes
    if order is FlashOrder.KV_OUTER:
        return (2.0 * n * d + tc * 3.0 * n * d) * elem_bytes + tc * 4.0 * n * stat
    return (2.0 * n * d + tr * 2.0 * n * d) * elem_bytes + n * stat


def attention_io(
    n: int,
    head_dim: int,
    memory_bytes: float,
    elem_bytes: float = DType.BF16.bytes,
    order: FlashOrder = FlashOrder.KV_OUTER,
) -> AttentionIO:
    """Standard vs tiled HBM traffic of self-attention over ``n`` tokens, one head.

    Args:
        n: sequence length (queries = keys = n).
        head_dim: d.
        memory_bytes: on-chip memory M in bytes (converted to elements of ``elem_bytes``).
        elem_bytes: bytes per element of Q, K, V, O.
        order: Algorithm 1's K/V-outer loop or FlashAttention-2's Q-outer loop.

    Returns:
        Block sizes, passes and bytes of both algorithms.
    """
    if n < 1:
        raise ConfigError(f"field context: must be at least 1, got {n}")
    blocks = block_sizes(memory_bytes, head_dim, elem_bytes)
    tc, tr = blocks.tiles(n)
    kv_passes, q_passes = (1, tc) if order is FlashOrder.KV_OUTER else (tr, 1)
    return AttentionIO(
        n=n,
        head_dim=head_dim,
        blocks=blocks,
        order=order,
        standard_bytes=standard_bytes(n, head_dim, elem_bytes),
        flash_bytes=flash_bytes(n, head_dim, blocks, elem_bytes, order),
        kv_passes=kv_passes,
        q_passes=q_passes,
    )


@dataclass(frozen=True, slots=True)
class DecodeIO:
    """HBM bytes of one decode query over ``n`` cached keys, one head, split ``splits`` ways."""

    n: int
    head_dim: int
    splits: int
    standard_bytes: float
    flash_bytes: float
    kv_bytes: float

    @property
    def kv_share(self) -> float:
        """Share of the tiled traffic that is the K/V cache itself."""
        return self.kv_bytes / self.flash_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "head_dim": self.head_dim,
            "splits": self.splits,
            "standard_bytes": self.standard_bytes,
            "flash_bytes": self.flash_bytes,
            "kv_bytes": self.kv_bytes,
            "kv_share": self.kv_share,
        }


def decode_io(
    n: int, head_dim: int, blocks: Blocks, cores: int, elem_bytes: float = DType.BF16.bytes
) -> DecodeIO:
    """One query against ``n`` keys.

    Standard: read q and K, write s; read s, write p; read p and V, write o:
    (2·N·d + 2·d + 4·N) elements. Flash-Decoding: split the keys into
    S = min(cores, ⌈N / Bc⌉) chunks; each split reads q and its K/V chunk once and writes a
    partial o and log-sum-exp; the reduction reads the S partials and writes o:
    (2·N·d + S·d + 2·S·d + d) elements + 2·S statistics.
    """
    if n < 1:
        raise ConfigError(f"field context: must be at least 1, got {n}")
    d, stat = head_dim, STAT_DTYPE.bytes
    splits = max(1, min(cores, math.ceil(n / blocks.bc)))
    kv = 2.0 * n * d * elem_bytes
    flash = kv + (splits * d + 2.0 * splits * d + d) * elem_bytes + 2.0 * splits * stat
    standard = (2.0 * n * d + 2.0 * d + 4.0 * n) * elem_bytes
    return DecodeIO(n, d, splits, standard, flash, kv)


@dataclass(frozen=True, slots=True)
class FlashMemory:
    """An on-chip memory attention is tiled against: name, bytes, cores that split decode."""

    name: str
    memory_bytes: float
    cores: int


@dataclass(frozen=True, slots=True)
class FlashRow:
    """Traffic of one layer's attention (all query heads, one sequence) at one length."""

    n: int
    memory: str
    prefill: AttentionIO
    decode: DecodeIO
    heads: int

    @property
    def prefill_standard_bytes(self) -> float:
        return self.prefill.standard_bytes * self.heads

    @property
    def prefill_flash_bytes(self) -> float:
        return self.prefill.flash_bytes * self.heads

    @property
    def decode_flash_bytes(self) -> float:
        return self.decode.flash_bytes * self.heads

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "memory": self.memory,
            "heads": self.heads,
            "prefill": self.prefill.to_dict(),
            "decode": self.decode.to_dict(),
            "prefill_standard_bytes_per_layer": self.prefill_standard_bytes,
            "prefill_flash_bytes_per_layer": self.prefill_flash_bytes,
            "decode_flash_bytes_per_layer": self.decode_flash_bytes,
        }


@dataclass(frozen=True, slots=True)
class FlashTable:
    """Traffic against sequence length for one model's attention on several memories."""

    model: str
    head_dim: int
    heads: int
    memories: tuple[FlashMemory, ...]
    rows: tuple[FlashRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.flash/1",
            "model": self.model,
            "head_dim": self.head_dim,
            "heads": self.heads,
            "memories": [
                {"name": m.name, "memory_bytes": m.memory_bytes, "cores": m.cores}
                for m in self.memories
            ],
            "note": "per layer = per query head x heads; GQA kernels that share a K/V head "
            "across its query group read K/V fewer times (not modelled)",
            "rows": [r.to_dict() for r in self.rows],
        }


def flash_table(
    model: str,
    head_dim: int,
    heads: int,
    memories: tuple[FlashMemory, ...],
    lengths: tuple[int, ...],
    elem_bytes: float = DType.BF16.bytes,
) -> FlashTable:
    """Prefill and decode attention traffic of every length on every memory."""
    rows = []
    for mem in memories:
        blocks = block_sizes(mem.memory_bytes, head_dim, elem_bytes)
        for n in lengths:
            rows.append(
                FlashRow(
                    n=n,
                    memory=mem.name,
                    prefill=attention_io(n, head_dim, mem.memory_bytes, elem_bytes),
                    decode=decode_io(n, head_dim, blocks, mem.cores, elem_bytes),
                    heads=heads,
                )
            )
    return FlashTable(model, head_dim, heads, memories, tuple(rows))


def flash_memory(acc: Accelerator, level: str | None = None) -> FlashMemory:
    """The per-core scratchpad of ``acc`` (usable bytes) as the M of Algorithm 1."""
    lvl = scratchpad_level(acc, level)
    return FlashMemory(
        name=f"{acc.name}:{lvl.name}",
        memory_bytes=lvl.usable_capacity_bytes,
        cores=acc.cores,
    )


def lengths_up_to(context: int, start: int = 512) -> tuple[int, ...]:
    """Sequence lengths start, 2·start, ... below ``context``, then ``context`` itself."""
    if context < 1:
        raise ConfigError(f"field context: must be at least 1, got {context}")
    out = []
    n = start
    while n < context:
        out.append(n)
        n *= 2
    return (*out, context)


def flash_for_model(
    model_name: str,
    head_dim: int,
    heads: int,
    accelerators: tuple[Accelerator, ...],
    context: int,
    elem_bytes: float = DType.BF16.bytes,
) -> FlashTable:
    """The traffic table of one model's attention on each accelerator's per-core scratchpad,
    for lengths 512, 1024, ... up to ``context``."""
    memories = tuple(flash_memory(acc) for acc in accelerators)
    return flash_table(model_name, head_dim, heads, memories, lengths_up_to(context), elem_bytes)
