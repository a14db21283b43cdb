"""The simulator's precomputed step cost equals the analytic cost model (differential test)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ridgeline.analytic import Efficiency, MixedShape, Phase, Workload, op_terms, step_cost
from ridgeline.analytic.workload import Dtypes
from ridgeline.sim.executor import StepCostModel
from ridgeline.specs import get_accelerator, get_model, load_config_file

A100 = get_accelerator("a100-80gb")
DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name", ["llama-2-7b", "mistral-7b", "gpt2"])
def test_uniform_steps_match_step_cost(name: str) -> None:
    m = get_model(name)
    cost = StepCostModel(m, A100)
    for batch, ctx in ((1, 512), (32, 3000), (200, 5000)):
        decode = step_cost(m, A100, Workload(Phase.DECODE, batch, ctx)).step_time_s
        assert cost.step_time_s([1] * batch, [ctx] * batch) == pytest.approx(decode, rel=1e-9)
    prefill = step_cost(m, A100, Workload(Phase.PREFILL, 2, 700, prompt_len=300)).step_time_s
    assert cost.step_time_s([300, 300], [400, 400]) == pytest.approx(prefill, rel=1e-9)


def _exact(m, new, prior, eff: Efficiency) -> float:
    peak = A100.peak(Dtypes().compute) * eff.compute
    bw = A100.device_bandwidth_bytes_per_s * eff.bandwidth
    ops = op_terms(m, MixedShape(np.array(new, float), np.array(prior, float)), Dtypes())
    t = sum(max(o.flops / peak, (o.bytes_read + o.bytes_written) / bw) for o in ops)
    return float(t) + eff.step_overhead_s


def test_mixed_batches_with_sliding_windows_match_op_terms() -> None:
    m = load_config_file(DATA / "qwen2_window.json")
    eff = Efficiency(bandwidth=0.8, compute=0.6, step_overhead_s=1e-3)
    cost = StepCostModel(m, A100, efficiency=eff)
    new, prior = [1, 1, 37, 120], [10, 90, 0, 50]
    assert cost.step_time_s(new, prior) == pytest.approx(_exact(m, new, prior, eff), rel=1e-9)


def test_closed_form_decode_run_equals_steps_one_by_one() -> None:
    for m in (get_model("llama-2-7b"), load_config_file(DATA / "qwen2_window.json")):
        cost = StepCostModel(m, A100)
        prior = [5, 60, 61, 300]
        run = cost.decode_run_s(prior, 7)
        one_by_one = [cost.step_time_s([1] * 4, [p + j for p in prior]) for j in range(7)]
        np.testing.assert_allclose(run, one_by_one, rtol=1e-12)


def test_moe_models_take_the_exact_path() -> None:
    m = get_model("mixtral-8x7b")
    cost = StepCostModel(m, A100)
    assert not cost.affine
    want = step_cost(m, A100, Workload(Phase.DECODE, 4, 100)).step_time_s
    assert cost.step_time_s([1] * 4, [100] * 4) == pytest.approx(want, rel=1e-9)
