"""The compiled schedule of one step on a scratchpad accelerator, and its simulated timeline.

On IBM Spyre the compiler, not a cache, moves every byte between device memory (LPDDR5) and
each core's scratchpad (LX), and every core runs the same program on its own tile (SPMD;
torch-spyre docs, "Dataflow Accelerator Architecture" and "Scratchpad (LX) optimization",
https://torch-spyre.readthedocs.io/en/latest/). This module does what such a compiler does for
one step of a model, at the level of detail a learner can check by hand:

1. takes the step's operators and their bytes from ``op_terms`` (one source of truth),
2. splits each operator across the cores (matmuls by output columns, attention over the KV
   cache by keys as in Flash-Decoding, everything else evenly),
3. tiles each core's share to the scratchpad (``tiling.best_tile`` for matmuls) and emits the
   per-core program — ``load``, ``ring``, ``compute``, ``store`` with sizes and scratchpad
   addresses — double-buffered so the next tile's load overlaps this tile's compute,
4. simulates it: one DMA queue per core at its share of device bandwidth (all cores stream at
   once, so each gets bandwidth ÷ cores), a compute engine at peak ÷ cores scaled by how much
   of the systolic array the tile fills, and the ring for inter-core traffic.

Per-core program of one double-buffered operator (buffers b0, b1)::

    DMA    | load t0→b0 | load t1→b1 | store t0 | load t2→b0 | store t1 | ...
    ring   | gather input (all-gather of the shared activation) |
    core   |            | compute t0 |          | compute t1 |          | ...

Bytes loaded from device memory equal the step's analytic bytes read (weights + KV +
activations, ``OpTerms.bytes_read``) plus the re-loads a plan declares (a matmul tile order
that streams an operand more than once, FlashAttention passes over Q/O in prefill).

Shapes are static: the schedule is compiled for a (batch, context) bucket, and a request that
does not fill the bucket pays for the padding.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from ridgeline.analytic import flash
from ridgeline.analytic.ops import OpTerms, op_terms
from ridgeline.analytic.roofline import Efficiency, shape_of, step_cost
from ridgeline.analytic.tiling import (
    LoopOrder,
    Matmul,
    Scratchpad,
    TilePlan,
    array_utilisation,
    best_tile,
    scratchpad_level,
)
from ridgeline.analytic.workload import Dtypes, Phase, Workload
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.model import ModelSpec

MIN_STREAM_TILES = 4  # NOTE: a heuristic: enough tiles for double buffering to overlap
NO_RING_NOTE = "no ring: every core re-reads the shared input; partials meet in device memory"


class Kind(StrEnum):
    """What an instruction does."""

    LOAD = "load"  # device memory → scratchpad
    STORE = "store"  # scratchpad → device memory
    RING = "ring"  # another core's scratchpad → this core's, over the ring
    COMPUTE = "compute"


class Category(StrEnum):
    """What the bytes of a transfer are."""

    WEIGHT = "weight"
    KV = "kv"
    ACT = "act"
    PARTIAL = "partial"  # matmul partial sums written out and read back (a declared re-load)
    NONE = "none"


class Lane(StrEnum):
    """A resource of a core that an operator can be limited by."""

    DMA = "device memory"
    COMPUTE = "compute"
    RING = "ring"


class OpKind(StrEnum):
    MATMUL = "matmul"
    ATTENTION = "attention"
    STREAM = "stream"


@dataclass(frozen=True, slots=True)
class Instr:
    """One instruction of a core's program: bytes or FLOPs, and the scratchpad address.

    ``reload`` marks bytes the plan moves a second time (declared, and counted).
    """

    kind: Kind
    category: Category
    size_bytes: float = 0.0
    flops: float = 0.0
    addr: int = 0
    reload: bool = False


@dataclass(frozen=True, slots=True)
class Step:
    """One tile step: its transfers in, its compute, its transfers out."""

    loads: tuple[Instr, ...]
    compute: Instr
    stores: tuple[Instr, ...]


@dataclass(frozen=True, slots=True)
class Buffer:
    """A scratchpad allocation: name, base address, bytes (rounded up to the granule)."""

    name: str
    addr: int
    size_bytes: int


@dataclass(frozen=True, slots=True)
class OpProgram:
    """The per-core program of one operator for one layer (every core runs the same one).

    Attributes:
        name: the operator (from ``op_terms``).
        count: layers it repeats in; the program runs ``count`` times per step.
        kind: matmul, attention over the KV cache, or a streamed op (norms, activations...).
        steps: the program, in issue order.
        buffers: scratchpad allocations, addresses from 0.
        plan: the tiling of a matmul (per-core shape), ``None`` for other kinds.
        terms: the operator's analytic terms (all layers, all cores).
        array_util: share of the matrix unit doing useful work.
        reload_note: why the plan re-loads bytes, empty if it does not.
    """

    name: str
    count: int
    kind: OpKind
    steps: tuple[Step, ...]
    buffers: tuple[Buffer, ...]
    plan: TilePlan | None
    terms: OpTerms
    array_util: float
    reload_note: str = ""

    def __post_init__(self) -> None:
        ends = [b.addr + b.size_bytes for b in self.buffers]
        assert all(e <= b.addr for e, b in zip(ends, self.buffers[1:], strict=False)), (
            "buffers overlap"
        )

    @property
    def occupancy_bytes(self) -> int:
        return sum(b.size_bytes for b in self.buffers)

    def total(
        self, kind: Kind, reload: bool | None = None, category: Category | None = None
    ) -> float:
        """Bytes of ``kind`` instructions in one core's program for one layer (optionally only
        re-loads or first loads, only one category)."""
        out = 0.0
        for s in self.steps:
            for ins in (*s.loads, *s.stores):
                if ins.kind is not kind or (reload is not None and ins.reload is not reload):
                    continue
                if category is None or ins.category is category:
                    out += ins.size_bytes
        return out

    @property
    def flops(self) -> float:
        return sum(s.compute.flops for s in self.steps)


@dataclass(frozen=True, slots=True)
class Core:
    """One core's resources during an SPMD step."""

    cores: int
    capacity_bytes: float
    granule_bytes: int
    array_dim: int
    dram_bytes_per_s: float  # this core's share of device bandwidth
    ring_bytes_per_s: float  # what the ring delivers into one core (both directions)
    flops_per_s: float  # this core's share of peak
    has_ring: bool = True  # False: shared inputs are re-read from device memory by every core


