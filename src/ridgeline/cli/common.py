"""What every command shares: consoles, option aliases, JSON output, error handling."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from ridgeline.analytic import Dtypes, Phase
from ridgeline.errors import ConfigError, RidgelineError
from ridgeline.specs import DType

MAX_CLI_INTEGER = 2**53  # integers past this lose exactness in JSON; no size reaches it
MAX_STEPS = 10_000  # timed steps or repeats of one measurement

# Piped output gets a wide, fixed width so tables are not folded to 80 columns.
console = Console(width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True)


def _bad_number(value: Any) -> str | None:
    """Why an option's parsed value is refused before any work starts, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_CLI_INTEGER:
        return f"{value:.3g} is absurdly large (limit {MAX_CLI_INTEGER:.3g})"
    return None


def check_numbers(command: Any, params: dict[str, Any]) -> None:
    """Refuse NaN, infinities and absurd integers in any option of ``command`` (``float()``
    parses "nan", and a NaN passes every range check); the library's own checks, which name
    their fields, bound the rest.

    Raises:
        ConfigError: ``option --rate: must be a finite number, got nan``.
    """
    for param in command.params:
        value = params.get(param.name or "")
        for item in value if isinstance(value, list | tuple) else (value,):
            why = _bad_number(item)
            if why is not None:
                name = max(getattr(param, "opts", None) or [param.name or "?"], key=len)
                raise ConfigError(f"option {name}: {why}")


def _checked(command: Any) -> Any:
    """``command`` with ``check_numbers`` run on its parsed options before it runs."""
    if getattr(command, "_numbers_checked", False):
        return command
    run = command.invoke

    def invoke(ctx: Any) -> Any:
        check_numbers(command, ctx.params)
        return run(ctx)

    command.invoke = invoke  # type: ignore[method-assign]
    command._numbers_checked = True  # type: ignore[attr-defined]
    return command


def one_line(message: str) -> str:
    """A message on one line (user values may hold newlines)."""
    return " ".join(message.split())


class GuardedGroup(TyperGroup):
    """A command group that turns every user error — a ``RidgelineError`` from the library or a
    bad option caught by the parser — into one stderr line and exit code 2."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is None or hasattr(command, "commands"):  # a group checks its own commands
            return command
        return _checked(command)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except RidgelineError as e:
            typer.echo(f"error: {one_line(str(e))}", err=True)
            raise typer.Exit(2) from None
        except OSError as e:  # an output that cannot be written, a disk that is full
            where = f": {e.filename}" if e.filename else ""
            typer.echo(f"error: {one_line(e.strerror or str(e))}{where}", err=True)
            raise typer.Exit(2) from None

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except typer.TyperException as e:  # the parser's usage errors
            message = e.format_message() if hasattr(e, "format_message") else str(e)
            typer.echo(f"error: {one_line(message)}", err=True)
            code = 2
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


def new_app(help_text: str) -> typer.Typer:
    return typer.Typer(
        cls=GuardedGroup,
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )


HwOpt = Annotated[
    str, typer.Option("--hw", help="accelerator name or path to a .toml catalog file")
]
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="model name or path to a config.json")]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="print JSON (stable schema) instead of tables")
]


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


def _clean(obj: Any) -> Any:
    """Plain JSON values: enums by value, numpy as lists/scalars, non-finite floats as null."""
    if isinstance(obj, dict):
        return {str(_clean(k)): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, np.ndarray):
        return _clean(obj.tolist())
    if isinstance(obj, np.generic):
        return _clean(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def emit_json(payload: Any) -> None:
    """Print ``payload`` (a dict, or anything with ``to_dict``) as JSON on stdout."""
    if hasattr(payload, "to_dict"):
        payload = payload.to_dict()
    typer.echo(json.dumps(_clean(payload), indent=2, allow_nan=False))


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str = "") -> None:
    """A report table (headers, rows of text, caption) as a Rich table on stdout."""
    table = Table(*headers, title=title or None)
    for row in rows:
        table.add_row(*row)
    console.print(table)
