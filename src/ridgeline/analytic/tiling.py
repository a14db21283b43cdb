"""Matmul tiling against a scratchpad: resident bytes, DRAM traffic per loop order, intensity.

C[M,N] += A[M,K]·B[K,N] runs as a loop nest over tiles (tm, tk, tn). One operand's tile stays
in the scratchpad while the loop over the other dimension runs (the *stationary* operand); the
other two stream. Traffic at the level below (DRAM/HBM) under each order (course module 5; the
classic blocked-matmul analysis of Hong & Kung 1981 and Lam, Rothberg & Wolf, ASPLOS 1991)::

    order          A read        B read        C written / read
    C-stationary   ⌈N/tn⌉ × A    ⌈M/tm⌉ × B    1 / 0            (output tile kept across k)
    A-stationary   1 × A         ⌈M/tm⌉ × B    ⌈K/tk⌉ / ⌈K/tk⌉−1 (partial sums go out and back)
    B-stationary   ⌈N/tn⌉ × A    1 × B         ⌈K/tk⌉ / ⌈K/tk⌉−1

where A, B, C are the full operand sizes in bytes. Arithmetic intensity at DRAM = 2MKN ÷ traffic
(Williams et al. 2009); it never exceeds 2MKN ÷ (A + B + C), the value when every operand moves
once — for a matrix-vector product (decode at batch 1) that is about 2M/bytes_per_weight FLOP/B,
far under any accelerator's ridge point, so no tile makes decode compute-bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ridgeline.errors import ConfigError
from ridgeline.specs.dtypes import DType
from ridgeline.specs.hardware import Accelerator, ManagedBy, MemoryLevel


class LoopOrder(StrEnum):
    """Which operand's tile stays in the scratchpad while the inner loop runs."""

    C_STATIONARY = "c-stationary"  # output-stationary: accumulate over k in place
    A_STATIONARY = "a-stationary"  # input-stationary: A tile reused across all of N
    B_STATIONARY = "b-stationary"  # weight-stationary: B tile reused across all of M


@dataclass(frozen=True, slots=True)
class Matmul:
    """C[M,N] += A[M,K]·B[K,N] with a storage size per operand (bytes per element)."""

    m: int
    k: int
    n: int
    a_bytes: float = DType.BF16.bytes
    b_bytes: float = DType.BF16.bytes
    c_bytes: float = DType.BF16.bytes

    def __post_init__(self) -> None:
        for name in ("m", "k", "n"):
            if getattr(self, name) < 1:
                raise ConfigError(f"field {name}: must be at least 1, got {getattr(self, name)}")

    @property
    def flops(self) -> float:
        """2·M·K·N (one multiply-add = 2 FLOPs)."""
        return 2.0 * self.m * self.k * self.n

    @property
    def a_total_bytes(self) -> float:
        return self.m * self.k * self.a_bytes

    @property
    def b_total_bytes(self) -> float:
        return self.k * self.n * self.b_bytes

    @property
    def c_total_bytes(self) -> float:
        return self.m * self.n * self.c_bytes

    @property
    def max_intensity(self) -> float:
        """FLOPs ÷ bytes when every operand moves exactly once: the ceiling of any tiling."""
        return self.flops / (self.a_total_bytes + self.b_total_bytes + self.c_total_bytes)


@dataclass(frozen=True, slots=True)
class Tile:
    """Tile edges (tm, tk, tn); edges larger than the matrix are clipped to it."""

    tm: int
    tk: int
    tn: int

    def clipped(self, mm: Matmul) -> Tile:
        return Tile(min(self.tm, mm.m), min(self.tk, mm.k), min(self.tn, mm.n))


@dataclass(frozen=True, slots=True)
class Passes:
    """How many times each operand crosses the DRAM↔scratchpad boundary (C: out and back)."""

    a_reads: int
    b_reads: int
    c_writes: int
    c_reads: int


