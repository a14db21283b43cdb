"""The lab's part of the report: the calibrated machine, measured vs predicted decode, the fitted
model, the gap explained, memory against the KV formula, MHA/GQA/MQA, the profiler's view.

Reads a lab results database with the standard library and ``ridgeline.lab``'s torch-free
modules (store, gap, machine); never imports torch. The figures come from ``lab_plots``. Used by
``ridgeline lab report`` (a standalone lab.html / lab.md / lab.json) and ``ridgeline report
--lab DB`` (sections appended).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from ridgeline.analytic import kv_bytes
from ridgeline.lab.compute_peak import peak_rows
from ridgeline.lab.configs import model_spec, raw_config
from ridgeline.lab.gap import (
    CAUSES,
    ComparedPoint,
    LabComparison,
    compare_records,
    latest_calibration,
)
from ridgeline.lab.machine import Calibration
from ridgeline.lab.store import Record, open_existing
from ridgeline.report import lab_plots
from ridgeline.report.document import ReportFiles, Section, Table, write_report
from ridgeline.report.figures import save_figure
from ridgeline.report.lab_growth import growth_table
from ridgeline.specs import DType
from ridgeline.specs.units import fmt_bytes, fmt_rate

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


def _ms(s: float | None) -> str:
    return "—" if s is None else f"{s * 1e3:.1f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:+.1f}%"


def _mib(n: float) -> str:
    return fmt_bytes(n, binary=True)


def _saved(figure: FigurePath, name: str, fig: Figure) -> Path:
    return save_figure(fig, figure(name))


# --- machine ---------------------------------------------------------------------------------


def _bandwidth_rows(cal: Calibration, sizes: list[int]) -> tuple[tuple[str, ...], ...]:
    rows = []
    for kernel in ("read", "copy", "triad"):
        for threads in sorted({p.threads for p in cal.bandwidth}):
            by_size = {
                p.size_bytes: p
                for p in cal.bandwidth
                if p.kernel == kernel and p.threads == threads
            }
            cells = (
                f"{by_size[s].best_bytes_per_s / 1e9:.1f}" if s in by_size else "—" for s in sizes
            )
            rows.append((kernel, str(threads), *cells))
    return tuple(rows)


def _machine_tables(cal: Calibration) -> tuple[Table, ...]:
    sizes = sorted({p.size_bytes for p in cal.bandwidth})
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
    return (
        Table(
            ("kernel", "threads", *[_mib(s) for s in sizes]),
            _bandwidth_rows(cal, sizes),
            "Bandwidth (GB/s) by array size",
        ),
        Table(("dtype", "n", "threads", "best"), mm, "Matmul peak"),
        *_peak_tables(cal),
        Table(
            ("batch", "shape", "threads", "ms", "weights streamed at"),
            gemm,
            "Decode-shaped GEMM (fp32): the weight term of the fitted model",
        ),
    )


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


def machine_section(data: LabData, figure: FigurePath) -> Section | None:
    """Bandwidth by array size, matmul peaks and decode-shaped GEMM rates of this machine."""
    cal = data.calibration
    if cal is None:
        return None
    text = (
        f"{cal.device_name}; last-level cache {_mib(cal.llc_bytes)} as the OS reports it; "
        f"{_mib(cal.memory_bytes)} of memory. Best of {cal.spec.repeats} timings per figure "
        "(STREAM's convention); GB/s = 1e9 B/s. One-thread figures time min(wall, process CPU "
        "time); figures at more threads are wall time, which a busy machine inflates."
    )
    steady = cal.steadiness
    flag = () if steady is None or steady.steady else (f"Flagged: {steady.warning()}",)
    return Section(
        "lab-machine",
        "Lab: this machine, calibrated",
        paragraphs=(text, *flag),
        tables=_machine_tables(cal),
        figures=(_saved(figure, "lab_bandwidth.png", lab_plots.bandwidth_plot(cal)),),
        data={"calibration": cal.to_dict()},
    )


# --- measured vs predicted --------------------------------------------------------------------

_POINT_HEADERS = (
    "backend", "B", "T", "measured ms", "p10–p90", "CPU ms", "predicted ms", "ratio", "eff. GB/s",
    "of calibrated", "fitted ms", "fit error", "prefill s", "load 1m",
)  # fmt: skip
_FIT_HEADERS = (
    "backend", "points", "t_fixed ms", "t_gemm(B) from", "KV at", "other FLOPs at",
    "per page fault", "median |error|", "leave-one-out",
)  # fmt: skip
_COMPARE_TEXT = (
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
    "threshold pinned high (+malloc-env) there are none."
)


def _point_row(p: ComparedPoint) -> tuple[str, ...]:
    return (
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


def _bounded(rate: str, fitted: bool) -> str:
    return rate if fitted else f"{rate} (bound)"


def _fit_rows(cmp: LabComparison) -> tuple[tuple[str, ...], ...]:
    return tuple(
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


def compare_section(data: LabData, figure: FigurePath) -> Section | None:
    """Every measured point against its roofline prediction, and the fitted model per backend."""
    cmp = data.comparison
    if cmp is None:
        return None
    method = (
        "Prediction: the analytic roofline (sum over operators of max(FLOPs ÷ peak, bytes ÷ "
        f"bandwidth)) on {cmp.accelerator}, at the mean KV length of the timed steps. Measured "
        f"({cmp.timer} time): median over the timed steps after warm-up (p10–p90 beside it, CPU "
        "time per step from time.process_time, which exposes contention when it falls below "
        "wall time). Effective bandwidth = analytic bytes of the step ÷ measured time."
    )
    return Section(
        "lab-compare",
        "Lab: decode step, measured against predicted",
        paragraphs=(method, _COMPARE_TEXT),
        tables=(
            Table(_POINT_HEADERS, tuple(_point_row(p) for p in cmp.points), "Every point"),
            Table(_FIT_HEADERS, _fit_rows(cmp), "Fitted model"),
        ),
        figures=(
            _saved(figure, "lab_decode_time.png", lab_plots.time_plot(cmp)),
            _saved(figure, "lab_effective_bandwidth.png", lab_plots.bandwidth_fraction_plot(cmp)),
        ),
        data={"comparison": cmp.to_dict()},
    )


# --- the gap ----------------------------------------------------------------------------------

_GAP_TEXT = (
    "Each point's gap (measured − predicted) split into named causes. The profiled steps give "
    "each operator group's time, scaled to the timed step (the profiler slows every operator); "
    "each group's excess is its time minus its roofline time. Time outside operators is "
    "framework overhead (Python, dispatch). Kernel (sys) time measured with getrusage during the "
    "timed steps is allocator page faults: glibc serves large blocks with fresh mmaps, which the "
    "kernel zeroes page by page; it is taken out of the cache-update group first. Negative "
    "values: faster than the roofline."
)


def gap_section(data: LabData, figure: FigurePath) -> Section | None:
    """Each point's gap split into named causes, with the evidence at the largest point."""
    cmp = data.comparison
    if cmp is None:
        return None
    rows = tuple(
        (
            p.label,
            str(p.batch),
            str(p.context),
            _ms(p.measured_s - p.predicted_s),
            *["—" if (v := lab_plots.cause_ms(p, n)) is None else f"{v:.1f}" for n in CAUSES],
        )
        for p in cmp.points
    )
    top_batch, top_context = max(q.batch for q in cmp.points), max(q.context for q in cmp.points)
    evidence = tuple(
        (p.label, c.name, _ms(c.seconds), c.evidence)
        for p in cmp.points
        if p.batch == top_batch and p.context == top_context
        for c in p.causes
    )
    return Section(
        "lab-gap",
        "Lab: the gap, explained",
        paragraphs=(_GAP_TEXT,),
        tables=(
            Table(("backend", "B", "T", "gap ms", *CAUSES), rows, "Gap by cause (ms per step)"),
            Table(
                ("backend", "cause", "ms", "evidence"), evidence, "Evidence at the largest point"
            ),
        ),
        figures=(_saved(figure, "lab_gap.png", lab_plots.gap_plot(cmp)),),
        data={"causes": list(CAUSES)},
    )


