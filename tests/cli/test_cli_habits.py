"""The habits a user expects of the ``ridgeline`` command: ``--version``, ``-h``, ``python -m
ridgeline``, flags shown as flags, one default accelerator and model, completion installable,
a help that loads no heavy module, output that a pipe receives unwrapped."""

from __future__ import annotations

import importlib
import inspect
import shlex
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

import ridgeline
from ridgeline.cli import COMMANDS, app
from ridgeline.cli.root import VERSION, load_command
from ridgeline.defaults import DEFAULT_ACCELERATOR, DEFAULT_ENGINE_MODEL, DEFAULT_MODEL
from srctree import REPO

runner = CliRunner()
ROOT = REPO


@pytest.mark.slow
def test_version_matches_the_package_and_python_m_runs_the_cli() -> None:
    assert ridgeline.__version__ == VERSION
    out = subprocess.run(
        [sys.executable, "-m", "ridgeline", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"ridgeline {ridgeline.__version__}"


def test_dash_h_is_help_everywhere_and_completion_is_installable() -> None:
    top = runner.invoke(app, ["-h"])
    assert top.exit_code == 0 and "--install-completion" in top.stdout
    for args in (["roofline", "-h"], ["hw", "-h"], ["sweep", "run", "-h"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0 and "Usage: ridgeline" in result.stdout, args


def test_boolean_flags_show_no_value_and_take_none() -> None:
    text = runner.invoke(app, ["roofline", "--help"]).stdout
    line = next(x for x in text.splitlines() if x.strip().startswith("--json"))
    assert "<bool>" not in line and "BOOLEAN" not in line
    bad = runner.invoke(app, ["roofline", "--json", "true"])
    assert bad.exit_code == 2 and "unexpected extra argument" in bad.stderr


def _first_paragraph(obj: object) -> str:
    doc = obj.info.help if isinstance(obj, typer.Typer) else inspect.getdoc(obj)
    return " ".join((doc or "").split("\n\n")[0].split())


def test_the_listing_is_each_commands_own_first_line() -> None:
    for name, entry in COMMANDS.items():
        obj = getattr(importlib.import_module(f"ridgeline.cli.{entry.module}"), entry.attr)
        assert entry.help == _first_paragraph(obj), name


def test_a_sub_app_stays_a_group_even_with_one_command() -> None:
    """Regression: ``engine`` has one command, ``build``; typer collapses such an app into
    that command, and ``ridgeline engine build`` failed with "unexpected extra argument"."""
    for name, entry in COMMANDS.items():
        obj = getattr(importlib.import_module(f"ridgeline.cli.{entry.module}"), entry.attr)
        if isinstance(obj, typer.Typer):
            subcommands = [c.name for c in obj.registered_commands]
            assert sorted(load_command(name, entry).commands) == sorted(subcommands), name
    result = runner.invoke(app, ["engine", "build", "-h"])
    assert result.exit_code == 0 and "--target" in result.stdout


def _defaults(name: str) -> dict[str, object]:
    command = load_command(name, COMMANDS[name])
    return {p.name: p.default for p in command.params if p.name in ("hw", "model")}


def test_one_default_accelerator_and_model() -> None:
    engine = {"generate", "lab", "bench", "serve", "engine"}  # a real model on this CPU
    scratchpad = {"schedule", "tile"}  # a scratchpad accelerator's compiler: IBM Spyre
    for name in COMMANDS:
        if name in engine or name in {"hw", "model", "sweep", "quiz", "explore"}:
            continue
        found = _defaults(name)
        if "model" in found:
            assert found["model"] == DEFAULT_MODEL, name
        if isinstance(found.get("hw"), str) and name not in scratchpad:
            assert found["hw"] == DEFAULT_ACCELERATOR, name
    assert _defaults("generate")["model"] == DEFAULT_ENGINE_MODEL


@pytest.mark.slow
def test_help_loads_no_heavy_module() -> None:
    """The packages' lazy ``__init__`` (a table of names) may load; none of their modules."""
    code = (
        "import sys; from ridgeline.cli import main; sys.argv = ['ridgeline', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = {'numpy', 'matplotlib', 'ridgeline.sim', 'torch', 'pydantic'}\n"
        "found = heavy & set(sys.modules)\n"
        "found |= {m for m in sys.modules if m.startswith('ridgeline.analytic.')}\n"
        "print(sorted(found))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


_LOADED = (
    "import sys\nfrom ridgeline.cli import main\n"
    "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
    "print(' '.join(sorted(sys.modules)))"
)
# What no command's --help, and no catalog listing, may load (a --help is to answer within 0.3 s).
_HEAVY_FOR_HELP = ("numpy", "scipy", "matplotlib", "pandas", "torch")


def _loaded(*args: str) -> set[str]:
    """The modules ``ridgeline ARGS`` has loaded when it exits."""
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, *args], capture_output=True, text=True, check=True
    )
    return set(done.stdout.split("\n")[-2].split())


def _first_leaf(name: str) -> list[str]:
    cmd, path = load_command(name, COMMANDS[name]), [name]
    while hasattr(cmd, "commands"):
        first = sorted(cmd.commands)[0]
        cmd, path = cmd.commands[first], [*path, first]
    return path


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_help_loads_no_numpy_nor_the_catalog(name: str) -> None:
    # regression: 'simulate --help' took 2.15 s and 'plan --help' loaded scipy, through the
    # enums and defaults their options name (now in sim.kinds, sweep.kinds, specs.cost_mode,
    # defaults); every --help parsed the catalog and its calibration files' models as well
    path = _first_leaf(name)
    loaded = _loaded(*path, "--help")
    assert not {m for m in loaded if m.split(".")[0] in _HEAVY_FOR_HELP}, path
    assert not loaded & {"ridgeline.specs.catalog", "ridgeline.specs.calibration"}, path


@pytest.mark.slow
@pytest.mark.parametrize(
    "args", [["hw", "list"], ["hw", "show", "h100-sxm"], ["hw", "list", "--json"]]
)
def test_the_catalog_lists_without_the_cost_model(args: list[str]) -> None:
    # regression: 'hw list' took 0.86 s loading numpy and the cost model for the ridge points
    loaded = _loaded(*args)
    assert not {m for m in loaded if m.split(".")[0] in _HEAVY_FOR_HELP}
    assert not {
        m for m in loaded if m.startswith(("ridgeline.sim.", "ridgeline.analytic.roofline"))
    }


@pytest.mark.slow
def test_a_plain_simulation_loads_no_compiled_shapes() -> None:
    # regression: every 'simulate' loaded the compiled-shape variants and the dataflow compiler
    # (sim.compiled, sim.static_variants, analytic.dataflow), a third of its start-up
    loaded = _loaded("simulate", "--requests", "20", "--json")
    unneeded = ("ridgeline.sim.compiled", "ridgeline.sim.static_variants", "ridgeline.sim.variants")
    unneeded += ("ridgeline.analytic.dataflow", "ridgeline.fidelity", "scipy", "matplotlib")
    assert not {m for m in loaded for u in unneeded if m == u or m.startswith(u + ".")}


@pytest.mark.slow
def test_piped_output_is_not_wrapped() -> None:
    cmd = [sys.executable, "-m", "ridgeline", "kv", "--context", "32768", "--hw", "h100-sxm"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].startswith("llama-3.1-8b: 131,072 B") and out[0].endswith("(batch 1)")
    assert len(out[0]) > 150


def _leaves() -> list[tuple[list[str], typer.core.TyperCommand]]:
    found: list[tuple[list[str], typer.core.TyperCommand]] = []

    def walk(path: list[str], cmd: object) -> None:
        sub = getattr(cmd, "commands", None)
        if sub is None:
            found.append((path, cmd))  # type: ignore[arg-type]
            return
        for name, child in sub.items():
            walk([*path, name], child)

    for name, entry in COMMANDS.items():
        walk([name], load_command(name, entry))
    return found


def test_every_command_help_shows_an_example_that_parses() -> None:
    leaves = _leaves()
    assert len(leaves) >= 41
    for path, cmd in leaves:
        help_text = runner.invoke(app, [*path, "--help"]).stdout
        lines = help_text.splitlines()
        assert "  Example:" in lines, path
        example = lines[lines.index("  Example:") + 1].strip()
        prefix = ["ridgeline", *path]
        args = shlex.split(example)
        assert args[: len(prefix)] == prefix, (path, example)
        cmd.make_context(" ".join(prefix), args[len(prefix) :])  # every option of it exists


def test_a_group_alone_prints_its_help_and_exits_0() -> None:
    # regression: 'ridgeline' and 'ridgeline lab' printed the whole help squashed into one
    # 'error: ...' line on stderr
    groups = [[n] for n in COMMANDS if hasattr(load_command(n, COMMANDS[n]), "commands")]
    assert len(groups) >= 8  # hw, model, native, sweep, bench, engine, lab, quiz
    for args in ([], *groups):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, args
        assert result.stdout.startswith(f"Usage: ridgeline {' '.join(args)}".rstrip() + " ")
        assert "\nOptions:\n" in result.stdout and result.stderr == ""


# The commands that serve or only write files, as README.md's tour names them.
NO_JSON = ("serve", "explore", "lab report", "lab export", "quiz export", "quiz instructor-init")


def test_every_command_that_prints_results_takes_json_and_the_readme_names_the_rest() -> None:
    # regression: the README promised --json on every command; serve, explore, lab report and
    # quiz export had none, and quiz instructor-init went unnamed
    without = [
        " ".join(path)
        for path, cmd in _leaves()
        if not any("--json" in getattr(p, "opts", ()) for p in cmd.params)
    ]
    assert sorted(without) == sorted(NO_JSON)
    readme = " ".join((ROOT / "README.md").read_text().split())
    named = "; those that serve or only write files do not (" + ", ".join(f"`{c}`" for c in NO_JSON)
    assert named in readme
    top = " ".join(runner.invoke(app, []).stdout.split())
    assert "Every command that prints results takes --json" in top