def passes(mm: Matmul, tile: Tile, order: LoopOrder) -> Passes:
    """Operand passes under a loop order (table in the module docstring)."""
    t = tile.clipped(mm)
    m_tiles, k_tiles, n_tiles = (
        math.ceil(mm.m / t.tm),
        math.ceil(mm.k / t.tk),
        math.ceil(mm.n / t.tn),
    )
    if order is LoopOrder.C_STATIONARY:
        return Passes(n_tiles, m_tiles, 1, 0)
    if order is LoopOrder.A_STATIONARY:
        return Passes(1, m_tiles, k_tiles, k_tiles - 1)
    return Passes(n_tiles, 1, k_tiles, k_tiles - 1)


@dataclass(frozen=True, slots=True)
class TilePlan:
    """One tiling of one matmul on one scratchpad, and what it costs at the level below."""

    matmul: Matmul
    tile: Tile
    order: LoopOrder
    buffers: int
    capacity_bytes: float
    resident_bytes: float
    passes: Passes
    a_traffic_bytes: float
    b_traffic_bytes: float
    c_traffic_bytes: float

    @property
    def fits(self) -> bool:
        return self.resident_bytes <= self.capacity_bytes

    @property
    def traffic_bytes(self) -> float:
        return self.a_traffic_bytes + self.b_traffic_bytes + self.c_traffic_bytes

    @property
    def intensity(self) -> float:
        """FLOPs ÷ DRAM bytes (Williams et al. 2009)."""
        return self.matmul.flops / self.traffic_bytes

    def to_dict(self) -> dict[str, Any]:
        t = self.tile
        return {
            "m": self.matmul.m,
            "k": self.matmul.k,
            "n": self.matmul.n,
            "tile": {"tm": t.tm, "tk": t.tk, "tn": t.tn},
            "order": self.order.value,
            "buffers": self.buffers,
            "capacity_bytes": self.capacity_bytes,
            "resident_bytes": self.resident_bytes,
            "fits": self.fits,
            "a_traffic_bytes": self.a_traffic_bytes,
            "b_traffic_bytes": self.b_traffic_bytes,
            "c_traffic_bytes": self.c_traffic_bytes,
            "traffic_bytes": self.traffic_bytes,
            "flops": self.matmul.flops,
            "intensity_flops_per_byte": self.intensity,
        }


def resident_bytes(mm: Matmul, tile: Tile, order: LoopOrder, buffers: int) -> float:
    """Scratchpad bytes a tiling holds at once.

    The A and B tiles stream (``buffers`` copies each: 2 = double buffering, the next tile's
    load overlapping this tile's compute). Under C-stationary the output tile accumulates in
    place (one copy); under the other orders partial sums stream out and back, so C is
    multi-buffered too.
    """
    t = tile.clipped(mm)
    a_tile = t.tm * t.tk * mm.a_bytes
    b_tile = t.tk * t.tn * mm.b_bytes
    c_tile = t.tm * t.tn * mm.c_bytes
    c_copies = 1 if order is LoopOrder.C_STATIONARY else buffers
    return buffers * (a_tile + b_tile) + c_copies * c_tile


def plan(
    mm: Matmul, tile: Tile, order: LoopOrder, capacity_bytes: float, buffers: int = 2
) -> TilePlan:
    """Resident bytes, fit and DRAM traffic of ``mm`` tiled by ``tile`` under ``order``.

    Args:
        mm: the matmul and its operand element sizes.
        tile: tile edges (clipped to the matrix).
        order: which operand stays resident (module docstring's table).
        capacity_bytes: the scratchpad the tiles must fit.
        buffers: 1 = single, 2 = double buffering of the streamed tiles.

    Returns:
        The plan: resident bytes, passes, traffic per operand, intensity.
    """
    if buffers < 1:
        raise ConfigError(f"field buffers: must be 1 (single) or more, got {buffers}")
    p = passes(mm, tile, order)
    return TilePlan(
        matmul=mm,
        tile=tile.clipped(mm),
        order=order,
        buffers=buffers,
        capacity_bytes=capacity_bytes,
        resident_bytes=resident_bytes(mm, tile, order, buffers),
        passes=p,
        a_traffic_bytes=p.a_reads * mm.a_total_bytes,
        b_traffic_bytes=p.b_reads * mm.b_total_bytes,
        c_traffic_bytes=(p.c_writes + p.c_reads) * mm.c_total_bytes,
    )


