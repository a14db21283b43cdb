"""Predictions held against published measurements: the dataset loader, predict
through the simulator, re-timing a recorded run, the closed forms of the fit's inner loop, the
fit itself, and the predict command."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.fidelity.dataset import Metric, load_dataset, load_source_file, parse_source
from ridgeline.fidelity.fit import (
    EngineFacts,
    engine_calibration,
    engine_facts,
    fit_family,
    kv_read_factor,
)
from ridgeline.fidelity.prediction import PredictRequest, predict, record
from ridgeline.fidelity.trace import TraceSet, _sum_max
from ridgeline.specs import DType, get_accelerator, get_family, get_model
from ridgeline.specs.calibration import IDEAL, MIN_CONSTRAINING_ROWS, CostMode, Term

runner = CliRunner()

SOURCE = {
    "title": "t",
    "url": "https://example.org/x",
    "date": "2024-08",
    "kind": "vendor",
    "publisher": "p",
}
ROW = {
    "id": "r1",
    "hardware": "h100-sxm",
    "chips": 2,
    "tensor_parallel": 2,
    "model": "llama-3.1-8b",
    "weight_dtype": "fp8",
    "kv_dtype": "fp8",
    "scenario": "offline",
    "metric": "output_tokens_per_s",
    "value": 1000.0,
    "isl": 128,
    "osl": 128,
    "quote": "q",
}


# --- the dataset -----------------------------------------------------------------------------


def test_dataset_rows_parse_and_check_their_split() -> None:
    (row,) = parse_source({"source": SOURCE, "rows": [ROW]}, "src")
    assert row.key == "src/r1"
    assert row.weight_dtype is DType.FP8
    with pytest.raises(ConfigError, match=r"row r1: field chips: 2 != .* = 1"):
        parse_source({"source": SOURCE, "rows": [{**ROW, "tensor_parallel": 1}]}, "src")
    with pytest.raises(ConfigError, match="field rows.id: duplicate"):
        parse_source({"source": SOURCE, "rows": [ROW, ROW]}, "src")
    with pytest.raises(ConfigError, match=r"field rows.0.value"):
        parse_source({"source": SOURCE, "rows": [{**ROW, "value": -1}]}, "src")


def test_a_binary_measurement_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="cannot read a TOML measurement file") as e:
        load_source_file(bad)
    assert "\n" not in str(e.value)


# --- predict ---------------------------------------------------------------------------------


def _small(**over: object) -> PredictRequest:
    kw: dict[str, object] = dict(
        hardware="h100-sxm",
        model="llama-3.1-8b",
        isl=256,
        osl=64,
        weight_dtype=DType.FP8,
        requests=40,
        max_seqs=16,
    )
    kw.update(over)
    return PredictRequest(**kw)  # type: ignore[arg-type]


def test_predict_sizes_its_kv_pool_with_the_one_rule() -> None:
    """70B in bf16 on 4 H100s under the KV-pool rule (analytic.memory), predict's profile step
    of 8,192 tokens over 256 sequences: each chip may use 0.9 x 80e9 = 72e9 B for 141.1e9 / 4 =
    35,276,853,248 B of weights, a reserve of 8,192 x 2 B x (8,192 + 3 x 28,672 / 4) +
    256 x 128,256 x 24 B = 1,274,544,128 B of activations and 1e9 B of workspace, and KV:
    34,448,602,624 B. The 4 chips hold distinct KV heads (8 / 4): 137,794,410,496 B / (16 x
    327,680 B per block) = 26,282 blocks."""
    from ridgeline.analytic import Deployment, Dtypes, MemoryRule, kv_pool_blocks

    model = get_model("llama-3.1-70b")
    dep = Deployment(get_accelerator("h100-sxm"), 4)
    assert kv_pool_blocks(model, dep, Dtypes(), 16 * 327_680, MemoryRule(None, 8192, 256)) == 26_282
    req = PredictRequest("h100-sxm", "llama-3.1-70b", isl=128, osl=8, tensor_parallel=4, requests=4)
    p = predict(req)
    assert p.kv_blocks == 26_282 and p.max_batch == 26_282 // 9  # 136 tokens: 9 blocks each
    with pytest.raises(CapacityError, match="leaves no room for KV on 2 x h100-sxm"):
        predict(PredictRequest("h100-sxm", "llama-3.1-70b", 128, 8, tensor_parallel=2))


def test_calibrated_prediction_is_slower_than_ideal_and_reports_its_mode() -> None:
    ideal = predict(_small(mode=CostMode.IDEAL))
    cal = predict(_small())
    assert cal.mode is CostMode.CALIBRATED and ideal.mode is CostMode.IDEAL
    assert cal.output_tokens_per_s < ideal.output_tokens_per_s
    assert cal.tpot_s > ideal.tpot_s
    assert 1 <= cal.batch <= 16
    assert cal.num_requests == 40


@pytest.mark.parametrize(
    "over",
    [
        {},  # offline queue
        {"requests": None, "batch": 3},  # a fixed batch
        {"requests": 6, "concurrency": 2, "osl": 1},  # closed loop: TTFT from admission
        {"model": "mixtral-8x7b", "requests": 12, "isl": 64, "osl": 16},  # MoE: stepped runs
        {"tensor_parallel": 2, "requests": 20},
    ],
)
def test_a_recorded_run_retimes_to_the_simulation(over: dict[str, object]) -> None:
    """Re-timing one recorded run equals simulating again, ideal and calibrated."""
    req = _small(**over)
    trace = record(req)
    for mode, cal in ((CostMode.IDEAL, IDEAL), (CostMode.CALIBRATED, None)):
        cal = cal or get_accelerator("h100-sxm").calibration
        p = predict(_small(mode=mode, **over))
        m = trace.metrics(cal)
        assert m[Metric.OUTPUT_TOKENS_PER_S] == pytest.approx(p.output_tokens_per_s, rel=1e-9)
        assert m[Metric.TTFT_S] == pytest.approx(p.ttft_s, rel=1e-9)
        if req.osl > 1:
            assert m[Metric.TPOT_S] == pytest.approx(p.tpot_s, rel=1e-9)
    stacked = TraceSet.of([trace] * 4, list(Metric))
    values = stacked.values(cal)
    expected = trace.metrics(cal)
    for v, metric in zip(values, Metric, strict=True):
        assert v == pytest.approx(expected[metric], rel=1e-9)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    a=st.floats(-5, 5),
    b=st.floats(-2, 2),
    c=st.floats(-5, 5),
    d=st.floats(-2, 2),
    k=st.integers(1, 60),
)
def test_sum_of_max_of_two_lines_is_closed_form(
    a: float, b: float, c: float, d: float, k: int
) -> None:
    j = np.arange(k)
    brute = np.maximum(a + b * j, c + d * j).sum()
    got = _sum_max(np.array([a]), np.array([b]), np.array([c]), np.array([d]), np.array([k]))
    assert got[0] == pytest.approx(brute, rel=1e-9, abs=1e-9)


@pytest.mark.slow
def test_the_fit_recovers_known_terms() -> None:
    """Rows made from a known calibration give that calibration back."""
    truth = {
        Term.BANDWIDTH_EFFICIENCY: 0.7,
        Term.FP8_COMPUTE_EFFICIENCY: 0.45,
        Term.LAYER_LATENCY_S: 2e-5,
    }
    family = dataclasses.replace(get_family("nvidia-gpu"), fit=tuple(truth))
    base = get_accelerator("h100-sxm").calibration
    items = []
    shapes: list[dict[str, object]] = [
        {},
        {"requests": None, "batch": 1},
        {"isl": 2048, "osl": 16},
        {"requests": None, "batch": 1, "model": "distilgpt2", "weight_dtype": DType.BF16},
    ]
    for i, over in enumerate(shapes * 4):  # each term needs MIN_CONSTRAINING_ROWS rows behind it
        req = _small(**over)
        trace = record(req)
        metric = Metric.OUTPUT_TOKENS_PER_S if i % 2 == 0 else Metric.PER_USER_TOKENS_PER_S
        value = trace.metrics(base.with_values(truth))[metric]
        (row,) = parse_source(
            {
                "source": SOURCE,
                "rows": [
                    {
                        **ROW,
                        "id": f"r{i}",
                        "chips": 1,
                        "tensor_parallel": 1,
                        "metric": metric.value,
                        "value": value,
                    }
                ],
            },
            "synthetic",
        )
        items.append((row, trace))
    fit = fit_family(family, items)
    assert fit.mean_abs_log_error < 1e-4
    for term, value in truth.items():
        assert fit.values[term] == pytest.approx(value, rel=0.02)
    assert fit.source.startswith("fitted on rows: synthetic/r0")
    assert fit.pinned == {}
    # with half the rows every term has fewer than 8 rows behind it: pinned at its prior
    few = fit_family(family, items[:4])
    assert few.values == {} and set(few.pinned) == set(truth)
    assert all(n < MIN_CONSTRAINING_ROWS for n in few.pinned.values())
    pinned = few.calibration(base)
    assert pinned.layer_latency_s == family.priors.layer_latency_s
    assert pinned.sources["layer_latency_s"] == family.priors.sources["layer_latency_s"]


# --- the command -------------------------------------------------------------------------------


def test_predict_json_carries_the_issue_fields() -> None:
    args = ["predict", "--hw", "h100-sxm", "-m", "llama-3.1-8b", "--weight-dtype", "fp8"]
    out = runner.invoke(app, [*args, "--isl", "128", "--osl", "32", "--requests", "50", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    for key in (
        "output_tokens_per_s",
        "per_user_tokens_per_s",
        "ttft_s",
        "tpot_s",
        "batch",
        "bound",
    ):
        assert math.isfinite(d[key]) if key != "bound" else d[key]
    assert d["mode"] == "calibrated"
    ideal = runner.invoke(
        app, [*args, "--isl", "128", "--osl", "32", "--requests", "50", "--ideal", "--json"]
    )
    assert json.loads(ideal.stdout)["mode"] == "ideal"
    assert json.loads(ideal.stdout)["output_tokens_per_s"] > d["output_tokens_per_s"]


def test_predict_refuses_what_does_not_fit_in_one_line() -> None:
    out = runner.invoke(app, ["predict", "--hw", "tpu-v5e", "-m", "llama-3.1-70b", "--json"])
    assert out.exit_code == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "leaves no room for KV on 1 x tpu-v5e" in out.stderr


def test_one_offline_prediction_takes_well_under_a_second_of_cpu() -> None:
    """Fast enough for a sweep: the default offline run of 1,000 requests."""
    req = PredictRequest("h100-sxm", "llama-3.1-8b", isl=1024, osl=128)
    predict(req)  # the first call loads the catalog and model files
    start = time.process_time()
    out = predict(req)
    assert time.process_time() - start < 1.0
    assert out.to_dict()["output_tokens_per_s"] > 0


def test_an_engine_without_gqa_attention_reads_the_group_size_times_the_kv() -> None:
    rows = {r.key: r for r in load_dataset()}
    old = rows["trtllm-perf-v0-6/70b-h100-tp4-fp8-b480-128-2048"]  # TensorRT-LLM 0.6.1
    new = rows["trtllm-perf-v0-17/8b-h100-tp1-fp8-128-128"]
    assert kv_read_factor(old) == 64 / 8  # llama-2-70b: 64 query heads, 8 KV heads
    assert kv_read_factor(new) == 1.0
    cal = get_accelerator("h100-sxm").calibration
    slower = engine_calibration(cal, EngineFacts(8.0))
    assert slower.kv_bandwidth_efficiency == pytest.approx(cal.kv_bandwidth_efficiency / 8)
    assert slower.bandwidth_efficiency == cal.bandwidth_efficiency
    assert engine_calibration(cal, EngineFacts()) is cal


def test_an_engine_that_fuses_the_quantisation_pays_no_quantised_gemm_latency() -> None:
    rows = {r.key: r for r in load_dataset()}
    trt = rows["trtllm-perf-v0-17/8b-h100-tp1-fp8-128-128"]  # TensorRT engines
    assert engine_facts(trt) == EngineFacts(1.0, fused_quantisation=True)
    cal = get_accelerator("h100-sxm").calibration
    assert cal.quantised_gemm_latency_s == pytest.approx(9e-6)  # AIConfigurator's PyTorch flow
    fused = engine_calibration(cal, engine_facts(trt))
    assert fused.quantised_gemm_latency_s == 0.0
    assert fused.gemm_latency_s == cal.gemm_latency_s


def test_stated_engine_facts_by_hand() -> None:
    """JetStream-PyTorch reads a dense 2,048-token cache per slot: 2,048 / (161 + 338 / 2)
    times the KV bytes of its rows' mean context; gpt-fast's power-limited A100s move bytes at
    1.7 / 2.039 TB/s of the catalog part's rate."""
    rows = {r.key: r for r in load_dataset()}
    tpu = engine_facts(rows["jetstream-pytorch-v5e/llama-3-8b-v5e8-bf16-b128"])
    assert tpu.kv_read_factor == pytest.approx(2048 / (161 + 338 / 2))
    a100 = engine_facts(rows["gpt-fast-a100/7b-a100-tp1-bf16-batch1"])
    assert a100.bandwidth_scale == pytest.approx(1.7e12 / 2.039e12)
    cal = get_accelerator("a100-80gb").calibration
    slow = engine_calibration(cal, a100)
    assert slow.bandwidth_efficiency == pytest.approx(cal.bandwidth_efficiency * 1.7 / 2.039)
    assert slow.kv_bandwidth_efficiency == pytest.approx(cal.kv_bandwidth_efficiency * 1.7 / 2.039)


