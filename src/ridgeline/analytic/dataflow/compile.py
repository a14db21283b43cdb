"""Operators → per-core programs: each operator of ``op_terms`` split across the cores and
tiled to one core's scratchpad (module docstring of ``ridgeline.analytic.dataflow``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ridgeline.analytic import flash
from ridgeline.analytic.dataflow.program import (
    NO_RING_NOTE,
    Allocator,
    Category,
    Core,
    Instr,
    Kind,
    OpKind,
    OpProgram,
    Step,
    rounding_slack,
)
from ridgeline.analytic.ops import OpTerms
from ridgeline.analytic.tiling import (
    LoopOrder,
    Matmul,
    Scratchpad,
    TilePlan,
    array_utilisation,
    best_tile,
)
from ridgeline.analytic.workload import Dtypes, Phase, Workload
from ridgeline.errors import CapacityError
from ridgeline.specs.model import ModelSpec

MIN_STREAM_TILES = 4  # NOTE: a heuristic: enough tiles for double buffering to overlap


def matmul_dims(t: OpTerms, dt: Dtypes) -> tuple[int, int, int] | None:
    """(M, K, N) of a projection, recovered from its ``op_terms`` bookkeeping, or ``None``.

    Per layer, act_read = M·K·a, act_write = M·N·a, FLOPs = 2·M·K·N, so
    M = (M·K)(M·N) ÷ (M·K·N); an op is a projection when K·N·w matches its weight bytes (±1%
    for a bias).
    """
    if t.count < 1 or float(t.flops) <= 0 or float(t.weight_bytes) <= 0:
        return None
    if float(t.kv_read_bytes) > 0:
        return None
    mk = float(t.act_read_bytes) / t.count / dt.act.bytes
    mn = float(t.act_write_bytes) / t.count / dt.act.bytes
    mkn = float(t.flops) / t.count / 2.0
    m = mk * mn / mkn
    if m < 0.5 or abs(m - round(m)) > 1e-6 * m:
        return None
    k, n = mk / m, mn / m
    weights = float(t.weight_bytes) / t.count / dt.weight.bytes
    if abs(k * n - weights) > 0.01 * weights:
        return None
    return round(m), round(k), round(n)


def _per_core_layer(x: Any, t: OpTerms, cores: int) -> float:
    return float(x) / t.count / cores


def _matmul_program(
    t: OpTerms, dims: tuple[int, int, int], core: Core, dt: Dtypes, buffers: int
) -> OpProgram:
    """Split a projection by output columns across cores and tile each core's share.

    Each core loads its 1/cores of the input and gets the rest over the ring (all-gather), so
    device memory sees the input once; weights and outputs split by columns.
    """
    m, k, n = dims
    n_core = math.ceil(n / core.cores)
    mm = Matmul(m, k, n_core, dt.act.bytes, dt.weight.bytes, dt.act.bytes)
    pad = Scratchpad(
        "core",
        core.capacity_bytes - rounding_slack(core, buffers),
        core.array_dim,
        core.granule_bytes,
        core.flops_per_s,
        core.dram_bytes_per_s,
    )
    p = best_tile(mm, pad, buffers)
    if p is None:
        raise CapacityError(
            f"{t.name}: no tile of a [{m}x{k}]·[{k}x{n_core}] matmul fits "
            f"{core.capacity_bytes:.0f} B of scratchpad"
        )
    sizes = _MatmulBytes(
        a=float(t.act_read_bytes) / t.count,
        b=_per_core_layer(t.weight_bytes, t, core.cores),
        c=_per_core_layer(t.act_write_bytes, t, core.cores),
        cores=core.cores,
        ring=core.has_ring,
    )
    alloc = Allocator(core.granule_bytes)
    steps = _emit_matmul(mm, p, sizes, alloc)
    return OpProgram(
        t.name,
        t.count,
        OpKind.MATMUL,
        tuple(steps),
        tuple(alloc.buffers),
        p,
        t,
        array_utilisation(mm, core.array_dim),
        _reload_note(p, core.has_ring),
    )


def _reload_note(p: TilePlan, ring: bool) -> str:
    """Why a tiling moves an operand more than once, or "" when it does not."""
    if p.passes.a_reads == 1 and p.passes.b_reads == 1 and p.passes.c_reads == 0:
        return "" if ring else NO_RING_NOTE
    return ("" if ring else NO_RING_NOTE + "; ") + (
        f"{p.order.value} tiles {p.tile.tm}x{p.tile.tk}x{p.tile.tn}: A read "
        f"{p.passes.a_reads}x, B {p.passes.b_reads}x, partial sums "
        f"{p.passes.c_writes} out / {p.passes.c_reads} back"
    )


@dataclass(frozen=True, slots=True)
class _MatmulBytes:
    """Per-layer bytes of one core's share: A (the whole input), B and C (its columns)."""

    a: float
    b: float
    c: float
    cores: int
    ring: bool


