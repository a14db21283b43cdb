"""The lab's plots: each function draws one matplotlib ``Figure`` from stored lab results and
returns it (``lab_sections`` saves them beside the report). Torch-free."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ridgeline.analytic import kv_bytes
from ridgeline.lab.configs import model_spec, raw_config
from ridgeline.lab.gap import CAUSES, ComparedPoint, LabComparison
from ridgeline.lab.machine import Calibration
from ridgeline.lab.store import Record
from ridgeline.report.figures import new_figure
from ridgeline.specs import DType

MIB = 2**20


def bandwidth_plot(cal: Calibration) -> Figure:
    """Best read/copy/triad bandwidth against array size, one line per kernel and thread count,
    with the last-level cache size marked."""
    fig, ax = new_figure((7.5, 4.5))
    for kernel in ("read", "copy", "triad"):
        for threads in sorted({p.threads for p in cal.bandwidth}):
            pts = sorted(
                (p for p in cal.bandwidth if p.kernel == kernel and p.threads == threads),
                key=lambda p: p.size_bytes,
            )
            ax.plot(
                [p.size_bytes / MIB for p in pts],
                [p.best_bytes_per_s / 1e9 for p in pts],
                marker="o",
                ls="-" if threads == 1 else "--",
                label=f"{kernel}, {threads} thread(s)",
            )
    ax.axvline(cal.llc_bytes / MIB, color="grey", lw=1, ls=":", label="LLC (OS report)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("array size (MiB)")
    ax.set_ylabel("best bandwidth (GB/s)")
    ax.set_title(f"Memory bandwidth: {cal.device_name}")
    ax.legend(fontsize=7, ncol=2)
    return fig


def _time_lines(ax: Axes, pts: Sequence[ComparedPoint], color_of: dict[int, str]) -> None:
    """Measured (with p10-p90 bars), roofline and fitted step time against context per batch."""
    for batch in sorted({p.batch for p in pts}):
        row = sorted((p for p in pts if p.batch == batch), key=lambda p: p.context)
        color, x = color_of[batch], [p.context for p in row]
        low = [(p.measured_s - p.p10_s) * 1e3 for p in row]
        high = [(p.p90_s - p.measured_s) * 1e3 for p in row]
        ax.errorbar(
            x,
            [p.measured_s * 1e3 for p in row],
            yerr=[low, high],
            marker="o",
            color=color,
            label=f"B={batch} measured",
        )
        ax.plot(
            x, [p.predicted_s * 1e3 for p in row], ls="--", color=color, label=f"B={batch} roofline"
        )
        ax.plot(
            x,
            [(p.fitted_s or 0) * 1e3 for p in row],
            ls=":",
            color=color,
            label=f"B={batch} fitted",
        )


def time_plot(cmp: LabComparison) -> Figure:
    """Decode step time against context, one panel per backend: measured, roofline, fitted."""
    labels = cmp.labels()
    cols = min(len(labels), 2)
    rows = -(-len(labels) // cols)
    fig, axes = new_figure((6 * cols, 4.3 * rows), rows, cols, squeeze=False)
    for ax in axes.flat[len(labels) :]:
        ax.set_visible(False)
    color_of = {b: f"C{i}" for i, b in enumerate(sorted({p.batch for p in cmp.points}))}
    for ax, label in zip(axes.flat, labels, strict=False):
        _time_lines(ax, [p for p in cmp.points if p.label == label], color_of)
        ax.set_xlabel("context (tokens)")
        ax.set_ylabel("decode step (ms)")
        ax.set_title(label)
        ax.legend(fontsize=6, ncol=3)
    return fig


def bandwidth_fraction_plot(cmp: LabComparison) -> Figure:
    """Effective bandwidth (analytic bytes ÷ measured time) as a fraction of the calibrated one."""
    fig, ax = new_figure((7, 4.2))
    for j, label in enumerate(cmp.labels()):
        pts = [p for p in cmp.points if p.label == label]
        for i, batch in enumerate(sorted({p.batch for p in pts})):
            row = sorted((p for p in pts if p.batch == batch), key=lambda p: p.context)
            ax.plot(
                [p.context for p in row],
                [p.bandwidth_fraction for p in row],
                marker="osd^v"[j % 5],
                color=f"C{i}",
                ls=["-", "--", ":", "-."][j % 4],
                label=f"{label} B={batch}",
            )
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel("effective ÷ calibrated bandwidth")
    ax.set_title("Effective bandwidth (analytic bytes ÷ measured time)")
    ax.legend(fontsize=6, ncol=2)
    return fig


def short_label(label: str) -> str:
    """``hf/dynamic/sdpa`` → ``dyn/sdp``; the engine → ``engine``; ``+m``: the malloc setting."""
    backend, cache, attn = label.split("+")[0].split("/")
    short = "engine" if backend == "ridgeline" else f"{cache[:3]}/{attn[:3]}"
    return short + ("+m" if "+" in label else "")


def cause_ms(p: ComparedPoint, name: str) -> float | None:
    """Milliseconds per step of one named cause of a point's gap (None when not measured)."""
    return next((c.seconds * 1e3 for c in p.causes if c.name == name), None)


