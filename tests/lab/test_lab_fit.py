"""The lab's calibrated step model: physical terms, fitted within the probes' bounds."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ridgeline.lab.fit import Bounds, StepTerms, fit_step_model
from ridgeline.lab.gap import ComparedPoint, fit

BOUNDS = Bounds(read_bytes_per_s=1e10, peak_flops_per_s=4e10)


def _grid(t_fixed: float, kv_rate: float, flop_rate: float, fault_s: float = 0.0) -> list:
    """Nine points of t = t_fixed + gemm + kv / kv_rate + flops / flop_rate + faults x fault_s,
    with KV bytes and other FLOPs varied independently (not collinear)."""
    points = []
    for batch in (1, 4, 16):
        gemm_s = 0.01 * (1 + batch / 8)  # the probe: weights streamed, then FLOP-bound
        for i, kv in enumerate((1e6, 1e7, 1e8)):
            flops = 1e8 * batch * (1 + (i + batch) % 3)
            faults = 0.0 if kv * batch < 1e8 else kv * batch / 4096 * 0.5
            t = t_fixed + gemm_s + kv / kv_rate + flops / flop_rate + faults * fault_s
            points.append(StepTerms(t, gemm_s, kv, flops, faults))
    return points


def test_fit_recovers_fixed_time_kv_rate_and_flop_rate_inside_the_bounds() -> None:
    model = fit_step_model("x", _grid(3e-3, 2e9, 5e9), BOUNDS)
    assert model.overhead_s == pytest.approx(3e-3, rel=1e-6)
    assert model.kv_bytes_per_s == pytest.approx(2e9, rel=1e-6)
    assert model.flops_per_s == pytest.approx(5e9, rel=1e-6)
    assert model.fitted == ("t_fixed", "BW_kv", "F") and model.fault_s == 0.0
    assert model.median_abs_error < 1e-9 and model.loo_median_abs_error is not None


def test_rates_faster_than_the_probes_stay_at_the_probes() -> None:
    # data that "want" KV at 50 GB/s and FLOPs at 400 GFLOP/s: the fit may not follow
    model = fit_step_model("x", _grid(3e-3, 5e10, 4e11), BOUNDS)
    assert model.kv_bytes_per_s == pytest.approx(BOUNDS.read_bytes_per_s)
    assert model.flops_per_s == pytest.approx(BOUNDS.peak_flops_per_s)
    assert "BW_kv" not in model.fitted and "F" not in model.fitted


def test_fit_charges_page_faults_that_grow_faster_than_the_bytes() -> None:
    # the glibc pattern docs/lab.md describes: a re-allocated cache faults only once it crosses the mmap
    # threshold, so the fault count is not a linear function of the KV bytes
    points = _grid(3e-3, 2e9, 5e9, fault_s=1.8e-6)
    model = fit_step_model("x", points, BOUNDS)
    assert model.fault_s == pytest.approx(1.8e-6, rel=1e-6)
    assert model.kv_bytes_per_s == pytest.approx(2e9, rel=1e-6)
    without = fit_step_model("x", [replace(p, minor_faults=0.0) for p in points], BOUNDS)
    assert without.median_abs_error > 100 * model.median_abs_error


def test_fit_ignores_a_handful_of_faults() -> None:
    points = [
        replace(p, minor_faults=2.0 if i == 4 else 0.0) for i, p in enumerate(_grid(0, 2e9, 5e9))
    ]
    points[4] = replace(points[4], measured_s=points[4].measured_s + 1e-4)
    assert fit_step_model("x", points, BOUNDS).fault_s == 0.0


_positive = st.floats(1e-4, 1.0)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_positive, _positive, _positive, _positive), min_size=3, max_size=9))
def test_every_fitted_model_is_physical(rows: list[tuple[float, float, float, float]]) -> None:
    # whatever the data, no rate beats its probe and no term goes negative, so every prediction
    # is at least the probed GEMMs plus the KV at the read bandwidth plus FLOPs at the peak
    points = [StepTerms(t, g, kv * 1e9, fl * 1e11) for t, g, kv, fl in rows]
    model = fit_step_model("x", points, BOUNDS)
    assert model.kv_bytes_per_s <= BOUNDS.read_bytes_per_s * (1 + 1e-12)
    assert model.flops_per_s <= BOUNDS.peak_flops_per_s * (1 + 1e-12)
    assert model.overhead_s >= 0 and model.fault_s >= 0
    for p in points:
        floor = p.gemm_s + p.kv_bytes / 1e10 + p.other_flops / 4e10
        assert model.predict(p) >= floor * (1 - 1e-12)


def _point(batch: int, gemm_probe_s: float | None, gemm_curve_s: float | None) -> ComparedPoint:
    t = 0.02 + batch * 1e-3
    return ComparedPoint(
        label="x",
        model="m",
        batch=batch,
        context=0,
        kv_len=0.0,
        threads=1,
        measured_s=t,
        p10_s=t,
        p90_s=t,
        cpu_s=t,
        prefill_s=0.0,
        predicted_s=t / 2,
        bytes=1e8,
        weight_bytes=1e8,
        kv_bytes=1e6 * batch,
        flops=0.0,
        bandwidth_bytes_per_s=1e10,
        kv_tensor_bytes=0,
        kv_formula_bytes=0.0,
        peak_above_start_bytes=None,
        load_avg_1m=0.0,
        causes=(),
        weight_gemm_s=gemm_curve_s,
        gemm_probe_s=gemm_probe_s,
        other_flops=1e7 * batch,
    )


def test_compare_takes_the_probe_then_the_curve_then_the_read_bandwidth() -> None:
    # measured = 20 ms + B ms; the B-slope is KV and FLOPs above their bounds, so what is left of
    # the 20 ms after the weight GEMMs is the fixed time: it shows which GEMM time was used
    probed = [_point(b, 0.011, 0.015) for b in (1, 4, 16, 32)]
    model = fit("x", probed, BOUNDS)
    assert (model.gemm_source, model.overhead_s) == ("probe", pytest.approx(0.009, rel=1e-6))
    one_missing = [*probed[:3], replace(probed[3], gemm_probe_s=None)]
    model = fit("x", one_missing, BOUNDS)
    assert model.gemm_source == "calibrated F.linear curve"
    assert model.overhead_s == pytest.approx(0.005, rel=1e-6)
    bare = [replace(p, gemm_probe_s=None, weight_gemm_s=None) for p in probed]
    model = fit("x", bare, BOUNDS)
    # the weights then cost 1e8 B / 1e10 B/s = 10 ms at every batch, never nothing
    assert (model.gemm_source, model.overhead_s) == (
        "read bandwidth",
        pytest.approx(0.01, rel=1e-6),
    )
