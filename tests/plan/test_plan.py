"""``ridgeline plan``: the cheapest deployment that meets latency targets."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from ridgeline.analytic import Deployment
from ridgeline.analytic.deployment import check_deployment
from ridgeline.analytic.kv import kv_bytes_per_token, weights_bytes
from ridgeline.analytic.memory import chip_budget
from ridgeline.analytic.pricing import Pricing
from ridgeline.cli import app
from ridgeline.errors import ConfigError
from ridgeline.plan import Formats, Knobs, Layout, PlanRequest, Split, Targets, run_plan
from ridgeline.plan.bound import DecodeRate, Instance, Traffic, _largest, decode_rate
from ridgeline.plan.engine import commands
from ridgeline.plan.request import WorkloadChoice, load_prices
from ridgeline.plan.space import formats_of, kv_tokens, splits_of
from ridgeline.plan.steps import StepPrices
from ridgeline.specs import DType, accelerator_names, get_accelerator, get_model
from ridgeline.specs.calibration import CostMode

runner = CliRunner()
M70, M8 = get_model("llama-3.1-70b"), get_model("llama-3.1-8b")
MI300X, H200 = get_accelerator("mi300x"), get_accelerator("h200")
BF16 = Formats(DType.BF16, DType.BF16)


# --- the space --------------------------------------------------------------------------------


def test_70b_fits_one_mi300x_at_a_short_context_but_needs_two_at_a_long_one() -> None:
    """bf16 weights of llama-3.1-70b: 70,553,706,496 x 2 B = 141.1 GB. Under the KV-pool rule
    one MI300X keeps 90% of 192 GB, less the weights and the profile step's reserve, for KV of
    327,680 B a token: about 86,500 tokens. A 1,100-token request fits one chip; a
    120,100-token one needs TP2 (each chip: half the weights, half the KV heads)."""
    assert weights_bytes(M70) == 141_107_412_992
    assert kv_bytes_per_token(M70) == 327_680
    budget = chip_budget(M70, Deployment(MI300X), BF16.dtypes)
    assert budget.usable_bytes == pytest.approx(0.9 * 192e9)
    tokens = (0.9 * 192e9 - 141_107_412_992 - budget.reserve_bytes) / 327_680
    assert kv_tokens(M70, MI300X, Split(1), BF16) == pytest.approx(tokens)
    assert 80_000 < tokens < 96_719  # the reserve takes a few GB of the 31.7 left
    short = splits_of(M70, MI300X, BF16, 1_100, 8)
    long = splits_of(M70, MI300X, BF16, 120_100, 8)
    assert [s.tensor for s in short] == [1, 2, 4, 8]
    assert [s.tensor for s in long] == [2, 4, 8]


def test_formats_are_what_the_chip_computes() -> None:
    """H200 lists bf16 and fp8 peaks; B200 fp4 too; Spyre has fp16 and no bf16; A100 no fp8."""
    assert [f.label for f in formats_of(H200)] == [
        "bf16, KV bf16",
        "bf16, KV fp8",
        "fp8, KV bf16",
        "fp8, KV fp8",
    ]
    b200 = {f.weight for f in formats_of(get_accelerator("b200"))}
    assert b200 == {DType.BF16, DType.FP8, DType.FP4}
    assert {f.weight for f in formats_of(get_accelerator("ibm-spyre"))} == {DType.FP16, DType.FP8}
    assert formats_of(get_accelerator("a100-80gb")) == [BF16]
    with pytest.raises(ConfigError, match="field weight_dtypes: a100-80gb has no fp8 peak"):
        formats_of(get_accelerator("a100-80gb"), [DType.FP8])


def test_groq_is_split_into_pipelines_that_hold_70b() -> None:
    """230 MB chips: llama-3.1-70b needs hundreds of them, in pipeline stages."""
    groq = get_accelerator("groq-lpu")
    splits = splits_of(M70, groq, BF16, 1_000, 100_000)
    assert splits and all(s.pipeline > 1 for s in splits)
    assert min(s.chips for s in splits) >= 141_107_412_992 / groq.device_capacity_bytes


def test_expert_parallel_twin_holds_the_same_bytes_moves_fewer_rows_and_is_searched() -> None:
    """mixtral-8x7b: 8 experts of 3 x 4096 x 14336 = 176,160,768 parameters in each of 32
    layers, 352,321,536 B each in bf16: 90,194,313,216 B of experts in 93,405,585,408 B of
    weights. At TP2 EP2 a chip holds 8/2 = 4 whole experts per layer, 45,097,156,608 B, and half
    the rest (3,211,272,192 / 2): the bytes of half of every expert at TP2. Each chip of EP2
    moves only the rows routed to its own experts, where TP2's sliced experts move every routed
    row on both chips, so a long prefill is faster spread and a decode, whose rows are few,
    prices the same to 1%. The space enumerates both. A dense model or an EP that is not the TP
    degree is refused with the field named."""
    mixtral, h100 = get_model("mixtral-8x7b"), get_accelerator("h100-sxm")
    assert weights_bytes(mixtral) == 93_405_585_408
    ep, tp = Split(2, expert=2), Split(2)
    chip = chip_budget(mixtral, ep.deployment(h100), BF16.dtypes).weights_bytes
    assert chip == 3_211_272_192 / 2 + 4 * 32 * 352_321_536 == 46_702_792_704
    assert chip == chip_budget(mixtral, tp.deployment(h100), BF16.dtypes).weights_bytes
    prices = StepPrices(mixtral, h100, Pricing.expected(h100))
    assert prices.decode_s(ep, BF16, 32, 2000) == pytest.approx(
        prices.decode_s(tp, BF16, 32, 2000), rel=0.01
    )
    assert prices.prefill_s(ep, BF16, 1, 8192) < prices.prefill_s(tp, BF16, 1, 8192)
    splits = splits_of(mixtral, h100, BF16, 1_100, 8)
    assert {s.expert for s in splits} == {1, 2, 4, 8}
    assert all(s.expert in (1, s.tensor) for s in splits)
    assert {s.expert for s in splits_of(M8, h100, BF16, 1_100, 8)} == {1}
    with pytest.raises(ConfigError, match="field expert_parallel: 4 must equal tensor_parallel"):
        check_deployment(mixtral, Split(2, expert=4).deployment(h100))
    with pytest.raises(ConfigError, match="field expert_parallel: llama-3.1-8b has no experts"):
        check_deployment(M8, Split(2, expert=2).deployment(h100))


# --- the bound --------------------------------------------------------------------------------


def test_largest_is_the_last_true_of_a_monotone_predicate() -> None:
    for limit in (1, 2, 7, 64, 1000):
        for cut in (1, 3, 50, 999, 5000):
            assert _largest(lambda b, c=cut: b <= c, limit) == min(cut, limit)


def test_decode_rate_is_the_largest_batch_within_tpot_by_brute_force() -> None:
    """A decode instance's batch: the largest b whose step is within the TPOT target; its rate
    b / ((O - 1) x step(b))."""
    prices = StepPrices(M8, H200, Pricing.expected(H200))
    traffic = Traffic(1000, 101, 1000, 1101)
    inst = Instance(Split(1), BF16)
    rate = decode_rate(prices, inst, traffic, Targets(1.0, 0.015))
    assert isinstance(rate, DecodeRate)
    steps = [prices.decode_s(Split(1), BF16, b, 1050.5) for b in range(1, 600)]
    best = max(b for b, s in zip(range(1, 600), steps, strict=True) if s <= 0.015)
    assert rate.batch == best
    assert rate.requests_per_s == pytest.approx(best / (100 * steps[best - 1]))


@pytest.mark.slow
def test_the_simulator_never_beats_the_bound() -> None:
    """One copy at 1.1x the bound's capacity misses the targets (the bound is an upper one)."""
    wl = WorkloadChoice(isl=1000, osl=100, duration_s=30).spec()
    req = PlanRequest(M8, wl, 30.0, Targets(0.5, 0.02), ("h100-sxm",), max_chips=1, simulated=2)
    plan = run_plan(req)
    assert plan.winner is not None
    for c in plan.accelerators[0].candidates:
        assert c.copies is None or c.copies >= c.bound.copies_for(30.0)


