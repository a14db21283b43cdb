"""The report section on tiling, FlashAttention, the compiled Spyre schedule and the
three orchestrators, for the report's model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ridgeline import analytic as an
from ridgeline.analytic import dataflow, flash, orchestrate, tiling
from ridgeline.report import tiling_plots
from ridgeline.report.document import Section, Table
from ridgeline.report.figures import save_figure
from ridgeline.specs import DType, get_accelerator
from ridgeline.specs.catalog import DATAFLOW, GPU, TPU
from ridgeline.specs.units import fmt_bytes, fmt_seconds

if TYPE_CHECKING:
    from ridgeline.report.build import ReportContext

SCRATCHPAD_HW = ("ibm-spyre", "h100-sxm")
FLASH_HW = (GPU, TPU, DATAFLOW)  # the five architectures' GPU, TPU and Spyre


def _tiling_part(ctx: ReportContext) -> tuple[Table, Path, list[dict[str, Any]]]:
    """Intensity curves of the model's MLP up projection, decode (M = batch) and prefill."""
    m = ctx.model
    curves: list[tuple[str, tiling.IntensityCurve]] = []
    rows: list[tuple[str, ...]] = []
    data: list[dict[str, Any]] = []
    for hw in SCRATCHPAD_HW:
        acc = get_accelerator(hw)
        for label, rows_m in (("decode", ctx.batch), ("prefill", ctx.prompt)):
            rep = tiling.tile_report(acc, tiling.Matmul(rows_m, m.hidden_size, m.ffn), DType.BF16)
            curves.append((f"{rep.scratchpad.name}, {label} M={rows_m}", rep.curve))
            b = rep.best
            tile = (
                "none fits" if b is None else f"{b.order.value} {b.tile.tm}x{b.tile.tk}x{b.tile.tn}"
            )
            ai = "—" if b is None else f"{b.intensity:.3g}"
            rows.append(
                (hw, label, str(rows_m), tile, ai, f"{rep.curve.ridge_point:.3g}", rep.curve.reason)
            )
            data.append(rep.to_dict())
    fig = save_figure(
        tiling_plots.intensity_plot(
            curves, f"{m.name} MLP up projection [M x {m.hidden_size}]·[{m.hidden_size} x {m.ffn}]"
        ),
        ctx.figure("tile_intensity.png"),
    )
    table = Table(
        ("accelerator", "phase", "M", "best tile (one core)", "AI", "ridge", "verdict"),
        tuple(rows),
        "Best tile on one core's scratchpad, and whether any square tile reaches the ridge",
    )
    return table, fig, data


def _flash_part(ctx: ReportContext) -> tuple[Table, Path, dict[str, Any]]:
    m = ctx.model
    accs = tuple(get_accelerator(h) for h in FLASH_HW)
    t = flash.flash_for_model(m.name, m.head_dim, m.num_heads, accs, max(ctx.context, 1024))
    rows = tuple(
        (
            r.memory,
            f"{r.n:,}",
            f"{r.prefill.blocks.bc}/{r.prefill.blocks.br}",
            fmt_bytes(r.prefill_standard_bytes),
            fmt_bytes(r.prefill_flash_bytes),
            f"{r.prefill.saving:.1f}x",
            str(r.prefill.q_passes),
            fmt_bytes(r.decode_flash_bytes),
        )
        for r in t.rows
    )
    fig = save_figure(tiling_plots.flash_plot(t), ctx.figure("flash.png"))
    table = Table(
        ("memory", "N", "Bc/Br", "standard", "tiled", "saving", "Q/O passes", "decode"),
        rows,
        "Attention HBM traffic per layer and sequence (Dao et al. 2022, Algorithm 0 vs 1)",
    )
    return table, fig, t.to_dict()


