"""Plots (matplotlib, Agg backend): each function draws one figure and saves it to ``path``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ridgeline.analytic import (  # noqa: E402
    Comparison,
    DeploymentCost,
    Phase,
    StepCost,
    Technique,
    kv_bytes,
    sweep,
    weights_bytes,
)
from ridgeline.analytic.workload import Dtypes  # noqa: E402
from ridgeline.specs import Accelerator, DType, ModelSpec  # noqa: E402

_MARKERS = {"prefill": "s", "decode": "o"}


def _save(fig: plt.Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _roof(ax: plt.Axes, acc: Accelerator, color: str, dtype_peak: float) -> None:
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
    path: str | Path,
    title: str = "Roofline",
) -> Path:
    """Roofs of the accelerators and one marker per step (prefill squares, decode circles)."""
    fig, ax = plt.subplots(figsize=(8, 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    color_of = {acc.name: colors[i % len(colors)] for i, acc in enumerate(accelerators)}
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
    return _save(fig, path)


def decode_sweep_plot(
    model: ModelSpec,
    acc: Accelerator,
    batches: Sequence[int],
    contexts: np.ndarray,
    path: str | Path,
    dtypes: Dtypes | None = None,
) -> Path:
    """Predicted decode step time and bound against context, one line per batch size."""
    fig, (ax_t, ax_ai) = plt.subplots(1, 2, figsize=(11, 4.5))
    for b in batches:
        s = sweep(model, acc, Phase.DECODE, b, contexts, dtypes)
        ax_t.plot(contexts, s.step_time_s * 1e3, label=f"batch {b}")
        ax_ai.plot(contexts, s.arithmetic_intensity, label=f"batch {b}")
    ax_ai.axhline(s.ridge_point, color="k", ls="--", lw=1, label="ridge point")
    ax_t.set_xlabel("context (tokens)")
    ax_t.set_ylabel("decode step time (ms)")
    ax_t.set_title(f"{model.name} decode on {acc.name}")
    ax_ai.set_xlabel("context (tokens)")
    ax_ai.set_ylabel("arithmetic intensity (FLOP/B)")
    ax_ai.set_yscale("log")
    ax_ai.set_title("intensity vs ridge point")
    for ax in (ax_t, ax_ai):
        ax.set_xscale("log", base=2)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, path)


def kv_plot(
    model: ModelSpec,
    path: str | Path,
    batches: Sequence[int] = (1, 8, 32),
    dtypes: Dtypes | None = None,
    acc: Accelerator | None = None,
) -> Path:
    """KV bytes against context per batch, with the weights and (optionally) device capacity."""
    dt = dtypes or Dtypes()
    ctx = np.logspace(7, 20, 200, base=2)
    fig, ax = plt.subplots(figsize=(8, 5))
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
    return _save(fig, path)


def techniques_plot(rows: Sequence[Technique], path: str | Path, title: str) -> Path:
    """KV bytes of each technique, relative to MHA."""
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.barh([r.name for r in rows], [r.ratio_to_mha for r in rows], color="tab:blue")
    for i, r in enumerate(rows):
        ax.text(r.ratio_to_mha, i, f" {r.kv_bytes / 1e9:.3g} GB", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("KV bytes relative to MHA")
    ax.set_title(title)
    ax.set_xlim(0, 1.25)
    return _save(fig, path)


def compare_plot(comparison: Comparison, path: str | Path) -> Path:
    """Decode on each architecture's deployment: tokens/s per user and per system (left), and
    where a step's time goes on one chip: compute, memory, links, pipeline bubble (right)."""
    rows = [r for r in comparison.rows if r.decode is not None]
    labels = [_deployment_label(r.decode) for r in rows if r.decode is not None]
    costs = [r.decode for r in rows if r.decode is not None]
    fig, (ax_tps, ax_time) = plt.subplots(1, 2, figsize=(13, 0.8 * len(rows) + 2.2))
    y = np.arange(len(rows))
    per_user = [c.tokens_per_s_per_seq for c in costs]
    per_system = [c.tokens_per_s for c in costs]
    ax_tps.barh(y - 0.2, per_user, 0.4, label="per user", color="tab:blue")
    ax_tps.barh(y + 0.2, per_system, 0.4, label="per system", color="tab:orange")
    for i, (u, s) in enumerate(zip(per_user, per_system, strict=True)):
        ax_tps.text(u, i - 0.2, f" {u:,.0f}", va="center", fontsize=7)
        ax_tps.text(s, i + 0.2, f" {s:,.0f}", va="center", fontsize=7)
    ax_tps.set_yticks(y, labels, fontsize=8)
    ax_tps.set_xscale("log")
    ax_tps.set_xlabel("decode tokens/s")
    ax_tps.invert_yaxis()
    ax_tps.legend(fontsize=8, loc="lower right")
    ax_tps.grid(True, axis="x", which="both", alpha=0.3)
    _time_shares(ax_time, costs)
    ax_time.set_yticks(y, [c.binding.value for c in costs], fontsize=8)
    ax_time.invert_yaxis()
    fig.suptitle(
        f"{comparison.model}: decode at batch {comparison.batch}, context {comparison.context}, "
        f"on the smallest deployment that holds weights + KV",
        fontsize=10,
    )
    return _save(fig, path)


def _deployment_label(cost: DeploymentCost) -> str:
    d = cost.deployment
    return (
        f"{d.accelerator.name}\n{d.chips} chips, TP {d.tensor_parallel} x PP {d.pipeline_parallel}"
    )


def _time_shares(ax: plt.Axes, costs: Sequence[DeploymentCost]) -> None:
    """Stacked fractions of the step: busy time split by resource, then the bubble."""
    parts = ("compute", "memory", "links", "pipeline bubble")
    colors = ("tab:red", "tab:blue", "tab:green", "lightgray")
    left = np.zeros(len(costs))
    for name, color in zip(parts, colors, strict=True):
        share = np.array([_share(c, name) for c in costs])
        ax.barh(np.arange(len(costs)), share, left=left, color=color, label=name)
        left += share
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of one chip's decode step (tick labels: what binds)")
    ax.legend(fontsize=7, ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.1))


def _share(cost: DeploymentCost, part: str) -> float:
    s, total = cost.slot, cost.step_time_s
    busy = cost.microbatches / total
    return {
        "compute": s.compute_s * busy,
        "memory": s.memory_s * busy,
        "links": s.interconnect_s * busy,
        "pipeline bubble": cost.bubble_s / total,
    }[part]
