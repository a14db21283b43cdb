"""The TPU orchestrator, computed: Pallas BlockSpecs in VMEM and a double-buffered pipeline.

A Pallas TPU kernel declares a grid and, for each operand, a ``BlockSpec``: the block one grid
step holds in VMEM. The pipeline emitter double-buffers every operand: while the MXU works on
step i, the DMA engine brings the blocks of step i+1 from HBM and writes back the output block
that step i−1 finished; a block whose index does not change between consecutive steps is not
copied again (JAX docs, "Pallas TPU: Pipelining"; the Scaling Book's TPU chapter: "Data in HBM
needs to be copied into VMEM before the TensorCore can do any computation", [S2]).

Each step waits for both engines, so with n grid steps::

    DMA  | in0 | in1        | in2 + out0 | in3 + out1 | out2       | out3 |
    MXU  |     | compute 0  | compute 1  | compute 2  | compute 3  |      |
           fill  max(DMA_0, MXU_0) ...                 max(DMA_3, MXU_3)  drain

    time = fill + Σ_i max(DMA_i, MXU_i) + drain
    fill = the first step's input blocks (nothing to overlap them with)
    DMA_i = input blocks of step i+1 that changed + the output block step i−1 completed
    drain = the last output block's write-back

A matmul C[M,N] = A[M,K]·B[K,N] runs on the grid (⌈M/bm⌉, ⌈N/bn⌉, ⌈K/bk⌉), K innermost, with
an fp32 accumulator in VMEM (the Pallas TPU matmul guide's kernel); blocks are padded to their
full shape at the edges, so a shape that does not divide the block pays for the padding. VMEM
holds two copies of each input block and of the output block, plus the accumulator. Attention
over the KV cache streams KV blocks of ``bkv`` tokens per sequence (the ragged paged attention
kernel's grid: sequences × KV blocks), its FLOPs and bytes taken from ``op_terms``. Other
operators (norms, activations, the embedding gather) are fused elementwise work that streams
their bytes once at HBM bandwidth.

NOTE: first order: no per-grid-step overhead, one TensorCore per chip (peak and bandwidth of
the chip), causal masking folded into ``op_terms``' attended-key count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import numpy as np

from ridgeline.analytic.dataflow.compile import matmul_dims
from ridgeline.analytic.ops import OpTerms, op_terms
from ridgeline.analytic.roofline import shape_of
from ridgeline.analytic.tiling import Matmul, array_utilisation, edge_candidates, scratchpad_level
from ridgeline.analytic.workload import Dtypes, Workload
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.specs.dtypes import DType
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.model import ModelSpec

ACC_DTYPE = DType.FP32  # the matmul accumulator kept in VMEM scratch


@dataclass(frozen=True, slots=True)
class TensorCore:
    """What the pipeline needs of a TPU: VMEM bytes, MXU edge, HBM bandwidth, peak."""

    vmem_bytes: float
    mxu_dim: int
    hbm_bytes_per_s: float
    peak_flops_per_s: float


def tensor_core(
    acc: Accelerator, dtype: DType = DType.BF16, vmem_limit_bytes: float | None = None
) -> TensorCore:
    """The core of ``acc``: its kernel/compiler scratchpad (VMEM), ``array_dim``, device
    bandwidth and the peak at ``dtype``; ``vmem_limit_bytes`` caps VMEM (Pallas' scoped VMEM
    limit)."""
    if acc.array_dim is None:
        raise ConfigError(
            f"{acc.name}: field array_dim: the catalog gives no MXU edge, so no BlockSpec "
            f"can be chosen (blocks are multiples of it)"
        )
    vmem = scratchpad_level(acc).usable_capacity_bytes
    if vmem_limit_bytes is not None:
        vmem = min(vmem, vmem_limit_bytes)
    return TensorCore(vmem, acc.array_dim, acc.device_bandwidth_bytes_per_s, acc.peak(dtype))


@dataclass(frozen=True, slots=True)
class BlockSpec:
    """Block edges of a matmul's grid (bm, bk, bn) and the grid itself (M, N, K steps)."""

    bm: int
    bk: int
    bn: int
    grid: tuple[int, int, int]

    @property
    def steps(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def to_dict(self) -> dict[str, Any]:
        return {"bm": self.bm, "bk": self.bk, "bn": self.bn, "grid": list(self.grid)}


@dataclass(frozen=True, slots=True)
class Pipeline:
    """One operator's pipelined run on a TensorCore (one layer's instance).

    Attributes:
        name: the operator.
        block: the matmul's BlockSpec, ``None`` for attention and fused elementwise ops.
        steps: grid steps.
        vmem_bytes: VMEM the blocks occupy (double-buffered) plus scratch.
        fill_s: the first input blocks' DMA.
        steady_s: Σ over steps of max(DMA, MXU).
        drain_s: the last output block's write-back.
        dma_bytes: bytes the DMA engine moves (HBM→VMEM and back).
        dma_s: DMA time alone (dma_bytes ÷ bandwidth).
        mxu_s: MXU time alone.
        note: what the blocks are.
    """

    name: str
    block: BlockSpec | None
    steps: int
    vmem_bytes: float
    fill_s: float
    steady_s: float
    drain_s: float
    dma_bytes: float
    dma_s: float
    mxu_s: float
    note: str = ""

    @property
    def time_s(self) -> float:
        return self.fill_s + self.steady_s + self.drain_s

    @property
    def bound(self) -> str:
        return "MXU" if self.mxu_s > self.dma_s else "DMA"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "block": None if self.block is None else self.block.to_dict(),
            "steps": self.steps,
            "vmem_bytes": self.vmem_bytes,
            "fill_s": self.fill_s,
            "steady_s": self.steady_s,
            "drain_s": self.drain_s,
            "time_s": self.time_s,
            "dma_bytes": self.dma_bytes,
            "dma_s": self.dma_s,
            "mxu_s": self.mxu_s,
            "bound": self.bound,
            "note": self.note,
        }


