"""How ``ridgeline lab`` shows its results: Rich tables of a calibration, a profile, the KV
checks and a predicted-vs-measured comparison. Rendering only; the numbers come from
``ridgeline.lab``."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ridgeline.cli.common import console, print_table
from ridgeline.specs.units import fmt_bytes, fmt_rate


def _mib(value: float | None) -> str:
    return "—" if value is None else fmt_bytes(value, binary=True)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.2f}%"


def print_calibration(cal: Any, written: Any) -> None:
    """Bandwidth by kernel and size, matmul peaks, decode-GEMM rates, and the specs written."""
    bw = Table("kernel", "size", "threads", "best", "median", title=f"Bandwidth: {cal.device_name}")
    for p in cal.bandwidth:
        bw.add_row(
            p.kernel,
            _mib(p.size_bytes),
            str(p.threads),
            fmt_rate(p.best_bytes_per_s, "B/s"),
            fmt_rate(p.median_bytes_per_s, "B/s"),
        )
    mm = Table("dtype", "n", "threads", "best", title="Matmul peak")
    for m in cal.matmul:
        mm.add_row(m.dtype, str(m.n), str(m.threads), fmt_rate(m.best_flops_per_s, "FLOP/s"))
    gemm = Table("batch", "shape", "threads", "time", "weights streamed at", title="Decode GEMM")
    for g in cal.gemm:
        gemm.add_row(
            str(g.batch),
            f"[{g.batch},{g.n_in}]x[{g.n_in},{g.n_out}]",
            str(g.threads),
            f"{g.best_s * 1e3:.2f} ms",
            fmt_rate(g.weight_bytes_per_s, "B/s"),
        )
    for table in (bw, mm, gemm):
        console.print(table)
    _print_peaks(cal)
    for w in written:
        bandwidth = fmt_rate(w.accelerator.device_bandwidth_bytes_per_s, "B/s")
        console.print(f"wrote {w.path} (--hw {w.name}: {w.threads} thread(s), {bandwidth})")


def _print_peaks(cal: Any) -> None:
    """Per thread count: physical peak, measured clock and every kernel's rate (CPU, fp32)."""
    from ridgeline.lab.compute_peak import peak_rows

    for n in sorted(set(cal.spec.threads)) if cal.spec.device == "cpu" else ():
        table = Table("fp32 compute", "FLOP/s", "how", title=f"Compute peak, {n} thread(s)")
        for what, rate, how in peak_rows(cal.peak_report(n)):
            shown = (
                fmt_rate(rate, "FLOP/s") if rate is not None else ("" if what == "note" else "?")
            )
            table.add_row(what, shown, how)
        console.print(table)


def print_profile(rep: Any) -> None:
    """Top operators by time and by memory, the peak's parts, allocations against traffic."""
    s = rep.summary
    for title, rows in (("by self time", s.top_time), ("by memory allocated", s.top_memory)):
        table = Table(
            "op",
            "calls/step",
            "self ms/step",
            "share",
            "self alloc/step",
            title=f"Top operators {title}",
        )
        for r in rows:
            table.add_row(
                r.name,
                f"{r.calls_per_step:.0f}",
                f"{r.self_s_per_step * 1e3:.2f}",
                f"{100 * r.share:.1f}%",
                _mib(r.self_bytes_per_step),
            )
        console.print(table)
    c = rep.composition
    console.print(
        f"peak during decode {_mib(c.peak)} = parameters {_mib(c.parameters)} + KV "
        f"{_mib(c.kv_at_start)} + temporaries {_mib(c.temporaries)} (KV after: "
        f"{_mib(c.kv_at_end)})"
    )
    console.print(
        f"allocated {_mib(s.allocated_bytes_per_step)}/step vs "
        f"{_mib(rep.analytic_bytes_per_step)} moved/step (analytic): ratio "
        f"{rep.allocated_over_moved:.2f} — allocations are not traffic; trace: {rep.trace_path}"
    )


def print_kv(rep: Any, checks_title: str, scratchpad_title: str) -> None:
    """The KV formula against the cache tensors and the freed memory, and scratchpad fits."""
    table = Table(
        "model",
        "attn",
        "kv heads",
        "formula",
        "cache tensors",
        "exact",
        "freed (malloc)",
        "err",
        "freed (RSS)",
        "err",
        "decode",
        title=checks_title,
    )
    for c in rep.checks:
        table.add_row(
            c.name,
            c.attention,
            str(c.num_kv_heads),
            _mib(c.formula_bytes),
            _mib(c.tensor_bytes),
            "yes" if c.exact else "NO",
            _mib(c.freed_malloc_bytes),
            _pct(c.malloc_error),
            _mib(c.freed_rss_bytes),
            _pct(c.rss_error),
            f"{c.decode_median_s * 1e3:.1f} ms",
        )
    console.print(table)
    console.print(_scratchpad_table(rep.scratchpad, scratchpad_title))
    _print_growth(rep.to_dict()["checks"])


