"""The ``ridgeline`` group: the command table, lazy loading, ``--version``, ``-h`` and shell
completion. Light on purpose: it imports typer and click only (no numpy, no matplotlib, no
library layer), so ``ridgeline --help`` answers fast.

A command's module is imported when that command runs (click's "lazily loading subcommands"
pattern). The top-level help lists every command from ``COMMANDS`` without importing them;
``tests/cli/test_cli_habits.py`` checks that each one-line help matches its command's docstring.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from ridgeline.cli.group import App, GuardedGroup, checked, new_app
from ridgeline.defaults import DEFAULT_ACCELERATOR, DEFAULT_MODEL

VERSION = "0.1.0"


@dataclass(frozen=True, slots=True)
class Entry:
    """Where one top-level command lives and how the top-level help lists it."""

    module: str  # under ridgeline.cli
    attr: str  # a Typer sub-app or a command function
    help: str  # first line of its docstring (or of the sub-app's help)
    panel: str


_A, _S, _M, _L = "Analytic", "Serving", "Measured (needs ridgeline[torch])", "Learn and share"
COMMANDS: dict[str, Entry] = {
    "hw": Entry("analytic_cmds", "hw_app", "Accelerators of the catalog.", _A),
    "model": Entry("analytic_cmds", "model_app", "Models from the catalog or any config.json.", _A),
    "roofline": Entry(
        "analytic_cmds",
        "roofline_cmd",
        "One step on the roofline: per-operator FLOPs and bytes, intensity, bound, time.",
        _A,
    ),
    "kv": Entry(
        "analytic_cmds",
        "kv_cmd",
        "KV cache: bytes per token and in total, crossover with the weights, what fits, techniques.",
        _A,
    ),
    "recompute": Entry(
        "recompute_cmd",
        "recompute_cmd",
        "Recompute K and V or cache them: FLOPs recomputed against bytes kept, per context and chip.",
        _A,
    ),
    "questions": Entry(
        "analytic_cmds",
        "questions_cmd",
        "The five questions for an accelerator and workload, and what one decode step reads.",
        _A,
    ),
    "compare": Entry(
        "analytic_cmds",
        "compare_cmd",
        "Five architectures side by side, each on the smallest deployment that holds the model.",
        _A,
    ),
    "deploy": Entry(
        "deploy_cmds",
        "deploy_cmd",
        "A model on many chips of one accelerator: memory, links, bubble and what binds.",
        _A,
    ),
    "predict": Entry(
        "fidelity_cmds",
        "predict_cmd",
        "Expected throughput, TTFT and TPOT of a deployment, through the serving simulator.",
        _S,
    ),
    "plan": Entry(
        "plan_cmds",
        "plan_cmd",
        "The cheapest deployment that meets latency targets, on every accelerator asked.",
        _S,
    ),
    "validate": Entry(
        "fidelity_cmds",
        "validate_cmd",
        "Hold every prediction against the published measurements of the dataset.",
        _S,
    ),
    "tile": Entry(
        "tiling_cmds",
        "tile_cmd",
        "Best tile of C[M,N] += A[M,K]·B[K,N] on one core's scratchpad, and intensity vs tile.",
        _A,
    ),
    "flash": Entry(
        "tiling_cmds",
        "flash_cmd",
        "FlashAttention traffic against N on each accelerator's per-core scratchpad.",
        _A,
    ),
    "schedule": Entry(
        "tiling_cmds",
        "schedule_cmd",
        "Compile one step for a scratchpad accelerator and simulate its timeline.",
        _A,
    ),
    "orchestrate": Entry(
        "tiling_cmds",
        "orchestrate_cmd",
        "One KV cache, three orchestrators: bytes per level, time, and the level that binds.",
        _A,
    ),
    "layout": Entry(
        "tiling_cmds",
        "layout_cmd",
        "Layout and access: bank conflicts by stride, alignment to the granule, walk order.",
        _A,
    ),
    "kv-manage": Entry(
        "kv_cmds",
        "kv_manage_cmd",
        "Who manages the KV cache on each architecture, and what each technique costs or saves.",
        _S,
    ),
    "simulate": Entry(
        "simulate_cmds",
        "simulate_cmd",
        "Simulate serving a workload: latency, throughput and KV memory.",
        _S,
    ),
    "native": Entry(
        "native_cmds",
        "native_app",
        "The simulator's fast mode, compiled: build, status, clean.",
        _S,
    ),
    "sweep": Entry(
        "sweep_cmds",
        "sweep_app",
        "Capacity sweeps: the highest request rate within SLOs, per configuration.",
        _S,
    ),
    "generate": Entry(
        "engine_cmds",
        "generate_cmd",
        "Generate with the real paged-KV engine (random weights unless --weights).",
        _M,
    ),
    "bench": Entry("engine_cmds", "bench_app", "Benchmarks of the real engine.", _M),
    "engine": Entry("kernel_cmds", "engine_app", "The real engine: its compiled kernels.", _M),
    "serve": Entry(
        "serve_cmds", "serve_cmd", "Serve the real engine behind an OpenAI-compatible HTTP API.", _M
    ),
    "lab": Entry(
        "lab_cmds",
        "lab_app",
        "Measure decode on this machine and hold the analytic model to it.",
        _M,
    ),
    "report": Entry(
        "report_cmd",
        "report_cmd",
        "Write the full report (report.html, report.md, report.json and figures) for one model.",
        _L,
    ),
    "quiz": Entry(
        "quiz_cmds",
        "quiz_app",
        "The graded quiz: 22 questions over the seven modules, computed by ridgeline.",
        _L,
    ),
    "explore": Entry(
        "web_cmds",
        "explore_cmd",
        "Serve the explorer: live views of the analytic model and the simulator in a browser.",
        _L,
    ),
}


def load_command(name: str, entry: Entry) -> Any:
    """Import the command's module and build its click command."""
    obj = getattr(importlib.import_module(f"ridgeline.cli.{entry.module}"), entry.attr)
    command: Any
    if isinstance(obj, typer.Typer):  # a group, even of one command (``engine build``)
        command = typer.main.get_group(obj)
    else:  # a command function: a one-command app collapses to the command
        single = new_app(entry.help)
        single.command(name, rich_help_panel=entry.panel)(obj)
        command = typer.main.get_command(single)
    command.name = name
    return command


class LazyGroup(GuardedGroup):
    """``GuardedGroup`` whose commands come from ``COMMANDS`` and load when they run."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        return checked(load_command(cmd_name, entry))

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands under their panels, each with its whole one-line help (no command is
        imported to list it)."""
        panels: dict[str, list[tuple[str, str]]] = {}
        for name, entry in COMMANDS.items():
            panels.setdefault(entry.panel, []).append((name, entry.help))
        for panel, rows in panels.items():
            with formatter.section(panel):
                formatter.write_dl(rows)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"ridgeline {VERSION}")
        raise typer.Exit()


app = App(
    name="ridgeline",
    cls=LazyGroup,
    help=(
        "ridgeline: where the time and memory of LLM inference go, and why.\n\n"
        f"Analytic and serving commands default to --hw {DEFAULT_ACCELERATOR} and --model "
        f"{DEFAULT_MODEL}; the engine and the lab default to distilgpt2, a model that runs on a "
        "CPU. Every command that prints results takes --json; bad input prints one line on stderr "
        "and exits 2."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: rich's help renderer costs 0.2 s of start-up
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """ridgeline: where the time and memory of LLM inference go, and why."""


def main(args: Any = None) -> None:
    """The console script (``ridgeline``) and ``python -m ridgeline``."""
    app(args=args, prog_name="ridgeline")
