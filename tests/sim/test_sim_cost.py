"""The simulator's precomputed step cost equals the analytic cost model (differential test)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ridgeline.analytic import (
    Deployment,
    Efficiency,
    MixedShape,
    Phase,
    Workload,
    op_terms,
    step_cost,
)
from ridgeline.analytic.pricing import Pricing
from ridgeline.analytic.workload import Dtypes
from ridgeline.sim.executor import StepCostModel
from ridgeline.sim.lines import Pieces, affine_maxima, sum_of_maxima
from ridgeline.sim.replicas import DeploymentStepCost
from ridgeline.specs import get_accelerator, get_model, load_config_file
from ridgeline.specs.calibration import CostMode

A100 = get_accelerator("a100-80gb")
IDEAL = Pricing.ideal(A100)
DATA = Path(__file__).parent.parent / "data"


@pytest.mark.parametrize("name", ["llama-2-7b", "mistral-7b", "gpt2"])
def test_uniform_steps_match_step_cost(name: str) -> None:
    m = get_model(name)
    cost = StepCostModel(m, IDEAL)
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
    cost = StepCostModel(m, Pricing.of(A100, CostMode.IDEAL, efficiency=eff))
    new, prior = [1, 1, 37, 120], [10, 90, 0, 50]
    assert cost.step_time_s(new, prior) == pytest.approx(_exact(m, new, prior, eff), rel=1e-9)


def test_closed_form_decode_run_equals_steps_one_by_one() -> None:
    for m in (get_model("llama-2-7b"), load_config_file(DATA / "qwen2_window.json")):
        cost = StepCostModel(m, IDEAL)
        prior = [5, 60, 61, 300]
        run = cost.decode_run_s(prior, 7)
        one_by_one = [cost.step_time_s([1] * 4, [p + j for p in prior]) for j in range(7)]
        np.testing.assert_allclose(run, one_by_one, rtol=1e-12)


@pytest.mark.parametrize("mode", list(CostMode))
def test_moe_models_are_linear_in_two_more_aggregates(mode: CostMode) -> None:
    # x gains the experts hit by the step's T tokens, 8·(1 − (1 − 2/8)^T), and the rows of
    # each expert GEMM, 2T / experts hit: a uniform decode batch of 4 hits 8·(1 − 0.75⁴) =
    # 5.47 experts, 1.46 rows each
    m = get_model("mixtral-8x7b")
    cost = StepCostModel(m, Pricing.of(A100, mode))
    assert cost.num_columns == 8
    assert cost.moe_columns(4) == pytest.approx((8 * (1 - 0.75**4), 8 / (8 * (1 - 0.75**4))))
    if mode is CostMode.IDEAL:
        want = step_cost(m, A100, Workload(Phase.DECODE, 4, 100)).step_time_s
        assert cost.step_time_s([1] * 4, [100] * 4) == pytest.approx(want, rel=1e-9)
    new, prior = [1, 1, 1, 300], [400, 500, 600, 0]
    assert cost.grouped_step_s(3, 1500, [300], [0]) == pytest.approx(
        cost.step_time_s(new, prior), rel=1e-12
    )
    one_by_one = [cost.step_time_s([1] * 3, [400 + j, 500 + j, 600 + j]) for j in range(5)]
    np.testing.assert_allclose(cost.decode_run_s([400, 500, 600], 5), one_by_one, rtol=1e-12)
    segments = cost.decode_segments_s([(3, 1500, 5)])
    assert segments is not None
    np.testing.assert_allclose(segments, one_by_one, rtol=1e-12)


@pytest.mark.parametrize("name", ["mixtral-8x7b", "qwen3-30b-a3b"])
def test_moe_steps_are_the_linear_model_with_each_op_at_its_own_kind(name: str) -> None:
    """A mixture-of-experts step's per-op terms from the linear model (the experts hit and rows
    per expert GEMM as two more aggregates) equal op_terms on the step's own shape, each op's
    compute at its own format's peak, mixed prefill-and-decode steps included."""
    cost = StepCostModel(get_model(name), Pricing.expected(get_accelerator("h100-sxm")))
    for new, prior in (([1] * 4, [100, 7, 300, 2]), ([512, 1, 1], [0, 40, 900]), ([33], [64])):
        decode = all(n == 1 for n in new)
        shape = MixedShape(np.asarray(new, dtype=float), np.asarray(prior, dtype=float))
        f, m, k, r = cost._terms(shape)
        x = np.asarray(cost.aggregates(new, prior))
        got = [a @ x for a in cost._raw[decode]]
        for a, b in zip(got, (f, m / cost.bw, k / cost.bw, r), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("hw", ["a100-80gb", "h100-sxm", "tpu-v5e"])
@pytest.mark.parametrize("mode", list(CostMode))
def test_grouped_closed_forms_equal_step_time(hw: str, mode: CostMode) -> None:
    """decode_steps_s (batch and tokens per step, members finishing), decode_segments_s
    (the same steps as runs of a fixed batch) and grouped_step_s
    (members by count and sum) give step_time_s of the listed sequences."""
    cost = StepCostModel(get_model("llama-2-7b"), Pricing.of(get_accelerator(hw), mode))
    prior = [5, 60, 61, 300, 4000, 17]
    fin = [3, 9, 9, 2, 9, 6]  # steps each still takes
    batch, total, one_by_one = [], [], []
    for j in range(9):
        ctx = [p + j for p, f in zip(prior, fin, strict=True) if f > j]
        batch.append(len(ctx))
        total.append(sum(ctx))
        one_by_one.append(cost.step_time_s([1] * len(ctx), ctx))
    steps = cost.decode_steps_s(batch, total)
    assert steps is not None
    np.testing.assert_allclose(np.array(steps), np.array(one_by_one), rtol=1e-12)
    # the same steps as runs of a fixed batch: (6, ., 2), (5, ., 1), (4, ., 3), (3, ., 3)
    runs = [(6, total[0], 2), (5, total[2], 1), (4, total[3], 3), (3, total[6], 3)]
    assert cost.decode_segments_s(runs) == steps
    long_run = cost.decode_segments_s([(4, 0, 3000)])
    assert long_run is not None
    want = [cost.step_time_s([1] * 4, [j] * 4) for j in range(3000)]
    np.testing.assert_allclose(np.array(long_run), np.array(want), rtol=1e-12)
    # a long run (one numpy expression) rounds as step-by-step segments (list comprehension)
    assert long_run == cost.decode_steps_s([4] * 3000, [4 * j for j in range(3000)])
    mixed = cost.grouped_step_s(len(prior), sum(prior), [700, 1], [0, 33])
    assert mixed == pytest.approx(cost.step_time_s([1] * 6 + [700, 1], prior + [0, 33]), rel=1e-12)


def test_decode_steps_follow_the_pieces_across_kinks() -> None:
    """A run whose cached tokens cross kinks (and land on one) takes each step's own piece."""
    cost = StepCostModel(get_model("llama-2-7b"), IDEAL)
    pieces = Pieces((100.5, 164.0, 2000.0), (1.0, 0.5, 0.25, 2.0), (1e-3, 2e-3, 3e-3, 1e-4))
    cost._pieces[4] = pieces  # a stand-in with kinks (llama's decode has none on these chips)
    times = cost.decode_segments_s([(4, 0, 600), (3, 2500, 5)])
    base4, base3 = cost.fixed_s + 4 * cost.seq_s, cost.fixed_s + 3 * cost.seq_s
    want = [pieces.at(4 * j) + base4 for j in range(600)]
    want += [cost._decode_pieces(3).at(2500 + 3 * j) + base3 for j in range(5)]
    assert times == pytest.approx(want, rel=1e-15)


def test_grouped_closed_forms_need_the_base_pricing() -> None:
    """A cost model that reprices steps (or has sliding windows) offers no grouped forms."""

    class Doubled(StepCostModel):
        def step_time_s(self, new, prior):  # type: ignore[no-untyped-def]
            return 2 * super().step_time_s(new, prior)

    assert StepCostModel(get_model("llama-2-7b"), IDEAL).offers_grouped_forms()
    assert Doubled(get_model("llama-2-7b"), IDEAL).decode_steps_s([2], [10]) is None
    window = StepCostModel(load_config_file(DATA / "qwen2_window.json"), IDEAL)
    assert window.grouped_step_s(2, 10, [1], [3]) is None


@pytest.mark.slow
@given(
    st.lists(
        st.tuples(*(st.floats(-1e3, 1e3, allow_nan=False) for _ in range(4))),
        min_size=1,
        max_size=8,
    ),
    st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=20),
)
def test_sum_of_maxima_pieces_equal_the_sum(
    lines: list[tuple[float, float, float, float]], points: list[float]
) -> None:
    a1, c1, a2, c2 = (np.array(v) for v in zip(*lines, strict=True))
    pieces = sum_of_maxima(a1, c1, a2, c2)
    for s in points:
        want = float(np.maximum(a1 + c1 * s, a2 + c2 * s).sum())
        assert pieces.at(s) == pytest.approx(want, rel=1e-9, abs=1e-6)