def _scratchpad_table(fits: Any, scratchpad_title: str) -> Table:
    """How many tokens of KV each model's layers fit in a scratchpad."""
    sp = Table(
        "model",
        "level",
        "capacity",
        "B/token/head",
        "tokens per head",
        "per layer",
        "all layers",
        title=f"Tokens of {scratchpad_title} scratchpad",
    )
    for f in fits:
        sp.add_row(
            f.model,
            f.level,
            _mib(f.capacity_bytes),
            f"{f.bytes_per_token_per_head:.0f}",
            f"{f.tokens_per_head:,}",
            f"{f.tokens_per_layer:,}",
            f"{f.tokens_all_layers:,}",
        )
    return sp


def _print_growth(checks: list[dict[str, Any]]) -> None:
    """KV growth seen in the resident peak, when the checks measured it."""
    from ridgeline.report.lab_growth import growth_table

    t = growth_table(checks)
    if t is not None:
        print_table(t.headers, t.rows, t.caption)


def _fit_lines(cmp: Any) -> list[str]:
    """The bounds the fits share (the roofline's peak and bandwidth), then one line per fit."""
    if not cmp.fits:
        return []
    b = cmp.fits[0].bounds
    head = (
        f"roofline and bounds of the fit: fp32 peak {fmt_rate(b.peak_flops_per_s, 'FLOP/s')}, "
        f"read bandwidth {fmt_rate(b.read_bytes_per_s, 'B/s')} ({cmp.accelerator})"
    )
    return [head, *(_fit_line(f) for f in cmp.fits)]


def _fit_line(f: Any) -> str:
    """One backend's fitted model; a rate at its probe's bound says "(bound)"."""

    def rate(value: float, unit: str, term: str) -> str:
        return fmt_rate(value, unit) + ("" if term in f.fitted else " (bound)")

    loo = f.loo_median_abs_error
    loo_text = "" if loo is None else f" (leave-one-out {100 * loo:.1f}%)"
    faults = f" + faults x {f.fault_s * 1e6:.2f} us" if f.fault_s else ""
    return (
        f"{f.label}: t = {f.overhead_s * 1e3:.1f} ms + t_gemm(B) ({f.gemm_source})"
        f" + KV/{rate(f.kv_bytes_per_s, 'B/s', 'BW_kv')}"
        f" + other FLOPs/{rate(f.flops_per_s, 'FLOP/s', 'F')}{faults};"
        f" median |error| {100 * f.median_abs_error:.1f}%{loo_text}"
    )


def print_comparison(cmp: Any, timer: str) -> None:
    """Every point measured against predicted and fitted, the fits, and the gap by cause."""
    table = Table(
        "backend",
        "B",
        "T",
        "measured",
        "p10–p90",
        "predicted",
        "ratio",
        "BW frac",
        "fitted",
        "fit err",
        title=f"Decode step: measured ({timer} time) vs {cmp.label} on {cmp.accelerator}",
    )
    for p in cmp.points:
        table.add_row(
            p.label,
            str(p.batch),
            str(p.context),
            f"{p.measured_s * 1e3:.1f} ms",
            f"{p.p10_s * 1e3:.1f}–{p.p90_s * 1e3:.1f}",
            f"{p.predicted_s * 1e3:.1f} ms",
            f"{p.ratio:.2f}",
            f"{p.bandwidth_fraction:.2f}",
            f"{(p.fitted_s or 0) * 1e3:.1f} ms",
            _pct(p.fit_error),
        )
    console.print(table)
    for line in _fit_lines(cmp):
        console.print(line)
    gap = Table(
        "backend",
        "B",
        "T",
        "gap",
        *[c.name for c in cmp.points[0].causes],
        title="Gap (measured − predicted), ms per step",
    )
    for p in cmp.points:
        gap.add_row(
            p.label,
            str(p.batch),
            str(p.context),
            f"{(p.measured_s - p.predicted_s) * 1e3:.1f}",
            *[f"{c.seconds * 1e3:.1f}" for c in p.causes],
        )
    console.print(gap)
