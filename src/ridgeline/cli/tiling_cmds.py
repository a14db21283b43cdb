"""Tiling commands: tile, flash, schedule, orchestrate (thin: parse, call, render)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Column, Table

from ridgeline import analytic as an
from ridgeline import specs  # the catalog loads when a command runs, not for its --help
from ridgeline.cli.common import (
    BatchOpt,
    ContextOpt,
    DtypeOpt,
    HwOpt,
    IdealOpt,
    JsonOpt,
    ModelOpt,
    PhaseOpt,
    PlotOpt,
    PromptOpt,
    console,
    emit_json,
    mode_of,
    print_table,
    save_plot,
    writable_file,
)
from ridgeline.defaults import DATAFLOW, DEFAULT_MODEL, GPU, TPU
from ridgeline.specs.dtypes import DType
from ridgeline.specs.limits import MAX_BATCH, MAX_CONTEXT, MAX_VOCAB
from ridgeline.specs.units import fmt_bytes, fmt_seconds

if TYPE_CHECKING:  # loaded when a command runs, not for its --help (start-up)
    import ridgeline.analytic.dataflow
    import ridgeline.analytic.orchestrate  # noqa: F401
    from ridgeline.analytic import dataflow, tiling
    from ridgeline.analytic.flash import FlashTable
    from ridgeline.analytic.orchestrate import OrchestrationReport


DEFAULT_FLASH_HW = [GPU, TPU, DATAFLOW]
BuffersOpt = Annotated[int, typer.Option(min=1, max=4, help="1 = single, 2 = double buffering")]
DimOpt = {"min": 1, "max": MAX_VOCAB}  # a matmul dimension: hidden, FFN or vocabulary sized


def tile_cmd(
    hw: Annotated[
        list[str] | None, typer.Option("--hw", help="accelerator or .toml (repeat to compare)")
    ] = None,
    m: Annotated[
        int, typer.Option("--m", min=1, max=MAX_CONTEXT, help="rows of A and C (tokens)")
    ] = 1,
    k: Annotated[int, typer.Option("--k", **DimOpt, help="inner dimension")] = 4096,
    n: Annotated[int, typer.Option("--n", **DimOpt, help="columns of B and C")] = 4096,
    dtype: DtypeOpt = "bf16",
    buffers: BuffersOpt = 2,
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
) -> None:
    """Best tile of C[M,N] += A[M,K]·B[K,N] on one core's scratchpad, and intensity vs tile.

    \b
    Example:
      ridgeline tile --hw ibm-spyre --hw h100-sxm --m 1 --k 4096 --n 14336
    """
    from ridgeline.analytic import tiling

    dt = DType.parse(dtype)
    mm = tiling.Matmul(m, k, n, dt.bytes, dt.bytes, dt.bytes)
    accs = tuple(specs.get_accelerator(h) for h in (hw or ["ibm-spyre"]))
    cmp = tiling.compare_tiles(accs, mm, dt, buffers)
    if plot:
        curves = [(r.scratchpad.name, r.curve) for r in cmp.reports]
        from ridgeline.report import tiling_plots

        fig = tiling_plots.intensity_plot(curves, f"[{m}x{k}]·[{k}x{n}] {dt.value}")
        save_plot(fig, plot)
    if json_out:
        emit_json(cmp)
        return
    _print_curves(cmp)
    for rep in cmp.reports:
        _print_best(rep)


def _print_curves(cmp: tiling.TileComparison) -> None:
    edges = sorted({p.edge for r in cmp.reports for p in r.curve.points})
    table = Table("edge", *(f"{r.scratchpad.name} AI (resident)" for r in cmp.reports))
    for edge in edges:
        cells = []
        for r in cmp.reports:
            p = next((q for q in r.curve.points if q.edge == edge), None)
            cells.append(
                ""
                if p is None
                else f"{p.intensity:.3g} ({fmt_bytes(p.resident_bytes)})" + ("" if p.fits else " *")
            )
        table.add_row(str(edge), *cells)
    console.print(table)
    console.print("square tiles, C-stationary, double-buffered; * = does not fit the scratchpad")


def _print_best(rep: tiling.TileReport) -> None:
    b, pad = rep.best, rep.scratchpad
    if b is None:
        console.print(f"{pad.name}: no legal tile fits {fmt_bytes(pad.capacity_bytes)}")
    else:
        t = b.tile
        console.print(
            f"best on {pad.name} ({fmt_bytes(pad.capacity_bytes)}): "
            f"{b.order.value} {t.tm}x{t.tk}x{t.tn}, {fmt_bytes(b.resident_bytes)} resident, "
            f"{fmt_bytes(b.traffic_bytes)} traffic, {b.intensity:.3g} FLOP/B; one core: compute "
            f"{fmt_seconds(rep.compute_s or 0)}, memory {fmt_seconds(rep.memory_s or 0)}"
        )
    console.print(f"{pad.name}: {rep.curve.reason}")


def flash_cmd(
    model: ModelOpt = DEFAULT_MODEL,
    context: ContextOpt = 32768,
    hw: Annotated[
        list[str] | None, typer.Option("--hw", help="accelerator (repeat); default: 3")
    ] = None,
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
) -> None:
    """FlashAttention traffic against N on each accelerator's per-core scratchpad.

    \b
    Example:
      ridgeline flash --model llama-3.1-8b --context 8192
    """
    from ridgeline.analytic import flash

    spec = specs.get_model(model)
    accs = tuple(specs.get_accelerator(h) for h in (hw or DEFAULT_FLASH_HW))
    table = flash.flash_for_model(spec.name, spec.head_dim, spec.num_heads, accs, context)
    if plot:
        from ridgeline.report import tiling_plots

        save_plot(tiling_plots.flash_plot(table), plot)
    if json_out:
        emit_json(table)
        return
    console.print(_flash_table(table))
    console.print(
        f"{spec.name}: per layer, one sequence, {spec.num_heads} query heads, d = "
        f"{spec.head_dim}; K/V read once (Algorithm 1), Q/O once per K/V block"
    )


def _flash_table(table: FlashTable) -> Table:
    """One row per memory and sequence length: bytes moved, standard against tiled."""
    out = Table(
        Column("memory", no_wrap=True),
        "N",
        "Bc/Br",
        "standard",
        "tiled",
        "saving",
        "Q/O passes",
        "decode",
        "splits",
    )
    for r in table.rows:
        p = r.prefill
        out.add_row(
            r.memory,
            f"{r.n:,}",
            f"{p.blocks.bc}/{p.blocks.br}",
            fmt_bytes(r.prefill_standard_bytes),
            fmt_bytes(r.prefill_flash_bytes),
            f"{p.saving:.1f}x",
            str(p.q_passes),
            fmt_bytes(r.decode_flash_bytes),
            str(r.decode.splits),
        )
    return out


def schedule_cmd(
    hw: HwOpt = "ibm-spyre",
    model: ModelOpt = DEFAULT_MODEL,
    phase: PhaseOpt = an.Phase.DECODE,
    batch: BatchOpt = 1,
    context: ContextOpt = 4096,
    prompt: PromptOpt = None,
    bucket_batch: Annotated[
        int | None, typer.Option(min=1, max=MAX_BATCH, help="compiled batch slots")
    ] = None,
    bucket_context: Annotated[
        int | None, typer.Option(min=1, max=MAX_CONTEXT, help="compiled sequence length")
    ] = None,
    buffers: BuffersOpt = 2,
    timeline: Annotated[
        str | None, typer.Option(help="write the timeline PNG here", callback=writable_file)
    ] = None,
    no_ring: Annotated[
        bool, typer.Option("--no-ring", help="cores re-read shared inputs from device memory")
    ] = False,
    ideal: IdealOpt = False,
    bw_eff: Annotated[
        float, typer.Option(help="with --ideal: fraction of bandwidth reached (Spyre: 0.75)")
    ] = 1.0,
    program: Annotated[
        str | None, typer.Option(help="also print this op's per-core program (e.g. lm_head)")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Compile one step for a scratchpad accelerator and simulate its timeline.

    Device memory streams at the calibration's bandwidth efficiency (the expected schedule)
    unless --ideal (the datasheet's, or --bw-eff of it).

    \b
    Example:
      ridgeline schedule --hw ibm-spyre --model llama-3.1-8b --batch 4
    """
    acc = specs.get_accelerator(hw)
    pricing = an.Pricing.of(acc, mode_of(ideal), efficiency=an.Efficiency(bandwidth=bw_eff))
    w = pricing.workload(phase, batch, context, prompt)
    bucket = _bucket(w, bucket_batch, bucket_context)
    eff = pricing.calibration.bandwidth_efficiency
    opts = an.dataflow.ScheduleOptions(buffers, not no_ring, bandwidth_efficiency=eff)
    s = an.dataflow.compile_schedule(specs.get_model(model), acc, w, bucket, opts)
    listing = an.dataflow.program_of(s, program) if program else None  # a typo fails first
    _emit_schedule(s, pricing, listing, timeline, json_out)