def _pipelined(
    in_bytes: np.ndarray, out_bytes: np.ndarray, mxu_s: np.ndarray, bw: float
) -> tuple[float, float, float]:
    """(fill, Σ max(DMA_i, MXU_i), drain) of a double-buffered grid (module docstring)."""
    dma = np.zeros_like(mxu_s)  # (n,) bytes the DMA engine moves during step i
    dma[:-1] += in_bytes[1:]
    dma[1:] += out_bytes[:-1]
    steady = float(np.maximum(dma / bw, mxu_s).sum())
    return float(in_bytes[0]) / bw, steady, float(out_bytes[-1]) / bw


def matmul_vmem_bytes(mm: Matmul, bm: int, bk: int, bn: int) -> float:
    """VMEM of a matmul BlockSpec: two copies of the A, B and C blocks, one fp32 accumulator."""
    blocks = bm * bk * mm.a_bytes + bk * bn * mm.b_bytes + bm * bn * mm.c_bytes
    return 2.0 * blocks + bm * bn * ACC_DTYPE.bytes


def matmul_pipeline(mm: Matmul, block: tuple[int, int, int], core: TensorCore) -> Pipeline:
    """The pipelined run of ``mm`` with blocks (bm, bk, bn) on ``core`` (module docstring).

    Grid order (m, n, k), k innermost: A's block (m, k) and B's block (k, n) are copied when
    their index changes from the previous step; C's block (m, n) is written after its last k.
    Edge blocks are full blocks (padding computed and moved).
    """
    bm, bk, bn = block
    gm, gn, gk = math.ceil(mm.m / bm), math.ceil(mm.n / bn), math.ceil(mm.k / bk)
    idx = np.arange(gm * gn * gk)
    m_i, n_i, k_i = idx // (gn * gk), (idx // gk) % gn, idx % gk
    a_new = np.ones(idx.size, dtype=bool)
    b_new = np.ones(idx.size, dtype=bool)
    a_new[1:] = (m_i[1:] != m_i[:-1]) | (k_i[1:] != k_i[:-1])
    b_new[1:] = (n_i[1:] != n_i[:-1]) | (k_i[1:] != k_i[:-1])
    in_bytes = a_new * (bm * bk * mm.a_bytes) + b_new * (bk * bn * mm.b_bytes)  # (n,)
    out_bytes = (k_i == gk - 1) * (bm * bn * mm.c_bytes)  # (n,)
    util = array_utilisation(Matmul(bm, bk, bn), core.mxu_dim)
    mxu = np.full(idx.size, 2.0 * bm * bk * bn / (core.peak_flops_per_s * util))
    fill, steady, drain = _pipelined(in_bytes, out_bytes, mxu, core.hbm_bytes_per_s)
    moved = float(in_bytes.sum() + out_bytes.sum())
    return Pipeline(
        name=f"[{mm.m}x{mm.k}]·[{mm.k}x{mm.n}]",
        block=BlockSpec(bm, bk, bn, (gm, gn, gk)),
        steps=int(idx.size),
        vmem_bytes=matmul_vmem_bytes(mm, bm, bk, bn),
        fill_s=fill,
        steady_s=steady,
        drain_s=drain,
        dma_bytes=moved,
        dma_s=moved / core.hbm_bytes_per_s,
        mxu_s=float(mxu.sum()),
    )