def gap_plot(cmp: LabComparison) -> Figure:
    """Per point: the roofline bar, each named cause stacked on it (below zero when faster than
    its roofline), and the measured step as a black tick."""
    pts = cmp.points
    fig, ax = new_figure((max(7.0, 0.45 * len(pts)), 4.8))
    x = np.arange(len(pts))
    ax.bar(x, [p.predicted_s * 1e3 for p in pts], color="lightgrey", label="roofline (predicted)")
    bottom_pos = np.array([p.predicted_s * 1e3 for p in pts])
    bottom_neg = np.zeros(len(pts))
    for i, name in enumerate(CAUSES):
        vals = np.array([cause_ms(p, name) or 0.0 for p in pts])
        pos, neg = np.clip(vals, 0, None), np.clip(vals, None, 0)
        ax.bar(x, pos, bottom=bottom_pos, color=f"C{i}", label=name)
        ax.bar(x, neg, bottom=bottom_neg, color=f"C{i}", hatch="//")
        bottom_pos += pos
        bottom_neg += neg
    measured = [p.measured_s * 1e3 for p in pts]
    ax.scatter(x, measured, color="k", marker="_", s=200, zorder=3, label="measured")
    ticks = [f"{short_label(p.label)}\nB{p.batch} T{p.context}" for p in pts]
    ax.set_xticks(x, ticks, fontsize=6)
    ax.set_ylabel("ms per decode step")
    ax.set_title("Roofline + named causes (hatched: faster than its roofline)")
    ax.legend(fontsize=6, ncol=3, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _memory_points(ax: Axes, mine: Sequence[Record], color: str, batch: int) -> None:
    """Cache-tensor bytes, and those plus the resident peak's rise, at each measured length."""
    mem = [r.result["memory"] for r in mine]
    ax.scatter(
        [m["kv_tokens"] for m in mem],
        [m["kv_bytes"] / MIB for m in mem],
        color=color,
        marker="o",
        label=f"cache tensors B={batch}",
    )
    peaks = [m for m in mem if m.get("rss_peak_above_start_bytes") is not None]
    ax.scatter(
        [m["kv_tokens"] for m in peaks],
        [(m["kv_bytes"] + m["rss_peak_above_start_bytes"]) / MIB for m in peaks],
        color=color,
        marker="^",
        label=f"KV + peak RSS rise during decode B={batch}",
    )


def memory_plot(decode_records: Sequence[Record]) -> Figure:
    """KV bytes of DynamicCache runs: the formula as lines, the measured cache tensors and the
    resident peak as points, one colour per batch."""
    fig, ax = new_figure((7, 4.3))
    recs = [r for r in decode_records if r.config["cache"] == "dynamic"]
    if recs:
        model = recs[0].config["model"]
        spec = model_spec(raw_config(model), model)
        dtype = DType.parse(recs[0].config["dtype"])
        ctx = np.linspace(0, max(r.result["memory"]["kv_tokens"] for r in recs) * 1.05, 50)
        for i, batch in enumerate(sorted({r.config["batch"] for r in recs})):
            kv_mib = np.asarray(kv_bytes(spec, batch, ctx, dtype)) / MIB
            ax.plot(ctx, kv_mib, color=f"C{i}", lw=1, label=f"formula B={batch}")
            _memory_points(ax, [r for r in recs if r.config["batch"] == batch], f"C{i}", batch)
    ax.set_xlabel("tokens in the cache")
    ax.set_ylabel("MiB")
    ax.set_title("KV cache: formula line vs measured (DynamicCache)")
    ax.legend(fontsize=6)
    return fig


def kv_variants_plot(checks: Sequence[dict[str, Any]], batch: int, context: int) -> Figure:
    """KV bytes (left axis) and decode step time (right axis) of the MHA/GQA/MQA variants."""
    fig, ax = new_figure((6.5, 3.8))
    x = np.arange(len(checks))
    kv = ax.bar(x - 0.2, [c["formula_bytes"] / MIB for c in checks], 0.4, label="KV MiB")
    ax2 = ax.twinx()
    ms = [c["decode_median_s"] * 1e3 for c in checks]
    step = ax2.bar(x + 0.2, ms, 0.4, color="C1", label="decode ms")
    ax.bar_label(kv, fmt="%.3g", fontsize=7)
    ax2.bar_label(step, fmt="%.3g", fontsize=7)
    ax.set_xticks(x, [c["name"] for c in checks], fontsize=7)
    ax.set_ylabel("KV cache (MiB)")
    ax2.set_ylabel("decode step (ms)")
    ax.set_title(f"MHA vs GQA vs MQA at B={batch}, T={context}")
    ax.legend(handles=[kv, step], fontsize=7, loc="upper right")
    return fig
