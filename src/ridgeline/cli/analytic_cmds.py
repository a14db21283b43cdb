"""Commands over the analytic layer: hw, model, roofline, kv, questions, compare."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ridgeline import analytic as an
from ridgeline import specs  # the catalog loads when a command runs, not for its --help
from ridgeline.cli.common import (
    BatchOpt,
    ContextOpt,
    DtypeOpt,
    HwOpt,
    IdealOpt,
    JsonOpt,
    MemoryUtilizationOpt,
    ModelOpt,
    PhaseOpt,
    PlotOpt,
    PromptOpt,
    console,
    dtypes,
    emit_json,
    mode_of,
    new_app,
    save_plot,
)
from ridgeline.defaults import DEFAULT_ACCELERATOR, DEFAULT_MODEL
from ridgeline.errors import CapacityError
from ridgeline.specs.cost_mode import CostMode
from ridgeline.specs.dtypes import DType
from ridgeline.specs.limits import MAX_CONTEXT
from ridgeline.specs.units import fmt_bytes, fmt_rate, fmt_seconds

if TYPE_CHECKING:  # for the type checker; at run time ``an.speed`` loads on first use
    import ridgeline.analytic.deployment
    import ridgeline.analytic.speed  # noqa: F401
    from ridgeline.specs import Accelerator, ModelSpec

hw_app = new_app("Accelerators of the catalog.")
model_app = new_app("Models from the catalog or any config.json.")


def _hw_dict(name: str) -> dict:
    return {
        "schema": "ridgeline.hw/1",
        **an.accelerator_summary(specs.get_accelerator(name)).to_dict(),
    }


@hw_app.command("list")
def hw_list(json_out: JsonOpt = False) -> None:
    """List the catalog's accelerators with device memory, bandwidth, bf16 peak and ridge.

    \b
    Example:
      ridgeline hw list
    """
    rows = [_hw_dict(n) for n in specs.accelerator_names()]
    if json_out:
        emit_json({"schema": "ridgeline.hw-list/1", "accelerators": rows})
        return
    table = Table(
        "name",
        "kind",
        "device memory (usable of installed)",
        "bandwidth",
        "bf16 peak",
        "ridge (FLOP/B)",
    )
    for r in rows:
        table.add_row(
            r["name"],
            r["kind"],
            f"{_usable_of_installed(r['device_capacity_bytes'], r['device_installed_bytes'])} "
            f"{r['device_level']}",
            fmt_rate(r["device_bandwidth_bytes_per_s"], "B/s"),
            fmt_rate(specs.get_accelerator(r["name"]).peak(DType.BF16), "FLOP/s"),
            f"{r['ridge_point_flops_per_byte']:.1f}",
        )
    console.print(table)


LOCAL_MEMORY_KINDS = (
    "the three kinds of local memory (course module 3): hardware-managed cache, "
    "software-managed scratchpad (kernel code), compiler-managed local memory"
)


def _usable_of_installed(usable: float, installed: float) -> str:
    """``112 GB of 128 GB`` where ECC or a reservation takes a part, else ``80 GB``."""
    if usable >= installed:
        return fmt_bytes(installed)
    return f"{fmt_bytes(usable)} of {fmt_bytes(installed)}"


@hw_app.command("show")
def hw_show(
    name: Annotated[str, typer.Argument(help="name or .toml path")], json_out: JsonOpt = False
) -> None:
    """Memory levels (fastest first), who manages each, peaks and sources of one accelerator.

    \b
    Example:
      ridgeline hw show ibm-spyre
    """
    d = _hw_dict(name)
    if json_out:
        emit_json(d)
        return
    console.print(f"[bold]{d['name']}[/bold] — {d['description']} ({d['cores']} {d['core_name']}s)")
    table = Table(
        "level",
        "per instance (usable of installed)",
        "instances",
        "total",
        "bandwidth",
        "managed by",
        "kind of local memory",
        "scope",
        "ridge bf16",
        "source",
    )
    ridges = {r["level"]: r["ridge_point_flops_per_byte"] for r in d["ridge_points"]}
    for lvl in d["levels"]:
        bw = lvl["bandwidth_bytes_per_s"]
        ridge = ridges[lvl["name"]]
        usable = lvl["usable_bytes"] or lvl["capacity_bytes"]
        table.add_row(
            lvl["name"],
            _usable_of_installed(usable, lvl["capacity_bytes"]),
            str(lvl["instances"]),
            fmt_bytes(lvl["total_capacity_bytes"]),
            fmt_rate(bw, "B/s") if bw else "—",
            lvl["managed_by"],
            lvl["local_memory"] or "— (device or host memory)",
            lvl["scope"],
            f"{ridge:.3g}" if ridge else "—",
            lvl["sources"].get("capacity_bytes", ""),
        )
    console.print(table)
    console.print(LOCAL_MEMORY_KINDS + f"; KV orchestrated by {d['orchestrator']}", highlight=False)
    _print_peaks_links_notes(d, specs.get_accelerator(name))


def _print_peaks_links_notes(d: dict, acc: Accelerator) -> None:
    peaks = ", ".join(f"{k} {fmt_rate(v, 'FLOP/s')}" for k, v in d["peak_flops_per_s"].items())
    console.print(f"dense peaks: {peaks}")
    _print_fallbacks(acc)
    if d["interconnect"] is not None:
        _print_links(d["interconnect"])
    for note in d["notes"]:
        console.print(f"note: {note}")


def _print_fallbacks(acc: Accelerator) -> None:
    """The formats the file gives no peak for, and which peak prices them (``specs.peaks``)."""
    rules = [acc.peak_rule(d) for d in DType if d not in acc.peak_flops_per_s]
    parts = [
        f"{r.dtype} = {r.stand.dtype}" + (f" ÷ {r.stand.passes}" if r.stand.passes > 1 else "")
        for r in rules
    ]
    if parts:
        console.print(f"unlisted formats: {', '.join(parts)} (data/peak_fallback.toml)")


def _print_links(link: dict) -> None:
    console.print(
        f"links: {link['kind']} ({link['topology']}), {link['links']} x "
        f"{fmt_rate(link['link_bandwidth_bytes_per_s'], 'B/s')} one way, egress "
        f"{fmt_rate(link['egress_bandwidth_bytes_per_s'], 'B/s')}, "
        f"{fmt_seconds(link['latency_s'])} per hop, up to {link['domain_chips']} chips "
        f"per tensor-parallel group; splits by {link['parallelism']}",
        highlight=False,
    )


def model_dict(name: str, kv_dtype: str = "bf16") -> dict:
    summary = an.model_summary(specs.get_model(name), DType.parse(kv_dtype))
    return {"schema": "ridgeline.model/1", **summary.to_dict()}


@model_app.command("list")
def model_list(json_out: JsonOpt = False) -> None:
    """List the shipped model configs.

    \b
    Example:
      ridgeline model list
    """
    rows = [model_dict(n) for n in specs.model_names()]
    if json_out:
        emit_json({"schema": "ridgeline.model-list/1", "models": rows})
        return
    table = Table("name", "family", "params", "active", "attention", "KV B/token (bf16)")
    for r in rows:
        table.add_row(
            r["name"],
            r["family"],
            f"{r['params']:,}",
            f"{r['active_params']:,}",
            r["attention"],
            f"{r['kv_bytes_per_token']:,.0f}",
        )
    console.print(table)


@model_app.command("show")
def model_show(
    name: Annotated[str, typer.Argument(help="catalog name or config.json path")],
    kv_dtype: DtypeOpt = "bf16",
    json_out: JsonOpt = False,
) -> None:
    """Shapes, parameter counts and KV bytes per token of one model.

    \b
    Example:
      ridgeline model show llama-3.1-8b --kv-dtype fp8
    """
    d = model_dict(name, kv_dtype)
    if json_out:
        emit_json(d)
        return
    table = Table("field", "value")
    for key in (
        "name",
        "family",
        "params",
        "active_params",
        "layers",
        "hidden_size",
        "heads",
        "kv_heads",
        "kv_heads_cached",
        "head_dim",
        "ffn",
        "vocab_size",
        "attention",
        "tied_embeddings",
        "sliding_windows",
        "moe",
        "mla",
        "kv_bytes_per_token",
    ):
        value = d[key]
        table.add_row(
            key,
            f"{value:,}"
            if isinstance(value, int | float) and not isinstance(value, bool)
            else str(value),
        )
    console.print(table)


def _roofline_plot(m: ModelSpec, cost: an.StepCost, path: str) -> None:
    """The step and the other phase at the same batch and context, on one roofline."""
    from ridgeline.report import plots

    w, pricing = cost.workload, cost.pricing
    other = an.Phase.PREFILL if w.phase is an.Phase.DECODE else an.Phase.DECODE
    pair = [
        cost,
        an.step_cost(m, pricing, an.Workload(other, w.batch, w.context_len, dtypes=w.dtypes)),
    ]
    acc = pricing.accelerator
    title = f"{m.name} on {acc.name} ({pricing.label} step times)"
    save_plot(plots.roofline_plot(pair, [acc], title), path)


def _ops_table(cost: an.StepCost) -> Table:
    heads = ("op", "×", "GFLOP", "weights", "KV r/w", "activations", "AI", "bound", "time")
    title = f"{cost.model} on {cost.accelerator}, per operator — {cost.pricing.label}"
    table = Table(*heads, title=title)
    for op in cost.ops:
        table.add_row(
            op.name,
            str(op.count),
            f"{op.flops / 1e9:.4g}",
            fmt_bytes(op.weight_bytes),
            f"{fmt_bytes(op.kv_read_bytes)}/{fmt_bytes(op.kv_write_bytes)}",
            fmt_bytes(op.act_read_bytes + op.act_write_bytes),
            f"{op.arithmetic_intensity:.3g}",
            op.bound.value,
            fmt_seconds(op.time_s),
        )
    return table


def roofline_cmd(
    hw: HwOpt = DEFAULT_ACCELERATOR,
    model: ModelOpt = DEFAULT_MODEL,
    phase: PhaseOpt = an.Phase.DECODE,
    batch: BatchOpt = 1,
    context: ContextOpt = 4096,
    prompt: PromptOpt = None,
    weight_dtype: DtypeOpt = "bf16",
    act_dtype: DtypeOpt = "bf16",
    kv_dtype: DtypeOpt = "bf16",
    ideal: IdealOpt = False,
    bw_eff: Annotated[
        float, typer.Option(help="with --ideal: fraction of peak bandwidth reached")
    ] = 1.0,
    compute_eff: Annotated[
        float, typer.Option(help="with --ideal: fraction of peak FLOP/s reached")
    ] = 1.0,
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
) -> None:
    """One step on the roofline: per-operator FLOPs and bytes, intensity, bound, time.

    Times are the calibrated expectation unless --ideal (the other mode is quoted beside).

    \b
    Example:
      ridgeline roofline --hw h100-sxm --model llama-3.1-8b --batch 64
    """
    m, acc = specs.get_model(model), specs.get_accelerator(hw)
    dt = dtypes(weight_dtype, act_dtype, kv_dtype)
    pricing = an.Pricing.of(acc, mode_of(ideal), dt, an.Efficiency(bw_eff, compute_eff))
    cost, quote = an.speed.quote_step(m, pricing, pricing.workload(phase, batch, context, prompt))
    if plot:
        _roofline_plot(m, cost, plot)
    if json_out:
        emit_json({**cost.to_dict(), "speed": quote.to_dict()})
        return
    console.print(_ops_table(cost))
    console.print(
        f"{phase.value} B={batch} T={context} on {acc.name}: {cost.flops / 1e9:.4g} GFLOP, "
        f"{fmt_bytes(cost.bytes)} moved → intensity {cost.arithmetic_intensity:.3g} FLOP/B vs "
        f"ridge {cost.ridge_point:.3g} → [bold]{cost.bound.value}-bound[/bold]"
    )
    console.print(quote.sentence(), highlight=False, soft_wrap=True)


def _print_kv(k: an.KvSummary, model: ModelSpec) -> None:
    cross = k.crossover_context_tokens
    console.print(
        f"{k.model}: {k.kv_bytes_per_token:,.0f} B of {k.dtypes.kv.value} KV per token; "
        f"batch {k.batch} × {k.context:,} tokens = {fmt_bytes(k.kv_bytes)} "
        f"({fmt_bytes(k.kv_bytes, binary=True)}); weights {fmt_bytes(k.weights_bytes)}; "
        f"KV passes the weights at {'no context' if cross is None else f'{cross:,} tokens'}"
        f" (batch {k.batch})",
        highlight=False,
    )
    if k.context > model.max_position_embeddings:
        console.print(
            f"note: {k.context:,} tokens exceed {k.model}'s {model.max_position_embeddings:,} "
            "positions; the sizes above are as asked",
            highlight=False,
        )
    if k.fit is not None:
        for line in fit_lines(k.fit):
            console.print(line, highlight=False, soft_wrap=True)
    table = Table("technique", "what", "KV B/token", "KV total", "vs MHA")
    for t in k.techniques:
        table.add_row(
            t.name,
            t.description,
            f"{t.kv_bytes_per_token:,.0f}",
            fmt_bytes(t.kv_bytes),
            f"{t.ratio_to_mha:.3f}",
        )
    console.print(table)


def fit_lines(fit: an.KvFit) -> list[str]:
    """The direct capacity answer (``analytic.memory.kv_fit``) as lines: the deployment, where
    one chip's memory goes, the largest batch at the context and the longest context at the
    batch (never "None": what does not fit is said)."""
    dep = fit.deployment
    where = f"on one {dep.accelerator.name}" if dep.chips == 1 else f"on {dep.label}"
    if fit.chosen:
        where += (
            f", the smallest deployment that holds the weights (one {dep.accelerator.name} "
            "cannot; --tp and --pp choose another)"
        )
    batch = (
        f"{fit.max_batch:,}"
        if fit.max_batch is not None
        else f"none (one sequence needs more than the {fmt_bytes(fit.pool_bytes)} KV pool)"
    )
    if fit.max_context is None:
        longest = f"none (not one token each for {fit.batch} sequences)"
    elif fit.capped:
        longest = f"{fit.max_context:,} tokens, the model's maximum (memory would hold more)"
    else:
        longest = f"{fit.max_context:,} tokens"
    return [
        f"{where}: {fit.budget.sentence()}; KV pool {fmt_bytes(fit.pool_bytes)}",
        f"  the largest batch that fits at {fit.context:,} tokens: {batch}",
        f"  the longest context at batch {fit.batch}: {longest}",
    ]


def kv_cmd(
    model: ModelOpt = DEFAULT_MODEL,
    batch: BatchOpt = 1,
    context: ContextOpt = 4096,
    kv_dtype: DtypeOpt = "bf16",
    weight_dtype: DtypeOpt = "bf16",
    hw: Annotated[
        str | None, typer.Option("--hw", help="also size against this accelerator")
    ] = None,
    tp: Annotated[
        int | None,
        typer.Option(
            "--tp", help="tensor-parallel chips (default: the fewest that hold the weights)"
        ),
    ] = None,
    pp: Annotated[int | None, typer.Option("--pp", help="pipeline stages")] = None,
    memory_utilization: MemoryUtilizationOpt = None,
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
) -> None:
    """KV cache: bytes per token and in total, crossover with the weights, what fits, techniques.

    With --hw: the largest batch that fits at --context and the longest context at --batch, under
    the one KV-pool rule (--memory-utilization of each chip for weights, a named reserve and KV;
    the same rule as predict and simulate).

    \b
    Example:
      ridgeline kv --model llama-3.1-70b --context 131072 --hw h200 --kv-dtype fp8
    """
    m = specs.get_model(model)
    dt = dtypes(weight=weight_dtype, kv=kv_dtype)
    acc = specs.get_accelerator(hw) if hw else None
    target: Accelerator | an.Deployment | None = acc
    if acc is not None and (tp is not None or pp is not None):
        target = an.Deployment(acc, 1 if tp is None else tp, 1 if pp is None else pp)
        an.deployment.check_deployment(m, target)
    rule = an.MemoryRule(memory_utilization)
    summary = an.kv_summary(m, batch, context, dt, target, rule)
    if summary.capacity_error is not None:  # no deployment holds the weights
        raise CapacityError(summary.capacity_error)
    if plot:
        from ridgeline.report import plots

        save_plot(plots.kv_plot(m, dtypes=dt, acc=acc), plot)
    if json_out:
        emit_json(summary)
        return
    _print_kv(summary, m)


def questions_cmd(
    hw: HwOpt = DEFAULT_ACCELERATOR,
    model: ModelOpt = DEFAULT_MODEL,
    phase: PhaseOpt = an.Phase.DECODE,
    batch: BatchOpt = 1,
    context: ContextOpt = 4096,
    kv_dtype: DtypeOpt = "bf16",
    weight_dtype: DtypeOpt = "bf16",
    ideal: IdealOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """The five questions for an accelerator and workload, and what one decode step reads.

    The step's time is the calibrated expectation unless --ideal.

    \b
    Example:
      ridgeline questions --hw groq-lpu --model llama-3.1-8b
    """
    m, acc = specs.get_model(model), specs.get_accelerator(hw)
    dt = dtypes(weight=weight_dtype, kv=kv_dtype)
    pricing = an.Pricing.of(acc, mode_of(ideal), dt)
    ans = an.five_questions(m, pricing, pricing.workload(phase, batch, context))
    reads = an.decode_reads(m, acc, batch, context, dt)
    if json_out:
        emit_json({**ans.to_dict(), "decode_reads": reads.to_dict()})
        return
    render_questions(ans, reads)


def render_questions(ans: an.FiveAnswers, reads: an.StepReads) -> None:
    table = Table("level", "1. how much", "2. how fast", "3. who decides", "4. ridge (FLOP/B)")
    for lvl in ans.levels:
        bw, ridge = lvl.bandwidth_bytes_per_s, lvl.ridge_point_flops_per_byte
        table.add_row(
            f"{lvl.name} ({lvl.scope})",
            f"{fmt_bytes(lvl.capacity_bytes)} × {lvl.instances}",
            fmt_rate(bw, "B/s") if bw else "—",
            lvl.managed_by,
            f"{ridge:.3g}" if ridge else "—",
        )
    console.print(table)
    console.print(
        f"5. scarce on the roofline: [bold]{ans.roofline.text}[/bold] — {ans.reason}; "
        f"expected (calibrated) to bind: [bold]{ans.expected.text}[/bold]"
        + (f" ({ans.expected.share:.0%} of the step)" if ans.expected.share < 1 else ""),
        highlight=False,
    )
    console.print(f"one step: {ans.speed.sentence()}", highlight=False, soft_wrap=True)
    console.print(
        f"one decode step (B={reads.batch}, T={reads.context}) at each level's datasheet "
        f"bandwidth (the ideal roofline) reads weights "
        f"{fmt_bytes(reads.weight_bytes)}, KV {fmt_bytes(reads.kv_bytes)}, activations "
        f"{fmt_bytes(reads.activation_bytes)}: "
        + "; ".join(
            f"{lt.level} {fmt_seconds(lt.time_s)}{'' if lt.fits else ' (does not fit)'}"
            for lt in reads.per_level
        )
    )


def compare_cmd(
    model: ModelOpt = DEFAULT_MODEL,
    hw: Annotated[list[str] | None, typer.Option("--hw", help="repeat; default: the five")] = None,
    batch: BatchOpt = 1,
    context: ContextOpt = 4096,
    prompt: Annotated[int, typer.Option(min=1, max=MAX_CONTEXT, help="prefill tokens")] = 2048,
    ideal: IdealOpt = False,
    json_out: JsonOpt = False,
    plot: PlotOpt = None,
) -> None:
    """Five architectures side by side, each on the smallest deployment that holds the model.

    Per accelerator: chips, decode tokens/s per user and per system, what binds, prefill; the
    calibrated expectation with the ideal roofline in brackets (--ideal swaps them; the table
    and the plot show the same binding).

    \b
    Example:
      ridgeline compare --model llama-3.1-70b
    """
    m = specs.get_model(model)
    cmp = an.compare(m, hw or an.DEFAULT_ACCELERATORS, batch, context, prompt, mode=mode_of(ideal))
    if plot:
        from ridgeline.report import plots

        save_plot(plots.compare_plot(cmp), plot)
    if json_out:
        emit_json(cmp)
        return
    console.print(compare_table(cmp))
    for row in cmp.rows:
        console.print(f"- {row.binds}", highlight=False, soft_wrap=True)


def _other_label(cmp: an.Comparison) -> str:
    return "ideal roofline" if cmp.mode is CostMode.CALIBRATED else "calibrated expectation"


def compare_table(cmp: an.Comparison) -> Table:
    """The comparison as a Rich table (one row per accelerator): the quoted mode's figures
    (expected, calibrated, by default) with the other mode's in brackets, and the quoted
    mode's binding (as the plot)."""
    table = Table(
        "accelerator",
        "chips",
        "TP x PP",
        "per chip: needs / has",
        "decode step",
        "tok/s per user",
        "tok/s per system",
        "binds (expected)",
        "prefill step",
        title=(
            f"{cmp.model}: batch {cmp.batch}, context {cmp.context}, prompt {cmp.prompt} — "
            f"{cmp.label} with the {_other_label(cmp)} in brackets"
        ),
    )
    for row in cmp.rows:
        d, p = row.decode_quoted, row.prefill_quoted
        di, pi = row.decode_other, row.prefill_other
        if d is None or p is None or di is None or pi is None:
            table.add_row(row.accelerator.name, "does not fit", *[""] * 7)
            continue
        mem = d.memory
        table.add_row(
            row.accelerator.name,
            str(d.deployment.chips),
            f"{d.deployment.tensor_parallel} x {d.deployment.pipeline_parallel}",
            f"{fmt_bytes(mem.needed_bytes)} / {fmt_bytes(mem.available_bytes)}",
            f"{fmt_seconds(d.step_time_s)} ({fmt_seconds(di.step_time_s)})",
            f"{d.tokens_per_s_per_seq:,.0f} ({di.tokens_per_s_per_seq:,.0f})",
            f"{d.tokens_per_s:,.0f} ({di.tokens_per_s:,.0f})",
            d.binding.text,
            f"{fmt_seconds(p.step_time_s)} ({fmt_seconds(pi.step_time_s)})",
        )
    return table
