"""How ``ridgeline lab`` shows its results: Rich tables of a calibration, a profile, the KV
checks and a predicted-vs-measured comparison. Rendering only; the numbers come from
``ridgeline.lab``."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ridgeline.cli.common import console
from ridgeline.specs.units import fmt_bytes, fmt_rate


def _mib(value: float | None) -> str:
    return "—" if value is None else fmt_bytes(value, binary=True)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.2f}%"


def print_calibration(cal: Any, written: Any) -> None:
    """Bandwidth by kernel and size, matmul peaks, decode-GEMM rates, and the specs written."""
    bw = Table("kernel", "size", "threads", "best", "median", title=f"Bandwidth: {cal.device_name}")
    for p in cal.bandwidth:
        bw.add_row(p.kernel, _mib(p.size_bytes), str(p.threads),
                   fmt_rate(p.best_bytes_per_s, "B/s"), fmt_rate(p.median_bytes_per_s, "B/s"))  # fmt: skip
    mm = Table("dtype", "n", "threads", "best", title="Matmul peak")
    for m in cal.matmul:
        mm.add_row(m.dtype, str(m.n), str(m.threads), fmt_rate(m.best_flops_per_s, "FLOP/s"))
    gemm = Table("batch", "shape", "threads", "time", "weights streamed at", title="Decode GEMM")
    for g in cal.gemm:
        gemm.add_row(str(g.batch), f"[{g.batch},{g.n_in}]x[{g.n_in},{g.n_out}]", str(g.threads),
                     f"{g.best_s * 1e3:.2f} ms", fmt_rate(g.weight_bytes_per_s, "B/s"))  # fmt: skip
    for table in (bw, mm, gemm):
        console.print(table)
    for w in written:
        bandwidth = fmt_rate(w.accelerator.device_bandwidth_bytes_per_s, "B/s")
        console.print(f"wrote {w.path} (--hw {w.name}: {w.threads} thread(s), {bandwidth})")


def print_profile(rep: Any) -> None:
    """Top operators by time and by memory, the peak's parts, allocations against traffic."""
    s = rep.summary
    for title, rows in (("by self time", s.top_time), ("by memory allocated", s.top_memory)):
        table = Table("op", "calls/step", "self ms/step", "share", "self alloc/step",
                      title=f"Top operators {title}")  # fmt: skip
        for r in rows:
            table.add_row(r.name, f"{r.calls_per_step:.0f}", f"{r.self_s_per_step * 1e3:.2f}",
                          f"{100 * r.share:.1f}%", _mib(r.self_bytes_per_step))  # fmt: skip
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
    table = Table("model", "attn", "kv heads", "formula", "cache tensors", "exact",
                  "freed (malloc)", "err", "freed (RSS)", "err", "decode", title=checks_title)  # fmt: skip
    for c in rep.checks:
        table.add_row(
            c.name, c.attention, str(c.num_kv_heads), _mib(c.formula_bytes), _mib(c.tensor_bytes),
            "yes" if c.exact else "NO", _mib(c.freed_malloc_bytes), _pct(c.malloc_error),
            _mib(c.freed_rss_bytes), _pct(c.rss_error), f"{c.decode_median_s * 1e3:.1f} ms",
        )  # fmt: skip
    console.print(table)
    sp = Table("model", "level", "capacity", "B/token/head", "tokens per head", "per layer",
               "all layers", title=f"Tokens of {scratchpad_title} scratchpad")  # fmt: skip
    for f in rep.scratchpad:
        sp.add_row(f.model, f.level, _mib(f.capacity_bytes), f"{f.bytes_per_token_per_head:.0f}",
                   f"{f.tokens_per_head:,}", f"{f.tokens_per_layer:,}", f"{f.tokens_all_layers:,}")  # fmt: skip
    console.print(sp)


def _fit_line(f: Any) -> str:
    weights = (
        f" + {f.weight_scale:.2f} x W/BW_gemm(B)"
        if f.weight_scale is not None
        else " (weights included)"
    )
    kv = fmt_rate(f.kv_bandwidth, "B/s") if f.kv_bandwidth else "inf"
    flops = fmt_rate(f.flops_per_s, "FLOP/s") if f.flops_per_s else "inf"
    loo = f.loo_median_abs_error
    loo_text = "" if loo is None else f" (leave-one-out {100 * loo:.1f}%)"
    faults = f" + faults x {f.fault_s * 1e6:.2f} us" if f.fault_s else ""
    return (
        f"{f.label}: t = {f.overhead_s * 1e3:.1f} ms{weights} + KV/{kv} + FLOPs/{flops}{faults};"
        f" median |error| {100 * f.median_abs_error:.1f}%{loo_text}"
    )


def print_comparison(cmp: Any, timer: str) -> None:
    """Every point measured against predicted and fitted, the fits, and the gap by cause."""
    table = Table("backend", "B", "T", "measured", "p10–p90", "predicted", "ratio", "BW frac",
                  "fitted", "fit err",
                  title=f"Decode step: measured ({timer} time) vs predicted on {cmp.accelerator}")  # fmt: skip
    for p in cmp.points:
        table.add_row(
            p.label, str(p.batch), str(p.context), f"{p.measured_s * 1e3:.1f} ms",
            f"{p.p10_s * 1e3:.1f}–{p.p90_s * 1e3:.1f}", f"{p.predicted_s * 1e3:.1f} ms",
            f"{p.ratio:.2f}", f"{p.bandwidth_fraction:.2f}", f"{(p.fitted_s or 0) * 1e3:.1f} ms",
            _pct(p.fit_error),
        )  # fmt: skip
    console.print(table)
    for f in cmp.fits:
        console.print(_fit_line(f))
    gap = Table("backend", "B", "T", "gap", *[c.name for c in cmp.points[0].causes],
                title="Gap (measured − predicted), ms per step")  # fmt: skip
    for p in cmp.points:
        gap.add_row(p.label, str(p.batch), str(p.context),
                    f"{(p.measured_s - p.predicted_s) * 1e3:.1f}",
                    *[f"{c.seconds * 1e3:.1f}" for c in p.causes])  # fmt: skip
    console.print(gap)
