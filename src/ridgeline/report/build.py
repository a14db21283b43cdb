"""``ridgeline report``: the full report on one model (roofline, KV, the five questions, the
five architectures compared), written as report.html, report.md and report.json.

Every section prices its steps with the report's one ``Pricing`` (``ReportContext.pricing``,
calibrated unless ``--ideal``; ``analytic.pricing``) and names it; the KV section and the serving
simulations size KV pools with the one rule (``analytic.memory``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ridgeline import analytic as an
from ridgeline.analytic.chip_summary import LevelRidge
from ridgeline.analytic.pricing import Pricing
from ridgeline.analytic.speed import SpeedQuote, quote_step
from ridgeline.defaults import DEFAULT_ACCELERATOR
from ridgeline.report import plots
from ridgeline.report.document import ReportFiles, Section, Table, write_report
from ridgeline.report.figures import save_figure
from ridgeline.report.kv_manage_section import kv_manage_section
from ridgeline.report.layout_section import layout_section
from ridgeline.report.serving_section import serving_section
from ridgeline.report.tiling_section import tiling_section
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim.workload import WorkloadSpec
from ridgeline.specs import Accelerator, ModelSpec, get_accelerator, get_model, param_counts
from ridgeline.specs.calibration import CostMode
from ridgeline.specs.units import fmt_bytes, fmt_rate, fmt_seconds


@dataclass(frozen=True, slots=True)
class ServingQuestion:
    """What the serving section simulates: a workload (None: its shared-prefix workload at 80%
    of the rough sustainable rate) under a scheduler, with a KV-pool ``memory_utilization``."""

    workload: WorkloadSpec | None = None
    scheduler: SchedulerConfig = SchedulerConfig(max_model_len=4096)
    memory_utilization: float | None = None


@dataclass(frozen=True, slots=True)
class ReportContext:
    """What every section reads: the model, the one pricing (mode, calibration, deployment,
    data types), where figures go, the step sizes and the serving question."""

    model: ModelSpec
    pricing: Pricing
    out_dir: Path
    batch: int = 1
    context: int = 4096
    prompt: int = 2048
    serving: ServingQuestion = ServingQuestion()

    @property
    def hw(self) -> Accelerator:
        return self.pricing.accelerator

    @property
    def chip(self) -> Pricing:
        """The pricing on one chip (the roofline and the five questions are one chip's)."""
        return self.pricing.on(self.hw)

    def figure(self, name: str) -> Path:
        return self.out_dir / "figures" / name


def _model_section(ctx: ReportContext) -> Section:
    m, p = ctx.model, param_counts(ctx.model)
    rows = [
        ("parameters", f"{p.total:,}"),
        ("active parameters per token", f"{p.active:,}"),
        ("layers × hidden", f"{m.num_layers} × {m.hidden_size}"),
        ("heads / KV heads / head dim", f"{m.num_heads} / {m.num_kv_heads} / {m.head_dim}"),
        ("attention", m.attention.value),
        ("KV bytes per token (bf16)", f"{an.kv_bytes_per_token(m):,.0f}"),
    ]
    return Section(
        "model",
        f"Model: {m.name}",
        tables=(Table(("field", "value"), tuple(rows)),),
        data={
            "params": p.total,
            "active_params": p.active,
            "kv_bytes_per_token": an.kv_bytes_per_token(m),
        },
    )


def _ridge_rows(ridges: list[LevelRidge]) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (
            r.level,
            fmt_rate(r.bandwidth_bytes_per_s, "B/s") if r.bandwidth_bytes_per_s else "—",
            f"{r.ridge_point_flops_per_byte:.3g}" if r.ridge_point_flops_per_byte else "—",
        )
        for r in ridges
    )


def _step_rows(points: list[an.StepCost], quotes: list[SpeedQuote]) -> tuple[tuple[str, ...], ...]:
    """One row per step: the quoted mode's time and tokens/s, the other mode's in brackets."""
    return tuple(
        (
            p.workload.phase.value,
            str(p.workload.batch),
            str(p.workload.context_len),
            f"{p.arithmetic_intensity:.3g}",
            p.bound.value,
            f"{fmt_seconds(q.step_s(q.mode))} ({fmt_seconds(q.step_s(_other(q.mode)))})",
            _tokens_per_s(q),
        )
        for p, q in zip(points, quotes, strict=True)
    )


