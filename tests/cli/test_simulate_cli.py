"""``ridgeline simulate`` and ``simulate compare``: stdout and stderr checked separately."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline.analytic.pricing import Pricing
from ridgeline.cli import app
from ridgeline.report.build import ReportContext
from ridgeline.report.serving_section import serving_section
from ridgeline.specs import get_accelerator, get_model

DATA = Path(__file__).parent.parent / "data"
runner = CliRunner()


@pytest.mark.slow
def test_simulate_json_reports_one_result() -> None:
    r = runner.invoke(
        app,
        [
            "simulate",
            "--hw",
            "a100-80gb",
            "--model",
            "llama-2-7b",
            "--workload",
            "poisson",
            "--rate",
            "5",
            "--requests",
            "50",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    (res,) = out["results"]
    assert out["schema"] == "ridgeline.simulate/3" and res["num_requests"] == 50
    assert out["mode"] == "calibrated" and out["pricing"]["label"] == "expected (calibrated)"
    assert res["num_completed"] + res["num_rejected"] == 50
    # the KV-pool rule (analytic.memory): 0.9 x 80e9 B less 13,476,831,232 B of weights, the
    # profile step's 2,048 x 2 B x (4,096 + 3 x 11,008) + 256 x 32,000 x 24 B = 348,651,520 B
    # of activations and 1e9 B of workspace: 57,174,517,248 B / (16 x 524,288 B) = 6,815 blocks
    assert res["ttft_s"]["p50"] > 0 and res["kv_blocks"] == 6815


def test_simulate_prices_calibrated_unless_ideal_and_says_so() -> None:
    """The same run is slower calibrated than on the ideal roofline, and the table names it."""
    args = ["simulate", "--hw", "h100-sxm", "-m", "llama-3.1-8b", "-n", "20", "--rate", "2"]
    cal = runner.invoke(app, [*args, "--json"])
    ideal = runner.invoke(app, [*args, "--json", "--ideal"])
    assert cal.exit_code == ideal.exit_code == 0, cal.output + ideal.output
    c, i = json.loads(cal.stdout), json.loads(ideal.stdout)
    assert (c["mode"], i["mode"]) == ("calibrated", "ideal")
    assert c["results"][0]["tpot_s"]["p50"] > i["results"][0]["tpot_s"]["p50"]
    table = runner.invoke(app, [*args, "--ideal"], env={"COLUMNS": "200"})
    assert "— ideal roofline" in table.stdout
    bad = runner.invoke(app, [*args, "--bw-eff", "0.5"])
    assert bad.exit_code == 2 and "add --ideal" in bad.stderr


@pytest.mark.slow
def test_simulate_compare_table_and_plots(tmp_path: Path) -> None:
    args = [
        "simulate",
        "compare",
        "--requests",
        "30",
        "--rate",
        "8",
        "--configs",
        "paged,contiguous,prefix",
        "--workload",
        "shared-prefix",
        "--plot",
        str(tmp_path),
    ]
    r = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    for label in ("paged", "contiguous", "prefix"):
        assert label in r.stdout
    assert (tmp_path / "kv_use.png").stat().st_size > 1000
    assert (tmp_path / "latency_cdf.png").stat().st_size > 1000


@pytest.mark.slow
def test_trace_spec_decode_disagg_and_tiers_options() -> None:
    r = runner.invoke(
        app,
        [
            "simulate",
            "--trace",
            str(DATA / "trace_tiny.jsonl"),
            "--spec-k",
            "3",
            "--spec-accept",
            "0.6",
            "--disagg",
            "1:1",
            "--tiers",
            "host",
            "--prefix-caching",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    (res,) = json.loads(r.stdout)["results"]
    assert res["num_completed"] == 4 and res["tier_traffic"][0]["name"] == "host"


def test_errors_are_one_stderr_line_with_exit_2() -> None:
    r = runner.invoke(app, ["simulate", "--trace", str(DATA / "trace_bad.jsonl")])
    assert r.exit_code == 2
    assert r.stderr.strip().count("\n") == 0
    assert "trace_bad.jsonl:2: field prompt_len: not a number: 'ten'" in r.stderr
    r = runner.invoke(app, ["simulate", "--policy", "lifo", "--requests", "5"])
    assert r.exit_code == 2 and "'lifo' is not one of 'fcfs'" in r.stderr
    r = runner.invoke(app, ["simulate", "compare", "--configs", "paged,bogus", "--requests", "5"])
    assert r.exit_code == 2 and "unknown simulate variant 'bogus'" in r.stderr
    r = runner.invoke(app, ["simulate", "--disagg", "2", "--requests", "5"])
    assert r.exit_code == 2 and "field disagg" in r.stderr


@pytest.mark.slow
def test_report_serving_section(tmp_path: Path) -> None:
    ctx = ReportContext(get_model("gpt2"), Pricing.expected(get_accelerator("a100-80gb")), tmp_path)
    s = serving_section(ctx, num_requests=60)
    assert [row[0] for row in s.tables[0].rows] == [
        "paged",
        "contiguous",
        "static",
        "prefix",
        "spec",
    ]
    assert all(f.exists() for f in s.figures)
    paged, contiguous = s.data["results"][0], s.data["results"][1]
    assert contiguous["unused_allocated_frac"] > 10 * paged["unused_allocated_frac"]


def test_a_run_the_fast_mode_does_not_cover_says_why_on_stderr_and_in_the_json() -> None:
    """Speculative decoding runs in the step loop: one stderr line names it, the JSON's
    ``fast_mode`` says the same; a covered run says nothing and reports that the fast mode ran."""
    args = ["simulate", "--hw", "a100-80gb", "-m", "llama-2-7b", "-n", "8", "--rate", "4"]
    spec = runner.invoke(app, [*args, "--spec-k", "2", "--json"])
    plain = runner.invoke(app, [*args, "--json"])
    assert spec.exit_code == plain.exit_code == 0, spec.output + plain.output
    assert spec.stderr == (
        "fast mode off: speculative decoding (the step loop runs it, ~10x slower)\n"
    )
    assert json.loads(spec.stdout)["results"][0]["fast_mode"] == {
        "ran": False,
        "off": "spec_decode",
        "why": "speculative decoding",
    }
    assert plain.stderr == ""
    assert json.loads(plain.stdout)["results"][0]["fast_mode"] == {
        "ran": True,
        "off": None,
        "why": None,
    }
