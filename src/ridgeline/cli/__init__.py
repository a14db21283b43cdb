"""cli: the ``ridgeline`` command. A face: each command parses, calls one library function and
renders its result (Rich tables, ``--json``, ``--plot``). No logic lives here.

Layer rule: may import every layer; nothing imports ``cli``.
"""

from __future__ import annotations

from ridgeline.cli.analytic_cmds import (
    compare_cmd,
    hw_app,
    kv_cmd,
    model_app,
    questions_cmd,
    roofline_cmd,
)
from ridgeline.cli.common import new_app
from ridgeline.cli.engine_cmds import bench_app, generate_cmd
from ridgeline.cli.lab_cmds import lab_app
from ridgeline.cli.report_cmd import report_cmd
from ridgeline.cli.simulate_cmds import simulate_cmd

app = new_app("ridgeline: where the time and memory of LLM inference go, and why.")
app.add_typer(hw_app, name="hw")
app.add_typer(model_app, name="model")
app.command("roofline")(roofline_cmd)
app.command("kv")(kv_cmd)
app.command("questions")(questions_cmd)
app.command("compare")(compare_cmd)
app.command("report")(report_cmd)
app.command("simulate")(simulate_cmd)
app.command("generate")(generate_cmd)
app.add_typer(bench_app, name="bench")
app.add_typer(lab_app, name="lab")


def main() -> None:
    app()
