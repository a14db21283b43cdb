"""How sure a prediction is: intervals from the held-out validation residuals per accelerator
family (``fidelity.residuals``)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.fidelity.dataset import Metric, load_dataset
from ridgeline.fidelity.residuals import (
    MIN_ROWS,
    FamilyResiduals,
    Interval,
    NoInterval,
    Residual,
    family_residuals,
    residuals_of,
    speed_interval,
    speed_log_error,
    time_interval,
)
from ridgeline.fidelity.validate import RowResult, validate

runner = CliRunner()


def test_quantiles_of_ten_residuals_by_hand() -> None:
    """Ten residuals 0, 0.1, ..., 0.9: numpy's linear 10th percentile is 0.09, 90th 0.81."""
    fam = FamilyResiduals("x", tuple(Residual(f"r{i}", "s", i / 10) for i in range(10)))
    lo, hi = fam.quantiles()
    assert lo == pytest.approx(0.09) and hi == pytest.approx(0.81)
    assert fam.num_sources == 1


def test_nvidia_intervals_from_the_stored_residuals() -> None:
    """A predicted speed is divided by e^e (too fast when e > 0), a predicted time multiplied."""
    rows = family_residuals()["nvidia-gpu"].rows
    assert len(rows) == 138
    lo, hi = np.quantile([r.speed_log_error for r in rows], [0.1, 0.9])
    s = speed_interval("h200", 500.0)
    assert isinstance(s, Interval) and s.rows == 138 and s.family == "nvidia-gpu"
    assert s.low == pytest.approx(500 * math.exp(-hi)) and s.high == pytest.approx(
        500 * math.exp(-lo)
    )
    t = time_interval("h100-sxm", 0.03)
    assert isinstance(t, Interval)
    assert t.low == pytest.approx(0.03 * math.exp(lo)) and t.high == pytest.approx(
        0.03 * math.exp(hi)
    )


def test_families_with_too_few_rows_say_so() -> None:
    tpu = speed_interval("tpu-v5e", 100.0)
    assert isinstance(tpu, NoInterval) and tpu.rows == 6 and tpu.family == "google-tpu"
    assert tpu.reason == "google-tpu: 6 held-out rows, fewer than the 8 an interval needs"
    spyre = time_interval("ibm-spyre", 1.0)
    assert isinstance(spyre, NoInterval) and spyre.rows == 0
    assert MIN_ROWS == 8


def _held_out(metric: Metric, ratio: float) -> RowResult:
    """A row result whose held-out prediction is ``ratio`` times the published value."""
    row = next(r for r in load_dataset() if r.metric is metric)
    return RowResult(row, ideal=row.value, calibrated=row.value, loso=ratio * row.value)


def test_a_row_predicted_twice_too_fast_is_a_residual_of_ln_2() -> None:
    """Half the published TPOT and twice the published tokens/s are both twice too fast."""
    assert speed_log_error(_held_out(Metric.TPOT_S, 0.5)) == pytest.approx(math.log(2))
    assert speed_log_error(_held_out(Metric.OUTPUT_TOKENS_PER_S, 2.0)) == pytest.approx(math.log(2))


def test_predict_shows_the_intervals() -> None:
    args = ["predict", "--hw", "h100-sxm", "-m", "llama-3.1-8b", "--isl", "128", "--osl", "32"]
    out = runner.invoke(app, [*args, "--requests", "50", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    tps = d["intervals"]["output_tokens_per_s"]
    assert tps["low"] < d["output_tokens_per_s"] < tps["high"] and tps["rows"] == 138
    assert d["intervals"]["tpot_s"]["low"] < d["tpot_s"] < d["intervals"]["tpot_s"]["high"]
    table = runner.invoke(app, [*args, "--requests", "50"])
    assert "80% interval" in table.stdout
    tpu = runner.invoke(app, ["predict", "--hw", "tpu-v5e", "-m", "llama-3.1-8b", "--tp", "4"])
    assert "no interval: google-tpu: 6 held-out rows" in tpu.stdout
    ideal = runner.invoke(app, [*args, "--requests", "50", "--ideal", "--json"])
    assert json.loads(ideal.stdout)["intervals"] is None


@pytest.mark.slow
def test_stored_residuals_are_a_fresh_validation() -> None:
    """``python tools/write_residuals.py --write`` after any change to the calibration."""
    fresh = residuals_of(validate(loso=True))
    stored = family_residuals()
    assert sorted(fresh) == sorted(stored)
    for name, fam in fresh.items():
        assert [r.key for r in fam.rows] == [r.key for r in stored[name].rows]
        got = [r.speed_log_error for r in stored[name].rows]
        assert got == pytest.approx([r.speed_log_error for r in fam.rows], abs=2e-6)
