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
from ridgeline.cli.deploy_cmds import deploy_cmd
from ridgeline.cli.report_cmd import report_cmd
from ridgeline.cli.simulate_cmds import simulate_cmd
from ridgeline.cli.sweep_cmds import sweep_app

app = new_app("ridgeline: where the time and memory of LLM inference go, and why.")
app.add_typer(hw_app, name="hw")
app.add_typer(model_app, name="model")
app.command("roofline")(roofline_cmd)
app.command("kv")(kv_cmd)
app.command("questions")(questions_cmd)
app.command("compare")(compare_cmd)
app.command("deploy")(deploy_cmd)
app.command("report")(report_cmd)
app.command("simulate")(simulate_cmd)
app.add_typer(sweep_app, name="sweep")


def main() -> None:
    app()