# --- memory -----------------------------------------------------------------------------------

_MEMORY_HEADERS = (
    "backend", "B", "T", "tokens", "KV (cache)", "formula", "match", "parameters",
    "decode peak rise",
    "malloc rise",
)  # fmt: skip
_MEMORY_TEXT = (
    "KV bytes read from the cache object (Σ numel × element size of cache.layers[i].keys and "
    ".values) against 2 × layers × batch × tokens × kv_heads × head_dim × bytes. A StaticCache "
    "allocates its full length up front, so it holds more than the formula at the current "
    "length. Decode peak rise: the resident high-water mark (VmHWM, reset through "
    "/proc/self/clear_refs) above the resident size at the start of the memory phase, or CUDA "
    "max_memory_allocated above the allocated bytes then: the cache already exists, so it is the "
    "decode step's temporaries and near 0 — how the peak grows with the context is measured by "
    "the KV lab (its table 'KV growth seen in the resident peak'); malloc: glibc mallinfo2 "
    "in-use bytes sampled after each step."
)


def _memory_row(r: Record) -> tuple[str, ...]:
    m, cfg = r.result["memory"], r.config
    spec = model_spec(raw_config(cfg["model"]), cfg["model"])
    formula = kv_bytes(spec, cfg["batch"], m["kv_tokens"], DType.parse(cfg["dtype"]))
    peak = m.get("cuda_peak_above_start_bytes")
    if peak is None:
        peak = m.get("rss_peak_above_start_bytes")
    malloc = m.get("malloc_max_above_start_bytes")
    return (
        f"{cfg['backend']}/{cfg['cache']}/{cfg['attn']}",
        str(cfg["batch"]),
        str(cfg["context"]),
        str(m["kv_tokens"]),
        _mib(m["kv_bytes"]),
        _mib(formula),
        "exact" if m["kv_bytes"] == formula else f"{m['kv_bytes'] / formula:.3f}×",
        _mib(m["param_bytes"]),
        "—" if peak is None else _mib(peak),
        "—" if malloc is None else _mib(malloc),
    )