@dataclass(frozen=True, slots=True)
class Scratchpad:
    """The on-chip memory a tile lives in and the hardware constraints on a tile's edges.

    ``array_dim``: tile edges are multiples of the matrix unit (systolic array / MXU);
    ``granule_bytes``: the contiguous (last) dimension of each row-major operand tile is a
    whole number of transfer granules (Spyre's 128-B sticks). An edge equal to the full matrix
    dimension is always allowed.
    """

    name: str
    capacity_bytes: float
    array_dim: int = 1
    granule_bytes: float = 1.0
    peak_flops_per_s: float = 0.0
    bandwidth_bytes_per_s: float = 0.0


def scratchpad_level(acc: Accelerator, level: str | None = None) -> MemoryLevel:
    """The per-core software-managed level a tile lives in (Spyre LX, H100 SMEM, TPU VMEM).

    Default: the first level managed by a kernel or the compiler whose bandwidth is known.
    """
    if level is not None:
        return acc.level(level)
    for lvl in acc.levels:
        managed = lvl.managed_by in (ManagedBy.KERNEL, ManagedBy.COMPILER)
        if managed and lvl.bandwidth_bytes_per_s is not None:
            return lvl
    raise ConfigError(f"{acc.name}: field levels: no kernel- or compiler-managed scratchpad level")


def scratchpad_of(acc: Accelerator, dtype: DType, level: str | None = None) -> Scratchpad:
    """One core's scratchpad, its share of the chip's peak and of device bandwidth.

    A core of an SPMD program gets peak ÷ cores and device bandwidth ÷ cores when every core
    runs the same tile program at once, so a core's ridge point equals the chip's.
    """
    lvl = scratchpad_level(acc, level)
    granule = acc.device.granule_bytes or lvl.granule_bytes or 1.0
    return Scratchpad(
        name=f"{acc.name}:{lvl.name}",
        capacity_bytes=lvl.usable_capacity_bytes,
        array_dim=acc.array_dim or 1,
        granule_bytes=granule,
        peak_flops_per_s=acc.peak(dtype) / acc.cores,
        bandwidth_bytes_per_s=acc.device_bandwidth_bytes_per_s / acc.cores,
    )


def array_utilisation(mm: Matmul, array_dim: int) -> float:
    """Useful share of matrix-unit work: M·K·N over the dims padded to the array edge.

    At batch 1 (M = 1) an 8x8 systolic array does 1/8 useful work (NOTE: a first-order
    estimate; it ignores how a given array maps M, K and N onto its rows and columns).
    """

    def pad(x: int) -> int:
        return math.ceil(x / array_dim) * array_dim

    return (mm.m * mm.k * mm.n) / (pad(mm.m) * pad(mm.k) * pad(mm.n))


def time_bound_s(p: TilePlan, pad: Scratchpad) -> tuple[float, float]:
    """(compute, memory) seconds on one core: FLOPs ÷ (peak·array use), traffic ÷ bandwidth."""
    compute = p.matmul.flops / (pad.peak_flops_per_s * array_utilisation(p.matmul, pad.array_dim))
    return compute, p.traffic_bytes / pad.bandwidth_bytes_per_s


def num_steps(p: TilePlan) -> int:
    """Tile steps (one compute each) of the loop nest."""
    mm, t = p.matmul, p.tile
    return math.ceil(mm.m / t.tm) * math.ceil(mm.k / t.tk) * math.ceil(mm.n / t.tn)


def fill_s(p: TilePlan, pad: Scratchpad) -> float:
    """Seconds before the first compute can start: one A tile and one B tile loaded."""
    t, mm = p.tile, p.matmul
    return (t.tm * t.tk * mm.a_bytes + t.tk * t.tn * mm.b_bytes) / pad.bandwidth_bytes_per_s


