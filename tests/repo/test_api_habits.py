"""What a notebook user expects of the Python API: results that show themselves as tables
(``_repr_html_``), sweeps as DataFrames whatever their shape, plot functions that return a
matplotlib figure and leave the backend alone, and the trace samples shipped with the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

import ridgeline as rl
from ridgeline.data import trace_names, trace_path
from ridgeline.errors import UnknownNameError
from ridgeline.report import plots

pd = pytest.importorskip("pandas", reason="DataFrames need the pandas extra")

M, H100 = rl.get_model("llama-3.1-8b"), rl.get_accelerator("h100-sxm")


@pytest.mark.parametrize(
    ("batch", "context", "rows"),
    [
        (8, 4096, 1),  # a point
        (np.arange(1, 5), 4096, 4),  # a line
        (np.arange(1, 5)[:, None], np.array([128, 1024, 4096]), 12),  # the README's 2-D grid
        (np.array([[1, 2], [3, 4]]), np.array([[128], [256]]), 4),  # broadcast from two shapes
    ],
)
def test_sweep_to_dataframe_on_every_shape(batch: object, context: object, rows: int) -> None:
    s = rl.sweep(M, H100, rl.Phase.DECODE, batch=batch, context=context)
    df = s.to_dataframe()
    assert len(df) == rows
    grid = np.broadcast_arrays(s.batch, s.context, s.step_time_s)
    assert df["batch"].tolist() == grid[0].ravel().tolist()
    assert df["step_time_s"].tolist() == grid[2].ravel().tolist()
    one = rl.step_cost(M, H100, rl.Workload(rl.Phase.DECODE, int(df.batch[0]), int(df.context[0])))
    assert df["step_time_s"][0] == pytest.approx(one.step_time_s, rel=1e-12)


def test_result_types_show_themselves_as_tables() -> None:
    w = rl.Workload(rl.Phase.DECODE, batch=8, context_len=4096)
    shown = {
        "step": rl.step_cost(M, H100, w),
        "sweep": rl.sweep(M, H100, rl.Phase.DECODE, batch=np.arange(1, 9), context=4096),
        "questions": rl.five_questions(M, H100, w),
        "compare": rl.compare(M),
        "kv": rl.kv_summary(M, 8, 4096, target=H100),
        "model": rl.model_summary(M),
        "accelerator": rl.accelerator_summary(H100),
    }
    for name, result in shown.items():
        html = result._repr_html_()
        assert html.startswith("<table>") and html.endswith("</table>"), name
    assert "<td>mlp.up_gate</td>" in shown["step"]._repr_html_()
    assert "131,072" in shown["kv"]._repr_html_()


def test_plot_functions_return_figures() -> None:
    cost = rl.step_cost(M, H100, rl.Workload(rl.Phase.DECODE, 1, 4096))
    assert isinstance(plots.roofline_plot([cost], [H100], "t"), Figure)
    assert isinstance(plots.kv_plot(M, acc=H100), Figure)
    assert isinstance(plots.compare_plot(rl.compare(M)), Figure)
    assert isinstance(plots.techniques_plot(rl.techniques(M, 1, 4096), "t"), Figure)


@pytest.mark.slow
def test_importing_the_plots_leaves_the_backend_alone() -> None:
    code = (
        "import matplotlib\n"
        "before = matplotlib.rcParams._get_backend_or_none()\n"
        "import ridgeline.report.plots, ridgeline.report.lab_plots, ridgeline.report.build\n"
        "import sys\n"
        "print(before, matplotlib.rcParams._get_backend_or_none(), 'matplotlib.pyplot' in sys.modules)"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "None", "False"]


def test_trace_samples_ship_with_the_package() -> None:
    assert trace_names() == ["splitwise_code", "splitwise_conv", "vidur_conv_4qps_1k"]
    first = trace_path("splitwise_conv").read_text().splitlines()
    assert first[0] == "arrived_at,num_prefill_tokens,num_decode_tokens" and len(first) == 1001
    assert first[1] == "0.0,374,44"  # the Azure conversation trace's first request
    with pytest.raises(UnknownNameError, match="splitwise_conv"):
        trace_path("splitwise_cnv")