def test_validate_simulates_each_distinct_run_once() -> None:
    """Regression: a run publishing two metrics (throughput and TTFT) was simulated once per
    row, a fifth of validate's CPU; rows of one run now share its recorded trace."""
    from ridgeline.fidelity.validate import record_all, request_for, retimeable

    rows = load_dataset()
    runs: list[PredictRequest] = []

    def run(req: PredictRequest) -> object:
        runs.append(req)
        return object()

    traces = record_all(rows, run=run)  # type: ignore[arg-type]
    reqs = {r.key: request_for(r) for r in rows if retimeable(r)}
    assert len(runs) == len(set(runs)) == len(set(reqs.values())) < len(reqs)
    by_run = {req: traces[key] for key, req in reqs.items()}
    assert all(traces[key] is by_run[req] for key, req in reqs.items())


def test_validate_simulates_each_run_with_arrivals_once_per_calibration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: rows of one run with arrivals (its throughput, its TTFT) were each simulated
    in full, once per mode; now once per run and calibration."""
    import ridgeline.fidelity.validate as v
    from ridgeline.specs.calibration import IDEAL

    calls: list[PredictRequest] = []

    class Answer:
        def to_dict(self) -> dict[str, float]:
            return {m.value: 1.0 for m in Metric}

    def fake(req: PredictRequest) -> Answer:
        calls.append(req)
        return Answer()

    monkeypatch.setattr(v, "predict", fake)
    rows = [r for r in load_dataset() if not v.retimeable(r)]
    runs: v.Simulated = {}
    for row in rows + rows:
        assert v._predicted(row, IDEAL, {}, runs) == 1.0
    assert len(calls) == len({v.request_for(r) for r in rows}) < len(rows)