def _emit_schedule(
    s: dataflow.Schedule,
    pricing: an.Pricing,
    listing: dataflow.OpProgram | None,
    timeline: str | None,
    json_out: bool,
) -> None:
    """The timeline plot if asked, then the schedule as JSON or as tables."""
    if timeline:
        from ridgeline.report import tiling_plots

        save_plot(tiling_plots.timeline_plot(s), timeline)
    if json_out:
        emit_json({**s.to_dict(), "mode": pricing.mode.value, "pricing": pricing.to_dict()})
        return
    eff = pricing.calibration.bandwidth_efficiency
    _print_schedule(s, f"{pricing.label}: device memory at {eff:g} of its bandwidth", listing)


def _bucket(w: an.Workload, batch: int | None, context: int | None) -> dataflow.Bucket | None:
    """The compiled bucket the options name (the default bucket fills what they leave out), or
    None for the default bucket."""
    from ridgeline.analytic import dataflow

    if batch is None and context is None:
        return None
    d = dataflow.default_bucket(w)
    return dataflow.Bucket(
        d.batch if batch is None else batch, d.context if context is None else context
    )


def _print_schedule(
    s: dataflow.Schedule, label: str, listing: dataflow.OpProgram | None = None
) -> None:
    """The compiled step's table and totals, then the listing of ``--program`` if asked."""
    from ridgeline.analytic import dataflow

    heads = ("op", "×", "tile per core", "loaded", "ring", "LX", "time", "roofline")
    table = Table(*heads, title=f"{s.model} on {s.accelerator}, compiled — {label}")
    for o in s.ops:
        table.add_row(
            o.name,
            str(o.count),
            o.tile or o.kind.value,
            fmt_bytes(o.dram_load_bytes),
            fmt_bytes(o.ring_bytes),
            fmt_bytes(o.occupancy_bytes),
            fmt_seconds(o.time_s),
            fmt_seconds(o.roofline_s),
        )
    console.print(table)
    gap = ", ".join(f"{k} {fmt_seconds(v)}" for k, v in s.gap().causes().items())
    console.print(
        f"reads: weights {fmt_bytes(s.analytic_weight_bytes)}, KV r+w "
        f"{fmt_bytes(s.analytic_kv_bytes)}, activations r+w {fmt_bytes(s.analytic_act_bytes)}; "
        f"loaded {fmt_bytes(s.loaded_bytes)} ("
        + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in asdict(s.loaded_by_category()).items() if v)
        + f"; re-loads {fmt_bytes(s.reload_bytes)}), "
        f"ring {fmt_bytes(s.ring_bytes)}, padding {s.padding_fraction:.1%}\n"
        f"step {fmt_seconds(s.time_s)} vs roofline {fmt_seconds(s.roofline_time_s)} ({gap}); "
        f"compute {s.compute_utilisation:.2%}, bandwidth {s.bandwidth_utilisation:.1%}, "
        f"peak LX {fmt_bytes(s.peak_occupancy_bytes)} of {fmt_bytes(s.core.capacity_bytes)}"
    )
    if listing is not None:
        for line in dataflow.listing(listing, max_steps=4):
            console.print(line, highlight=False, soft_wrap=True)


