"""The per-core program of a compiled step: instructions, tile steps, scratchpad buffers, and
the resources of one core (its scratchpad, its shares of bandwidth and peak)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from ridgeline.analytic.ops import OpTerms
from ridgeline.analytic.tiling import TilePlan, scratchpad_level
from ridgeline.analytic.workload import Dtypes
from ridgeline.errors import ConfigError
from ridgeline.specs.hardware import Accelerator

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


def rounding_slack(core: Core, buffers: int) -> float:
    """Bytes lost to rounding each of at most 3·``buffers`` buffers up to the granule."""
    return 3 * buffers * core.granule_bytes


class Allocator:
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