def _other(mode: CostMode) -> CostMode:
    return CostMode.IDEAL if mode is CostMode.CALIBRATED else CostMode.CALIBRATED


def _in_brackets(pricing: Pricing) -> str:
    """``expected (calibrated) with the ideal roofline in brackets`` (or the reverse)."""
    return f"{pricing.label} with the {pricing.counterpart().label} in brackets"


def _roofline_figures(ctx: ReportContext, points: list[an.StepCost]) -> tuple[Path, Path]:
    m, acc = ctx.model, ctx.hw
    roof = plots.roofline_plot(points, [acc], f"{m.name} on {acc.name} ({ctx.chip.label})")
    contexts = np.logspace(7, 17, 60, base=2)
    sweep = plots.decode_sweep_plot(m, ctx.chip, (1, 8, 64, 256), contexts)
    return (
        save_figure(roof, ctx.figure("roofline.png")),
        save_figure(sweep, ctx.figure("decode_sweep.png")),
    )


def _roofline_section(ctx: ReportContext) -> Section:
    m, acc = ctx.model, ctx.hw
    ridges = an.ridge_points(acc)
    steps = [(an.Phase.PREFILL, 1, ctx.prompt), (an.Phase.DECODE, 1, ctx.context)]
    steps.append((an.Phase.DECODE, 64, ctx.context))
    quoted = [quote_step(m, ctx.chip, ctx.chip.workload(ph, b, t)) for ph, b, t in steps]
    points, quotes = [p for p, _ in quoted], [q for _, q in quoted]
    di = an.decode_intensity(m, acc, ctx.batch, ctx.context)
    batching = an.decode_batching(m, acc, ctx.context)
    text = (
        f"Decode intensity at batch {ctx.batch}, context {ctx.context}: "
        f"{di.weights_only:.3g} FLOP/B counting weights alone, {di.with_kv:.3g} FLOP/B with the "
        f"KV cache, against a ridge point of {di.ridge_point:.3g} FLOP/B. "
        f"{batching.sentence()[0].upper()}{batching.sentence()[1:]}."
    )
    headers = ("phase", "batch", "context", "AI (FLOP/B)", "bound", "step", "tokens/s")
    return Section(
        "roofline",
        f"Roofline on {acc.name}",
        paragraphs=(text,),
        tables=(
            Table(
                ("level", "bandwidth", "ridge bf16 (FLOP/B)"),
                _ridge_rows(ridges),
                "Ridge point per memory level",
            ),
            Table(
                headers,
                _step_rows(points, quotes),
                f"Prefill and decode on one roofline: {_in_brackets(ctx.chip)}; {quotes[1].basis}",
            ),
        ),
        figures=_roofline_figures(ctx, points),
        data={
            "ridge_points": [
                {"level": r.level, "ridge": r.ridge_point_flops_per_byte} for r in ridges
            ],
            "steps": [p.to_dict() for p in points],
            "speeds": [q.to_dict() for q in quotes],
            "decode_intensity": di.to_dict(),
        },
    )


def _kv_text(k: an.KvSummary) -> tuple[str, ...]:
    cross = k.crossover_context_tokens
    kv, wt = k.dtypes.kv.value, k.dtypes.weight.value
    first = (
        f"{k.model} stores {k.kv_bytes_per_token:,.0f} bytes of {kv} KV per token; its KV passes "
        f"its {wt} weights ({fmt_bytes(k.weights_bytes)}) at "
        f"{'no context' if cross is None else f'{cross:,} tokens'} at batch {k.batch}."
    )
    fit = k.fit
    if fit is None:
        return (first, str(k.capacity_error))
    most = "no sequence" if fit.max_batch is None else f"at most {fit.max_batch:,} sequences"
    longest = (
        "no context"
        if fit.max_context is None
        else f"one sequence of {fit.max_context:,} tokens"
        + (" (the model's maximum)" if fit.capped else "")
    )
    fits = (
        f"On {fit.deployment.label}, under the KV-pool rule ({fit.budget.sentence()}): "
        f"{most} of {k.context:,} tokens, or {longest}."
    )
    return (first, fits)