def orchestrate_cmd(
    model: ModelOpt = DEFAULT_MODEL,
    batch: BatchOpt = 1,
    context: ContextOpt = 4096,
    gpu: Annotated[str, typer.Option(help="the GPU")] = GPU,
    tpu: Annotated[str, typer.Option(help="the TPU")] = TPU,
    spyre: Annotated[str, typer.Option(help="the dataflow machine")] = DATAFLOW,
    ideal: IdealOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """One KV cache, three orchestrators: bytes per level, time, and the level that binds.

    Device memory at the calibration's KV bandwidth efficiency (expected) unless --ideal.

    \b
    Example:
      ridgeline orchestrate --model llama-3.1-8b --batch 8 --context 8192
    """
    rep = an.orchestrate.orchestrate(
        specs.get_model(model),
        batch,
        context,
        specs.get_accelerator(gpu),
        specs.get_accelerator(tpu),
        specs.get_accelerator(spyre),
        mode_of(ideal),
    )
    if json_out:
        emit_json(rep)
        return
    _print_orchestration(rep)


def _print_orchestration(rep: OrchestrationReport) -> None:
    """Who places and moves each level's bytes, per accelerator, and the binding level."""
    heads = ("accelerator", "orchestrator", "level", "placed by", "moved by", "bytes", "time")
    table = Table(*heads, title=f"one decode step's attention — {rep.label}")
    for r in rep.rows:
        for i, mv in enumerate(r.moves):
            t = mv.time_s
            table.add_row(
                r.accelerator if i == 0 else "",
                r.orchestrator if i == 0 else "",
                mv.level + (" *" if mv.level == r.binding else ""),
                mv.managed_by,
                mv.moved_by,
                fmt_bytes(mv.moved_bytes),
                fmt_seconds(t) if t is not None else "—",
            )
    console.print(table)
    tr = rep.traffic
    times = ", ".join(f"{r.accelerator} {fmt_seconds(r.time_s)}" for r in rep.rows)
    console.print(
        f"{rep.model}, batch {rep.batch}, context {rep.context}: attention reads "
        f"{fmt_bytes(tr.kv_read_bytes)} of KV per decode step; * = binding level; {times}"
    )
    for r in rep.rows:
        if r.detail:
            console.print(f"{r.accelerator}: {r.detail}; KV in {r.kv_home}", highlight=False)


def layout_cmd(
    hw: Annotated[str, typer.Option(help="accelerator whose banked level to use")] = "h100-sxm",
    level: Annotated[str, typer.Option(help="the banked level")] = "smem",
    stride: Annotated[
        list[int] | None, typer.Option("--stride", help="stride in words (repeat)")
    ] = None,
    granule: Annotated[
        float | None, typer.Option(help="transfer granule B (default: ibm-spyre's 128-B stick)")
    ] = None,
    size: Annotated[float, typer.Option(help="bytes of the aligned/misaligned access")] = 256.0,
    offset: Annotated[list[float] | None, typer.Option("--offset", help="B (repeat)")] = None,
    rows: Annotated[int, typer.Option(help="rows of the walked array")] = 1024,
    cols: Annotated[int, typer.Option(help="columns of the walked array")] = 1024,
    elem: Annotated[float, typer.Option(help="bytes per element")] = 4.0,
    cache: Annotated[float, typer.Option(help="cache bytes that keep lines between columns")] = 0.0,
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
) -> None:
    """Layout and access: bank conflicts by stride, alignment to the granule, walk order.

    Bank conflicts by stride, alignment to the transfer granule, and the bytes fetched per
    useful byte of a row-major against a column-major walk.

    \b
    Example:
      ridgeline layout --hw h100-sxm --plot out/layout.png
    """
    from ridgeline.analytic import layout
    from ridgeline.report import layout_section

    d = layout.LayoutQuery()
    q = layout.LayoutQuery(
        tuple(stride) if stride else d.strides,
        size,
        tuple(offset) if offset else d.offsets,
        rows,
        cols,
        elem,
        cache,
    )
    g = granule if granule is not None else layout_section.granule_of("ibm-spyre")
    rep = layout.layout_report(specs.get_accelerator(hw).level(level), g, q)
    if plot:
        save_plot(layout_section.layout_plot(rep), plot)
    if json_out:
        emit_json(rep)
        return
    for t in layout_section.layout_tables(rep):
        print_table(t.headers, t.rows, t.caption)
