"""What every command shares: consoles, option aliases, JSON output, error handling."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from enum import Enum
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from ridgeline.analytic import Dtypes, Phase
from ridgeline.errors import RidgelineError
from ridgeline.specs import DType

# Piped output gets a wide, fixed width so tables are not folded to 80 columns.
console = Console(width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True)


class GuardedGroup(TyperGroup):
    """A command group that turns every user error — a ``RidgelineError`` from the library or a
    bad option caught by the parser — into one stderr line and exit code 2."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except RidgelineError as e:
            typer.echo(f"error: {e}", err=True)
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
            typer.echo(f"error: {' '.join(message.split())}", err=True)
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
PlotOpt = Annotated[str | None, typer.Option("--plot", help="also write a PNG plot to this file")]
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
