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
from ridgeline.cli.engine_cmds import bench_app, generate_cmd
from ridgeline.cli.fidelity_cmds import predict_cmd, validate_cmd
from ridgeline.cli.kernel_cmds import engine_app
from ridgeline.cli.kv_cmds import kv_manage_cmd
from ridgeline.cli.lab_cmds import lab_app
from ridgeline.cli.quiz_cmds import quiz_app
from ridgeline.cli.report_cmd import report_cmd
from ridgeline.cli.serve_check_cmd import serve_check_cmd
from ridgeline.cli.serve_cmds import serve_cmd
from ridgeline.cli.simulate_cmds import simulate_cmd
from ridgeline.cli.sweep_cmds import sweep_app
from ridgeline.cli.tiling_cmds import (
    flash_cmd,
    layout_cmd,
    orchestrate_cmd,
    schedule_cmd,
    tile_cmd,
)
from ridgeline.cli.web_cmds import explore_cmd

app = new_app("ridgeline: where the time and memory of LLM inference go, and why.")
app.add_typer(hw_app, name="hw")
app.add_typer(model_app, name="model")
app.command("roofline")(roofline_cmd)
app.command("kv")(kv_cmd)
app.command("questions")(questions_cmd)
app.command("compare")(compare_cmd)
app.command("deploy")(deploy_cmd)
app.command("predict")(predict_cmd)
app.command("validate")(validate_cmd)
app.command("report")(report_cmd)
app.command("simulate")(simulate_cmd)
app.command("tile")(tile_cmd)
app.command("flash")(flash_cmd)
app.command("schedule")(schedule_cmd)
app.command("orchestrate")(orchestrate_cmd)
app.command("kv-manage")(kv_manage_cmd)
app.command("layout")(layout_cmd)
app.add_typer(quiz_app, name="quiz")
app.command("generate")(generate_cmd)
app.add_typer(bench_app, name="bench")
app.add_typer(engine_app, name="engine")
app.command("serve")(serve_cmd)
lab_app.command("serve-check")(serve_check_cmd)
app.add_typer(lab_app, name="lab")
app.command("explore")(explore_cmd)
app.add_typer(sweep_app, name="sweep")


def main() -> None:
    app()
