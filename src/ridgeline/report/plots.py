"""Analytic plots: each function draws one matplotlib ``Figure`` and returns it (``figures``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ridgeline.analytic import (
    Comparison,
    DeploymentCost,
    Phase,
    StepCost,
    Technique,
    kv_bytes,
    sweep,
    weights_bytes,
)
from ridgeline.analytic.pricing import IDEAL_LABEL, Pricing
from ridgeline.analytic.workload import Dtypes
from ridgeline.report.figures import colors, new_figure
from ridgeline.specs import Accelerator, DType, ModelSpec

_MARKERS = {"prefill": "s", "decode": "o"}


def _roof(ax: Axes, acc: Accelerator, color: str, dtype_peak: float) -> None:
    bw = acc.device_bandwidth_bytes_per_s
    ai = np.logspace(-2, 4, 200)
    ax.plot(
        ai,
        np.minimum(dtype_peak, ai * bw),
        color=color,
        lw=1.8,
        label=f"{acc.name} (ridge {dtype_peak / bw:.3g} FLOP/B)",
    )


def roofline_plot(
    points: Sequence[StepCost],
    accelerators: Sequence[Accelerator],
    title: str = "Roofline",
) -> Figure:
    """Roofs of the accelerators and one marker per step (prefill squares, decode circles)."""
    fig, ax = new_figure((8, 5.5))
    palette = colors()
    color_of = {acc.name: palette[i % len(palette)] for i, acc in enumerate(accelerators)}
    for acc in accelerators:
        peak = next(
            (p.peak_flops_per_s for p in points if p.accelerator == acc.name), acc.peak(DType.BF16)
        )
        _roof(ax, acc, color_of[acc.name], peak)
    for p in points:
        phase = p.workload.phase.value
        ax.scatter(
            p.arithmetic_intensity,
            p.attainable_flops_per_s,
            marker=_MARKERS[phase],
            s=60,
            color=color_of.get(p.accelerator, "k"),
            edgecolor="k",
            zorder=3,
        )
        ax.annotate(
            f"{phase} B={p.workload.batch}",
            (p.arithmetic_intensity, p.attainable_flops_per_s),
            textcoords="offset points",
            xytext=(5, -10),
            fontsize=7,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, device memory)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return fig


def decode_sweep_plot(
    model: ModelSpec,
    priced: Pricing | Accelerator,
    batches: Sequence[int],
    contexts: np.ndarray,
    dtypes: Dtypes | None = None,
) -> Figure:
    """Predicted decode step time (priced by ``priced``; an accelerator alone: the ideal
    roofline) and bound against context, one line per batch size."""
    fig, (ax_t, ax_ai) = new_figure((11, 4.5), 1, 2)
    acc = priced.accelerator if isinstance(priced, Pricing) else priced
    label = priced.label if isinstance(priced, Pricing) else IDEAL_LABEL
    for b in batches:
        s = sweep(model, priced, Phase.DECODE, b, contexts, dtypes)
        ax_t.plot(contexts, s.step_time_s * 1e3, label=f"batch {b}")
        ax_ai.plot(contexts, s.arithmetic_intensity, label=f"batch {b}")
    ax_ai.axhline(s.ridge_point, color="k", ls="--", lw=1, label="ridge point")
    ax_t.set_xlabel("context (tokens)")
    ax_t.set_ylabel("decode step time (ms)")
    ax_t.set_title(f"{model.name} decode on {acc.name} ({label})")
    ax_ai.set_xlabel("context (tokens)")
    ax_ai.set_ylabel("arithmetic intensity (FLOP/B)")
    ax_ai.set_yscale("log")
    ax_ai.set_title("intensity vs ridge point")
    for ax in (ax_t, ax_ai):
        ax.set_xscale("log", base=2)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def kv_plot(
    model: ModelSpec,
    batches: Sequence[int] = (1, 8, 32),
    dtypes: Dtypes | None = None,
    acc: Accelerator | None = None,
) -> Figure:
    """KV bytes against context per batch, with the weights and (optionally) device capacity."""
    dt = dtypes or Dtypes()
    ctx = np.logspace(7, 20, 200, base=2)
    fig, ax = new_figure((8, 5))
    for b in batches:
        ax.plot(ctx, np.asarray(kv_bytes(model, b, ctx, dt.kv)) / 1e9, label=f"KV, batch {b}")
    w = weights_bytes(model, dt.weight) / 1e9
    ax.axhline(w, color="k", ls="--", label=f"weights {w:.3g} GB")
    if acc is not None:
        cap = acc.device_capacity_bytes / 1e9
        ax.axhline(cap, color="r", ls=":", label=f"{acc.name} {acc.device_level} {cap:.3g} GB")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context (tokens per sequence)")
    ax.set_ylabel("GB (1e9 bytes)")
    ax.set_title(f"{model.name}: KV cache ({dt.kv.value}) vs weights ({dt.weight.value})")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def techniques_plot(rows: Sequence[Technique], title: str) -> Figure:
    """KV bytes of each technique, relative to MHA."""
    fig, ax = new_figure((8, 4))
    ax.barh([r.name for r in rows], [r.ratio_to_mha for r in rows], color="tab:blue")
    for i, r in enumerate(rows):
        ax.text(r.ratio_to_mha, i, f" {r.kv_bytes / 1e9:.3g} GB", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("KV bytes relative to MHA")
    ax.set_title(title)
    ax.set_xlim(0, 1.25)
    return fig


def compare_plot(comparison: Comparison) -> Figure:
    """Decode on each architecture's deployment, in the comparison's mode (the table's): tokens/s
    per user and per system (left), and where a step's time goes on one chip: compute, memory,
    links, pipeline bubble (right), with the binding the table names."""
    costs = [c for r in comparison.rows if (c := r.decode_quoted) is not None]
    fig, (ax_tps, ax_time) = new_figure((13, 0.8 * len(costs) + 2.4), 1, 2)
    y = np.arange(len(costs))
    labels = [_deployment_label(c) for c in costs]
    for offset, attr, name, color in (
        (-0.2, "tokens_per_s_per_seq", "per user", "tab:blue"),
        (0.2, "tokens_per_s", "per system", "tab:orange"),
    ):
        values = [getattr(c, attr) for c in costs]
        bars = ax_tps.barh(y + offset, values, 0.4, label=name, color=color)
        ax_tps.bar_label(bars, [f" {v:,.0f}" for v in values], fontsize=7)
    ax_tps.set_yticks(y, labels, fontsize=8)
    ax_tps.set_xscale("log")
    ax_tps.set_xlabel(f"decode tokens/s, {comparison.label} (log scale)")
    ax_tps.invert_yaxis()
    ax_tps.legend(fontsize=8, loc="lower right")
    ax_tps.grid(True, axis="x", which="both", alpha=0.3)
    _time_shares(ax_time, costs)
    ax_time.set_yticks(
        y, [f"{c.deployment.accelerator.name}\nbinds: {c.binding.text}" for c in costs], fontsize=8
    )
    ax_time.invert_yaxis()
    fig.suptitle(
        f"{comparison.model}: decode at batch {comparison.batch}, context {comparison.context}, "
        f"on the smallest deployment that holds weights + KV — {comparison.label}",
        fontsize=10,
    )
    return fig


def _deployment_label(cost: DeploymentCost) -> str:
    d = cost.deployment
    chips = "1 chip" if d.chips == 1 else f"{d.chips:,} chips"
    return f"{d.accelerator.name}\n{chips}, TP {d.tensor_parallel} x PP {d.pipeline_parallel}"


def _time_shares(ax: Axes, costs: Sequence[DeploymentCost]) -> None:
    """Stacked fractions of the step: busy time split by resource (fixed latency: the
    calibrated per-layer time), then the bubble; each part of 8% or more carries its
    percentage."""
    parts = ("compute", "memory", "links", "fixed latency", "pipeline bubble")
    palette = ("tab:red", "tab:blue", "tab:green", "tab:purple", "lightgray")
    left = np.zeros(len(costs))
    for name, color in zip(parts, palette, strict=True):
        share = np.array([_share(c, name) for c in costs])
        bars = ax.barh(np.arange(len(costs)), share, left=left, color=color, label=name)
        ax.bar_label(
            bars, [f"{v:.0%}" if v >= 0.08 else "" for v in share], label_type="center", fontsize=7
        )
        left += share
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of one chip's decode step")
    ax.legend(fontsize=7, ncols=5, loc="upper center", bbox_to_anchor=(0.5, -0.14))


def _share(cost: DeploymentCost, part: str) -> float:
    s, total = cost.slot, cost.step_time_s
    busy = cost.microbatches / total
    return {
        "compute": s.compute_s * busy,
        "memory": s.memory_s * busy,
        "links": s.interconnect_s * busy,
        "fixed latency": s.layer_s * busy,
        "pipeline bubble": cost.bubble_s / total,
    }[part]