def _edges(dim: int, tile: int) -> list[tuple[int, int]]:
    """(start, size) of the tiles along one dimension."""
    return [(s, min(tile, dim - s)) for s in range(0, dim, tile)]


def _emit_matmul(mm: Matmul, p: TilePlan, sz: _MatmulBytes, alloc: Allocator) -> list[Step]:
    """The loop nest of ``p.order`` as a flat list of steps (module docstring of ``tiling``).

    An A tile's first load comes 1/cores from device memory and the rest over the ring (without
    a ring: a replicated read, declared as a re-load); a later load of the same tile is a
    declared re-load from device memory.
    """
    t, nb = p.tile, p.buffers
    a_addr = [alloc.alloc(f"A[{i}]", t.tm * t.tk * mm.a_bytes) for i in range(nb)]
    b_addr = [alloc.alloc(f"B[{i}]", t.tk * t.tn * mm.b_bytes) for i in range(nb)]
    c_copies = 1 if p.order is LoopOrder.C_STATIONARY else nb
    c_addr = [alloc.alloc(f"C[{i}]", t.tm * t.tn * mm.c_bytes) for i in range(c_copies)]
    ms, ks, ns = _edges(mm.m, t.tm), _edges(mm.k, t.tk), _edges(mm.n, t.tn)
    seen_a: set[tuple[int, int]] = set()
    seen_b: set[tuple[int, int]] = set()
    steps: list[Step] = []

    def step(mi: int, ki: int, ni: int, store: bool, with_a: bool, with_b: bool) -> None:
        i = len(steps)
        loads: list[Instr] = []
        if with_a:
            loads += _a_loads(mm, sz, ms[mi], ks[ki], (mi, ki) in seen_a, a_addr[i % nb])
            seen_a.add((mi, ki))
        if with_b:
            frac = ks[ki][1] / mm.k * ns[ni][1] / mm.n
            again = (ki, ni) in seen_b
            seen_b.add((ki, ni))
            loads.append(Instr(Kind.LOAD, Category.WEIGHT, sz.b * frac, 0, b_addr[i % nb], again))
        c_frac = ms[mi][1] / mm.m * ns[ni][1] / mm.n
        c_at = c_addr[i % c_copies]
        if ki > 0 and p.order is not LoopOrder.C_STATIONARY:
            loads.append(Instr(Kind.LOAD, Category.PARTIAL, sz.c * c_frac, 0, c_at, True))
        flops = 2.0 * ms[mi][1] * ks[ki][1] * ns[ni][1]
        compute = Instr(Kind.COMPUTE, Category.NONE, 0.0, flops, b_addr[i % nb])
        stores: tuple[Instr, ...] = ()
        if store:
            partial = ki < len(ks) - 1
            cat = Category.PARTIAL if partial else Category.ACT
            stores = (Instr(Kind.STORE, cat, sz.c * c_frac, 0, c_at, partial),)
        steps.append(Step(tuple(loads), compute, stores))

    _loop_nest(p.order, len(ms), len(ks), len(ns), step)
    return steps


