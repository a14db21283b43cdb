"""``ridgeline recompute``: recompute K and V or cache them, priced per context and accelerator
(thin: parse, call ``analytic.recompute``, render)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ridgeline import specs  # the catalog loads when a command runs, not for its --help
from ridgeline.cli.common import (
    DtypeOpt,
    JsonOpt,
    ModelOpt,
    console,
    dtypes,
    emit_json,
    print_table,
)
from ridgeline.defaults import DEFAULT_MODEL
from ridgeline.specs.units import fmt_bytes, fmt_seconds

if TYPE_CHECKING:  # loaded when the command runs, not for its --help (start-up)
    from ridgeline.analytic.recompute import RecomputeReport

DEFAULT_CONTEXTS = (1024, 4096, 32768)


def recompute_cmd(
    model: ModelOpt = DEFAULT_MODEL,
    hw: Annotated[
        list[str] | None, typer.Option("--hw", help="accelerator (repeat); default: the five")
    ] = None,
    context: Annotated[
        list[int] | None,
        typer.Option("--context", "-t", help="context length (repeat); default 1k, 4k, 32k"),
    ] = None,
    kv_dtype: DtypeOpt = "bf16",
    weight_dtype: DtypeOpt = "bf16",
    json_out: JsonOpt = False,
) -> None:
    """Recompute K and V or cache them: FLOPs recomputed against bytes kept, per context and chip.

    \b
    Example:
      ridgeline recompute --model llama-3.1-8b
    """
    from ridgeline.analytic.recompute import recompute_report
    from ridgeline.specs.catalog import FIVE_ARCHITECTURES

    m = specs.get_model(model)
    contexts = tuple(context or DEFAULT_CONTEXTS)
    accs = [specs.get_accelerator(n) for n in hw or FIVE_ARCHITECTURES]
    rep = recompute_report(m, accs, contexts, dtypes(weight=weight_dtype, kv=kv_dtype))
    if json_out:
        emit_json(rep)
        return
    _print(rep)


def _print(rep: RecomputeReport) -> None:
    rows = [
        (
            t.accelerator if i == 0 else "",
            f"{p.context:,}",
            fmt_bytes(p.kv_bytes),
            fmt_seconds(p.read_s),
            f"{p.recompute_flops:.3g}",
            fmt_seconds(p.recompute_s),
            f"{p.flops_per_byte:,.0f} / {t.ridge_point:,.3g}",
            f"{p.ratio:,.0f}x",
        )
        for t in rep.trades
        for i, p in enumerate(t.points)
    ]
    headers = (
        "accelerator",
        "context",
        "KV kept",
        "read it",
        "FLOPs to recompute",
        "recompute",
        "FLOP per byte kept / ridge",
        "recompute ÷ read",
    )
    title = (
        f"{rep.model}, one sequence, one decode step: read the cached K and V, or rebuild them "
        "(a prefill of the context) — ideal roofline, one chip"
    )
    print_table(headers, rows, title)
    for t in rep.trades:
        console.print(f"- {t.sentence()}", highlight=False)
