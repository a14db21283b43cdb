"""``ridgeline lab ...``: calibrate, sweep, profile, kv, compare, report, export.

Thin commands: each parses, calls one lab function and renders. torch and transformers load only
inside the commands that measure, so ``ridgeline --help`` stays fast without them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ridgeline.cli.common import (
    IdealOpt,
    JsonOpt,
    ModelOpt,
    console,
    emit_json,
    err_console,
    mode_of,
    new_app,
    positive,
    progress_bar,
    writable_dir,
)
from ridgeline.cli.lab_render import print_calibration, print_comparison, print_kv, print_profile
from ridgeline.cli.serve_check_cmd import serve_check_cmd
from ridgeline.defaults import DEFAULT_ENGINE_MODEL
from ridgeline.errors import ConfigError
from ridgeline.lab.store import DEFAULT_DB
from ridgeline.specs.limits import MAX_BATCH, MAX_CONTEXT
from ridgeline.specs.units import MiB

if TYPE_CHECKING:
    from ridgeline.lab.sweep import SweepSpec

lab_app = new_app("Measure decode on this machine and hold the analytic model to it.")

DbOpt = Annotated[str, typer.Option("--db", help="results database (SQLite)")]
ThreadsOpt = Annotated[int, typer.Option("--threads", help="intra-op threads (1 is steadiest)")]
DeviceOpt = Annotated[str, typer.Option("--device", help="cpu or cuda")]
BatchesOpt = Annotated[str, typer.Option("--batch", "-b", help="batch sizes, e.g. 1,4,16")]
ContextsOpt = Annotated[str, typer.Option("--context", "-t", help="contexts, e.g. 128,512,1024")]
BackendsOpt = Annotated[
    list[str] | None,
    typer.Option(help="hf:<dynamic|static>:<sdpa|eager> (repeatable) or ridgeline"),
]


def _timer(value: str) -> str:
    """An option callback: the timer is known before any database is opened."""
    from ridgeline.lab.gap import TIMERS

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


def _record(
    db: str, kind: str, config: dict[str, Any], run_on: tuple[int, str], result: dict[str, Any]
) -> None:
    """Store one result with the environment it ran in (threads, device) and its start time."""
    from ridgeline.lab import env as lab_env
    from ridgeline.lab.store import ResultsStore

    env = lab_env.capture(*run_on).to_dict()
    with ResultsStore(db) as store:
        store.put(kind, {**config, "at": env["started_at"]}, env, result)


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
    write them as accelerator specs NAME (all threads) and NAME-t1 (one thread).

    \b
    Example:
      ridgeline lab calibrate --sizes 1,64 --db out/lab.db
    """
    from ridgeline.lab.calibrate import calibrate
    from ridgeline.lab.machine import KIND, CalibrationSpec, default_threads, write_specs
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
    cal = calibrate(spec, progress_lines())
    written = write_specs(cal, name, out_dir)
    _record(db, KIND, spec.to_dict(), (max(spec.threads), device), cal.to_dict())
    if cal.steadiness is not None and not cal.steadiness.steady:
        warning = cal.steadiness.warning()
        err_console.print(f"[bold yellow]warning:[/bold yellow] {warning}", soft_wrap=True)
    if json_out:
        specs = [str(w.path) for w in written]
        emit_json(
            {"schema": "ridgeline.lab-calibrate/1", "calibration": cal.to_dict(), "specs": specs}
        )
        return
    print_calibration(cal, written)


def progress_lines() -> Callable[[str], None]:
    """A function that writes a progress line on stderr, stamped with the seconds since it was
    made (what a long lab step says while it works)."""
    start = time.monotonic()

    def say(message: str) -> None:
        stamp = f"[dim]{time.monotonic() - start:6.0f} s[/dim]"
        err_console.print(f"{stamp} {message}", highlight=False, soft_wrap=True)

    return say


def _dtypes(text: str, device: str) -> tuple[str, ...]:
    """The --dtypes list, else fp32 (and bf16 where it has a fast path)."""
    from ridgeline.lab.machine import default_dtypes

    return tuple(d.strip() for d in text.split(",") if d.strip()) or default_dtypes(device)


