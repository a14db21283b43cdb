"""What every command shares: consoles, option aliases, JSON output (error handling: ``group``)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ridgeline.analytic import Dtypes, Phase
from ridgeline.cli.group import GuardedGroup, new_app
from ridgeline.defaults import DEFAULT_ACCELERATOR, DEFAULT_MODEL
from ridgeline.report.jsonable import plain_json
from ridgeline.specs import DType
from ridgeline.specs.cost_mode import CostMode

# Piped output is never wrapped: lines are written whole (soft wrap) and tables get room for
# their natural width instead of being folded to 80 columns.
console = Console(soft_wrap=not sys.stdout.isatty(), width=None if sys.stdout.isatty() else 4096)
err_console = Console(stderr=True)
Tick = Callable[..., None]
MAX_STEPS = 10_000  # timed steps or repeats of one measurement


HwOpt = Annotated[
    str, typer.Option("--hw", help="accelerator name or path to a .toml catalog file")
]
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="model name or path to a config.json")]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="print JSON (stable schema) instead of tables")
]
IdealOpt = Annotated[
    bool,
    typer.Option(
        "--ideal",
        help="price on the ideal roofline (datasheet peaks, no latencies) instead of the "
        "calibrated expectation (the default)",
    ),
]
MemoryUtilizationOpt = Annotated[
    float | None,
    typer.Option(
        "--memory-utilization",
        help="fraction of each chip's device memory for weights, reserve and KV (vLLM's "
        "gpu_memory_utilization; default 0.9 under a runtime allocator, 1 where a compiler "
        "places every byte)",
    ),
]
TpOpt = Annotated[int, typer.Option("--tp", help="tensor-parallel chips per stage")]
PpOpt = Annotated[int, typer.Option("--pp", help="pipeline stages")]


def positive(*names: str, help: str, most: int = MAX_STEPS) -> Any:
    """An integer option in [1, most] (steps, repeats, sizes the library does not bound)."""
    return typer.Option(*names, min=1, max=most, help=help)


def writable_file(path: str | None) -> str | None:
    """An option callback: ``path`` can be written (probed now, before any work; parent
    directories are made as the writers make them)."""
    if path is None:
        return None
    p = Path(path)
    existed = p.exists()
    try:
        if p.is_dir():
            raise IsADirectoryError(21, "is a directory")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.open("ab").close()
        if not existed:
            p.unlink()
    except OSError as e:
        raise typer.BadParameter(f"cannot write {path}: {e.strerror or e}") from None
    return path


def writable_dir(path: str | Path | None) -> str | Path | None:
    """An option callback: ``path`` is, or can be made, a directory that can be written."""
    if path is None:
        return None
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".ridgeline-probe-{os.getpid()}"
        probe.open("ab").close()
        probe.unlink()
    except OSError as e:
        raise typer.BadParameter(f"cannot write into {path}: {e.strerror or e}") from None
    return path


PlotOpt = Annotated[
    str | None,
    typer.Option("--plot", help="also write a PNG plot to this file", callback=writable_file),
]
BatchOpt = Annotated[int, typer.Option("--batch", "-b", help="sequences in the batch")]
ContextOpt = Annotated[int, typer.Option("--context", "-t", help="context length in tokens")]
DtypeOpt = Annotated[str, typer.Option(help="bf16, fp16, fp32, fp8, int8, int4")]
PhaseOpt = Annotated[Phase, typer.Option(help="prefill or decode")]
PromptOpt = Annotated[
    int | None, typer.Option(help="prefill tokens per sequence (default: context)")
]


def dtypes(weight: str = "bf16", act: str = "bf16", kv: str = "bf16") -> Dtypes:
    return Dtypes(DType.parse(weight), DType.parse(act), DType.parse(kv))


def mode_of(ideal: bool) -> CostMode:
    """``--ideal`` as a pricing mode (calibrated otherwise)."""
    return CostMode.IDEAL if ideal else CostMode.CALIBRATED


@contextmanager
def progress_bar(total: int, enabled: bool, label: str = "") -> Iterator[Tick | None]:
    """A Rich progress bar on stderr for long runs, or ``None`` when not shown (not ``enabled``,
    or stderr is no terminal: a log or a pipe would get only its last frame). Call the tick
    with the number done so far (or nothing, to advance by one) and an optional description."""
    if not enabled or not err_console.is_terminal:
        yield None
        return
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, TextColumn("{task.description}"), console=err_console) as bar:
        task = bar.add_task("", total=total)

        def tick(done: int | None = None, description: str | None = None) -> None:
            if done is None:
                bar.advance(task)
            else:
                bar.update(task, completed=done)
            if description is not None:
                bar.update(task, description=description)

        yield tick


def save_plot(fig: Any, path: str | Path) -> Path:
    """Write a figure of ``ridgeline.report`` as a PNG (matplotlib loads only when a plot is
    asked for)."""
    from ridgeline.report.figures import save_figure

    return save_figure(fig, path)


def emit_json(payload: Any) -> None:
    """Print ``payload`` (a dict, or anything with ``to_dict``) as JSON on stdout."""
    if hasattr(payload, "to_dict"):
        payload = payload.to_dict()
    typer.echo(json.dumps(plain_json(payload), indent=2, allow_nan=False))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str = "") -> None:
    """A report table (headers, rows of text, caption) as a Rich table on stdout."""
    table = Table(*headers, title=title or None)
    for row in rows:
        table.add_row(*row)
    console.print(table)


__all__ = [
    "DEFAULT_ACCELERATOR",
    "DEFAULT_MODEL",
    "GuardedGroup",
    "console",
    "emit_json",
    "err_console",
    "new_app",
]