# --- the answers ------------------------------------------------------------------------------


SHORT = [
    "-m",
    "llama-3.1-8b",
    "--isl",
    "512",
    "--osl",
    "64",
    "--rate",
    "5",
    "--ttft-p90",
    "0.5",
    "--tpot-p90",
    "0.05",
]
SHORT += ["--duration", "10"]


def _plan(args: list[str]) -> dict[str, object]:
    out = runner.invoke(app, ["plan", *args, "--workers", "1", "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.mark.slow
def test_a_short_request_plan_on_one_h100() -> None:
    d = _plan(SHORT)
    assert d["schema"] == "ridgeline.plan/1" and d["mode"] == "calibrated"
    w = d["winner"]
    assert isinstance(w, dict) and w["chips"] == 1 and w["accelerator"] == "h100-sxm"
    assert w["tokens_per_s_per_chip"] == pytest.approx(5 * 64)  # the rate's output, one chip
    assert w["met"]["meets_slo"] and w["met"]["ttft_p_s"] <= 0.5 and w["met"]["tpot_p_s"] <= 0.05
    iv = w["intervals"]["tpot_s"]
    # the nvidia-gpu family's held-out rows in data/residuals/loso.toml (docs/plan.md)
    assert iv["low"] < w["met"]["tpot_p_s"] < iv["high"] and iv["rows"] == 138
    assert [c["factor"] for c in d["checks"]] == [0.5, 1.0, 1.5]  # type: ignore[union-attr]
    vllm = d["commands"][0]["lines"][0]  # type: ignore[index]
    assert vllm.startswith("vllm serve $MODEL --tensor-parallel-size 1")


def test_a_target_no_deployment_meets_is_an_answer() -> None:
    """TTFT 1 ms for 4,000-token prompts: exit 0, nothing meets, and the closest prefill is
    named with what binds."""
    args = ["plan", "-m", "llama-3.1-8b", "--isl", "4000", "--osl", "64", "--rate", "5"]
    out = runner.invoke(app, [*args, "--ttft-p90", "0.001", "--tpot-p90", "0.05", "--workers", "1"])
    assert out.exit_code == 0, out.output
    assert "no deployment meets the targets: h100-sxm: TTFT binds: the closest," in out.stdout
    assert "a 4000-token prompt alone takes" in out.stdout
    d = _plan(args[1:] + ["--ttft-p90", "0.001", "--tpot-p90", "0.05"])
    assert d["winner"] is None and d["commands"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--rate", "-1"], "field rate: must be > 0, got -1"),
        (["--rate", "nan"], "--rate: must be a finite number, got nan"),
        (["--ttft-p90", "0"], "field ttft: must be > 0, got 0"),
        (["--tpot-p90", "inf"], "must be a finite number, got inf"),
        (["--percentile", "101"], "field percentile: must be <= 100, got 101"),
        (["--hw", "h100,tpu-v5e"], "unknown accelerator 'h100'"),
        (["--max-chips", "0"], "field max_chips"),
        (["--weight-dtypes", "fp4"], "field weight_dtypes: h100-sxm has no fp4 peak"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    base = {"--rate": "5", "--ttft-p90": "1", "--tpot-p90": "0.05"}
    flags = dict(base)
    extra = []
    for k, v in zip(args[::2], args[1::2], strict=True):
        if k in flags:
            flags[k] = v
        else:
            extra += [k, v]
    cmd = ["plan", "--isl", "100", "--osl", "10", *[x for kv in flags.items() for x in kv], *extra]
    out = runner.invoke(app, cmd)
    assert out.exit_code == 2, out.output
    assert out.stdout == "" and out.stderr.count("\n") == 1
    assert message in out.stderr


def test_traffic_needs_exactly_one_source() -> None:
    with pytest.raises(ConfigError, match="give --isl and --osl, --trace or --workload"):
        WorkloadChoice().spec()
    with pytest.raises(ConfigError, match="give --isl and --osl, --trace or --workload"):
        WorkloadChoice(isl=10, osl=10, trace="splitwise_conv").spec()
    with pytest.raises(ConfigError, match="give both --isl and --osl"):
        WorkloadChoice(isl=10).spec()
    assert WorkloadChoice(trace="splitwise_conv").spec().trace_path is not None


def test_prices_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "p.toml"
    path.write_text("[prices.h100-sxm]\nusd_per_chip_hour = 2.5\n")
    assert load_prices(path) == {"h100-sxm": 2.5}
    path.write_text("[prices.h100-sxm]\nusd_per_chip_hour = -1\n")
    with pytest.raises(ConfigError, match="prices.h100-sxm.usd_per_chip_hour: must be > 0"):
        load_prices(path)


@pytest.mark.slow
def test_cost_per_million_tokens_by_hand(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """$2.5 per chip-hour, one chip carrying 5 x 64 = 320 tokens/s: 2.5 / (320 x 3600) x 1e6."""
    path = tmp_path / "p.toml"
    path.write_text("[prices.h100-sxm]\nusd_per_chip_hour = 2.5\n")
    d = _plan([*SHORT, "--price", str(path)])
    w = d["winner"]
    assert isinstance(w, dict) and d["ranked_by"] == "price"
    assert w["usd_per_million_tokens"] == pytest.approx(2.5 / (320 * 3600) * 1e6)


# --- command lines ----------------------------------------------------------------------------


def test_engine_command_lines_by_hand() -> None:
    lay = Layout("h200", Formats(DType.FP8, DType.FP8), Split(2), Knobs(128, 8192))
    vllm, sglang = commands(lay, H200, 3)
    assert vllm.lines == (
        "vllm serve $MODEL --tensor-parallel-size 2 --pipeline-parallel-size 1 --max-num-seqs 128 "
        "--max-num-batched-tokens 8192 --gpu-memory-utilization 0.9 --kv-cache-dtype fp8 "
        "--quantization fp8",
    )
    assert sglang.lines == (
        "python -m sglang.launch_server --model-path $MODEL --tp-size 2 --pp-size 1 "
        "--max-running-requests 128 --chunked-prefill-size 8192 --mem-fraction-static 0.9 "
        "--kv-cache-dtype fp8_e4m3 --quantization fp8",
    )
    assert vllm.note == "3 replicas behind a load balancer"
    pd = Layout("h200", BF16, Split(2), Knobs(64, 4096), Split(1), num_prefill=3, num_decode=1)
    lines = commands(pd, H200, 1)[0].lines
    assert lines[0] == "# each of the 3 prefill instances:" and "NixlConnector" in lines[1]
    assert "--tensor-parallel-size 2" in lines[3] and "--quantization" not in lines[3]
    groq = commands(lay, get_accelerator("groq-lpu"), 1)
    assert groq[0].lines == () and "does not run on groq-lpu" in groq[0].note


# --- breadth and scale ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("hw", accelerator_names())
def test_every_catalog_accelerator_gets_an_answer(hw: str) -> None:
    """Every chip: a winner, or the reason none meets the targets."""
    wl = WorkloadChoice(isl=512, osl=64, duration_s=10).spec()
    req = PlanRequest(M8, wl, 2.0, Targets(2.0, 0.2), (hw,), simulated=2)
    plan = run_plan(req)
    assert plan.winner is not None or plan.verdict.startswith("no deployment meets")
    assert plan.accelerators[0].num_layouts > 0


@pytest.mark.slow
def test_moe_and_config_json_models(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Mixtral (MoE) from the catalog and a dense config.json from a file both plan."""
    wl = WorkloadChoice(isl=512, osl=64, duration_s=10).spec()
    moe = run_plan(
        PlanRequest("mixtral-8x7b", wl, 2.0, Targets(1.0, 0.1), ("h100-sxm",), simulated=2)
    )
    assert moe.winner is not None and moe.winner.chips is not None
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 2048,
                "intermediate_size": 5632,
                "num_attention_heads": 32,
                "num_key_value_heads": 4,
                "num_hidden_layers": 22,
                "vocab_size": 32000,
                "max_position_embeddings": 4096,
            }
        )
    )
    dense = run_plan(
        PlanRequest(str(config), wl, 2.0, Targets(1.0, 0.1), ("a100-80gb",), simulated=2)
    )
    assert dense.winner is not None and dense.winner.chips == 1


@pytest.mark.slow
def test_local_pool_gives_the_in_process_plan() -> None:
    """Decisions are taken between rounds in shortlist order: two workers, same plan."""
    from ridgeline.sweep.backends import LocalBackend

    wl = WorkloadChoice(isl=1000, osl=100, duration_s=20).spec()
    req = PlanRequest(M8, wl, 20.0, Targets(0.5, 0.02), ("h100-sxm", "mi300x"), simulated=2)
    here, pooled = run_plan(req), run_plan(req, LocalBackend(2))
    a, b = here.to_dict(), pooled.to_dict()
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b
    assert math.isfinite(here.wall_s)


@pytest.mark.slow
def test_two_models_in_one_run_and_the_ideal_mode() -> None:
    """run_plans: one backend session for both models, each answered as alone; in ideal mode
    no figure claims an interval (the residuals are the calibrated model's)."""
    from ridgeline.plan import run_plans

    wl = WorkloadChoice(isl=512, osl=64, duration_s=10).spec()
    base = PlanRequest(M8, wl, 5.0, Targets(0.5, 0.05), ("h100-sxm",), simulated=2)
    both = run_plans([base, replace(base, model=M70)])
    alone = run_plan(replace(base, model=M70))
    assert [p.model for p in both] == ["llama-3.1-8b", "llama-3.1-70b"]
    assert both[1].winner is not None and alone.winner is not None
    assert both[1].winner.chips == alone.winner.chips
    assert both[1].winner.bound.layout == alone.winner.bound.layout
    ideal = run_plan(replace(base, mode=CostMode.IDEAL))
    assert ideal.winner is not None and ideal.winner.intervals is None
    assert "ideal roofline: no interval" in ideal.accelerators[0].interval_note
    with pytest.raises(ConfigError, match="share workload, rate, targets, seed and mode"):
        run_plans([base, replace(base, rate_rps=6.0)])


def test_a_workload_file_in_the_sweep_form(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "w.toml"
    path.write_text("[workload]\nprompt_tokens = [200, 2000]\noutput_tokens = 64\n")
    spec = WorkloadChoice(workload_file=str(path), duration_s=30).spec()
    assert spec.name == "w" and spec.duration_s == 30 and spec.prompt.lo == 200
    path.write_text("[workload]\nprompt_tokens = 0\noutput_tokens = 64\n")
    with pytest.raises(ConfigError, match=r"\[workload\] field prompt_tokens"):
        WorkloadChoice(workload_file=str(path)).spec()


@pytest.mark.slow
def test_ray_gives_the_local_plan() -> None:
    """The sweep's Ray backend runs a plan's simulations too, with the same answer."""
    pytest.importorskip("ray")
    from ridgeline.sweep.backends import RayBackend

    wl = WorkloadChoice(isl=1000, osl=100, duration_s=20).spec()
    req = PlanRequest(M8, wl, 20.0, Targets(0.5, 0.03), ("h100-sxm",), simulated=2)
    a, b = run_plan(req).to_dict(), run_plan(req, RayBackend(num_cpus=2)).to_dict()
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b