def _unit(elem_bytes: float, pad: Scratchpad, contiguous: bool) -> int:
    """Smallest legal edge step: a multiple of the array edge, and for a contiguous dimension
    also a whole number of granules."""
    if not contiguous:
        return pad.array_dim
    per_granule = max(1, math.ceil(pad.granule_bytes / elem_bytes))
    return math.lcm(pad.array_dim, per_granule)


def edge_candidates(dim: int, unit: int) -> list[int]:
    """Legal tile edges along one dimension: unit·2^i below ``dim``, and ``dim`` itself."""
    out = {dim}
    edge = unit
    while edge < dim:
        out.add(edge)
        edge *= 2
    return sorted(out)


def candidate_tiles(mm: Matmul, pad: Scratchpad) -> list[Tile]:
    """Tiles whose edges respect the array multiple and the granule (row-major operands: K is
    contiguous in A, N in B and C)."""
    tms = edge_candidates(mm.m, _unit(mm.a_bytes, pad, contiguous=False))
    tks = edge_candidates(mm.k, _unit(mm.a_bytes, pad, contiguous=True))
    tns = edge_candidates(mm.n, _unit(min(mm.b_bytes, mm.c_bytes), pad, contiguous=True))
    return [Tile(tm, tk, tn) for tm in tms for tk in tks for tn in tns]


def best_tile(mm: Matmul, pad: Scratchpad, buffers: int = 2) -> TilePlan | None:
    """The fitting tile and loop order with the smallest time bound on one core.

    Time bound = max(compute, memory) (roofline, Williams et al. 2009); ties go to less traffic,
    then to the shortest pipeline fill (the first tiles' load, which nothing overlaps).

    Args:
        mm: the matmul.
        pad: one core's scratchpad, matrix-unit edge, granule, peak and bandwidth share.
        buffers: buffer depth of the streamed tiles.

    Returns:
        The best fitting plan, or ``None`` when no legal tile fits the scratchpad.

    NOTE: no fixed cost per transfer is modelled, so among equal plans the smallest tiles win;
    a real compiler also weighs the per-DMA overhead ([S38]'s turnaround penalty).
    """
    best: TilePlan | None = None
    best_key: tuple[float, float, float] | None = None
    for tile in candidate_tiles(mm, pad):
        for order in LoopOrder:
            p = plan(mm, tile, order, pad.capacity_bytes, buffers)
            if not p.fits:
                continue
            key = (max(time_bound_s(p, pad)), p.traffic_bytes, fill_s(p, pad))
            if best_key is None or key < best_key:
                best, best_key = p, key
    return best


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One point of the intensity-vs-tile curve: square tiles of edge ``edge``."""

    edge: int
    resident_bytes: float
    fits: bool
    intensity: float


@dataclass(frozen=True, slots=True)
class IntensityCurve:
    """Intensity against tile edge for one matmul on one scratchpad, and the verdict."""

    matmul: Matmul
    scratchpad: Scratchpad
    order: LoopOrder
    ridge_point: float
    points: tuple[CurvePoint, ...]
    compute_bound_edge: int | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "scratchpad": self.scratchpad.name,
            "capacity_bytes": self.scratchpad.capacity_bytes,
            "order": self.order.value,
            "ridge_point_flops_per_byte": self.ridge_point,
            "max_intensity_flops_per_byte": self.matmul.max_intensity,
            "compute_bound_edge": self.compute_bound_edge,
            "reason": self.reason,
            "points": [
                {
                    "edge": p.edge,
                    "resident_bytes": p.resident_bytes,
                    "fits": p.fits,
                    "intensity": p.intensity,
                }
                for p in self.points
            ],
        }


def intensity_curve(
    mm: Matmul, pad: Scratchpad, order: LoopOrder = LoopOrder.C_STATIONARY, buffers: int = 2
) -> IntensityCurve:
    """Intensity of square tiles (edge = array multiples, doubling) until the tile covers the
    matrix, with the smallest fitting edge that reaches the ridge point, or why none does."""
    ridge = pad.peak_flops_per_s / pad.bandwidth_bytes_per_s
    edges = edge_candidates(max(mm.m, mm.k, mm.n), max(pad.array_dim, 8))
    points = []
    for edge in edges:
        p = plan(mm, Tile(edge, edge, edge), order, pad.capacity_bytes, buffers)
        points.append(CurvePoint(edge, p.resident_bytes, p.fits, p.intensity))
    hit = next((pt.edge for pt in points if pt.fits and pt.intensity >= ridge), None)
    return IntensityCurve(mm, pad, order, ridge, tuple(points), hit, _verdict(mm, points, ridge))


def _verdict(mm: Matmul, points: list[CurvePoint], ridge: float) -> str:
    if mm.max_intensity < ridge:
        return (
            f"never compute-bound: even moving every operand once gives "
            f"{mm.max_intensity:.3g} FLOP/B < ridge {ridge:.3g} FLOP/B "
            f"(M = {mm.m}: each weight byte feeds only 2·M/bytes-per-weight FLOPs)"
        )
    hit = next((pt for pt in points if pt.fits and pt.intensity >= ridge), None)
    if hit is None:
        best = max((pt.intensity for pt in points if pt.fits), default=0.0)
        return (
            f"not compute-bound on this scratchpad: the best fitting square tile reaches "
            f"{best:.3g} FLOP/B < ridge {ridge:.3g} FLOP/B; it takes a larger scratchpad, or "
            f"reuse across cores (a shared cache, a ring broadcast)"
        )
    return (
        f"compute-bound from {hit.edge}x{hit.edge} tiles "
        f"({hit.intensity:.3g} FLOP/B >= ridge {ridge:.3g} FLOP/B, "
        f"{hit.resident_bytes / 1e3:.4g} KB resident)"
    )


@dataclass(frozen=True, slots=True)
class TileReport:
    """The best tile of a matmul on one accelerator's core, and the intensity curve."""

    accelerator: str
    scratchpad: Scratchpad
    best: TilePlan | None
    compute_s: float | None
    memory_s: float | None
    curve: IntensityCurve

    def to_dict(self) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator,
            "scratchpad": self.scratchpad.name,
            "capacity_bytes": self.scratchpad.capacity_bytes,
            "array_dim": self.scratchpad.array_dim,
            "granule_bytes": self.scratchpad.granule_bytes,
            "best": None if self.best is None else self.best.to_dict(),
            "compute_s": self.compute_s,
            "memory_s": self.memory_s,
            "curve": self.curve.to_dict(),
        }