@pytest.mark.slow
@given(
    st.lists(
        st.tuples(
            *(st.sampled_from([0.0, 0.0, 1.5, -2.0, 3e-3, 7.0]) for _ in range(8))
        ),  # two sparse rows of four coefficients: constant, then three variables
        min_size=1,
        max_size=12,
    ),
    st.tuples(*(st.floats(0, 1e5, allow_nan=False) for _ in range(3))),
)
def test_affine_maxima_equal_the_sum(
    rows: list[tuple[float, ...]], point: tuple[float, float, float]
) -> None:
    f = np.array([r[:4] for r in rows])
    g = np.array([r[4:] for r in rows])
    x = np.array((1.0, *point))
    want = float(np.maximum(f @ x, g @ x).sum())
    assert affine_maxima(f, g).at(tuple(x)) == pytest.approx(want, rel=1e-9, abs=1e-6)


def test_a_deployment_prices_grouped_steps_with_its_links() -> None:
    """Tensor/pipeline splits add link time per step; a recording subclass gets no shortcut."""
    model = get_model("llama-2-7b")
    cost = DeploymentStepCost(model, Pricing.ideal(Deployment(get_accelerator("h100-sxm"), 2, 2)))
    prior = [40, 7, 900]
    mixed = cost.grouped_step_s(3, sum(prior), [300], [0])
    assert mixed == pytest.approx(cost.step_time_s([1, 1, 1, 300], prior + [0]), rel=1e-12)
    steps = cost.decode_segments_s([(3, 947, 2), (2, 50, 1)])
    want = [cost.step_time_s([1] * 3, [p + j for p in prior]) for j in range(2)]
    want.append(cost.step_time_s([1, 1], [42, 8]))
    np.testing.assert_allclose(np.array(steps), np.array(want), rtol=1e-12)

    class Recording(DeploymentStepCost):
        def step_time_s(self, new, prior):  # type: ignore[no-untyped-def]
            return 1.0

    assert not Recording(model, Pricing.ideal(Deployment(A100, 2, 1))).offers_grouped_forms()