def _kv_section(ctx: ReportContext) -> Section:
    m, acc = ctx.model, ctx.hw
    rule = an.MemoryRule(ctx.serving.memory_utilization)
    dep = ctx.pricing.deployment
    k = an.kv_summary(m, ctx.batch, ctx.context, ctx.pricing.dtypes, dep, rule)
    rows = tuple(
        (
            t.name,
            t.description,
            f"{t.kv_bytes_per_token:,.0f}",
            fmt_bytes(t.kv_bytes),
            f"{t.ratio_to_mha:.3f}",
        )
        for t in k.techniques
    )
    title = f"{m.name}: KV at batch {ctx.batch}, {ctx.context} tokens"
    figs = (
        save_figure(plots.kv_plot(m, acc=acc), ctx.figure("kv.png")),
        save_figure(plots.techniques_plot(k.techniques, title), ctx.figure("kv_techniques.png")),
    )
    return Section(
        "kv",
        "KV cache",
        _kv_text(k),
        (Table(("technique", "what", "KV B/token", "KV total", "vs MHA"), rows),),
        figs,
        k.to_dict(),
    )


def _questions_section(ctx: ReportContext) -> Section:
    m, acc = ctx.model, ctx.hw
    w = ctx.chip.workload(an.Phase.DECODE, ctx.batch, ctx.context)
    ans = an.five_questions(m, ctx.chip, w)
    rows = tuple(
        (
            f"{lv.name} ({lv.scope})",
            f"{fmt_bytes(lv.capacity_bytes)} × {lv.instances}",
            fmt_rate(lv.bandwidth_bytes_per_s, "B/s") if lv.bandwidth_bytes_per_s else "—",
            lv.managed_by,
            f"{lv.ridge_point_flops_per_byte:.3g}" if lv.ridge_point_flops_per_byte else "—",
        )
        for lv in ans.levels
    )
    reads = an.decode_reads(m, acc, ctx.batch, ctx.context, ctx.pricing.dtypes)
    read_rows = tuple(
        (
            lt.level,
            fmt_rate(lt.bandwidth_bytes_per_s, "B/s"),
            fmt_seconds(lt.time_s),
            "yes" if lt.fits else "no",
        )
        for lt in reads.per_level
    )
    return Section(
        "questions",
        f"The five questions on {acc.name}",
        paragraphs=(
            f"5. Scarce resource for decode (batch {ctx.batch}, context {ctx.context}) on the "
            f"roofline: {ans.roofline.text} — {ans.reason}; expected (calibrated) to bind: "
            f"{ans.expected.text}. One step: {ans.speed.sentence()}.",
            f"What one decode step reads on {acc.name}: weights {fmt_bytes(reads.weight_bytes)}, "
            f"KV {fmt_bytes(reads.kv_bytes)}, activations {fmt_bytes(reads.activation_bytes)} "
            "(GB = 1e9 bytes).",
        ),
        tables=(
            Table(("level", "1. how much", "2. how fast", "3. who decides", "4. ridge"), rows),
            Table(
                ("level", "bandwidth", "time for one decode step", "fits"),
                read_rows,
                f"One decode step on {acc.name}, at each level's datasheet bandwidth "
                "(the ideal roofline)",
            ),
        ),
        data={"questions": ans.to_dict(), "decode_reads": reads.to_dict()},
    )


def _tokens_per_s(q: SpeedQuote) -> str:
    """The quoted mode's tokens/s (the other's in brackets), or why none is quoted."""
    mine, other = q.tokens_per_s(q.mode), q.tokens_per_s(_other(q.mode))
    return "does not fit" if mine is None or other is None else f"{mine:,.0f} ({other:,.0f})"


