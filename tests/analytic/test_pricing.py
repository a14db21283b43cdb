"""The one pricing value (analytic.pricing): what it holds, how it moves between deployments and
modes, and that every face prices calibrated by default and names its mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline import analytic as an
from ridgeline.analytic.pricing import EXPECTED_LABEL, IDEAL_LABEL, Efficiency, Pricing
from ridgeline.cli import app
from ridgeline.errors import ConfigError
from ridgeline.specs import DType, get_accelerator, get_model
from ridgeline.specs.calibration import IDEAL, CostMode
from ridgeline.sweep import spec_from_dict
from ridgeline.sweep.point import DataTypes, point_key

H100, SPYRE = get_accelerator("h100-sxm"), get_accelerator("ibm-spyre")
runner = CliRunner()


def test_a_pricing_names_its_mode_terms_deployment_and_data_types() -> None:
    p = Pricing.of(an.Deployment(H100, 2), dtypes=an.Dtypes(kv=DType.FP8))
    assert p.mode is CostMode.CALIBRATED and p.calibration is H100.calibration
    assert p.label == EXPECTED_LABEL and p.accelerator is H100
    assert p.to_dict() == {
        "mode": "calibrated",
        "label": "expected (calibrated)",
        "calibration": "nvidia-gpu",
        "deployment": {
            "accelerator": "h100-sxm",
            "chips": 2,
            "tensor_parallel": 2,
            "pipeline_parallel": 1,
        },
        "dtypes": {"weight": "bf16", "act": "bf16", "kv": "fp8"},
    }
    ideal = p.counterpart()
    assert (ideal.mode, ideal.calibration, ideal.label) == (CostMode.IDEAL, IDEAL, IDEAL_LABEL)
    assert ideal.counterpart() == p and ideal.deployment == p.deployment


def test_moving_a_pricing_takes_the_new_chips_terms_in_calibrated_mode_only() -> None:
    cal = Pricing.expected(H100).on(SPYRE)
    assert cal.calibration is SPYRE.calibration and cal.deployment == an.Deployment(SPYRE)
    user = Pricing.of(H100, "ideal", efficiency=Efficiency(bandwidth=0.5))
    assert user.label == "ideal roofline (user efficiencies)"
    assert user.on(SPYRE).calibration == user.calibration  # the user's scaling travels
    with pytest.raises(ConfigError, match="add --ideal"):
        Pricing.of(H100, efficiency=Efficiency(compute=0.5))
    with pytest.raises(ValueError, match="'cheap' is not a valid CostMode"):
        Pricing.of(H100, "cheap")


def test_a_step_is_priced_by_its_pricing_and_a_bare_chip_is_the_roofline() -> None:
    m = get_model("llama-3.1-8b")
    w = an.Workload(an.Phase.DECODE, 8, 4096)
    bare, ideal = an.step_cost(m, H100, w), an.step_cost(m, Pricing.ideal(H100), w)
    cal = an.step_cost(m, Pricing.expected(H100), w)
    assert bare.step_time_s == ideal.step_time_s < cal.step_time_s
    assert (bare.mode, cal.mode) == (CostMode.IDEAL, CostMode.CALIBRATED)
    assert cal.to_dict()["pricing"]["calibration"] == "nvidia-gpu"
    with pytest.raises(ConfigError, match="field deployment: a roofline step is one chip's"):
        an.step_cost(m, Pricing.expected(an.Deployment(H100, 2)), w)


def test_a_sweep_spec_prices_calibrated_and_takes_data_types_as_an_axis() -> None:
    data = {
        "sweep": {"models": ["llama-3.1-70b"], "accelerators": ["h200"], "chips": [8]},
        "dtypes": [{"weight": "bf16"}, {"weight": "fp8"}],
        "workloads": [{"name": "w", "num_requests": 4, "prompt_tokens": 8, "output_tokens": 8}],
        "slo": {"ttft_s": 1.0, "tpot_s": 0.03},
    }
    spec = spec_from_dict(data)
    bf16, fp8 = spec.configurations()
    assert spec.mode is CostMode.CALIBRATED and bf16.mode is CostMode.CALIBRATED
    assert fp8.dtypes == DataTypes(DType.FP8)
    assert fp8.dtypes.dtypes == an.Dtypes(DType.FP8, DType.FP8, DType.FP8)  # W8A8, fp8 KV
    assert fp8.label.endswith("/w/fp8") and bf16.label.endswith("/w")
    ideal = spec_from_dict({**data, "sweep": {**data["sweep"], "mode": "ideal"}})
    key = point_key(bf16, spec.slo, 0)
    assert point_key(ideal.configurations()[0], spec.slo, 0) != key  # never reuse the other
    with pytest.raises(ConfigError, match="dtypes.0.weight"):
        spec_from_dict({**data, "dtypes": [{"weight": "fp9"}]})


def test_compare_table_and_plot_name_the_same_binding(tmp_path: Path) -> None:
    """Regression: the table quoted the calibrated binding and the PNG the ideal one. Both now
    show the quoted mode's: on one wafer the calibrated model expects fixed latency to bind
    llama-3.1-8b's decode, the ideal roofline says compute."""
    from ridgeline.report.plots import compare_plot

    cmp = an.compare(get_model("llama-3.1-8b"), ["cerebras-wse3"])
    (row,) = cmp.rows
    assert row.decode_quoted is row.decode_calibrated and row.decode_quoted is not None
    assert row.decode_quoted.binding.resource is an.Resource.LATENCY
    assert row.decode is not None and row.decode.binding.resource is an.Resource.COMPUTE
    fig = compare_plot(cmp)
    labels = [t.get_text() for t in fig.axes[1].get_yticklabels()]
    assert labels == ["cerebras-wse3\nbinds: fixed latency"]
    assert "expected (calibrated)" in fig.texts[0].get_text()
    ideal = an.compare(get_model("llama-3.1-8b"), ["cerebras-wse3"], mode=CostMode.IDEAL)
    assert [t.get_text() for t in compare_plot(ideal).axes[1].get_yticklabels()] == [
        "cerebras-wse3\nbinds: compute"
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["roofline"],
        ["questions"],
        ["compare", "--hw", "h100-sxm"],
        ["deploy", "--model", "llama-3.1-8b"],
        ["schedule"],
        ["orchestrate"],
        ["predict", "--requests", "8", "--isl", "64", "--osl", "8"],
        ["simulate", "-n", "8"],
        [
            "kv-manage",
            "-m",
            "gpt2",
            "--hw",
            "h100-sxm",
            "-n",
            "4",
            "--max-model-len",
            "1024",
            "--prefixes",
            "0",
            "--prompt",
            "fixed:64",
            "--output",
            "fixed:8",
        ],
    ],
)
def test_every_face_prices_calibrated_by_default_and_says_so(args: list[str]) -> None:
    cal = runner.invoke(app, [*args, "--json"])
    ideal = runner.invoke(app, [*args, "--json", "--ideal"])
    assert cal.exit_code == ideal.exit_code == 0, cal.output + ideal.output
    assert json.loads(cal.stdout)["mode"] == "calibrated"
    assert json.loads(ideal.stdout)["mode"] == "ideal"
    table = runner.invoke(app, [*args, "--ideal"], env={"COLUMNS": "250"})
    assert table.exit_code == 0 and "ideal" in table.stdout