def _schedule_part(ctx: ReportContext) -> tuple[Table, Path, dataflow.Schedule]:
    spyre = ctx.pricing.on(get_accelerator("ibm-spyre"))
    w = an.Workload(an.Phase.DECODE, ctx.batch, ctx.context)
    eff = spyre.calibration.bandwidth_efficiency
    opts = dataflow.ScheduleOptions(bandwidth_efficiency=eff)
    s = dataflow.compile_schedule(ctx.model, spyre.accelerator, w, options=opts)
    fig = save_figure(tiling_plots.timeline_plot(s), ctx.figure("spyre_decode_timeline.png"))
    rows = tuple(
        (
            o.name,
            str(o.count),
            o.tile or o.kind.value,
            fmt_bytes(o.dram_load_bytes),
            fmt_bytes(o.ring_bytes),
            fmt_seconds(o.time_s),
            fmt_seconds(o.roofline_s),
        )
        for o in s.ops
    )
    table = Table(
        ("op", "×", "tile per core", "loaded", "ring", "time", "roofline"),
        rows,
        f"Compiled decode step on ibm-spyre, batch {ctx.batch}, context {ctx.context} — "
        f"{spyre.label} (device memory at {eff:g} of its bandwidth)",
    )
    return table, fig, s


def _orchestrate_part(ctx: ReportContext) -> tuple[Table, dict[str, Any]]:
    g = get_accelerator
    rep = orchestrate.orchestrate(
        ctx.model, ctx.batch, ctx.context, g(GPU), g(TPU), g(DATAFLOW), ctx.pricing.mode
    )
    rows = tuple(
        (
            r.accelerator,
            r.orchestrator,
            mv.level + (" *" if mv.level == r.binding else ""),
            mv.moved_by,
            fmt_bytes(mv.moved_bytes),
            fmt_seconds(mv.time_s) if mv.time_s is not None else "—",
        )
        for r in rep.rows
        for mv in r.moves
    )
    table = Table(
        ("accelerator", "orchestrator", "level", "moved by", "bytes", "time"),
        rows,
        f"One KV cache, three orchestrators (decode attention; * = binding level) — {rep.label}",
    )
    return table, rep.to_dict()


def _array_use(s: dataflow.Schedule) -> float:
    """Array utilisation of the step's largest matmul."""
    matmuls = [o for o in s.ops if o.kind is dataflow.OpKind.MATMUL]
    return max(matmuls, key=lambda o: o.flops).array_util if matmuls else 1.0


def tiling_section(ctx: ReportContext) -> Section:
    """Tiling, FlashAttention, the compiled Spyre schedule and the three orchestrators."""
    tile_table, tile_fig, tile_data = _tiling_part(ctx)
    flash_table, flash_fig, flash_data = _flash_part(ctx)
    sched_table, sched_fig, s = _schedule_part(ctx)
    orch_table, orch_data = _orchestrate_part(ctx)
    gap = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in s.gap().causes().items())
    paragraphs = (
        "Tiling decides reuse: the intensity of a tiled matmul at DRAM grows with the tile "
        "along the dimension it reuses, until the scratchpad is full. At decode (M = batch) "
        "no tile helps: every weight byte is used for 2·M/2 FLOPs at bf16.",
        f"One decode step on ibm-spyre reads weights {fmt_bytes(s.analytic_weight_bytes)}, KV "
        f"{fmt_bytes(s.analytic_kv_bytes)} and activations {fmt_bytes(s.analytic_act_bytes)}; "
        f"the compiled schedule loads {fmt_bytes(s.loaded_bytes)} (declared re-loads "
        f"{fmt_bytes(s.reload_bytes)}) and takes {fmt_seconds(s.time_s)} against a roofline "
        f"bound of {fmt_seconds(s.roofline_time_s)} ({gap}). Each of the 32 cores gets 1/32 "
        f"of the LPDDR5 bandwidth; compute utilisation is {s.compute_utilisation:.2%} because "
        f"M = {ctx.batch} rows use {_array_use(s):.0%} of each {s.core.array_dim}x"
        f"{s.core.array_dim} systolic array and even so the arrays wait on bytes.",
    )
    return Section(
        "tiling",
        "Tiling, FlashAttention and the compiled schedule",
        paragraphs=paragraphs,
        tables=(tile_table, flash_table, sched_table, orch_table),
        figures=(tile_fig, flash_fig, sched_fig),
        data={
            "tiles": tile_data,
            "flash": flash_data,
            "schedule": s.to_dict(),
            "orchestrate": orch_data,
        },
    )
