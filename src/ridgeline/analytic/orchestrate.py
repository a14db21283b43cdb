"""Three orchestrators, one KV cache: who moves the KV of one decode step, through which levels.

The same attention over the same KV cache (``op_terms``' ``attn.core`` ops of one decode step:
every sequence's cached K and V read once per layer, the new token's K and V written) under
three ways of deciding where data lives (course module 3 of "Memory Systems in Dataflow
Architectures", IBM on Coursera, and its companion video "Why AI models run faster on some chips:
the KV cache effect", IBM Technology). Each machine's orchestrator is the catalog's
(``Accelerator.orchestrator``: the managers on the KV's path from where it lives to compute),
the same label ``kv-manage``, the report, the notebooks and the quiz use:

(a) GPU — runtime + kernels: the serving runtime keeps the KV in paged blocks in HBM (vLLM's
    block table, Kwon et al., SOSP 2023); the attention kernel stages tiles through shared
    memory; L2 is a hardware cache every HBM byte passes through.
(b) TPU — runtime + compiler: the runtime keeps KV pages in HBM; a Pallas kernel declares
    its KV blocks (BlockSpec) and the Pallas/Mosaic compiler pipelines their HBM→VMEM DMAs
    under MXU work (the page table sits in scalar memory); no hardware cache on the data path
    [S2]. Its time is the computed pipeline of ``analytic.pallas``: per grid step max(DMA,
    MXU), plus the fill and the drain.
(c) Spyre — runtime + compiler: the runtime (vLLM-Spyre) places each sequence's KV in LPDDR5
    in a slot of a compiled bucket, and every load from LPDDR5 into a core's LX and every ring
    transfer between cores is an instruction of the compiled schedule (``dataflow``), compiled
    for the (batch, context) bucket — so the step reads the bucket's KV, not the request's.
    Inside the step only compiler-emitted instructions move the data (what the video calls
    "the compiler").

Bytes per level are what crosses into or out of that level; time per level is bytes ÷ its
bandwidth, which in calibrated mode (the default, ``analytic.pricing``) is the device level's
datasheet bandwidth × the machine's ``kv_bandwidth_efficiency`` (the attention kernel reads the
KV) and in ideal mode the datasheet's. The GPU row's time is its binding level's; the TPU and
Spyre rows' times are their simulated pipelines (the same numbers as ``ridgeline schedule`` and
the compiled-shape simulator), and the binding level is the one whose transfers take longest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ridgeline.analytic import dataflow, pallas
from ridgeline.analytic.ops import OpTerms, op_terms
from ridgeline.analytic.pricing import Pricing
from ridgeline.analytic.roofline import shape_of
from ridgeline.analytic.tiling import scratchpad_level
from ridgeline.analytic.workload import Phase, Workload
from ridgeline.errors import ConfigError
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.model import ModelSpec

PAGE_TOKENS = 16  # vLLM's default KV block size (tokens per block), Kwon et al. 2023
PAGE_INDEX_BYTES = 4  # one int32 block id per block-table entry (vLLM block tables)


@dataclass(frozen=True, slots=True)
class LevelMove:
    """Bytes that cross one memory level in the step's attention, and what that costs.

    ``managed_by`` is who decides what lives in the level (catalog); ``moved_by`` is who issues
    the transfers of this step into or out of it.
    """

    level: str
    managed_by: str
    moved_by: str
    moved_bytes: float
    bandwidth_bytes_per_s: float | None
    what: str

    @property
    def time_s(self) -> float | None:
        if self.bandwidth_bytes_per_s is None:
            return None
        return self.moved_bytes / self.bandwidth_bytes_per_s


@dataclass(frozen=True, slots=True)
class Orchestration:
    """One accelerator's way of moving the KV cache through its levels."""

    accelerator: str
    orchestrator: str
    kv_home: str
    moves: tuple[LevelMove, ...]
    time_s: float
    binding: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "accelerator": self.accelerator,
            "orchestrator": self.orchestrator,
            "kv_home": self.kv_home,
            "time_s": self.time_s,
            "binding": self.binding,
            "detail": self.detail,
            "levels": [
                {
                    "level": m.level,
                    "managed_by": m.managed_by,
                    "moved_by": m.moved_by,
                    "bytes": m.moved_bytes,
                    "bandwidth_bytes_per_s": m.bandwidth_bytes_per_s,
                    "time_s": m.time_s,
                    "what": m.what,
                }
                for m in self.moves
            ],
        }