def core_of(
    acc: Accelerator,
    dt: Dtypes,
    level: str | None = None,
    use_ring: bool = True,
    bandwidth_efficiency: float = 1.0,
) -> Core:
    """A core of ``acc``: its scratchpad, and its shares of bandwidth and peak.

    Ring: a core receives from both neighbours, 2 × the per-direction bandwidth (bandwidth-
    optimal ring all-gather, Patarasuk & Yuan, JPDC 2009). Without a ring in the catalog (or
    with ``use_ring=False``) every core reads a shared input from device memory itself, and
    partial results meet in device memory: replicated traffic the plan declares as re-loads.
    ``bandwidth_efficiency`` scales device bandwidth (Spyre's measured ~150 of 200 GB/s [S38]).
    """
    lvl = scratchpad_level(acc, level)
    if acc.level_names.index(lvl.name) >= acc.level_names.index(acc.device_level):
        raise ConfigError(
            f"{acc.name}: field device_level: weights already live in '{acc.device_level}', "
            f"which is not below the scratchpad '{lvl.name}'; there is no load/store schedule "
            f"between them to compile"
        )
    share = acc.device_bandwidth_bytes_per_s * bandwidth_efficiency / acc.cores
    if lvl.bandwidth_bytes_per_s is not None:
        share = min(share, lvl.bandwidth_bytes_per_s / lvl.instances)
    ring = acc.ring_bandwidth_bytes_per_s
    return Core(
        cores=acc.cores,
        capacity_bytes=lvl.usable_capacity_bytes,
        granule_bytes=int(acc.device.granule_bytes or lvl.granule_bytes or 1),
        array_dim=acc.array_dim or 1,
        dram_bytes_per_s=share,
        ring_bytes_per_s=2.0 * ring if ring is not None else share,
        flops_per_s=acc.peak(dt.compute) / acc.cores,
        has_ring=use_ring and ring is not None,
    )