def memory_section(data: LabData, figure: FigurePath) -> Section | None:
    """KV bytes of the cache tensors against the formula, and the peak memory rise, per point."""
    recs = data.of_kind("decode")
    if not recs:
        return None
    return Section(
        "lab-memory",
        "Lab: memory during decode",
        paragraphs=(_MEMORY_TEXT,),
        tables=(Table(_MEMORY_HEADERS, tuple(_memory_row(r) for r in recs)),),
        figures=(_saved(figure, "lab_memory.png", lab_plots.memory_plot(recs)),),
    )


# --- KV variants and profile ------------------------------------------------------------------

_KV_HEADERS = (
    "model", "attention", "KV heads", "formula", "cache tensors", "exact", "freed malloc err",
    "freed RSS err", "decode ms",
)  # fmt: skip
_SCRATCHPAD_HEADERS = (
    "model", "scratchpad", "capacity", "dtype", "tokens per layer·head", "per layer", "whole model",
)  # fmt: skip
_KV_TEXT = (
    "KV bytes = 2 × layers × batch × context × kv_heads × head_dim × bytes (Pope et al. 2023). "
    "Checked exactly against the cache tensors, and against the memory given back when the cache "
    "is freed (glibc mallinfo2 and RSS, with the mmap threshold at 64 KiB so freed blocks return "
    "to the OS; each block costs up to a page more).",
    "Independently of the cache tensors, the resident peak is read while a fresh DynamicCache is "
    "filled in fixed chunks: its slope against the tokens held is the formula's bytes per token "
    "times 1 + max(1/(2·layers), copies/layers) — the old copy of one layer's K or V alive during "
    "torch.cat, or, with grouped-query attention, repeat_kv's copies of a layer's K and V for "
    "every query head (none for MHA; a view for MQA).",
)


def _kv_rows(checks: list[dict[str, Any]]) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (
            c["name"],
            c["attention"],
            str(c["num_kv_heads"]),
            _mib(c["formula_bytes"]),
            _mib(c["tensor_bytes"]),
            "yes" if c["exact"] else "no",
            _pct(c["malloc_error"]),
            _pct(c["rss_error"]),
            _ms(c["decode_median_s"]),
        )
        for c in checks
    )