def _a_loads(
    mm: Matmul, sz: _MatmulBytes, mt: tuple[int, int], kt: tuple[int, int], again: bool, addr: int
) -> list[Instr]:
    tile = sz.a * mt[1] / mm.m * kt[1] / mm.k
    if again:
        return [Instr(Kind.LOAD, Category.ACT, tile, 0, addr, True)]
    own = tile / sz.cores
    rest = (Kind.RING, False) if sz.ring else (Kind.LOAD, True)  # else: replicated read
    return [
        Instr(Kind.LOAD, Category.ACT, own, 0, addr),
        Instr(rest[0], Category.ACT, tile - own, 0, addr, rest[1]),
    ]


def _loop_nest(order: LoopOrder, mt: int, kt: int, nt: int, step: Any) -> None:
    """Call ``step(mi, ki, ni, store, with_a, with_b)`` in the order's loop nest."""
    last_k = kt - 1
    if order is LoopOrder.C_STATIONARY:
        for mi in range(mt):
            for ni in range(nt):
                for ki in range(kt):
                    step(mi, ki, ni, ki == last_k, True, True)
    elif order is LoopOrder.A_STATIONARY:
        for mi in range(mt):
            for ki in range(kt):
                for ni in range(nt):
                    step(mi, ki, ni, True, ni == 0, True)
    else:
        for ki in range(kt):
            for ni in range(nt):
                for mi in range(mt):
                    step(mi, ki, ni, True, True, mi == 0)


@dataclass(frozen=True, slots=True)
class _Stream:
    """Per-core, per-layer bytes of a streamed op, by category, and its FLOPs."""

    loads: tuple[tuple[Category, float, bool], ...]
    stores: tuple[tuple[Category, float, bool], ...]
    gather: float  # bytes this core needs from the others' share of a shared input
    reduce: float  # bytes of partial results this core exchanges with the others
    flops: float


