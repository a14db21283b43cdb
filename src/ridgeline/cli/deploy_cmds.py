"""``ridgeline deploy``: one model on many chips of one accelerator (tensor and pipeline
parallelism), given or chosen automatically."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer
from rich.table import Table

from ridgeline import analytic as an
from ridgeline import specs  # the catalog loads when a command runs, not for its --help
from ridgeline.cli.analytic_cmds import fit_lines
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
    console,
    dtypes,
    emit_json,
    mode_of,
)
from ridgeline.defaults import DEFAULT_ACCELERATOR, DEFAULT_MODEL
from ridgeline.specs.units import fmt_bytes, fmt_seconds


def deploy_cmd(
    hw: HwOpt = DEFAULT_ACCELERATOR,
    model: ModelOpt = DEFAULT_MODEL,
    tp: Annotated[int | None, typer.Option("--tp", help="tensor-parallel chips per stage")] = None,
    pp: Annotated[int | None, typer.Option("--pp", help="pipeline stages")] = None,
    phase: PhaseOpt = an.Phase.DECODE,
    batch: BatchOpt = 1,
    context: ContextOpt = 4096,
    weight_dtype: DtypeOpt = "bf16",
    kv_dtype: DtypeOpt = "bf16",
    ideal: IdealOpt = False,
    memory_utilization: MemoryUtilizationOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """A model on many chips of one accelerator: memory, links, bubble and what binds.

    Per-chip memory and work, all-reduces, pipeline sends and bubble, step time, tokens/s per
    user and per system (calibrated, the ideal roofline beside; --ideal swaps them), and what
    fits: the largest batch at --context and the longest context at --batch under the one
    KV-pool rule (as predict and simulate). Without --tp and --pp, the smallest deployment that
    holds the weights plus the KV.

    \b
    Example:
      ridgeline deploy --hw h100-sxm --model llama-3.1-70b --tp 2
    """
    m, acc = specs.get_model(model), specs.get_accelerator(hw)
    dt = dtypes(weight=weight_dtype, kv=kv_dtype)
    split = an.Deployment(acc, 1 if tp is None else tp, 1 if pp is None else pp)
    pricing = an.Pricing.of(split, mode_of(ideal), dt)
    w = pricing.workload(phase, batch, context)
    rule = an.MemoryRule(memory_utilization)
    cost = an.deploy_step(m, pricing, w, tp is None and pp is None, rule)
    other = an.deployment_cost(m, cost.pricing.counterpart(), w, rule=rule)
    fit = an.kv_fit(m, cost.deployment, dt, (context + 1, batch), rule)
    if json_out:
        emit_json({**cost.to_dict(), other.mode.value: other.to_dict(), "capacity": fit.to_dict()})
        return
    console.print(deploy_table(cost, other))
    console.print(an.binding_sentence(cost), highlight=False, soft_wrap=True)
    for line in fit_lines(fit):
        console.print(line, highlight=False, soft_wrap=True)


def deploy_table(cost: an.DeploymentCost, other: an.DeploymentCost | None = None) -> Table:
    """One deployment's step as a Rich table: the figures of ``cost``'s mode, and the other
    mode's beside the times and speeds when ``other`` is given."""
    s, mem, dep = cost.slot, cost.memory, cost.deployment
    rows = [
        ("deployment", dep.label),
        ("per chip: weights + KV", f"{fmt_bytes(mem.weights_bytes)} + {fmt_bytes(mem.kv_bytes)}"),
        (
            "per chip: offered",
            f"{fmt_bytes(mem.available_bytes)} of {fmt_bytes(mem.capacity_bytes)} "
            f"(memory_utilization {mem.budget.memory_utilization:g}, "
            f"{mem.budget.reserve_text()})",
        ),
        ("per chip per step", f"{cost.chip_flops / 1e9:.4g} GFLOP, {fmt_bytes(cost.chip_bytes)}"),
        ("one all-reduce", _allreduce_text(cost)),
        ("links per step", fmt_bytes(cost.interconnect_bytes)),
        ("microbatches", f"{cost.microbatches} ({cost.schedule.value} pipeline)"),
        (
            "slot",
            f"compute {fmt_seconds(s.compute_s)}, memory {fmt_seconds(s.memory_s)}, "
            f"tensor parallel {fmt_seconds(s.tensor_parallel_s)}, send {fmt_seconds(s.send_s)}, "
            f"fixed latency {fmt_seconds(s.layer_s)}",
        ),
        ("bubble", f"{cost.bubble_fraction:.1%} ({fmt_seconds(cost.bubble_s)})"),
        ("binds", cost.binding.text),
    ]
    title = f"{cost.model}, {cost.workload.phase.value} — {cost.pricing.label}"
    table = Table("field", "value", title=title)
    for key, value in rows:
        table.add_row(key, value)
    for key, value in _speeds(cost, other):
        table.add_row(key, value)
    return table


def _speeds(cost: an.DeploymentCost, other: an.DeploymentCost | None) -> list[tuple[str, str]]:
    """Step and tokens/s in ``cost``'s mode, ``(ideal roofline ...)`` or ``(expected ...)``
    beside when ``other`` is at hand."""

    def pair(mine: str, theirs: str | None) -> str:
        if theirs is None or other is None:
            return mine
        return f"{mine} ({'ideal roofline' if other.pricing.is_ideal else 'expected'} {theirs})"

    def alt(fmt: Callable[[an.DeploymentCost], str]) -> str | None:
        return None if other is None else fmt(other)

    cells: list[tuple[str, Callable[[an.DeploymentCost], str]]] = [
        ("step", lambda c: fmt_seconds(c.step_time_s)),
        ("tokens/s per user", lambda c: f"{c.tokens_per_s_per_seq:,.1f}"),
        ("tokens/s per system", lambda c: f"{c.tokens_per_s:,.1f}"),
    ]
    label = " (ideal)" if cost.pricing.is_ideal else " (expected)"
    return [(name + label, pair(fmt(cost), alt(fmt))) for name, fmt in cells]


def _allreduce_text(cost: an.DeploymentCost) -> str:
    s = cost.slot
    ar = s.allreduce
    if ar.chips == 1:
        return "none (TP 1)"
    return (
        f"{fmt_bytes(ar.message_bytes)} message, {fmt_bytes(ar.bytes_sent_per_chip)} sent per "
        f"chip in {ar.steps} steps, {fmt_seconds(ar.time_s)}; {s.allreduces_per_pass} per pass"
    )
