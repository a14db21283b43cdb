"""The one KV-pool rule (analytic.memory): its reserve against vLLM's published memory profile,
the same pool on every path (simulator, predict, sweeps, kv, deploy), and the direct capacity
answers of ``kv`` and ``deploy``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ridgeline.analytic import Deployment, Dtypes, MemoryRule, chip_budget, kv_fit, kv_pool_blocks
from ridgeline.analytic.pricing import Pricing
from ridgeline.cli import app
from ridgeline.errors import CapacityError
from ridgeline.serving.scheduler import SchedulerConfig
from ridgeline.sim import SimConfig
from ridgeline.sim import kv_pool_blocks as sim_blocks
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.runtime_memory import runtime_memory
from ridgeline.sweep.point import ChipSplit, Configuration, Policy
from ridgeline.sweep.simulator import ServingSimulator
from ridgeline.sweep.workload import Lengths, WorkloadSpec

GIB = 2**30
runner = CliRunner()


@pytest.mark.parametrize(("tp", "logged_gib"), [(1, 1.26), (2, 1.26)])
def test_the_activation_reserve_is_near_vllms_profile(tp: int, logged_gib: float) -> None:
    """vLLM PR #10511 logs Meta-Llama-3-8B on an H100, profiled with 8,192 tokens over 256
    sequences: 'PyTorch activation peak memory 1.26GiB' at TP 1 and at TP 2. The rule's
    estimate: 8,192 x 2 B x (4,096 + 3 x 14,336 / tp) + 256 x 128,256 x 24 B."""
    m = get_model("llama-3-8b")
    b = chip_budget(m, Deployment(get_accelerator("h100-sxm"), tp), Dtypes(), MemoryRule())
    mlp = 8192 * 2 * (4096 + 3 * 14336 / tp)
    assert b.activation_bytes == mlp + 256 * 128_256 * 24
    assert b.activation_bytes / GIB == pytest.approx(logged_gib, rel=0.20)
    assert b.workspace_bytes == 1e9 and b.memory_utilization == 0.9


def test_a_compiler_placed_machine_keeps_no_reserve_and_uses_all_its_memory() -> None:
    wafer = get_accelerator("cerebras-wse3")
    rt = runtime_memory(wafer)
    assert (rt.kind, rt.memory_utilization, rt.workspace_bytes) == ("compiler", 1.0, 0.0)
    b = chip_budget(get_model("llama-3.1-8b"), Deployment(wafer), Dtypes())
    assert b.reserve_bytes == 0 and b.usable_bytes == wafer.device_capacity_bytes
    assert rt.sources["memory_utilization"].startswith("estimate:")


def test_every_path_sizes_the_same_pool() -> None:
    """The simulator's pool, the sweep's, predict's rule and the analytic function: one
    number for llama-3.1-8b on two H100s under the same profile step."""
    m, dep = get_model("llama-3.1-8b"), Deployment(get_accelerator("h100-sxm"), 2)
    sched = SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=128, max_model_len=4096)
    block = 16 * 131_072
    want = kv_pool_blocks(m, dep, Dtypes(), block, MemoryRule(None, 2048, 128))
    assert sim_blocks(SimConfig(m, Pricing.expected(dep), sched)) == want
    assert sim_blocks(SimConfig(m, Pricing.ideal(dep), sched)) == want  # mode prices, not sizes
    wl = WorkloadSpec(num_requests=4, prompt=Lengths.between(8, 8), output=Lengths.between(8, 8))
    config = Configuration(m.name, "h100-sxm", ChipSplit(2, 2), Policy("p", max_num_seqs=128), wl)
    assert sim_blocks(ServingSimulator().sim_config(config, 4096, 0)) == want


def test_the_capacity_answer_caps_at_the_models_positions_and_names_what_is_missing() -> None:
    m = get_model("llama-3.1-8b")
    fit = kv_fit(m, Deployment(get_accelerator("h200")), Dtypes(), (1_000_000, 1))
    assert fit.max_batch is None  # one sequence of a million tokens does not fit 126 GB of KV
    assert fit.max_context == 131_072 and fit.capped
    out = runner.invoke(
        app, ["kv", "--model", "llama-3.1-8b", "--context", "1000000", "--hw", "h200"]
    )
    assert out.exit_code == 0, out.output
    assert "None" not in out.stdout and "nan" not in out.stdout
    assert "exceed llama-3.1-8b's 131,072 positions" in out.stdout
    assert "at 1,000,000 tokens: none (one sequence needs more than the" in out.stdout
    assert "131,072 tokens, the model's maximum (memory would hold more)" in out.stdout


def test_kv_of_70b_on_an_h200_answers_with_the_smallest_split_that_holds_it() -> None:
    """The documented command as typed: one H200 cannot hold 141 GB of bf16
    weights, so kv answers on the smallest tensor-parallel group and says so."""
    args = [
        "kv",
        "--model",
        "llama-3.1-70b",
        "--context",
        "131072",
        "--hw",
        "h200",
        "--kv-dtype",
        "fp8",
    ]
    out = runner.invoke(app, args)
    assert out.exit_code == 0, out.output
    assert "on 2 x h200 (TP 2 x PP 1), the smallest deployment that holds the weights" in out.stdout
    d = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert d["capacity"]["chosen_deployment"] and d["capacity"]["deployment"]["chips"] == 2
    assert d["max_batch"] == 5  # 107 GB of fp8 KV / (131,072 x 163,840 B)


def test_deploy_and_predict_agree_on_two_h100s() -> None:
    """How big a batch fits llama-3.1-70b on two H100s? Under the one rule
    neither deploy nor predict finds room at memory_utilization 0.9, and both say what would;
    at 0.95 deploy's largest batch is predict's pool in requests of the same length."""
    deploy = runner.invoke(app, ["deploy", "--hw", "h100-sxm", "-m", "llama-3.1-70b", "--tp", "2"])
    predict = runner.invoke(
        app,
        [
            "predict",
            "--hw",
            "h100-sxm",
            "-m",
            "llama-3.1-70b",
            "--tp",
            "2",
            "--isl",
            "4000",
            "--osl",
            "96",
            "--requests",
            "4",
        ],
    )
    assert deploy.exit_code == predict.exit_code == 2
    assert "memory_utilization above 0.915" in deploy.stderr
    assert "memory_utilization above 0.915" in predict.stderr
    at = ["--memory-utilization", "0.95"]
    d = json.loads(
        runner.invoke(
            app,
            [
                "deploy",
                "--hw",
                "h100-sxm",
                "-m",
                "llama-3.1-70b",
                "--tp",
                "2",
                "--context",
                "4095",
                "--json",
                *at,
            ],
        ).stdout
    )
    p = json.loads(
        runner.invoke(
            app,
            [
                "predict",
                "--hw",
                "h100-sxm",
                "-m",
                "llama-3.1-70b",
                "--tp",
                "2",
                "--isl",
                "4000",
                "--osl",
                "96",
                "--requests",
                "4",
                "--json",
                *at,
            ],
        ).stdout
    )
    # deploy's reserve is for a step of 8,192 tokens over 256 sequences, predict's the same
    assert d["capacity"]["memory_per_chip"] == pytest.approx(
        chip_budget(
            get_model("llama-3.1-70b"),
            Deployment(get_accelerator("h100-sxm"), 2),
            Dtypes(),
            MemoryRule(0.95),
        ).to_dict()
    )
    # 4,096 tokens a request: deploy counts tokens, predict 16-token blocks (256 each)
    assert d["capacity"]["max_batch"] == p["max_batch"] == 4


def test_no_room_says_what_would_leave_some() -> None:
    m, h100 = get_model("llama-3.1-70b"), get_accelerator("h100-sxm")
    with pytest.raises(CapacityError, match=r"memory_utilization above 0\.915 leaves some"):
        kv_pool_blocks(m, Deployment(h100, 2), Dtypes(), 16 * 327_680)
    with pytest.raises(CapacityError, match=r"more chips \(--tp, --pp\) are needed"):
        kv_pool_blocks(m, Deployment(h100), Dtypes(), 16 * 327_680)
