"""The command group every ``ridgeline`` (sub)command shares: user errors become one stderr line
and exit code 2. Light: typer, click and the error types only."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from ridgeline.errors import RidgelineError


def _flags_as_flags(command: Any, ctx: Any) -> None:
    """Show boolean flags as ``--json``, not ``--json <bool>``: a flag takes no value, and an
    empty metavar keeps the help from suggesting one."""
    for param in command.get_params(ctx):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""


def format_params_by_panel(command: Any, ctx: Any, formatter: Any) -> None:
    """Arguments, then options under the help panel each belongs to (``rich_help_panel``,
    "Options" when none), in click's plain help layout."""
    sections: dict[str, list[tuple[str, str]]] = {}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        if param.param_type_name == "argument":
            panel = "Arguments"
        else:
            panel = getattr(param, "rich_help_panel", None) or "Options"
        sections.setdefault(panel, []).append(record)
    for panel in sorted(sections, key=lambda p: (p != "Arguments", p != "Options")):
        with formatter.section(panel):
            formatter.write_dl(sections[panel])


class FlagCommand(TyperCommand):
    """A command whose help shows its boolean flags without a value and its options grouped by
    panel."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _flags_as_flags(self, ctx)
        super().format_help(ctx, formatter)

    def format_options(self, ctx: Any, formatter: Any) -> None:
        format_params_by_panel(self, ctx, formatter)


class GuardedGroup(TyperGroup):
    """A command group that turns every user error — a ``RidgelineError`` from the library or a
    bad option caught by the parser — into one stderr line and exit code 2."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except RidgelineError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _flags_as_flags(self, ctx)
        super().format_help(ctx, formatter)

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


class App(typer.Typer):
    """A Typer app whose commands are ``FlagCommand``s."""

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", FlagCommand)
        return super().command(*args, **kwargs)


def new_app(help_text: str) -> typer.Typer:
    """A sub-app (``ridgeline hw``, ``ridgeline lab`` ...) with the shared error handling."""
    return App(
        cls=GuardedGroup,
        help=help_text,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
