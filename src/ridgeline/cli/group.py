"""The command group every ``ridgeline`` (sub)command shares: user errors become one stderr line
and exit code 2. Light: typer, click and the error types only."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from ridgeline.errors import ConfigError, RidgelineError

MAX_CLI_INTEGER = 2**53  # integers past this lose exactness in JSON; no size reaches it


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
                raise ConfigError(f"option {_option_name(param)}: {why}")


def _option_name(param: Any) -> str:
    return max(getattr(param, "opts", None) or [param.name or "?"], key=len)


def _finite_first(param: Any) -> None:
    """Refuse a float option's NaN or infinity before the parser checks its range: NaN fails
    ``min=0`` too, and was reported as "should be greater than or equal to 0"."""
    descriptor = getattr(param, "type_descriptor", None)
    if getattr(descriptor, "annotation", None) is not float:
        return
    run = param.process_value

    def process_value(ctx: Any, value: Any) -> Any:
        for item in value if isinstance(value, list | tuple) else (value,):
            why = _bad_number(_as_float(item))
            if why is not None:
                raise ConfigError(f"option {_option_name(param)}: {why}")
        return run(ctx, value)

    param.process_value = process_value


def _as_float(item: Any) -> Any:
    try:
        return float(item) if isinstance(item, str) else item
    except ValueError:
        return item  # the parser says what is wrong with it


def checked(command: Any) -> Any:
    """``command`` with ``check_numbers`` run on its parsed options before it runs (a group is
    returned as it is: it checks its own commands), and its float options refusing NaN and
    infinities before their range (``_finite_first``)."""
    if command is None or hasattr(command, "commands"):
        return command
    if getattr(command, "_numbers_checked", False):
        return command
    for param in command.params:
        _finite_first(param)
    run = command.invoke

    def invoke(ctx: Any) -> Any:
        check_numbers(command, ctx.params)
        return run(ctx)

    command.invoke = invoke
    command._numbers_checked = True
    return command


def one_line(message: str) -> str:
    """A message on one line (user values may hold newlines)."""
    return " ".join(message.split())


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

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return checked(super().get_command(ctx, cmd_name))

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

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _flags_as_flags(self, ctx)
        super().format_help(ctx, formatter)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """A group alone (``ridgeline``, ``ridgeline lab``) prints its help as ``--help`` does
        and exits 0 (click would raise it as a usage error, squashed into one stderr line)."""
        if not args and self.no_args_is_help and not ctx.resilient_parsing:
            typer.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(0)
        return super().parse_args(ctx, args)

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