@dataclass(frozen=True, slots=True)
class KvTraffic:
    """The attention of one decode step, summed over layers (from ``op_terms``)."""

    kv_read_bytes: float
    kv_write_bytes: float
    act_bytes: float
    flops: float
    layers: int

    @property
    def hbm_bytes(self) -> float:
        return self.kv_read_bytes + self.kv_write_bytes + self.act_bytes


@dataclass(frozen=True, slots=True)
class OrchestrationReport:
    """The three orchestrators side by side for one model, batch and context."""

    model: str
    batch: int
    context: int
    traffic: KvTraffic
    rows: tuple[Orchestration, ...]
    mode: CostMode = CostMode.CALIBRATED
    label: str = "expected (calibrated)"

    def to_dict(self) -> dict[str, Any]:
        t = self.traffic
        return {
            "schema": "ridgeline.orchestrate/3",
            "mode": self.mode.value,
            "label": self.label,
            "model": self.model,
            "batch": self.batch,
            "context": self.context,
            "kv_read_bytes": t.kv_read_bytes,
            "kv_write_bytes": t.kv_write_bytes,
            "activation_bytes": t.act_bytes,
            "rows": [r.to_dict() for r in self.rows],
        }


def _attention_terms(model: ModelSpec, w: Workload) -> list[OpTerms]:
    terms = op_terms(model, shape_of(w), w.dtypes)
    return [t for t in terms if t.name.startswith("attn.core")]


def kv_traffic(model: ModelSpec, w: Workload) -> KvTraffic:
    """What the attention over the KV cache reads and writes in one step."""
    ts = _attention_terms(model, w)
    return KvTraffic(
        kv_read_bytes=sum(float(t.kv_read_bytes) for t in ts),
        kv_write_bytes=sum(float(t.kv_write_bytes) for t in ts),
        act_bytes=sum(float(t.act_read_bytes + t.act_write_bytes) for t in ts),
        flops=sum(float(t.flops) for t in ts),
        layers=model.num_layers,
    )


def _finish(acc: Accelerator, who: str, home: str, moves: list[LevelMove]) -> Orchestration:
    timed = [(m.time_s, m.level) for m in moves if m.time_s is not None]
    time_s, binding = max(timed)
    return Orchestration(acc.name, who, home, tuple(moves), time_s, binding)


def _move(
    acc: Accelerator, level: str, by: str, moved: float, what: str, eff: float = 1.0
) -> LevelMove:
    lvl = acc.level(level)
    bw = lvl.bandwidth_bytes_per_s
    return LevelMove(level, lvl.managed_by.value, by, moved, None if bw is None else bw * eff, what)


def _kv_efficiency(acc: Accelerator, mode: CostMode) -> float:
    """The fraction of the device bandwidth the KV is read at in ``mode``."""
    return Pricing.of(acc, mode).calibration.kv_bandwidth_efficiency


def _block_table_bytes(w: Workload, layers: int) -> float:
    """One block id per PAGE_TOKENS tokens per sequence, read once per layer."""
    return w.batch * math.ceil(w.context_len / PAGE_TOKENS) * PAGE_INDEX_BYTES * layers


def gpu_row(
    acc: Accelerator, t: KvTraffic, w: Workload, mode: CostMode = CostMode.IDEAL
) -> Orchestration:
    """(a) Paged KV in HBM (runtime), tiles through shared memory (kernel), L2 (hardware)."""
    table = _block_table_bytes(w, t.layers)
    hbm = t.hbm_bytes + table
    moves = [
        _move(
            acc,
            acc.device_level,
            "kernel",
            hbm,
            "KV pages + q/o + block tables (runtime-allocated)",
            _kv_efficiency(acc, mode),
        ),
        _move(
            acc, "l2", "hardware", hbm, "every HBM byte passes the hardware cache once (no reuse)"
        ),
        _move(
            acc,
            "smem",
            "kernel",
            t.kv_read_bytes,
            "K/V tiles staged by the kernel (TMA / cp.async)",
        ),
    ]
    return _finish(acc, acc.orchestrator, f"{acc.device_level} (paged blocks)", moves)


