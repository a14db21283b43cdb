"""``ridgeline lab ...``: calibrate, sweep, profile, kv, compare, report, export.

Thin commands: each parses, calls one lab function and renders. torch and transformers load only
inside the commands that measure, so ``ridgeline --help`` stays fast without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ridgeline.cli.common import (
    JsonOpt,
    ModelOpt,
    console,
    emit_json,
    new_app,
    positive,
    print_table,
    writable_dir,
)
from ridgeline.errors import ConfigError
from ridgeline.lab.store import DEFAULT_DB
from ridgeline.specs.limits import MAX_BATCH, MAX_CONTEXT
from ridgeline.specs.units import MiB, fmt_bytes, fmt_rate

lab_app = new_app("Measure decode on this machine and hold the analytic model to it.")

DbOpt = Annotated[str, typer.Option("--db", help="results database (SQLite)")]
ThreadsOpt = Annotated[int, typer.Option("--threads", help="intra-op threads (1 is steadiest)")]
DeviceOpt = Annotated[str, typer.Option("--device", help="cpu or cuda")]
BatchesOpt = Annotated[str, typer.Option("--batch", "-b", help="batch sizes, e.g. 1,4,16")]
ContextsOpt = Annotated[str, typer.Option("--context", "-t", help="contexts, e.g. 128,512,1024")]


def _timer(value: str) -> str:
    """An option callback: the timer is known before any database is opened."""
    from ridgeline.lab.compare import TIMERS

    if value not in TIMERS:
        raise typer.BadParameter(f"'{value}' is not one of {', '.join(TIMERS)}")
    return value


TimerOpt = Annotated[
    str,
    typer.Option(
        "--timer", help="wall, or cpu (process time: discounts a busy machine)", callback=_timer
    ),
]


def _check_device(device: str) -> None:
    from ridgeline.lab.device import check_device

    check_device(device)


def _env_dict(threads: int, device: str) -> dict[str, Any]:
    from ridgeline.lab import env as lab_env

    return lab_env.capture(threads, device).to_dict()


@lab_app.command("calibrate")
def calibrate_cmd(
    sizes: Annotated[str, typer.Option(help="array sizes in MiB")] = "1,4,16,64,256,1024",
    threads: Annotated[str, typer.Option(help="thread counts (default: 1 and all)")] = "",
    dtypes: Annotated[
        str, typer.Option(help="matmul dtypes (default fp32; bf16 too on CUDA or a bf16 CPU)")
    ] = "",
    matmul_n: Annotated[int, positive(help="matmul size n ([n,n]x[n,n])", most=65_536)] = 2048,
    repeats: Annotated[int, positive(help="timings per figure (best kept)")] = 5,
    device: DeviceOpt = "cpu",
    name: Annotated[str, typer.Option(help="spec name (--hw NAME thereafter)")] = "measured",
    out_dir: Annotated[
        str | None, typer.Option(help="where to write NAME.toml (default: user hardware dir)")
    ] = None,
    db: DbOpt = DEFAULT_DB,
    json_out: JsonOpt = False,
) -> None:
    """Measure bandwidth (read/copy/triad, cache to DRAM, 1 and all threads) and matmul peaks;
    write them as accelerator specs NAME (all threads) and NAME-t1 (one thread)."""
    from ridgeline.lab.calibrate import calibrate
    from ridgeline.lab.machine import KIND, CalibrationSpec, default_threads, write_specs
    from ridgeline.lab.store import ResultsStore
    from ridgeline.lab.sweep import parse_ints

    _check_device(device)
    spec = CalibrationSpec(
        sizes_bytes=tuple(s * MiB for s in parse_ints(sizes, "--sizes")),
        threads=parse_ints(threads, "--threads") if threads else default_threads(),
        dtypes=_dtypes(dtypes, device),
        matmul_n=matmul_n,
        repeats=repeats,
        device=device,
    )
    with console.status("calibrating (bandwidth, then matmul)..."):
        cal = calibrate(spec)
    written = write_specs(cal, name, out_dir)
    env = _env_dict(max(spec.threads), device)
    with ResultsStore(db) as store:
        store.put(KIND, {**spec.to_dict(), "at": env["started_at"]}, env, cal.to_dict())
    if json_out:
        emit_json(
            {
                "schema": "ridgeline.lab-calibrate/1",
                "calibration": cal.to_dict(),
                "specs": [str(w.path) for w in written],
            }
        )
        return
    table = Table(
        "kernel", "size", "threads", "best", "median", title=f"Bandwidth: {cal.device_name}"
    )
    for p in cal.bandwidth:
        table.add_row(
            p.kernel,
            fmt_bytes(p.size_bytes, binary=True),
            str(p.threads),
            fmt_rate(p.best_bytes_per_s, "B/s"),
            fmt_rate(p.median_bytes_per_s, "B/s"),
        )
    console.print(table)
    mm = Table("dtype", "n", "threads", "best", title="Matmul peak")
    for m in cal.matmul:
        mm.add_row(m.dtype, str(m.n), str(m.threads), fmt_rate(m.best_flops_per_s, "FLOP/s"))
    console.print(mm)
    gemm = Table("batch", "shape", "threads", "time", "weights streamed at", title="Decode GEMM")
    for g in cal.gemm:
        gemm.add_row(
            str(g.batch),
            f"[{g.batch},{g.n_in}]x[{g.n_in},{g.n_out}]",
            str(g.threads),
            f"{g.best_s * 1e3:.2f} ms",
            fmt_rate(g.weight_bytes_per_s, "B/s"),
        )
    console.print(gemm)
    _print_peaks(cal)
    for w in written:
        console.print(
            f"wrote {w.path} (--hw {w.name}: {w.threads} thread(s), {fmt_rate(w.accelerator.device_bandwidth_bytes_per_s, 'B/s')})"
        )


def _dtypes(text: str, device: str) -> tuple[str, ...]:
    """The --dtypes list, else fp32 (and bf16 where it has a fast path)."""
    from ridgeline.lab.machine import default_dtypes

    return tuple(d.strip() for d in text.split(",") if d.strip()) or default_dtypes(device)


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


@lab_app.command("sweep")
def sweep_cmd(
    model: ModelOpt = "distilgpt2",
    backend: Annotated[
        list[str] | None,
        typer.Option(help="hf:<dynamic|static>:<sdpa|eager> (repeatable) or ridgeline"),
    ] = None,
    batch: BatchesOpt = "1,4,16",
    context: ContextsOpt = "128,512,1024",
    steps: Annotated[int, typer.Option(help="timed decode steps per point")] = 12,
    warmup: Annotated[int, typer.Option(help="untimed steps first")] = 3,
    memory_steps: Annotated[int, typer.Option(help="steps of the memory phase")] = 3,
    profile_steps: Annotated[int, typer.Option(help="steps of the profiled phase (0: none)")] = 2,
    threads: ThreadsOpt = 1,
    dtype: Annotated[str, typer.Option(help="fp32, bf16 or fp16")] = "fp32",
    device: DeviceOpt = "cpu",
    weights: Annotated[str | None, typer.Option(help="local weights directory")] = None,
    db: DbOpt = DEFAULT_DB,
    json_out: JsonOpt = False,
) -> None:
    """Time decode over batch x context per backend; points already in --db are skipped."""
    from ridgeline.lab.points import PointConfig
    from ridgeline.lab.store import ResultsStore
    from ridgeline.lab.sweep import (
        DEFAULT_BACKENDS,
        SweepSpec,
        parse_backends,
        parse_ints,
        run_sweep,
    )

    _check_device(device)
    base = PointConfig(
        model=model,
        steps=steps,
        warmup=warmup,
        memory_steps=memory_steps,
        profile_steps=profile_steps,
        threads=threads,
        dtype=dtype,
        device=device,
        weights=weights,
    )
    spec = SweepSpec(
        parse_backends(backend or list(DEFAULT_BACKENDS)),
        parse_ints(batch, "--batch"),
        parse_ints(context, "--context"),
        base,
    )
    total = len(spec.points())
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with ResultsStore(db) as store, Progress(*columns, console=console, disable=json_out) as bar:
        task = bar.add_task("sweep", total=total)

        def progress(cfg: PointConfig, status: str) -> None:
            bar.update(
                task, advance=1, description=f"{cfg.label} B={cfg.batch} T={cfg.context} {status}"
            )

        outcome = run_sweep(spec, store, progress)
    if json_out:
        emit_json(
            {
                "schema": "ridgeline.lab-sweep/1",
                "db": db,
                "measured": outcome.measured,
                "skipped": outcome.skipped,
                "total": outcome.total,
            }
        )
        return
    console.print(
        f"{outcome.measured} measured, {outcome.skipped} already stored, {outcome.total} points in {db}"
    )


@lab_app.command("profile")
def profile_cmd(
    model: ModelOpt = "distilgpt2",
    batch: Annotated[int, typer.Option("--batch", "-b", min=1, max=MAX_BATCH)] = 4,
    context: Annotated[int, typer.Option("--context", "-t", min=1, max=MAX_CONTEXT)] = 512,
    cache: Annotated[str, typer.Option(help="dynamic or static")] = "dynamic",
    attn: Annotated[str, typer.Option(help="sdpa or eager")] = "sdpa",
    steps: Annotated[int, positive(help="profiled decode steps")] = 3,
    threads: ThreadsOpt = 1,
    device: DeviceOpt = "cpu",
    trace: Annotated[str, typer.Option(help="Chrome trace file to write")] = "out/lab/trace.json",
    db: DbOpt = DEFAULT_DB,
    json_out: JsonOpt = False,
) -> None:
    """torch.profiler over decode steps: top ops by time and memory, peak and its parts, trace."""
    from ridgeline.lab.points import PointConfig
    from ridgeline.lab.profile import run_profile
    from ridgeline.lab.store import ResultsStore

    _check_device(device)
    cfg = PointConfig(
        model=model,
        cache=cache,
        attn=attn,
        batch=batch,
        context=context,
        profile_steps=steps,
        threads=threads,
        device=device,
    )
    rep = run_profile(cfg, trace)
    env = _env_dict(threads, device)
    with ResultsStore(db) as store:
        store.put("profile", {**cfg.to_dict(), "at": env["started_at"]}, env, rep.to_dict())
    if json_out:
        emit_json(rep.to_dict())
        return
    s = rep.summary
    for title, rows in (
        ("by self time", s.top_time),
        ("by memory allocated", s.top_memory),
    ):
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
                fmt_bytes(r.self_bytes_per_step, binary=True),
            )
        console.print(table)
    c = rep.composition
    console.print(
        f"peak during decode {fmt_bytes(c.peak, binary=True)} = parameters {fmt_bytes(c.parameters, binary=True)} "
        f"+ KV {fmt_bytes(c.kv_at_start, binary=True)} + temporaries {fmt_bytes(c.temporaries, binary=True)} "
        f"(KV after: {fmt_bytes(c.kv_at_end, binary=True)})"
    )
    console.print(
        f"allocated {fmt_bytes(s.allocated_bytes_per_step, binary=True)}/step vs {fmt_bytes(rep.analytic_bytes_per_step, binary=True)} moved/step "
        f"(analytic): ratio {rep.allocated_over_moved:.2f} — allocations are not traffic; trace: {rep.trace_path}"
    )


@lab_app.command("kv")
def kv_cmd(
    batch: Annotated[int, typer.Option("--batch", "-b", min=1, max=MAX_BATCH)] = 4,
    context: Annotated[int, typer.Option("--context", "-t", min=1, max=MAX_CONTEXT)] = 1024,
    decode_steps: Annotated[int, positive(help="decode steps timed per model")] = 5,
    hw: Annotated[str, typer.Option("--hw", help="accelerator of the scratchpad")] = "ibm-spyre",
    kv_dtype: Annotated[str, typer.Option(help="KV dtype for the scratchpad fit")] = "fp16",
    db: DbOpt = DEFAULT_DB,
    json_out: JsonOpt = False,
) -> None:
    """KV formula vs cache tensors (exact) and freed memory (1%); MHA/GQA/MQA; scratchpad fit."""
    from ridgeline.lab.kvlab import KIND, run_kv
    from ridgeline.lab.store import ResultsStore
    from ridgeline.specs import DType

    rep = run_kv(
        batch, context, decode_steps, scratchpad_hw=hw, scratchpad_dtype=DType.parse(kv_dtype)
    )
    env = _env_dict(1, "cpu")
    with ResultsStore(db) as store:
        store.put(
            KIND, {"batch": batch, "context": context, "at": env["started_at"]}, env, rep.to_dict()
        )
    if json_out:
        emit_json(rep.to_dict())
        return
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
        title=f"KV at batch {batch}, context {context} (fp32)",
    )
    for c in rep.checks:
        table.add_row(
            c.name,
            c.attention,
            str(c.num_kv_heads),
            fmt_bytes(c.formula_bytes, binary=True),
            fmt_bytes(c.tensor_bytes, binary=True),
            "yes" if c.exact else "NO",
            _opt_bytes(c.freed_malloc_bytes),
            _pct(c.malloc_error),
            _opt_bytes(c.freed_rss_bytes),
            _pct(c.rss_error),
            f"{c.decode_median_s * 1e3:.1f} ms",
        )
    console.print(table)
    sp = Table(
        "model",
        "level",
        "capacity",
        "B/token/head",
        "tokens per head",
        "per layer",
        "all layers",
        title=f"Tokens of {kv_dtype} KV in one {hw} scratchpad",
    )
    for f in rep.scratchpad:
        sp.add_row(
            f.model,
            f.level,
            fmt_bytes(f.capacity_bytes, binary=True),
            f"{f.bytes_per_token_per_head:.0f}",
            f"{f.tokens_per_head:,}",
            f"{f.tokens_per_layer:,}",
            f"{f.tokens_all_layers:,}",
        )
    console.print(sp)
    _print_growth(rep.to_dict()["checks"])


def _print_growth(checks: list[dict[str, Any]]) -> None:
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

    loo = (
        f" (leave-one-out {100 * f.loo_median_abs_error:.1f}%)"
        if f.loo_median_abs_error is not None
        else ""
    )
    faults = f" + faults x {f.fault_s * 1e6:.2f} us" if f.fault_s else ""
    return (
        f"{f.label}: t = {f.overhead_s * 1e3:.1f} ms + t_gemm(B) ({f.gemm_source})"
        f" + KV/{rate(f.kv_bytes_per_s, 'B/s', 'BW_kv')}"
        f" + other FLOPs/{rate(f.flops_per_s, 'FLOP/s', 'F')}{faults};"
        f" median |error| {100 * f.median_abs_error:.1f}%{loo}"
    )


def _opt_bytes(value: int | None) -> str:
    return "—" if value is None else fmt_bytes(value, binary=True)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.2f}%"


@lab_app.command("compare")
def compare_cmd(
    db: DbOpt = DEFAULT_DB,
    hw: Annotated[
        str | None, typer.Option("--hw", help="accelerator (default: the DB's calibration)")
    ] = None,
    timer: TimerOpt = "wall",
    json_out: JsonOpt = False,
) -> None:
    """Predicted vs measured per point, effective bandwidth, fitted model, the gap explained."""
    from ridgeline.lab.compare import compare_records
    from ridgeline.lab.store import open_existing

    with open_existing(db) as store:
        cmp = compare_records(store.records(), hw, timer)
    if json_out:
        emit_json(cmp.to_dict())
        return
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
        title=f"Decode step: measured ({timer} time) vs predicted on {cmp.accelerator}",
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


@lab_app.command("report")
def report_cmd(
    db: DbOpt = DEFAULT_DB,
    out: Annotated[
        str, typer.Option("--out", help="output directory", callback=writable_dir)
    ] = "out/lab",
    hw: Annotated[
        str | None, typer.Option("--hw", help="accelerator (default: the DB's calibration)")
    ] = None,
    timer: TimerOpt = "wall",
) -> None:
    """Write lab.html and lab.md (with plots) and lab.json from a results database."""
    from ridgeline.report.lab_section import build_lab_report

    files = build_lab_report(db, out, hw, timer)
    console.print(f"wrote {files.html}, {files.markdown}, {files.json}")


@lab_app.command("export")
def export_cmd(
    db: DbOpt = DEFAULT_DB,
    csv_path: Annotated[str | None, typer.Option("--csv", help="CSV file to write")] = None,
    json_path: Annotated[str | None, typer.Option("--json-file", help="JSON file to write")] = None,
    kind: Annotated[str | None, typer.Option(help="decode, calibrate, profile or kv")] = None,
) -> None:
    """Export stored measurements to CSV and/or JSON."""
    from ridgeline.lab.store import RECORD_KINDS, export_csv, export_json, open_existing

    if csv_path is None and json_path is None:
        raise ConfigError("field --csv/--json-file: give at least one output file")
    if kind is not None and kind not in RECORD_KINDS:  # it would export nothing, silently
        raise ConfigError(f"field --kind: '{kind}' is not one of {', '.join(RECORD_KINDS)}")
    with open_existing(db) as store:
        records = store.records(kind)
    for path, write in ((csv_path, export_csv), (json_path, export_json)):
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            write(records, path)
            console.print(f"wrote {len(records)} records to {path}")
