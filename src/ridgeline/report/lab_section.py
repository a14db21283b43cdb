"""The lab's part of the report: the calibrated machine, measured vs predicted decode, the fitted
model, the gap explained, memory against the KV formula, MHA/GQA/MQA, the profiler's view.

Reads a lab results database with the standard library and ``ridgeline.lab``'s torch-free
modules (store, compare, machine); never imports torch. Used by ``ridgeline lab report`` (a
standalone lab.html / lab.md / lab.json) and ``ridgeline report --lab DB`` (sections appended).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ridgeline.analytic import kv_bytes  # noqa: E402
from ridgeline.lab.compare import CAUSES, LabComparison, compare_records, latest_calibration  # noqa: E402
from ridgeline.lab.compute_peak import peak_rows  # noqa: E402
from ridgeline.lab.configs import model_spec, raw_config  # noqa: E402
from ridgeline.lab.machine import Calibration  # noqa: E402
from ridgeline.lab.store import Record, open_existing  # noqa: E402
from ridgeline.report.document import Section, Table, to_html, to_json, to_markdown  # noqa: E402
from ridgeline.report.lab_growth import growth_table
from ridgeline.specs import DType  # noqa: E402
from ridgeline.specs.units import fmt_bytes, fmt_rate  # noqa: E402

FigurePath = Callable[[str], Path]


@dataclass(frozen=True, slots=True)
class LabData:
    """Everything the lab sections draw from, read once from the database."""

    db: str
    records: tuple[Record, ...]
    comparison: LabComparison | None
    calibration: Calibration | None

    def latest(self, kind: str) -> Record | None:
        found = [r for r in self.records if r.kind == kind]
        return found[-1] if found else None

    def of_kind(self, kind: str) -> list[Record]:
        return [r for r in self.records if r.kind == kind]


def load_lab(db: str | Path, hw: str | None = None, timer: str = "wall") -> LabData:
    """Read the database and compare its decode points (if any) with the prediction."""
    with open_existing(db) as store:
        records = tuple(store.records())
    has_decode = any(r.kind == "decode" for r in records)
    cmp = compare_records(records, hw, timer) if has_decode else None
    return LabData(str(db), records, cmp, latest_calibration(records))


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _ms(s: float | None) -> str:
    return "—" if s is None else f"{s * 1e3:.1f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f}%"


# --- machine ---------------------------------------------------------------------------------


def _bandwidth_plot(cal: Calibration, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for kernel in ("read", "copy", "triad"):
        for threads in sorted({p.threads for p in cal.bandwidth}):
            pts = sorted(
                (p for p in cal.bandwidth if p.kernel == kernel and p.threads == threads),
                key=lambda p: p.size_bytes,
            )
            ax.plot(
                [p.size_bytes / 2**20 for p in pts],
                [p.best_bytes_per_s / 1e9 for p in pts],
                marker="o",
                ls="-" if threads == 1 else "--",
                label=f"{kernel}, {threads} thread(s)",
            )
    ax.axvline(cal.llc_bytes / 2**20, color="grey", lw=1, ls=":", label="LLC (OS report)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("array size (MiB)")
    ax.set_ylabel("best bandwidth (GB/s)")
    ax.set_title(f"Memory bandwidth: {cal.device_name}")
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


def machine_section(data: LabData, figure: FigurePath) -> Section | None:
    cal = data.calibration
    if cal is None:
        return None
    sizes = sorted({p.size_bytes for p in cal.bandwidth})
    rows = []
    for kernel in ("read", "copy", "triad"):
        for threads in sorted({p.threads for p in cal.bandwidth}):
            by_size = {
                p.size_bytes: p
                for p in cal.bandwidth
                if p.kernel == kernel and p.threads == threads
            }
            rows.append(
                (kernel, str(threads))
                + tuple(
                    f"{by_size[s].best_bytes_per_s / 1e9:.1f}" if s in by_size else "—"
                    for s in sizes
                )
            )
    mm = tuple(
        (m.dtype, str(m.n), str(m.threads), fmt_rate(m.best_flops_per_s, "FLOP/s"))
        for m in cal.matmul
    )
    gemm = tuple(
        (
            str(g.batch),
            f"[{g.batch}, {g.n_in}] × [{g.n_in}, {g.n_out}]",
            str(g.threads),
            f"{g.best_s * 1e3:.2f}",
            fmt_rate(g.weight_bytes_per_s, "B/s"),
        )
        for g in cal.gemm
    )
    return Section(
        "lab-machine",
        "Lab: this machine, calibrated",
        paragraphs=(
            f"{cal.device_name}; last-level cache {fmt_bytes(cal.llc_bytes, binary=True)} as the "
            f"OS reports it; {fmt_bytes(cal.memory_bytes, binary=True)} of memory. Best of "
            f"{cal.spec.repeats} timings per figure (STREAM's convention); GB/s = 1e9 B/s. "
            "One-thread figures time min(wall, process CPU time); figures at more threads are "
            "wall time, which a busy machine inflates.",
        ),
        tables=(
            Table(
                ("kernel", "threads", *[fmt_bytes(s, binary=True) for s in sizes]),
                tuple(rows),
                "Bandwidth (GB/s) by array size",
            ),
            Table(("dtype", "n", "threads", "best"), mm, "Matmul peak"),
            *_peak_tables(cal),
            Table(
                ("batch", "shape", "threads", "ms", "weights streamed at"),
                gemm,
                "Decode-shaped GEMM (fp32): the weight term of the fitted model",
            ),
        ),
        figures=(_bandwidth_plot(cal, figure("lab_bandwidth.png")),),
        data={"calibration": cal.to_dict()},
    )


def _bounded(rate: str, fitted: bool) -> str:
    return rate if fitted else f"{rate} (bound)"


def _peak_tables(cal: Calibration) -> tuple[Table, ...]:
    """Physical peak beside the measured kernels, per thread count (CPU calibrations)."""
    if cal.spec.device != "cpu":
        return ()
    tables = []
    for threads in sorted(set(cal.spec.threads)):
        rows = tuple(
            (what, "" if rate is None else fmt_rate(rate, "FLOP/s"), how)
            for what, rate, how in peak_rows(cal.peak_report(threads))
        )
        tables.append(
            Table(("fp32 compute", "FLOP/s", "how"), rows, f"Compute peak, {threads} thread(s)")
        )
    return tuple(tables)


# --- measured vs predicted --------------------------------------------------------------------


def _time_plot(cmp: LabComparison, path: Path) -> Path:
    labels = cmp.labels()
    cols = min(len(labels), 2)
    rows = -(-len(labels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4.3 * rows), squeeze=False)
    for ax in axes.flat[len(labels) :]:
        ax.set_visible(False)
    color_of = {b: f"C{i}" for i, b in enumerate(sorted({p.batch for p in cmp.points}))}
    for ax, label in zip(axes.flat, labels, strict=False):
        pts = [p for p in cmp.points if p.label == label]
        for batch in sorted({p.batch for p in pts}):
            row = sorted((p for p in pts if p.batch == batch), key=lambda p: p.context)
            color = color_of[batch]
            x = [p.context for p in row]
            ax.errorbar(
                x,
                [p.measured_s * 1e3 for p in row],
                yerr=[
                    [(p.measured_s - p.p10_s) * 1e3 for p in row],
                    [(p.p90_s - p.measured_s) * 1e3 for p in row],
                ],
                marker="o",
                color=color,
                label=f"B={batch} measured",
            )
            ax.plot(
                x,
                [p.predicted_s * 1e3 for p in row],
                ls="--",
                color=color,
                label=f"B={batch} roofline",
            )
            ax.plot(
                x,
                [(p.fitted_s or 0) * 1e3 for p in row],
                ls=":",
                color=color,
                label=f"B={batch} fitted",
            )
        ax.set_xlabel("context (tokens)")
        ax.set_ylabel("decode step (ms)")
        ax.set_title(label)
        ax.legend(fontsize=6)
    return _save(fig, path)


def _bandwidth_fraction_plot(cmp: LabComparison, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.2))
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
    return _save(fig, path)


def compare_section(data: LabData, figure: FigurePath) -> Section | None:
    cmp = data.comparison
    if cmp is None:
        return None
    rows = tuple(
        (
            p.label,
            str(p.batch),
            str(p.context),
            _ms(p.measured_s),
            f"{_ms(p.p10_s)}–{_ms(p.p90_s)}",
            _ms(p.cpu_s),
            _ms(p.predicted_s),
            f"{p.ratio:.2f}",
            f"{p.effective_bandwidth / 1e9:.2f}",
            f"{p.bandwidth_fraction:.2f}",
            _ms(p.fitted_s),
            _pct(p.fit_error),
            f"{p.prefill_s:.2f}",
            "—" if p.load_avg_1m is None else f"{p.load_avg_1m:.1f}",
        )
        for p in cmp.points
    )
    fits = tuple(
        (
            f.label,
            str(f.num_points),
            _ms(f.overhead_s),
            f.gemm_source,
            _bounded(fmt_rate(f.kv_bytes_per_s, "B/s"), "BW_kv" in f.fitted),
            _bounded(fmt_rate(f.flops_per_s, "FLOP/s"), "F" in f.fitted),
            f"{f.fault_s * 1e6:.2f} µs" if f.fault_s else "—",
            f"{100 * f.median_abs_error:.1f}%",
            "—" if f.loo_median_abs_error is None else f"{100 * f.loo_median_abs_error:.1f}%",
        )
        for f in cmp.fits
    )
    return Section(
        "lab-compare",
        "Lab: decode step, measured against predicted",
        paragraphs=(
            f"Prediction: the analytic roofline (sum over operators of max(FLOPs ÷ peak, bytes ÷ "
            f"bandwidth)) on {cmp.accelerator}, at the mean KV length of the timed steps. "
            f"Measured ({cmp.timer} time): median over the timed steps after warm-up (p10–p90 beside it, CPU time "
            "per step from time.process_time, which exposes contention when it falls below wall "
            "time). Effective bandwidth = analytic bytes of the step ÷ measured time.",
            "Fitted model per backend, physical terms only: t = t_fixed + t_gemm(B) + KV bytes "
            "÷ BW_kv + other FLOPs ÷ F + minor page faults × t_fault. t_gemm(B) is measured: the "
            "step's linear layers timed alone at the point's batch (weights and their FLOPs). "
            "BW_kv is fitted but never above the read bandwidth the calibration measured, F "
            "never above the calibrated peak (the fastest kernel), t_fixed and t_fault never "
            "below 0; '(bound)' marks a rate the fit left at its bound. Relative least squares; "
            "errors are median |fitted − measured| ÷ measured, in-sample and leave-one-out. The "
            "fault count is measured (getrusage over the timed steps), not predicted: whether "
            "glibc serves a re-allocated cache from fresh mmap'd pages depends on its dynamic "
            "mmap threshold (up to 32 MiB), so the faults grow faster than the bytes; with the "
            "threshold pinned high (+malloc-env) there are none.",
        ),
        tables=(
            Table(
                (
                    "backend",
                    "B",
                    "T",
                    "measured ms",
                    "p10–p90",
                    "CPU ms",
                    "predicted ms",
                    "ratio",
                    "eff. GB/s",
                    "of calibrated",
                    "fitted ms",
                    "fit error",
                    "prefill s",
                    "load 1m",
                ),
                rows,
                "Every point",
            ),
            Table(
                (
                    "backend",
                    "points",
                    "t_fixed ms",
                    "t_gemm(B) from",
                    "KV at",
                    "other FLOPs at",
                    "per page fault",
                    "median |error|",
                    "leave-one-out",
                ),
                fits,
                "Fitted model",
            ),
        ),
        figures=(
            _time_plot(cmp, figure("lab_decode_time.png")),
            _bandwidth_fraction_plot(cmp, figure("lab_effective_bandwidth.png")),
        ),
        data={"comparison": cmp.to_dict()},
    )


# --- the gap ----------------------------------------------------------------------------------


def _short(label: str) -> str:
    """``hf/dynamic/sdpa`` → ``dyn/sdp``; the engine → ``engine``."""
    backend, cache, attn = label.split("+")[0].split("/")
    short = "engine" if backend == "ridgeline" else f"{cache[:3]}/{attn[:3]}"
    return short + ("+m" if "+" in label else "")


def _gap_plot(cmp: LabComparison, path: Path) -> Path:
    pts = cmp.points
    fig, ax = plt.subplots(figsize=(max(7.0, 0.45 * len(pts)), 4.8))
    x = np.arange(len(pts))
    ax.bar(x, [p.predicted_s * 1e3 for p in pts], color="lightgrey", label="roofline (predicted)")
    bottom_pos = np.array([p.predicted_s * 1e3 for p in pts])
    bottom_neg = np.zeros(len(pts))
    for i, name in enumerate(CAUSES):
        vals = np.array(
            [next((c.seconds for c in p.causes if c.name == name), 0.0) * 1e3 for p in pts]
        )
        pos, neg = np.clip(vals, 0, None), np.clip(vals, None, 0)
        ax.bar(x, pos, bottom=bottom_pos, color=f"C{i}", label=name)
        ax.bar(x, neg, bottom=bottom_neg, color=f"C{i}", hatch="//")
        bottom_pos += pos
        bottom_neg += neg
    ax.scatter(
        x,
        [p.measured_s * 1e3 for p in pts],
        color="k",
        marker="_",
        s=200,
        zorder=3,
        label="measured",
    )
    ax.set_xticks(
        x,
        [f"{_short(p.label)}\nB{p.batch} T{p.context}" for p in pts],
        fontsize=6,
    )
    ax.set_ylabel("ms per decode step")
    ax.set_title("Roofline + named causes (hatched: faster than its roofline)")
    ax.legend(fontsize=6, ncol=3)
    return _save(fig, path)


def gap_section(data: LabData, figure: FigurePath) -> Section | None:
    cmp = data.comparison
    if cmp is None:
        return None
    rows = tuple(
        (
            p.label,
            str(p.batch),
            str(p.context),
            _ms(p.measured_s - p.predicted_s),
            *[_ms(next((c.seconds for c in p.causes if c.name == n), None)) for n in CAUSES],
        )
        for p in cmp.points
    )
    evidence = []
    for p in cmp.points:
        if p.batch == max(q.batch for q in cmp.points) and p.context == max(
            q.context for q in cmp.points
        ):
            evidence += [(p.label, c.name, _ms(c.seconds), c.evidence) for c in p.causes]
    return Section(
        "lab-gap",
        "Lab: the gap, explained",
        paragraphs=(
            "Each point's gap (measured − predicted) split into named causes. The profiled steps "
            "give each operator group's time, scaled to the timed step (the profiler slows every "
            "operator); each group's excess is its time minus its roofline time. Time outside "
            "operators is framework overhead (Python, dispatch). Kernel (sys) time measured with "
            "getrusage during the timed steps is allocator page faults: glibc serves large "
            "blocks with fresh mmaps, which the kernel zeroes page by page; it is taken out of "
            "the cache-update group first. Negative values: faster than the roofline.",
        ),
        tables=(
            Table(("backend", "B", "T", "gap ms", *CAUSES), rows, "Gap by cause (ms per step)"),
            Table(
                ("backend", "cause", "ms", "evidence"),
                tuple(evidence),
                "Evidence at the largest point",
            ),
        ),
        figures=(_gap_plot(cmp, figure("lab_gap.png")),),
        data={"causes": list(CAUSES)},
    )


# --- memory -----------------------------------------------------------------------------------


def _memory_plot(data: LabData, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.3))
    recs = [r for r in data.of_kind("decode") if r.config["cache"] == "dynamic"]
    if recs:
        model = recs[0].config["model"]
        spec = model_spec(raw_config(model), model)
        dtype = DType.parse(recs[0].config["dtype"])
        ctx = np.linspace(0, max(r.result["memory"]["kv_tokens"] for r in recs) * 1.05, 50)
        for i, batch in enumerate(sorted({r.config["batch"] for r in recs})):
            mine = [r for r in recs if r.config["batch"] == batch]
            ax.plot(
                ctx,
                kv_bytes(spec, batch, ctx, dtype) / 2**20,
                color=f"C{i}",
                lw=1,
                label=f"formula B={batch}",
            )
            ax.scatter(
                [r.result["memory"]["kv_tokens"] for r in mine],
                [r.result["memory"]["kv_bytes"] / 2**20 for r in mine],
                color=f"C{i}",
                marker="o",
                label=f"cache tensors B={batch}",
            )
            peaks = [
                r for r in mine if r.result["memory"].get("rss_peak_above_start_bytes") is not None
            ]
            ax.scatter(
                [r.result["memory"]["kv_tokens"] for r in peaks],
                [
                    (
                        r.result["memory"]["kv_bytes"]
                        + r.result["memory"]["rss_peak_above_start_bytes"]
                    )
                    / 2**20
                    for r in peaks
                ],
                color=f"C{i}",
                marker="^",
                label=f"KV + peak RSS rise during decode B={batch}",
            )
    ax.set_xlabel("tokens in the cache")
    ax.set_ylabel("MiB")
    ax.set_title("KV cache: formula line vs measured (DynamicCache)")
    ax.legend(fontsize=6)
    return _save(fig, path)


def memory_section(data: LabData, figure: FigurePath) -> Section | None:
    recs = data.of_kind("decode")
    if not recs:
        return None
    rows = []
    for r in recs:
        m = r.result["memory"]
        spec = model_spec(raw_config(r.config["model"]), r.config["model"])
        formula = kv_bytes(spec, r.config["batch"], m["kv_tokens"], DType.parse(r.config["dtype"]))
        peak = m.get("cuda_peak_above_start_bytes")
        if peak is None:
            peak = m.get("rss_peak_above_start_bytes")
        rows.append(
            (
                f"{r.config['backend']}/{r.config['cache']}/{r.config['attn']}",
                str(r.config["batch"]),
                str(r.config["context"]),
                str(m["kv_tokens"]),
                fmt_bytes(m["kv_bytes"], binary=True),
                fmt_bytes(formula, binary=True),
                "exact" if m["kv_bytes"] == formula else f"{m['kv_bytes'] / formula:.3f}×",
                fmt_bytes(m["param_bytes"], binary=True),
                "—" if peak is None else fmt_bytes(peak, binary=True),
                "—"
                if m.get("malloc_max_above_start_bytes") is None
                else fmt_bytes(m["malloc_max_above_start_bytes"], binary=True),
            )
        )
    return Section(
        "lab-memory",
        "Lab: memory during decode",
        paragraphs=(
            "KV bytes read from the cache object (Σ numel × element size of cache.layers[i].keys "
            "and .values) against 2 × layers × batch × tokens × kv_heads × head_dim × bytes. A "
            "StaticCache allocates its full length up front, so it holds more than the formula at "
            "the current length. Decode peak rise: the resident high-water mark (VmHWM, reset "
            "through /proc/self/clear_refs) above the resident size at the start of the memory "
            "phase, or CUDA max_memory_allocated above the allocated bytes then: the cache "
            "already exists, so it is the decode step's temporaries and near 0 — how the peak "
            "grows with the context is measured by the KV lab (its table 'KV growth seen in the "
            "resident peak'); malloc: glibc mallinfo2 in-use bytes sampled after each step.",
        ),
        tables=(
            Table(
                (
                    "backend",
                    "B",
                    "T",
                    "tokens",
                    "KV (cache)",
                    "formula",
                    "match",
                    "parameters",
                    "decode peak rise",
                    "malloc rise",
                ),
                tuple(rows),
            ),
        ),
        figures=(_memory_plot(data, figure("lab_memory.png")),),
    )


# --- KV variants and profile ------------------------------------------------------------------


def kv_section(data: LabData, figure: FigurePath) -> Section | None:
    rec = data.latest("kv")
    if rec is None:
        return None
    checks = rec.result["checks"]
    rows = tuple(
        (
            c["name"],
            c["attention"],
            str(c["num_kv_heads"]),
            fmt_bytes(c["formula_bytes"], binary=True),
            fmt_bytes(c["tensor_bytes"], binary=True),
            "yes" if c["exact"] else "no",
            _pct(c["malloc_error"]),
            _pct(c["rss_error"]),
            _ms(c["decode_median_s"]),
        )
        for c in checks
    )
    fits = tuple(
        (
            f["model"],
            f"{f['accelerator']} {f['level']}",
            fmt_bytes(f["capacity_bytes"], binary=True),
            f["dtype"],
            f"{f['tokens_per_head']:,}",
            f"{f['tokens_per_layer']:,}",
            f"{f['tokens_all_layers']:,}",
        )
        for f in rec.result["scratchpad"]
    )
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    names = [c["name"] for c in checks]
    ax.bar(
        np.arange(len(checks)) - 0.2,
        [c["formula_bytes"] / 2**20 for c in checks],
        0.4,
        label="KV MiB",
    )
    ax2 = ax.twinx()
    ax2.bar(
        np.arange(len(checks)) + 0.2,
        [c["decode_median_s"] * 1e3 for c in checks],
        0.4,
        color="C1",
        label="decode ms",
    )
    ax.set_xticks(np.arange(len(checks)), names, fontsize=7)
    ax.set_ylabel("KV cache (MiB)")
    ax2.set_ylabel("decode step (ms)")
    ax.set_title(f"MHA vs GQA vs MQA at B={rec.config['batch']}, T={rec.config['context']}")
    fig.legend(fontsize=7, loc="upper right")
    return Section(
        "lab-kv",
        "Lab: the KV formula, MHA vs GQA vs MQA, tokens per scratchpad",
        paragraphs=(
            "KV bytes = 2 × layers × batch × context × kv_heads × head_dim × bytes (Pope et al. "
            "2023). Checked exactly against the cache tensors, and against the memory given back "
            "when the cache is freed (glibc mallinfo2 and RSS, with the mmap threshold at 64 KiB "
            "so freed blocks return to the OS; each block costs up to a page more).",
            "Independently of the cache tensors, the resident peak is read while a fresh "
            "DynamicCache is filled in fixed chunks: its slope against the tokens held is the "
            "formula's bytes per token times 1 + max(1/(2·layers), copies/layers) — the old copy "
            "of one layer's K or V alive during torch.cat, or, with grouped-query attention, "
            "repeat_kv's copies of a layer's K and V for every query head (none for MHA; a view "
            "for MQA).",
        ),
        tables=(
            Table(
                (
                    "model",
                    "attention",
                    "KV heads",
                    "formula",
                    "cache tensors",
                    "exact",
                    "freed malloc err",
                    "freed RSS err",
                    "decode ms",
                ),
                rows,
                f"After prefill of batch {rec.config['batch']} × {rec.config['context']} tokens (fp32)",
            ),
            Table(
                (
                    "model",
                    "scratchpad",
                    "capacity",
                    "dtype",
                    "tokens per layer·head",
                    "per layer",
                    "whole model",
                ),
                fits,
                "Tokens of KV one scratchpad holds",
            ),
            *((growth,) if (growth := growth_table(checks)) is not None else ()),
        ),
        figures=(_save(fig, figure("lab_kv_variants.png")),),
    )


def profile_section(data: LabData, figure: FigurePath) -> Section | None:
    latest: dict[tuple[str, int, int], Record] = {}
    for rec in data.of_kind("profile"):  # the newest profile of each point
        cfg = rec.config
        latest[(cfg["cache"], cfg["batch"], cfg["context"])] = rec
    recs = list(latest.values())
    if not recs:
        return None
    tables = []
    paragraphs = [
        "torch.profiler with shapes and memory over a few decode steps. Allocated bytes are what "
        "the allocator handed out; bytes moved are what the step reads and writes (analytic). "
        "They differ by orders of magnitude either way: a static cache moves the weights and "
        "allocates almost nothing; a DynamicCache re-allocates its whole cache every step."
    ]
    for rec in recs:
        r = rec.result
        c, s, cfg = r["composition"], r["summary"], r["config"]
        where = f"{cfg['cache']} cache, B={cfg['batch']}, T={cfg['context']}"
        tables.append(
            Table(
                ("op", "self ms/step", "share", "self alloc/step"),
                tuple(
                    (
                        o["name"],
                        f"{o['self_s_per_step'] * 1e3:.2f}",
                        f"{100 * o['share']:.1f}%",
                        fmt_bytes(o["self_bytes_per_step"], binary=True),
                    )
                    for o in s["top_time"][:8]
                ),
                f"Top operators by self time ({where})",
            )
        )
        paragraphs.append(
            f"{where}: peak during decode {fmt_bytes(c['peak'], binary=True)} = parameters "
            f"{fmt_bytes(c['parameters'], binary=True)} + KV {fmt_bytes(c['kv_at_start'], binary=True)} "
            f"+ temporaries {fmt_bytes(c['temporaries'], binary=True)}; allocated "
            f"{fmt_bytes(s['allocated_bytes_per_step'], binary=True)} per step against "
            f"{fmt_bytes(r['analytic_bytes_per_step'], binary=True)} moved (ratio {r['allocated_over_moved']:.2f})."
        )
    return Section("lab-profile", "Lab: the profiler's view", tuple(paragraphs), tuple(tables))


LAB_SECTIONS = (
    machine_section,
    compare_section,
    gap_section,
    memory_section,
    kv_section,
    profile_section,
)


def lab_sections(data: LabData, figure: FigurePath) -> list[Section]:
    """Every lab section the database has data for."""
    out = []
    for build in LAB_SECTIONS:
        section = build(data, figure)
        if section is not None:
            out.append(section)
    return out


@dataclass(frozen=True, slots=True)
class LabFiles:
    html: Path
    markdown: Path
    json: Path
    sections: tuple[str, ...]


def build_lab_report(
    db: str | Path, out_dir: str | Path, hw: str | None = None, timer: str = "wall"
) -> LabFiles:
    """Write lab.html (self-contained), lab.md (figures beside it) and lab.json."""
    out = Path(out_dir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    data = load_lab(db, hw, timer)
    sections = lab_sections(data, lambda name: out / "figures" / name)
    title = "ridgeline lab: measured decode against the analytic model"
    files = LabFiles(
        out / "lab.html", out / "lab.md", out / "lab.json", tuple(s.key for s in sections)
    )
    files.html.write_text(to_html(title, sections))
    files.markdown.write_text(to_markdown(title, sections, out))
    files.json.write_text(to_json(title, sections))
    return files


_NEEDS = {
    machine_section: "calibrate",
    compare_section: "decode",
    gap_section: "decode",
    memory_section: "decode",
    kv_section: "kv",
    profile_section: "profile",
}


def lab_builders(db: str | Path, hw: str | None = None) -> list[Callable[[Any], Section]]:
    """Section builders for ``build_report`` (``ridgeline report --lab DB``): one per lab section
    the database has data for; each takes the report's context and draws into its figures."""
    data = load_lab(db, hw)
    kinds = {r.kind for r in data.records}

    def builder(build: Callable[[LabData, FigurePath], Section | None]) -> Callable[[Any], Section]:
        def run(ctx: Any) -> Section:
            section = build(data, ctx.figure)
            assert section is not None, "availability checked when the builders were made"
            return section

        return run

    return [builder(b) for b in LAB_SECTIONS if _NEEDS[b] in kinds]