def _scratchpad_rows(fits: list[dict[str, Any]]) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (
            f["model"],
            f"{f['accelerator']} {f['level']}",
            _mib(f["capacity_bytes"]),
            f["dtype"],
            f"{f['tokens_per_head']:,}",
            f"{f['tokens_per_layer']:,}",
            f"{f['tokens_all_layers']:,}",
        )
        for f in fits
    )


def kv_section(data: LabData, figure: FigurePath) -> Section | None:
    """The KV formula against the cache tensors for MHA, GQA and MQA, and tokens per scratchpad."""
    rec = data.latest("kv")
    if rec is None:
        return None
    checks, batch, context = rec.result["checks"], rec.config["batch"], rec.config["context"]
    plot = lab_plots.kv_variants_plot(checks, batch, context)
    return Section(
        "lab-kv",
        "Lab: the KV formula, MHA vs GQA vs MQA, tokens per scratchpad",
        paragraphs=_KV_TEXT,
        tables=(
            Table(
                _KV_HEADERS,
                _kv_rows(checks),
                f"After prefill of batch {batch} × {context} tokens (fp32)",
            ),
            Table(
                _SCRATCHPAD_HEADERS,
                _scratchpad_rows(rec.result["scratchpad"]),
                "Tokens of KV one scratchpad holds",
            ),
            *((growth,) if (growth := growth_table(checks)) is not None else ()),
        ),
        figures=(_saved(figure, "lab_kv_variants.png", plot),),
    )


_PROFILE_TEXT = (
    "torch.profiler with shapes and memory over a few decode steps. Allocated bytes are what the "
    "allocator handed out; bytes moved are what the step reads and writes (analytic). They "
    "differ by orders of magnitude either way: a static cache moves the weights and allocates "
    "almost nothing; a DynamicCache re-allocates its whole cache every step."
)


def _profile_parts(r: dict[str, Any]) -> tuple[Table, str]:
    c, s, cfg = r["composition"], r["summary"], r["config"]
    where = f"{cfg['cache']} cache, B={cfg['batch']}, T={cfg['context']}"
    top = tuple(
        (
            o["name"],
            f"{o['self_s_per_step'] * 1e3:.2f}",
            f"{100 * o['share']:.1f}%",
            _mib(o["self_bytes_per_step"]),
        )
        for o in s["top_time"][:8]
    )
    table = Table(
        ("op", "self ms/step", "share", "self alloc/step"),
        top,
        f"Top operators by self time ({where})",
    )
    text = (
        f"{where}: peak during decode {_mib(c['peak'])} = parameters {_mib(c['parameters'])} + "
        f"KV {_mib(c['kv_at_start'])} + temporaries {_mib(c['temporaries'])}; allocated "
        f"{_mib(s['allocated_bytes_per_step'])} per step against "
        f"{_mib(r['analytic_bytes_per_step'])} moved (ratio {r['allocated_over_moved']:.2f})."
    )
    return table, text


def profile_section(data: LabData, figure: FigurePath) -> Section | None:
    """The top operators and the peak memory's parts of the newest profile of each point."""
    latest: dict[tuple[str, int, int], Record] = {}
    for rec in data.of_kind("profile"):  # the newest profile of each point
        cfg = rec.config
        latest[(cfg["cache"], cfg["batch"], cfg["context"])] = rec
    if not latest:
        return None
    parts = [_profile_parts(rec.result) for rec in latest.values()]
    return Section(
        "lab-profile",
        "Lab: the profiler's view",
        (_PROFILE_TEXT, *(text for _, text in parts)),
        tuple(table for table, _ in parts),
    )


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


def build_lab_report(
    db: str | Path, out_dir: str | Path, hw: str | None = None, timer: str = "wall"
) -> ReportFiles:
    """Write lab.html (self-contained), lab.md (figures beside it) and lab.json."""
    out = Path(out_dir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    data = load_lab(db, hw, timer)
    sections = lab_sections(data, lambda name: out / "figures" / name)
    title = "ridgeline lab: measured decode against the analytic model"
    return write_report(out, "lab", title, sections)


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

        run.__name__ = (
            f"lab_{build.__name__}"  # the section's name, as the report's progress shows it
        )
        return run

    return [builder(b) for b in LAB_SECTIONS if _NEEDS[b] in kinds]