def tile_report(
    acc: Accelerator, mm: Matmul, dtype: DType = DType.BF16, buffers: int = 2
) -> TileReport:
    """Best tile and intensity curve of ``mm`` on one core of ``acc`` (its scratchpad, its
    share of peak and device bandwidth)."""
    pad = scratchpad_of(acc, dtype)
    best = best_tile(mm, pad, buffers)
    compute_s, memory_s = time_bound_s(best, pad) if best is not None else (None, None)
    curve = intensity_curve(mm, pad, buffers=buffers)
    return TileReport(acc.name, pad, best, compute_s, memory_s, curve)


@dataclass(frozen=True, slots=True)
class TileComparison:
    """One matmul's best tile and intensity curve on the cores of several accelerators."""

    matmul: Matmul
    reports: tuple[TileReport, ...]

    def to_dict(self) -> dict[str, Any]:
        mm = self.matmul
        return {
            "schema": "ridgeline.tile/1",
            "m": mm.m,
            "k": mm.k,
            "n": mm.n,
            "flops": mm.flops,
            "max_intensity_flops_per_byte": mm.max_intensity,
            "reports": [r.to_dict() for r in self.reports],
        }


def compare_tiles(
    accs: tuple[Accelerator, ...], mm: Matmul, dtype: DType = DType.BF16, buffers: int = 2
) -> TileComparison:
    """``tile_report`` of ``mm`` on each accelerator (e.g. a Spyre core and an H100 SM)."""
    if not accs:
        raise ConfigError("field hw: give at least one accelerator")
    return TileComparison(mm, tuple(tile_report(acc, mm, dtype, buffers) for acc in accs))