def tpu_row(
    acc: Accelerator, model: ModelSpec, w: Workload, mode: CostMode = CostMode.IDEAL
) -> Orchestration:
    """(b) KV pages in HBM; a Pallas kernel's KV blocks pipelined HBM→VMEM under MXU work by
    the DMAs its compiler emits."""
    (term,) = _attention_terms(model, w)
    eff = _kv_efficiency(acc, mode)
    core = pallas.tensor_core(acc, w.dtypes.compute)
    core = replace(core, hbm_bytes_per_s=core.hbm_bytes_per_s * eff)
    p = pallas.best_attention(term.name, pallas.attn_shape(term, model, w), core)
    n = term.count
    table = _block_table_bytes(w, model.num_layers)
    vmem = scratchpad_level(acc).name
    moves = [
        _move(
            acc,
            acc.device_level,
            "compiler",
            p.dma_bytes * n + table,
            "KV blocks + q/o (DMA) + page indices",
            eff,
        ),
        _move(
            acc,
            vmem,
            "compiler",
            p.dma_bytes * n,
            f"double-buffered {p.note} (Pallas BlockSpec), {p.vmem_bytes / 1e6:.3g} MB of VMEM",
        ),
    ]
    o = _finish(acc, acc.orchestrator, f"{acc.device_level} (pages)", moves)
    detail = (
        f"{p.steps} grid steps per layer, {p.bound}-bound: fill {p.fill_s * 1e6:.3g} us + "
        f"Σ max(DMA, MXU) {p.steady_s * 1e6:.4g} us + drain {p.drain_s * 1e6:.3g} us"
    )
    return replace(o, time_s=p.time_s * n, detail=detail)


def spyre_row(
    acc: Accelerator, model: ModelSpec, w: Workload, mode: CostMode = CostMode.IDEAL
) -> Orchestration:
    """(c) Explicit loads into each core's scratchpad and ring transfers, from the schedule
    compiled for the step's bucket (``dataflow.default_bucket``)."""
    eff = _kv_efficiency(acc, mode)
    opts = dataflow.ScheduleOptions(keep_events=False, bandwidth_efficiency=eff)
    sched = dataflow.compile_schedule(model, acc, w, None, opts)
    run = next(r for r in sched.runs if r.program.name.startswith("attn.core"))
    prog, core = run.program, sched.core
    n = prog.count * core.cores
    loaded, stored = prog.total(dataflow.Kind.LOAD) * n, prog.total(dataflow.Kind.STORE) * n
    ring = prog.total(dataflow.Kind.RING) * n
    dev, lx = acc.device, scratchpad_level(acc)
    b = sched.bucket
    moves = [
        LevelMove(
            dev.name,
            dev.managed_by.value,
            "compiler",
            loaded + stored,
            None if dev.bandwidth_bytes_per_s is None else dev.bandwidth_bytes_per_s * eff,
            f"compiler-emitted loads/stores of the ({b.batch}, {b.context}) bucket's KV",
        ),
        LevelMove(
            lx.name,
            lx.managed_by.value,
            "compiler",
            loaded + ring,
            lx.bandwidth_bytes_per_s,
            "LX writes",
        ),
        LevelMove(
            "ring",
            "compiler",
            "compiler",
            ring,
            (acc.ring_bandwidth_bytes_per_s or 0.0) * 2 * acc.cores or None,
            "q gather + partial-output reduction",
        ),
    ]
    home = f"{dev.name} (static buffers of the ({b.batch}, {b.context}) bucket)"
    o = _finish(acc, acc.orchestrator, home, moves)
    detail = (
        f"{len(prog.steps)} tile steps per core per layer on {core.cores} cores; padding "
        f"{sched.padding_fraction:.1%} of the step's bytes"
    )
    return replace(o, time_s=run.time_s * prog.count, detail=detail)


def orchestrate(
    model: ModelSpec,
    batch: int,
    context: int,
    gpu: Accelerator,
    tpu: Accelerator,
    spyre: Accelerator,
    mode: CostMode = CostMode.CALIBRATED,
) -> OrchestrationReport:
    """The KV traffic of one decode step under the three orchestrators.

    Args:
        model: the model whose KV cache is read.
        batch: sequences decoding together.
        context: cached tokens per sequence.
        gpu: the GPU (needs ``l2`` and ``smem`` levels).
        tpu: the TPU (a Pallas kernel's pipeline through VMEM).
        spyre: the dataflow machine (a compiled schedule of the attention).
        mode: the device level's bandwidth as the calibration's KV efficiency reaches it, or
            the datasheet's (module docstring).

    Returns:
        Bytes per level, time and binding level for each machine.
    """
    w = Workload(Phase.DECODE, batch, context)
    if context < 1:
        raise ConfigError("field context: must be at least 1 for a KV cache to exist")
    t = kv_traffic(model, w)
    rows = (
        gpu_row(gpu, t, w, mode),
        tpu_row(tpu, model, w, mode),
        spyre_row(spyre, model, w, mode),
    )
    label = Pricing.of(gpu, mode).label
    return OrchestrationReport(model.name, batch, context, t, rows, mode, label)