@lab_app.command("sweep")
def sweep_cmd(
    model: ModelOpt = DEFAULT_ENGINE_MODEL,
    backend: BackendsOpt = None,
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
    """Time decode over batch x context per backend; points already in --db are skipped.

    \b
    Example:
      ridgeline lab sweep -b 1 -t 128 --steps 3 --db out/lab.db
    """
    from ridgeline.lab.points import PointConfig
    from ridgeline.lab.sweep import DEFAULT_BACKENDS, SweepSpec, parse_backends, parse_ints

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
    backends = parse_backends(backend or list(DEFAULT_BACKENDS))
    spec = SweepSpec(backends, parse_ints(batch, "--batch"), parse_ints(context, "--context"), base)
    _run_lab_sweep(spec, db, json_out)


def _run_lab_sweep(spec: SweepSpec, db: str, json_out: bool) -> None:
    """Measure the points of ``spec`` not yet in ``db``, and say how many were measured."""
    from ridgeline.lab.store import ResultsStore
    from ridgeline.lab.sweep import run_sweep

    with ResultsStore(db) as store, _point_progress(len(spec.points()), json_out) as progress:
        outcome = run_sweep(spec, store, progress)
    counts = {"measured": outcome.measured, "skipped": outcome.skipped, "total": outcome.total}
    if json_out:
        emit_json({"schema": "ridgeline.lab-sweep/1", "db": db, **counts})
        return
    console.print(
        f"{outcome.measured} measured, {outcome.skipped} already stored, {outcome.total} points "
        f"in {db}"
    )


@contextmanager
def _point_progress(total: int, json_out: bool) -> Iterator[Callable[[Any, str], None]]:
    """Progress of a sweep, one call per point: a bar on a terminal, a line per point in a log
    (``make lab``), where a bar would show nothing; silent with --json."""
    lines = None if err_console.is_terminal or json_out else progress_lines()
    with progress_bar(total, not json_out and lines is None) as tick:
        done = [0]

        def progress(cfg: Any, status: str) -> None:
            done[0] += 1
            what = f"{cfg.label} B={cfg.batch} T={cfg.context} {status}"
            if tick is not None:
                tick(description=what)
            if lines is not None:
                lines(f"{done[0]}/{total} {what}")

        yield progress


@lab_app.command("profile")
def profile_cmd(
    model: ModelOpt = DEFAULT_ENGINE_MODEL,
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
    """torch.profiler over decode steps: top ops by time and memory, peak and its parts, trace.

    \b
    Example:
      ridgeline lab profile -b 1 -t 128 --db out/lab.db
    """
    from ridgeline.lab.points import PointConfig
    from ridgeline.lab.profile import run_profile

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
    with err_console.status(f"profiling {steps} decode steps at B={batch}, T={context}..."):
        rep = run_profile(cfg, trace)
    _record(db, "profile", cfg.to_dict(), (threads, device), rep.to_dict())
    if json_out:
        emit_json(rep.to_dict())
        return
    print_profile(rep)


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
    """KV formula vs cache tensors (exact) and freed memory (1%); MHA/GQA/MQA; scratchpad fit.

    \b
    Example:
      ridgeline lab kv -b 1 -t 256 --decode-steps 2 --db out/lab.db
    """
    from ridgeline.lab.kvlab import KIND, KvReport, run_kv, variants
    from ridgeline.specs import DType

    say, models, parts = progress_lines(), variants(), []
    dtype = DType.parse(kv_dtype)
    for i, model in enumerate(models, start=1):
        say(
            f"{i}/{len(models)} {model[0]}: the cache after a prefill, {decode_steps} decode steps, "
            "the memory freed, the resident peak as a fresh cache fills"
        )
        parts.append(
            run_kv(
                batch,
                context,
                decode_steps,
                scratchpad_hw=hw,
                scratchpad_dtype=dtype,
                models=[model],
            )
        )
    rep = KvReport.merge(parts)
    _record(db, KIND, {"batch": batch, "context": context}, (1, "cpu"), rep.to_dict())
    if json_out:
        emit_json(rep.to_dict())
        return
    print_kv(rep, f"KV at batch {batch}, context {context} (fp32)", f"{kv_dtype} KV in one {hw}")


@lab_app.command("compare")
def compare_cmd(
    db: DbOpt = DEFAULT_DB,
    hw: Annotated[
        str | None, typer.Option("--hw", help="accelerator (default: the DB's calibration)")
    ] = None,
    timer: TimerOpt = "wall",
    ideal: IdealOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Predicted vs measured per point, effective bandwidth, fitted model, the gap explained.

    The prediction is priced calibrated (a catalog --hw's family terms) unless --ideal.

    \b
    Example:
      ridgeline lab compare --db out/lab.db --hw xeon-spr
    """
    from ridgeline.lab.gap import compare_records
    from ridgeline.lab.store import open_existing

    with open_existing(db) as store:
        cmp = compare_records(store.records(), hw, timer, mode_of(ideal))
    if json_out:
        emit_json(cmp.to_dict())
        return
    print_comparison(cmp, timer)


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
    """Write lab.html and lab.md (with plots) and lab.json from a results database.

    \b
    Example:
      ridgeline lab report --db out/lab.db --out out/lab
    """
    from ridgeline.report.lab_sections import build_lab_report

    files = build_lab_report(db, out, hw, timer)
    console.print(f"wrote {files.html}, {files.markdown}, {files.json}")


@lab_app.command("export")
def export_cmd(
    db: DbOpt = DEFAULT_DB,
    csv_path: Annotated[str | None, typer.Option("--csv", help="CSV file to write")] = None,
    json_path: Annotated[str | None, typer.Option("--json-file", help="JSON file to write")] = None,
    kind: Annotated[str | None, typer.Option(help="decode, calibrate, profile or kv")] = None,
) -> None:
    """Export stored measurements to CSV and/or JSON.

    \b
    Example:
      ridgeline lab export --db out/lab.db --csv out/lab.csv
    """
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


# ``lab serve-check`` lives in its own module (it drives guidellm against ``ridgeline serve``).
lab_app.command("serve-check")(serve_check_cmd)