def _rounding_slack(core: Core, buffers: int) -> float:
    """Bytes lost to rounding each of at most 3·``buffers`` buffers up to the granule."""
    return 3 * buffers * core.granule_bytes


class _Allocator:
    """Bump allocation of scratchpad buffers, each aligned to the granule."""

    def __init__(self, granule: int) -> None:
        self.granule = granule
        self.buffers: list[Buffer] = []
        self.top = 0

    def alloc(self, name: str, size_bytes: float) -> int:
        size = math.ceil(size_bytes / self.granule) * self.granule
        self.buffers.append(Buffer(name, self.top, size))
        self.top += size
        return self.buffers[-1].addr


# ---------------------------------------------------------------------------------------------
# Operators → per-core programs


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
        core.capacity_bytes - _rounding_slack(core, buffers),
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
    alloc = _Allocator(core.granule_bytes)
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


def _emit_matmul(mm: Matmul, p: TilePlan, sz: _MatmulBytes, alloc: _Allocator) -> list[Step]:
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
    room = core.capacity_bytes - _rounding_slack(core, buffers)
    by_capacity = math.ceil(buffers * (load_bytes + store_bytes) / room)
    by_granule = max(1, int((load_bytes + store_bytes) // core.granule_bytes))
    tiles = max(1, by_capacity, min(MIN_STREAM_TILES, by_granule))
    alloc = _Allocator(core.granule_bytes)
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


# ---------------------------------------------------------------------------------------------
# Simulation


@dataclass(frozen=True, slots=True)
class Event:
    """A busy interval of one lane (``dma``, ``ring``, ``compute``) within one layer's op."""

    lane: str
    start_s: float
    end_s: float
    label: str


@dataclass(frozen=True, slots=True)
class OpRun:
    """One operator's simulated run on one core for one layer (all layers alike)."""

    program: OpProgram
    time_s: float
    dma_busy_s: float
    compute_busy_s: float
    ring_busy_s: float
    events: tuple[Event, ...]


def _transfer_s(ins: tuple[Instr, ...], kind: Kind, rate: float) -> float:
    return sum(i.size_bytes for i in ins if i.kind is kind) / rate


def simulate_op(prog: OpProgram, core: Core, keep_events: bool = False) -> OpRun:
    """Timeline of one operator on one core with ``buffers``-deep buffering.

    One in-order DMA queue: the load of tile i+1 is issued before the store of tile i, and a
    load waits until the compute that last used its buffer has finished. Ring transfers run
    on their own lane. Compute i waits for its loads, its ring data and compute i−1.
    """
    nb = _buffers(prog)
    rate = core.flops_per_s * prog.array_util
    dma = ring = comp = 0.0
    comp_end: list[float] = []
    pending_store: tuple[float, float] | None = None  # (ready_s, duration_s)
    busy = {"dma": 0.0, "ring": 0.0, "compute": 0.0}
    events: list[Event] = []

    def note(lane: str, start: float, dur: float, label: str) -> float:
        busy[lane] += dur
        if keep_events and dur > 0:
            events.append(Event(lane, start, start + dur, label))
        return start + dur

    for i, s in enumerate(prog.steps):
        free = comp_end[i - nb] if i >= nb else 0.0
        load_s = _transfer_s(s.loads, Kind.LOAD, core.dram_bytes_per_s)
        loaded = note("dma", max(dma, free), load_s, f"load {i}")
        dma = loaded
        if pending_store is not None:
            dma = note("dma", max(dma, pending_store[0]), pending_store[1], f"store {i - 1}")
        ring_s = _transfer_s(s.loads, Kind.RING, core.ring_bytes_per_s)
        ring = note("ring", max(ring, free), ring_s, f"ring {i}")
        start = max(loaded, ring, comp)
        comp = note("compute", start, s.compute.flops / rate, f"compute {i}")
        comp_end.append(comp)
        pending_store = (comp, _transfer_s(s.stores, Kind.STORE, core.dram_bytes_per_s))
    if pending_store is not None:
        dma = note("dma", max(dma, pending_store[0]), pending_store[1], "store last")
    end = max(dma, ring, comp)
    return OpRun(prog, end, busy["dma"], busy["compute"], busy["ring"], tuple(events))


def _buffers(prog: OpProgram) -> int:
    if prog.plan is not None:
        return prog.plan.buffers
    return max(1, sum(1 for b in prog.buffers if b.name.startswith("in[")))


# ---------------------------------------------------------------------------------------------
# The step


@dataclass(frozen=True, slots=True)
class Bucket:
    """The static (batch, context) shape a schedule is compiled for."""

    batch: int
    context: int


def default_bucket(w: Workload) -> Bucket:
    """Powers of two at or above the workload's batch and context (a common bucket ladder)."""
    return Bucket(_pow2(w.batch), _pow2(max(w.context_len, 1)))


def _pow2(x: int) -> int:
    return 1 << max(0, math.ceil(math.log2(x)))


@dataclass(frozen=True, slots=True)
class OpSummary:
    """One operator of the step: what moved where, how long it took, and against what bound."""

    name: str
    kind: OpKind
    count: int
    time_s: float
    roofline_s: float
    dram_load_bytes: float
    dram_store_bytes: float
    reload_bytes: float
    ring_bytes: float
    lx_written_bytes: float
    flops: float
    occupancy_bytes: int
    array_util: float
    limiter: Lane
    tile: str
    reload_note: str

    compute_utilisation: float = 0.0
    bandwidth_utilisation: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kind"] = self.kind.value
        d["limiter"] = self.limiter.value
        return d


@dataclass(frozen=True, slots=True)
class Gap:
    """Seconds per step the simulated schedule spends above the roofline bound, by cause."""

    reloads_s: float  # declared re-loads keep device memory busier than the analytic bytes
    array_padding_s: float  # tiles that fill the matrix unit only partly (M < array edge)
    ring_s: float  # inter-core transfers longer than everything else
    fill_drain_s: float  # first load and last store of each op, which nothing overlaps
    total_s: float

    def causes(self) -> dict[str, float]:
        """Cause name → seconds, for printing."""
        return {
            "re-loads": self.reloads_s,
            "array padding": self.array_padding_s,
            "ring": self.ring_s,
            "fill/drain": self.fill_drain_s,
        }


@dataclass(frozen=True, slots=True)
class CategoryBytes:
    """Bytes by what they are."""

    weight: float
    kv: float
    act: float
    partial: float


@dataclass(frozen=True, slots=True)
class Schedule:
    """A compiled, simulated step: per-op programs and runs, totals, and the analytic bound."""

    model: str
    accelerator: str
    workload: Workload
    bucket: Bucket
    core: Core
    runs: tuple[OpRun, ...]
    analytic_read_bytes: float
    analytic_write_bytes: float
    analytic_weight_bytes: float
    analytic_kv_bytes: float
    analytic_act_bytes: float
    roofline_time_s: float
    useful_read_bytes: float
    layers: int
    ops: tuple[OpSummary, ...] = field(default=())

    @property
    def time_s(self) -> float:
        return sum(r.time_s * r.program.count for r in self.runs)

    def _sum(self, kind: Kind, reload: bool | None = None) -> float:
        c = self.core.cores
        return sum(r.program.total(kind, reload) * r.program.count * c for r in self.runs)

    @property
    def loaded_bytes(self) -> float:
        """Device-memory bytes loaded by all cores over the step."""
        return self._sum(Kind.LOAD)

    def loaded_by_category(self) -> CategoryBytes:
        """Device-memory bytes loaded over the step, by what the load instructions carry."""
        c = self.core.cores

        def total(cat: Category) -> float:
            return sum(
                r.program.total(Kind.LOAD, category=cat) * r.program.count * c for r in self.runs
            )

        return CategoryBytes(
            total(Category.WEIGHT), total(Category.KV), total(Category.ACT), total(Category.PARTIAL)
        )

    @property
    def stored_bytes(self) -> float:
        return self._sum(Kind.STORE)

    @property
    def reload_bytes(self) -> float:
        """Bytes the plan loads a second time (declared)."""
        return self._sum(Kind.LOAD, reload=True)

    @property
    def restore_bytes(self) -> float:
        """Bytes the plan stores more than once (partial sums, FlashAttention passes)."""
        return self._sum(Kind.STORE, reload=True)

    @property
    def ring_bytes(self) -> float:
        return self._sum(Kind.RING)

    @property
    def flops(self) -> float:
        return sum(r.program.flops * r.program.count * self.core.cores for r in self.runs)

    @property
    def peak_occupancy_bytes(self) -> int:
        return max(r.program.occupancy_bytes for r in self.runs)

    @property
    def compute_utilisation(self) -> float:
        """FLOPs ÷ (peak × step time)."""
        return self.flops / (self.core.flops_per_s * self.core.cores * self.time_s)

    @property
    def bandwidth_utilisation(self) -> float:
        """Device bytes ÷ (device bandwidth × step time)."""
        moved = self.loaded_bytes + self.stored_bytes
        return moved / (self.core.dram_bytes_per_s * self.core.cores * self.time_s)

    @property
    def padding_fraction(self) -> float:
        """Share of the bytes read that the bucket adds over the request's own shape."""
        return 1.0 - self.useful_read_bytes / self.analytic_read_bytes

    def gap(self) -> Gap:
        """How far the simulated time is above the roofline bound, by cause (s per step).

        Per op: the plan's bound is its busiest lane (device memory including declared
        re-loads, compute at the array's utilisation, or the ring); what it adds over the
        analytic roofline is charged to that lane's cause, and the rest of the simulated time
        (the first load and the last store, which nothing overlaps) to fill/drain.
        """
        over = {lane: 0.0 for lane in Lane}
        fill = 0.0
        for r, o in zip(self.runs, self.ops, strict=True):
            n = r.program.count
            busiest = max(r.dma_busy_s, r.compute_busy_s, r.ring_busy_s)
            over[o.limiter] += max(0.0, busiest * n - o.roofline_s)
            fill += (r.time_s - busiest) * n
        tiny = 1e-9 * self.time_s  # floating-point noise, not a cause

        def clean(v: float) -> float:
            return 0.0 if abs(v) < tiny else v

        return Gap(
            reloads_s=clean(over[Lane.DMA]),
            array_padding_s=clean(over[Lane.COMPUTE]),
            ring_s=clean(over[Lane.RING]),
            fill_drain_s=clean(fill),
            total_s=clean(self.time_s - self.roofline_time_s),
        )

    def to_dict(self) -> dict[str, Any]:
        w = self.workload
        return {
            "schema": "ridgeline.schedule/1",
            "model": self.model,
            "accelerator": self.accelerator,
            "phase": w.phase.value,
            "batch": w.batch,
            "context": w.context_len,
            "bucket": {"batch": self.bucket.batch, "context": self.bucket.context},
            "padding_fraction": self.padding_fraction,
            "cores": self.core.cores,
            "time_s": self.time_s,
            "roofline_time_s": self.roofline_time_s,
            "gap": asdict(self.gap()),
            "analytic": {
                "read_bytes": self.analytic_read_bytes,
                "write_bytes": self.analytic_write_bytes,
                "weight_bytes": self.analytic_weight_bytes,
                "kv_bytes": self.analytic_kv_bytes,
                "activation_bytes": self.analytic_act_bytes,
            },
            "loaded_by_category": asdict(self.loaded_by_category()),
            "bytes_per_level": {
                "dram_loaded": self.loaded_bytes,
                "dram_stored": self.stored_bytes,
                "dram_reloaded": self.reload_bytes,
                "ring": self.ring_bytes,
                "scratchpad_written": self.loaded_bytes + self.ring_bytes,
            },
            "compute_utilisation": self.compute_utilisation,
            "bandwidth_utilisation": self.bandwidth_utilisation,
            "peak_occupancy_bytes": self.peak_occupancy_bytes,
            "scratchpad_bytes": self.core.capacity_bytes,
            "ops": [o.to_dict() for o in self.ops],
        }


def _summary(run: OpRun, core: Core, peak: float, bw: float) -> OpSummary:
    p, c, n = run.program, core.cores, run.program.count
    t = p.terms
    roof = max(float(t.flops) / peak, float(t.bytes_read + t.bytes_written) / bw)
    lanes = {Lane.DMA: run.dma_busy_s, Lane.COMPUTE: run.compute_busy_s, Lane.RING: run.ring_busy_s}
    limiter = max(lanes, key=lambda k: lanes[k])
    tile = ""
    if p.plan is not None:
        tt = p.plan.tile
        tile = f"{p.plan.order.value} {tt.tm}x{tt.tk}x{tt.tn}"
    lx_written = sum(sum(i.size_bytes for i in s.loads) for s in p.steps)
    return OpSummary(
        name=p.name,
        kind=p.kind,
        count=n,
        time_s=run.time_s * n,
        roofline_s=roof,
        dram_load_bytes=p.total(Kind.LOAD) * n * c,
        dram_store_bytes=p.total(Kind.STORE) * n * c,
        reload_bytes=(p.total(Kind.LOAD, True) + p.total(Kind.STORE, True)) * n * c,
        ring_bytes=p.total(Kind.RING) * n * c,
        lx_written_bytes=lx_written * n * c,
        flops=p.flops * n * c,
        occupancy_bytes=p.occupancy_bytes,
        array_util=p.array_util,
        limiter=limiter,
        tile=tile,
        reload_note=p.reload_note,
        compute_utilisation=p.flops * c / (core.flops_per_s * c * run.time_s),
        bandwidth_utilisation=(p.total(Kind.LOAD) + p.total(Kind.STORE))
        / (core.dram_bytes_per_s * run.time_s),
    )


@dataclass(frozen=True, slots=True)
class ScheduleOptions:
    """How to compile: buffer depth (2 = double buffering), whether cores share inputs over
    the ring, whether to keep per-instruction events for a timeline picture, and the fraction
    of device bandwidth reached (schedule and roofline alike)."""

    buffers: int = 2
    use_ring: bool = True
    keep_events: bool = True
    bandwidth_efficiency: float = 1.0

    def __post_init__(self) -> None:
        if self.buffers < 1:
            raise ConfigError(f"field buffers: must be at least 1, got {self.buffers}")
        if not 0.0 < self.bandwidth_efficiency <= 1.0:
            raise ConfigError(f"field bw_eff: must be in (0, 1], got {self.bandwidth_efficiency}")


def compile_schedule(
    model: ModelSpec,
    acc: Accelerator,
    workload: Workload,
    bucket: Bucket | None = None,
    options: ScheduleOptions | None = None,
) -> Schedule:
    """Compile and simulate one step of ``workload`` on ``acc`` for a static ``bucket``.

    Args:
        model: the model; its operators come from ``op_terms``.
        acc: a scratchpad accelerator (a compiler- or kernel-managed level above the device
            level), e.g. ``ibm-spyre``.
        workload: phase, batch, context and dtypes of the request.
        bucket: the static shape compiled for (default: next powers of two).
        options: buffer depth, ring use, event recording.

    Returns:
        The per-core programs, their simulated runs, totals and the analytic bound.

    Raises:
        ConfigError: the workload does not fit the bucket, or ``buffers`` < 1.
        CapacityError: no tile of some matmul fits the scratchpad.
    """
    opt = options or ScheduleOptions()
    b = bucket or default_bucket(workload)
    if workload.batch > b.batch or workload.context_len > b.context:
        raise ConfigError(
            f"field bucket: workload (batch {workload.batch}, context {workload.context_len}) "
            f"does not fit the bucket (batch {b.batch}, context {b.context})"
        )
    padded = Workload(workload.phase, b.batch, b.context, workload.prompt_len, workload.dtypes)
    core = core_of(
        acc, workload.dtypes, use_ring=opt.use_ring, bandwidth_efficiency=opt.bandwidth_efficiency
    )
    terms = op_terms(model, shape_of(padded), padded.dtypes)
    runs = tuple(
        simulate_op(compile_op(t, model, padded, core, opt.buffers), core, opt.keep_events)
        for t in terms
    )
    assert all(r.program.occupancy_bytes <= core.capacity_bytes for r in runs), "LX overflow"
    eff = Efficiency(bandwidth=opt.bandwidth_efficiency)
    cost = step_cost(model, acc, padded, eff)
    useful = step_cost(model, acc, workload).bytes_read
    peak = acc.peak(workload.dtypes.compute)
    bw = acc.device_bandwidth_bytes_per_s * opt.bandwidth_efficiency
    return Schedule(
        model=model.name,
        accelerator=acc.name,
        workload=workload,
        bucket=b,
        core=core,
        runs=runs,
        analytic_read_bytes=cost.bytes_read,
        analytic_write_bytes=cost.bytes_written,
        analytic_weight_bytes=cost.weight_bytes,
        analytic_kv_bytes=cost.kv_read_bytes + cost.kv_write_bytes,
        analytic_act_bytes=cost.act_bytes,
        roofline_time_s=cost.step_time_s,
        useful_read_bytes=useful,
        layers=model.num_layers,
        ops=tuple(_summary(r, core, peak, bw) for r in runs),
    )


@dataclass(frozen=True, slots=True)
class Segment:
    """One operator instance on the step's timeline (layer ``layer``, or -1 outside layers)."""

    name: str
    layer: int
    start_s: float
    end_s: float


def program_of(s: Schedule, name: str) -> OpProgram:
    """The per-core program of the operator called ``name``."""
    for r in s.runs:
        if r.program.name == name:
            return r.program
    names = ", ".join(r.program.name for r in s.runs)
    raise ConfigError(f"field program: no operator '{name}' (has {names})")


def listing(prog: OpProgram, max_steps: int = 8) -> tuple[str, ...]:
    """The first ``max_steps`` steps of a core's program as text, one instruction a line::

    step 0  load   weight    24.6 KB -> LX 0x00c00
    """
    lines = [
        f"{prog.name} x{prog.count} layers, {len(prog.steps)} steps per layer, buffers: "
        + ", ".join(f"{b.name}@0x{b.addr:05x}+{b.size_bytes}" for b in prog.buffers)
    ]
    for i, st in enumerate(prog.steps[:max_steps]):
        for ins in (*st.loads, st.compute, *st.stores):
            what = (
                f"{ins.flops:,.0f} FLOP" if ins.kind is Kind.COMPUTE else f"{ins.size_bytes:,.0f} B"
            )
            again = " (re-load)" if ins.reload else ""
            cat = "" if ins.kind is Kind.COMPUTE else ins.category.value
            lines.append(
                f"step {i:<4d} {ins.kind.value:8s}{cat:8s}{what:>16s} LX 0x{ins.addr:05x}{again}"
            )
    if len(prog.steps) > max_steps:
        lines.append(f"... {len(prog.steps) - max_steps} more steps")
    return tuple(lines)


def step_timeline(s: Schedule) -> tuple[Segment, ...]:
    """Operators in execution order: ops outside the layers (count 1) before and after the
    layer loop, per-layer ops repeated ``count`` times inside it."""
    runs = list(s.runs)
    first = next((i for i, r in enumerate(runs) if r.program.count > 1), len(runs))
    last = max((i for i, r in enumerate(runs) if r.program.count > 1), default=first - 1)
    out: list[Segment] = []
    t = 0.0
    for r in runs[:first]:
        out.append(Segment(r.program.name, -1, t, t + r.time_s))
        t += r.time_s
    for layer in range(s.layers):
        for r in runs[first : last + 1]:
            if layer < r.program.count:
                out.append(Segment(r.program.name, layer, t, t + r.time_s))
                t += r.time_s
    for r in runs[last + 1 :]:
        out.append(Segment(r.program.name, -1, t, t + r.time_s))
        t += r.time_s
    return tuple(out)