def block_candidates(dim: int, unit: int) -> list[int]:
    """Legal block edges: the full dimension, or ``unit``·2^i below it (the (8, 128) rule of
    Pallas TPU blocks, taken at the MXU edge)."""
    return edge_candidates(dim, unit) if dim > unit else [dim]


@cache
def best_matmul_block(mm: Matmul, core: TensorCore) -> Pipeline:
    """The BlockSpec with the shortest pipelined time among those whose double-buffered blocks
    fit VMEM (ties: less VMEM).

    Raises:
        CapacityError: when not even the smallest legal blocks fit.
    """
    best: tuple[float, float, Pipeline] | None = None
    u = core.mxu_dim
    for bm in block_candidates(mm.m, u):
        for bk in block_candidates(mm.k, u):
            for bn in block_candidates(mm.n, u):
                if matmul_vmem_bytes(mm, bm, bk, bn) > core.vmem_bytes:
                    continue
                p = matmul_pipeline(mm, (bm, bk, bn), core)
                key = (p.time_s, p.vmem_bytes)
                if best is None or key < best[:2]:
                    best = (p.time_s, p.vmem_bytes, p)
    if best is None:
        raise CapacityError(
            f"no block of a [{mm.m}x{mm.k}]·[{mm.k}x{mm.n}] matmul fits "
            f"{core.vmem_bytes:.0f} B of VMEM double-buffered"
        )
    return best[2]


@dataclass(frozen=True, slots=True)
class AttnShape:
    """Per-layer, per-sequence bytes and FLOPs of attention over the KV cache (``op_terms``),
    and the query rows per KV head the MXU sees (GQA group × new tokens)."""

    seqs: int
    keys: int  # cached + new keys one sequence's queries attend over
    kv_bytes_per_key: float  # K and V of one cached token (all KV heads)
    q_bytes: float  # queries (and new K/V) read per sequence
    out_bytes: float  # outputs (and new K/V) written per sequence
    flops: float  # per sequence
    rows: int
    head_dim: int


def attention_pipeline(
    name: str, a: AttnShape, bkv: int, core: TensorCore, q_blocks: int = 1
) -> Pipeline:
    """Attention streamed over KV blocks of ``bkv`` tokens: grid (sequence, query block, KV
    block). A query block is copied with its first KV block and its output written after its
    last; with ``q_blocks`` > 1 the KV cache is streamed once per query block."""
    blocks = math.ceil(a.keys / bkv)
    n = a.seqs * q_blocks * blocks
    j = np.arange(n) % blocks  # KV block index within its query block
    kv_block = a.kv_bytes_per_key * bkv  # one full block (the last one padded)
    q_block, o_block = a.q_bytes / q_blocks, a.out_bytes / q_blocks
    in_bytes = kv_block + (j == 0) * q_block  # (n,)
    out_bytes = (j == blocks - 1) * o_block  # (n,)
    rows = max(1, math.ceil(a.rows / q_blocks))
    util = array_utilisation(Matmul(rows, a.head_dim, bkv), core.mxu_dim)
    per_step = a.flops / q_blocks * bkv / a.keys
    mxu = np.full(n, per_step / (core.peak_flops_per_s * util))
    fill, steady, drain = _pipelined(in_bytes, out_bytes, mxu, core.hbm_bytes_per_s)
    moved = float(in_bytes.sum() + out_bytes.sum())
    vmem = 2.0 * (kv_block + q_block + o_block)
    note = f"KV blocks of {bkv} tokens" + (f", {q_blocks} query blocks" if q_blocks > 1 else "")
    return Pipeline(
        name,
        None,
        n,
        vmem,
        fill,
        steady,
        drain,
        moved,
        moved / core.hbm_bytes_per_s,
        float(mxu.sum()),
        note,
    )


def best_attention(name: str, a: AttnShape, core: TensorCore) -> Pipeline:
    """The KV block size (MXU-edge multiples up to the keys) with the shortest time that fits,
    with the fewest query blocks that let one fit."""
    q_blocks = 1
    while q_blocks <= max(1, a.rows):
        fitting = [
            p
            for bkv in block_candidates(a.keys, core.mxu_dim)
            if (p := attention_pipeline(name, a, bkv, core, q_blocks)).vmem_bytes <= core.vmem_bytes
        ]
        if fitting:
            return min(fitting, key=lambda p: p.time_s)
        q_blocks *= 2
    raise CapacityError(f"{name}: no KV block fits {core.vmem_bytes:.0f} B of VMEM")


