"""The compiled step: every operator compiled for a static (batch, context) bucket, simulated,
and summed, beside the analytic roofline bound of the same padded step."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ridgeline.analytic.dataflow.compile import compile_op
from ridgeline.analytic.dataflow.program import Category, Core, Kind, Lane, OpKind, core_of
from ridgeline.analytic.dataflow.simulate import OpRun, simulate_op
from ridgeline.analytic.ops import op_terms
from ridgeline.analytic.pricing import Efficiency, Pricing
from ridgeline.analytic.roofline import shape_of, step_cost
from ridgeline.analytic.workload import Workload
from ridgeline.errors import ConfigError
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.model import ModelSpec


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
    return _schedule(model, acc, (workload, padded, b), core, runs, opt.bandwidth_efficiency)


def _schedule(
    model: ModelSpec,
    acc: Accelerator,
    shapes: tuple[Workload, Workload, Bucket],
    core: Core,
    runs: tuple[OpRun, ...],
    bw_eff: float,
) -> Schedule:
    """The ``Schedule`` of simulated ``runs``, beside the analytic bound of the padded step."""
    workload, padded, b = shapes
    at_bw = Pricing.of(acc, CostMode.IDEAL, padded.dtypes, Efficiency(bandwidth=bw_eff))
    cost = step_cost(model, at_bw, padded)
    peak = acc.peak(workload.dtypes.compute)
    bw = acc.device_bandwidth_bytes_per_s * bw_eff
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
        useful_read_bytes=step_cost(model, acc, workload).bytes_read,
        layers=model.num_layers,
        ops=tuple(_summary(r, core, peak, bw) for r in runs),
    )
