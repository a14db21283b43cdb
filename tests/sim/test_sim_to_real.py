"""The sim-to-real benchmark's training/validation runs, the faces that express them (simulate
--engine/--profile/--concurrency, predict's percentiles, expert parallelism) and the closed loop."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline.analytic import Deployment
from ridgeline.analytic.deployment import check_deployment
from ridgeline.analytic.pricing import Pricing
from ridgeline.cli import app
from ridgeline.errors import ConfigError
from ridgeline.fidelity.prediction import PredictRequest, predict
from ridgeline.fidelity.sim_to_real import (
    Metrics,
    SimToRealSettings,
    trainval_experiments,
    validate_serving,
)
from ridgeline.sim import RequestSpec, SimConfig, simulate
from ridgeline.sim.inference_perf import Stage
from ridgeline.sim.workload import output_tokens, prompt_tokens
from ridgeline.specs import get_accelerator, get_model

runner = CliRunner()
H100 = get_accelerator("h100-sxm")


def test_the_fifteen_trainval_runs_load_with_their_sources() -> None:
    runs = trainval_experiments()
    assert len(runs) == 15 and len({r.exp_id for r in runs}) == 15
    for r in runs:
        src = r.measured_source  # the benchmark's trainval records, or the training runs'
        assert "results_trainval" in src or src.startswith("inference-sim/training default_args")
        check_deployment(get_model(r.model), Deployment(get_accelerator(r.hardware), r.tp))
        assert r.measured.e2e_mean > r.measured.ttft_mean > 0


def test_itl_is_the_benchmarks_derived_figure() -> None:
    """ITL mean = (E2E mean − TTFT mean) / (mean outputs − 1), as the benchmark derives it."""
    wl = [
        RequestSpec(f"r{i}", i * 0.5, prompt_tokens(i, 64), output_tokens(i, 11)) for i in range(4)
    ]
    result = simulate(SimConfig(get_model("llama-2-7b"), Pricing.expected(H100)), wl)
    m = Metrics.of(result)
    want = (result.e2e_s.mean - result.ttft_s.mean) / 10 * 1e3
    assert m.itl_mean == pytest.approx(want) and m.e2e_mean == pytest.approx(
        result.e2e_s.mean * 1e3
    )


def test_a_short_window_of_two_runs_scores_every_metric() -> None:
    runs = [r for r in trainval_experiments() if r.exp_id in ("64", "17")]
    short = [
        dataclasses.replace(
            r,
            profile=dataclasses.replace(
                r.profile, stages=tuple(Stage(s.rate_per_s, 20.0) for s in r.profile.stages)
            ),
        )
        for r in runs
    ]
    v = validate_serving(SimToRealSettings(), short)
    assert len(v.rows()) == 2 and all(r.cpu_s < 5.0 for r in v.results)
    for r in v.results:  # a sane prediction, not a fit: within 2x on these light loads
        assert 0.5 < r.ratio("e2e_mean") < 2.0 and 0.5 < r.ratio("ttft_mean") < 2.0
    d = v.to_dict()
    assert len(d["experiments"]) == 2 and set(d["median_ape"]) == {
        "e2e_mean",
        "ttft_mean",
        "itl_mean",
    }


def test_closed_loop_sends_a_clients_next_request_when_its_last_one_ends() -> None:
    wl = [RequestSpec(f"r{i}", 0.0, prompt_tokens(i, 32), output_tokens(i, 8)) for i in range(6)]
    cfg = SimConfig(get_model("llama-2-7b"), Pricing.ideal(H100))
    closed, open_ = simulate(cfg, wl, clients=2), simulate(cfg, wl)
    assert closed.num_completed == open_.num_completed == 6
    assert closed.max_running == 2 and open_.max_running == 6
    # three rounds of two, each request's latency counted from when its client sent it
    assert closed.makespan_s > 2.5 * max(r.e2e_s for r in closed.requests)


def test_expert_parallel_is_checked_and_labelled() -> None:
    mixtral, llama = get_model("mixtral-8x7b"), get_model("llama-2-7b")
    dep = Deployment(H100, 2, expert_parallel=2)
    check_deployment(mixtral, dep)
    assert "EP 2" in dep.label and dep.to_dict()["expert_parallel"] == 2
    assert "expert_parallel" not in Deployment(H100, 2).to_dict()
    with pytest.raises(ConfigError, match="expert_parallel"):
        check_deployment(llama, Deployment(H100, 2, expert_parallel=2))
    with pytest.raises(ConfigError, match="expert_parallel"):
        check_deployment(mixtral, Deployment(H100, 4, expert_parallel=2))


def test_predict_reports_percentiles_and_per_chip_throughput() -> None:
    req = PredictRequest("h100-sxm", "llama-3.1-8b", 512, 64, tensor_parallel=2, requests=40)
    p = predict(req)
    d = p.to_dict()
    for name in ("ttft", "tpot", "itl", "e2e"):
        q = d[f"{name}_s_percentiles"]
        assert 0 < q["p50"] <= q["p90"] <= q["p99"]
    assert p.chips == 2 and d["per_chip"]["output_tokens_per_s"] == pytest.approx(
        p.output_tokens_per_s / 2
    )
    assert p.total_tokens_per_s == pytest.approx(p.input_tokens_per_s + p.output_tokens_per_s)
    vllm = predict(dataclasses.replace(req, engine="vllm"))
    assert vllm.engine == "vllm" and d["engine"] == "generic"


def test_simulate_runs_an_inference_perf_profile_on_an_engine(tmp_path: Path) -> None:
    profile = {
        "load": {"type": "constant", "stages": [{"rate": 4, "duration": 5}]},
        "data": {
            "type": "shared_prefix",
            "shared_prefix": {
                "num_groups": 2,
                "num_prompts_per_group": 3,
                "system_prompt_len": 64,
                "question_len": 128,
                "output_len": 16,
            },
        },
    }
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    args = ["simulate", "--hw", "h100-sxm", "--model", "llama-3.1-8b", "--engine", "vllm"]
    out = runner.invoke(app, [*args, "--profile", str(path), "--tp", "2", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    r = d["results"][0]
    assert r["label"] == "vllm" and r["num_requests"] == 20 and r["num_completed"] == 20
    assert d["pricing"]["deployment"]["tensor_parallel"] == 2
    closed = runner.invoke(app, [*args, "--concurrency", "4", "-n", "12", "--json"])
    assert closed.exit_code == 0, closed.output
    assert json.loads(closed.stdout)["results"][0]["num_completed"] == 12


def test_a_trace_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    lines = [
        json.dumps({"arrival_s": i * 0.01, "prompt_len": 16, "output_len": 2}) for i in range(1200)
    ]
    path.write_text("\n".join(lines) + "\n")
    base = ["simulate", "--model", "llama-3.1-8b", "--hw", "h100-sxm", "--trace", str(path)]
    whole = runner.invoke(app, [*base, "--json"])
    assert whole.exit_code == 0, whole.output
    assert json.loads(whole.stdout)["results"][0]["num_requests"] == 1200  # no silent 1,000 cap
    first = runner.invoke(app, [*base, "-n", "300", "--json"])
    assert json.loads(first.stdout)["results"][0]["num_requests"] == 300