def attn_shape(t: OpTerms, model: ModelSpec, w: Workload) -> AttnShape:
    """Per-sequence terms of one layer's attention op."""
    per = 1.0 / t.count / w.batch
    prior = w.prior_tokens_per_seq
    group = model.num_heads // max(model.num_kv_heads, 1)
    return AttnShape(
        seqs=w.batch,
        keys=max(w.prior_tokens_per_seq + w.new_tokens_per_seq, 1),
        kv_bytes_per_key=float(t.kv_read_bytes) * per / prior if prior else 0.0,
        q_bytes=float(t.act_read_bytes) * per,
        out_bytes=float(t.act_write_bytes + t.kv_write_bytes) * per,
        flops=float(t.flops) * per,
        rows=group * w.new_tokens_per_seq,
        head_dim=model.head_dim,
    )


def _elementwise(t: OpTerms, core: TensorCore) -> Pipeline:
    moved = float(t.bytes_read + t.bytes_written) / t.count
    s = moved / core.hbm_bytes_per_s
    mxu = float(t.flops) / t.count / core.peak_flops_per_s
    return Pipeline(t.name, None, 1, 0.0, 0.0, max(s, mxu), 0.0, moved, s, mxu, "fused")


def op_pipeline(t: OpTerms, model: ModelSpec, w: Workload, core: TensorCore) -> Pipeline:
    """One operator (one layer's instance) on the TensorCore."""
    dims = matmul_dims(t, w.dtypes)
    if dims is not None:
        m, k, n = dims
        dt = w.dtypes
        mm = Matmul(m, k, n, dt.act.bytes, dt.weight.bytes, dt.act.bytes)
        p = best_matmul_block(mm, core)
        b = p.block
        assert b is not None
        return _renamed(p, t.name, f"BlockSpec ({b.bm}, {b.bk}) x ({b.bk}, {b.bn})")
    if float(t.kv_read_bytes) > 0 or float(t.kv_write_bytes) > 0:
        return best_attention(t.name, attn_shape(t, model, w), core)
    return _elementwise(t, core)


def _renamed(p: Pipeline, name: str, note: str) -> Pipeline:
    return Pipeline(
        name,
        p.block,
        p.steps,
        p.vmem_bytes,
        p.fill_s,
        p.steady_s,
        p.drain_s,
        p.dma_bytes,
        p.dma_s,
        p.mxu_s,
        note,
    )


@dataclass(frozen=True, slots=True)
class TpuStep:
    """One step on a TPU: each operator's pipeline and how many layers repeat it."""

    accelerator: str
    workload: Workload
    ops: tuple[tuple[int, Pipeline], ...]

    @property
    def time_s(self) -> float:
        return sum(n * p.time_s for n, p in self.ops)

    @property
    def fill_drain_s(self) -> float:
        return sum(n * (p.fill_s + p.drain_s) for n, p in self.ops)

    def op(self, name: str) -> Pipeline:
        for _, p in self.ops:
            if p.name == name:
                return p
        raise ConfigError(f"field op: no operator '{name}'")

    def to_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "schema": "ridgeline.tpu-step/1",
            "accelerator": self.accelerator,
            "phase": w.phase.value,
            "batch": w.batch,
            "context": w.context_len,
            "time_s": self.time_s,
            "fill_drain_s": self.fill_drain_s,
            "ops": [{"count": n, **p.to_dict()} for n, p in self.ops],
        }


def tpu_step(
    model: ModelSpec,
    acc: Accelerator,
    w: Workload,
    vmem_limit_bytes: float | None = None,
    bandwidth_efficiency: float = 1.0,
) -> TpuStep:
    """Every operator of one step of ``w`` pipelined on ``acc``'s TensorCore (at
    ``bandwidth_efficiency`` of its HBM bandwidth)."""
    dt: Dtypes = w.dtypes
    core = tensor_core(acc, dt.compute, vmem_limit_bytes)
    if bandwidth_efficiency != 1.0:
        core = replace(core, hbm_bytes_per_s=core.hbm_bytes_per_s * bandwidth_efficiency)
    ops = tuple((t.count, op_pipeline(t, model, w, core)) for t in op_terms(model, shape_of(w), dt))
    return TpuStep(acc.name, w, ops)