def _compare_row(r: an.ArchRow) -> tuple[str, ...]:
    d, p = r.decode_other, r.prefill_other
    dc, pc = r.decode_quoted, r.prefill_quoted
    if d is None or p is None or dc is None or pc is None:
        return (r.accelerator.name, r.accelerator.kind, "does not fit", "", "", "", "", "")
    return (
        r.accelerator.name,
        r.accelerator.kind,
        f"{d.deployment.chips} chips (TP {d.deployment.tensor_parallel} x PP "
        f"{d.deployment.pipeline_parallel})",
        f"{fmt_seconds(dc.step_time_s)} ({fmt_seconds(d.step_time_s)})",
        f"{dc.tokens_per_s_per_seq:,.0f} ({d.tokens_per_s_per_seq:,.0f})",
        f"{dc.tokens_per_s:,.0f} ({d.tokens_per_s:,.0f})",
        dc.binding.text,
        f"{fmt_seconds(pc.step_time_s)} ({fmt_seconds(p.step_time_s)})",
    )


def _compare_section(ctx: ReportContext) -> Section:
    p = ctx.pricing
    cmp = an.compare(
        ctx.model, an.DEFAULT_ACCELERATORS, ctx.batch, ctx.context, ctx.prompt, p.dtypes, p.mode
    )
    fig = save_figure(plots.compare_plot(cmp), ctx.figure("compare.png"))
    intro = (
        f"Each architecture runs {ctx.model.name} on the smallest deployment of its chips that "
        f"holds the weights plus the KV of batch {ctx.batch} at context {ctx.context}: tensor "
        f"parallel within a node for GPUs, TPUs and Spyre cards, a layer pipeline across Groq "
        f"chips and Cerebras wafers. Decode tokens/s are per user (one sequence) and per "
        f"system (the whole batch): {_in_brackets(p)} (docs/fidelity.md)."
    )
    return Section(
        "compare",
        "Five architectures compared",
        paragraphs=(intro, *(r.binds for r in cmp.rows)),
        tables=(
            Table(
                (
                    "accelerator",
                    "kind",
                    "deployment",
                    "decode step",
                    "tok/s per user",
                    "tok/s per system",
                    "binds",
                    "prefill step",
                ),
                tuple(_compare_row(r) for r in cmp.rows),
            ),
        ),
        figures=(fig,),
        data=cmp.to_dict(),
    )


SectionBuilder = Callable[[ReportContext], Section]
SECTIONS: list[SectionBuilder] = [
    _model_section,
    _roofline_section,
    _kv_section,
    _questions_section,
    _compare_section,
    serving_section,
    tiling_section,
    layout_section,
    kv_manage_section,
]


def section_name(builder: SectionBuilder) -> str:
    """A builder's name as progress shows it (``_kv_section`` -> ``kv``)."""
    name = getattr(builder, "__name__", "section")
    return name.strip("_").removesuffix("_section")


def build_report(
    model: str | ModelSpec,
    out_dir: str | Path,
    hw: str | Accelerator | Pricing = DEFAULT_ACCELERATOR,
    sections: list[SectionBuilder] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ReportFiles:
    """Write report.html (self-contained), report.md and report.json into ``out_dir``; ``hw``
    is the report's pricing (an accelerator alone: one chip of it, calibrated); ``progress`` is
    told the name of each section as it starts."""
    out = Path(out_dir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    pricing = hw if isinstance(hw, Pricing) else Pricing.expected(get_accelerator(hw))
    ctx = ReportContext(get_model(model), pricing, out)
    return write_sections(ctx, sections or SECTIONS, progress)


def write_sections(
    ctx: ReportContext,
    sections: list[SectionBuilder],
    progress: Callable[[str], None] | None = None,
) -> ReportFiles:
    """Build ``sections`` on ``ctx`` (telling ``progress`` each one's name as it starts) and
    write the report's three files."""
    built = []
    for builder in sections:
        if progress is not None:
            progress(section_name(builder))
        built.append(builder(ctx))
    title = f"ridgeline report: {ctx.model.name} ({ctx.pricing.label})"
    meta = {"mode": ctx.pricing.mode.value, "pricing": ctx.pricing.to_dict()}
    return write_report(ctx.out_dir, "report", title, built, meta)
