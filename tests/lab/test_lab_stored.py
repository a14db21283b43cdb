"""The stored lab run (``tests/data/lab/measurements.json``: the ``out/lab/measurements.json``
that ``make lab`` wrote for the run docs/lab.md quotes) against the lab's calibrated roofline and
its calibrated model.

A roofline whose peaks come from the fastest kernels the machine ran can only be a lower bound:
a measured engine step below it means a peak or a bandwidth was calibrated too low (the fault
this guards against: a torch.mm peak far below the engine's own GEMMs). The calibrated model
must predict the engine's steps within 10% (median) with every term physical.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ridgeline.lab.gap import compare_records
from ridgeline.lab.store import load_json

LAB = Path(__file__).resolve().parent.parent / "data" / "lab"
ENGINE = "ridgeline/paged/paged"


@pytest.fixture(scope="module")
def stored() -> tuple:
    records = load_json(LAB / "measurements.json")
    timer = (LAB / "timer.txt").read_text().strip()
    cmp = compare_records(records, timer=timer)
    return cmp, records


def test_the_calibrated_roofline_never_exceeds_a_measured_engine_step(stored: tuple) -> None:
    cmp, _ = stored
    engine = [p for p in cmp.points if p.label == ENGINE]
    assert {(p.batch, p.context) for p in engine} == {
        (b, t) for b in (1, 4, 16) for t in (128, 512, 1024)
    }
    below = [(p.batch, p.context, p.ratio) for p in engine if p.measured_s < p.predicted_s]
    assert not below, f"engine steps faster than the roofline (B, T, ratio): {below}"


def test_the_calibrated_model_predicts_the_engine_within_10_percent(stored: tuple) -> None:
    cmp, _ = stored
    (model,) = [f for f in cmp.fits if f.label == ENGINE]
    assert model.gemm_source == "probe" and model.median_abs_error <= 0.10
    # physical: no rate above what a probe measured, no negative time, few fitted terms
    assert model.kv_bytes_per_s <= model.bounds.read_bytes_per_s
    assert model.flops_per_s <= model.bounds.peak_flops_per_s
    assert model.overhead_s >= 0 and model.fault_s >= 0 and len(model.fitted) <= 3


def test_the_calibrated_peak_is_the_fastest_kernel_and_within_the_physical_peak(
    stored: tuple,
) -> None:
    cmp, _ = stored
    from ridgeline.lab.gap import latest_calibration

    cal = latest_calibration(stored[1])
    assert cal is not None
    rep = cal.peak_report(1)
    best = rep.calibrated
    assert best is not None and best.kernel.startswith("FMA loop")
    assert cmp.accelerator == "measured-t1"
    # the FMA loop can only reach the pipes' peak at the clock the core ran at
    physical = rep.physical_at_measured_clock
    if physical is not None:
        assert best.flops_per_s <= 1.05 * physical


@pytest.mark.slow
def test_compare_prints_where_the_gemm_time_came_from(tmp_path: Path) -> None:
    # regression: "t_gemm(B) [probe]" was read by rich as a markup tag and printed as "t_gemm(B) "
    from typer.testing import CliRunner

    from ridgeline.cli import app
    from ridgeline.lab.store import ResultsStore

    db = tmp_path / "lab.db"
    with ResultsStore(db) as store:
        for r in load_json(LAB / "measurements.json"):
            store.put(r.kind, r.config, r.env, r.result)
    res = CliRunner().invoke(app, ["lab", "compare", "--db", str(db), "--timer", "cpu"])
    assert res.exit_code == 0, res.output
    assert f"{ENGINE}: t = " in res.output and "t_gemm(B) (probe)" in res.output