def _stream_program(
    t: OpTerms, kind: OpKind, s: _Stream, core: Core, buffers: int, note: str = ""
) -> OpProgram:
    """Split a streamed op evenly and cut it into equal double-buffered tiles."""
    if not core.has_ring and s.gather + s.reduce > 0:
        s = _without_ring(s)
        note = note or NO_RING_NOTE
    load_bytes = sum(b for _, b, _ in s.loads)
    store_bytes = sum(b for _, b, _ in s.stores)
    room = core.capacity_bytes - rounding_slack(core, buffers)
    by_capacity = math.ceil(buffers * (load_bytes + store_bytes) / room)
    by_granule = max(1, int((load_bytes + store_bytes) // core.granule_bytes))
    tiles = max(1, by_capacity, min(MIN_STREAM_TILES, by_granule))
    alloc = Allocator(core.granule_bytes)
    in_addr = [alloc.alloc(f"in[{i}]", load_bytes / tiles) for i in range(buffers)]
    out_addr = [alloc.alloc(f"out[{i}]", store_bytes / tiles) for i in range(buffers)]
    steps = []
    for i in range(tiles):
        loads = [
            Instr(Kind.LOAD, cat, b / tiles, 0, in_addr[i % buffers], again)
            for cat, b, again in s.loads
            if b > 0
        ]
        ring = s.gather + s.reduce
        if ring > 0:
            loads.append(Instr(Kind.RING, Category.ACT, ring / tiles, 0, in_addr[i % buffers]))
        stores = tuple(
            Instr(Kind.STORE, cat, b / tiles, 0, out_addr[i % buffers], again)
            for cat, b, again in s.stores
            if b > 0
        )
        compute = Instr(Kind.COMPUTE, Category.NONE, 0.0, s.flops / tiles, in_addr[i % buffers])
        steps.append(Step(tuple(loads), compute, stores))
    return OpProgram(t.name, t.count, kind, tuple(steps), tuple(alloc.buffers), None, t, 1.0, note)


def _without_ring(s: _Stream) -> _Stream:
    """Inter-core traffic through device memory: the gathered input is read again by every
    core, partial results are stored and read back (declared re-loads)."""
    loads = (*s.loads, (Category.ACT, s.gather + s.reduce, True))
    stores = (*s.stores, (Category.ACT, s.reduce, True))
    return _Stream(loads, stores, 0.0, 0.0, s.flops)


def _basic_stream(t: OpTerms, cores: int) -> _Stream:
    """Every category split evenly across cores; no inter-core traffic."""
    c = cores

    def per(x: Any) -> float:
        return _per_core_layer(x, t, c)

    return _Stream(
        loads=(
            (Category.WEIGHT, per(t.weight_bytes), False),
            (Category.KV, per(t.kv_read_bytes), False),
            (Category.ACT, per(t.act_read_bytes), False),
        ),
        stores=(
            (Category.KV, per(t.kv_write_bytes), False),
            (Category.ACT, per(t.act_write_bytes), False),
        ),
        gather=0.0,
        reduce=0.0,
        flops=per(t.flops),
    )


def _attention_stream(t: OpTerms, model: ModelSpec, w: Workload, core: Core) -> tuple[_Stream, str]:
    """Attention over the KV cache, split across cores.

    Decode (Flash-Decoding): each core reads 1/cores of the cached keys and values; the query
    (and new K/V) is gathered over the ring, and the partial outputs are reduced over the ring.
    Prefill (FlashAttention, Algorithm 1 on one core's scratchpad): heads and sequences split
    across cores; with Tc > 1 K/V blocks, Q, O and the statistics move Tc times — a declared
    re-load of (Tc − 1)·(2·N·d + 2·N·stat) bytes read and (Tc − 1)·(N·d + 2·N·stat) written.
    """
    base = _basic_stream(t, core.cores)
    c = core.cores
    act_in = float(t.act_read_bytes) / t.count
    act_out = float(t.act_write_bytes) / t.count
    if w.phase is Phase.DECODE:
        gather, reduce = act_in * (c - 1) / c, act_out * (c - 1) / c
        return _Stream(base.loads, base.stores, gather, reduce, base.flops), ""
    n, d, e = w.new_tokens_per_seq, model.head_dim, w.dtypes.act.bytes
    blocks = flash.block_sizes(core.capacity_bytes, d, e)
    tc, _ = blocks.tiles(n)
    if tc <= 1:
        return base, ""
    heads_seqs = model.num_heads * w.batch / c
    stat = flash.STAT_DTYPE.bytes
    extra_in = heads_seqs * (tc - 1) * (2.0 * n * d * e + 2.0 * n * stat)
    extra_out = heads_seqs * (tc - 1) * (1.0 * n * d * e + 2.0 * n * stat)
    loads = (*base.loads, (Category.ACT, extra_in, True))
    stores = (*base.stores, (Category.ACT, extra_out, True))
    note = f"FlashAttention Bc={blocks.bc}, Br={blocks.br}: Q/O pass {tc}x over {n} tokens"
    return _Stream(loads, stores, 0.0, 0.0, base.flops), note


def compile_op(
    t: OpTerms, model: ModelSpec, w: Workload, core: Core, buffers: int = 2
) -> OpProgram:
    """The per-core program of one operator."""
    dims = matmul_dims(t, w.dtypes)
    if dims is not None:
        return _matmul_program(t, dims, core, w.dtypes, buffers)
    if float(t.kv_read_bytes) > 0 or float(t.kv_write_bytes) > 0:
        stream, note = _attention_stream(t, model, w, core)
        return _stream_program(t, OpKind.ATTENTION, stream, core, buffers, note)
    return _stream_program(t, OpKind.STREAM, _basic_stream(t, core.cores), core, buffers)
