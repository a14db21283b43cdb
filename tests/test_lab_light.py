"""The lab's torch-free parts: results store, fitted model, scratchpad fit, CLI faces."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.errors import ConfigError
from ridgeline.lab.gap import ComparedPoint, fit
from ridgeline.lab.scratchpad import scratchpad_fit
from ridgeline.lab.store import ResultsStore, export_csv, export_json, open_existing
from ridgeline.specs import DType, get_model


def test_store_keeps_each_point_once_and_exports(tmp_path: Path) -> None:
    db = tmp_path / "lab.db"
    with ResultsStore(db) as store:
        assert store.put("decode", {"batch": 1, "context": 8}, {"host": "h"}, {"t": 0.5})
        assert not store.put("decode", {"context": 8, "batch": 1}, {"host": "h"}, {"t": 9.9})
        assert store.has("decode", {"batch": 1, "context": 8})
        assert not store.has("decode", {"batch": 2, "context": 8})
        records = store.records()
    assert [r.result for r in records] == [{"t": 0.5}]
    export_csv(records, tmp_path / "m.csv")
    export_json(records, tmp_path / "m.json")
    header = (tmp_path / "m.csv").read_text().splitlines()[0]
    assert "config.batch" in header and "result.t" in header
    assert '"schema": "ridgeline.lab/1"' in (tmp_path / "m.json").read_text()


def test_opening_a_missing_database_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--db"):
        open_existing(tmp_path / "nope.db")


def _point(
    batch: int, kv: float, flops: float, measured: float, gemm_s: float | None, faults: float = 0.0
) -> ComparedPoint:
    return ComparedPoint(
        label="x", model="m", batch=batch, context=0, kv_len=0.0, threads=1,
        measured_s=measured, p10_s=measured, p90_s=measured, cpu_s=measured, prefill_s=0.0,
        predicted_s=measured / 2, bytes=1e8 + kv, weight_bytes=1e8, kv_bytes=kv, flops=flops,
        bandwidth_bytes_per_s=1e10, kv_tensor_bytes=0, kv_formula_bytes=0.0,
        peak_above_start_bytes=None, load_avg_1m=0.0, causes=(), weight_gemm_s=gemm_s,
        minor_faults=faults,
    )  # fmt: skip


def test_fit_recovers_overhead_weights_kv_bandwidth_and_flop_rate() -> None:
    # t = 3 ms + 1.5 x 1e8 B / rate(B) + kv / 2e9 B/s + flops / 5e10 FLOP/s
    rate = {1: 1e10, 4: 5e9, 16: 4e9}  # a decode GEMM slows down past batch 1
    points = []
    for batch in (1, 4, 16):
        for kv in (1e6, 1e7, 1e8):
            flops, gemm_s = 2e8 * batch, 1e8 / rate[batch]
            t = 3e-3 + 1.5 * gemm_s + kv / 2e9 + flops / 5e10
            points.append(_point(batch, kv, flops, t, gemm_s))
    model = fit("x", points)
    assert model.overhead_s == pytest.approx(3e-3, rel=1e-6)
    assert model.weight_scale == pytest.approx(1.5, rel=1e-6)
    assert model.kv_bandwidth == pytest.approx(2e9, rel=1e-6)
    assert model.flops_per_s == pytest.approx(5e10, rel=1e-6)
    assert model.median_abs_error < 1e-9 and model.loo_median_abs_error is not None


def test_fit_charges_page_faults_that_grow_faster_than_the_bytes() -> None:
    # the glibc pattern docs/lab.md describes: a re-allocated cache faults only once it crosses the mmap
    # threshold, so the fault count is not a linear function of the KV bytes
    points = []
    for batch in (1, 4, 16):
        for kv in (1e6, 1e7, 1e8):
            faults = 0.0 if kv * batch < 1e8 else kv * batch / 4096 * 0.5
            t = 3e-3 + 1e8 / 1e10 + kv / 2e9 + faults * 1.8e-6
            points.append(_point(batch, kv, 2e8 * batch, t, 1e8 / 1e10, faults))
    model = fit("x", points)
    assert model.fault_s == pytest.approx(1.8e-6, rel=1e-6)
    assert model.kv_bandwidth == pytest.approx(2e9, rel=1e-6)
    without = fit("x", [replace(p, minor_faults=0.0) for p in points])
    assert without.median_abs_error > 100 * model.median_abs_error


def test_fit_ignores_a_handful_of_faults() -> None:
    # a few faults per step must not buy a per-fault cost: the term is left out below MIN_FAULTS
    points = [
        _point(b, kv, 2e8 * b, 3e-3 + kv / 2e9 + (1e-4 if kv == 1e7 else 0.0), None, f)
        for b in (1, 4)
        for kv, f in ((1e6, 0.0), (1e7, 2.0), (1e8, 0.0))
    ]
    assert fit("x", points).fault_s == 0.0


def test_scratchpad_fit_on_one_spyre_core() -> None:
    fit_ = scratchpad_fit(get_model("distilgpt2"), "ibm-spyre", DType.FP16)
    # one token of one head of one layer: K and V, 64 elements each, 2 bytes
    assert fit_.bytes_per_token_per_head == 2 * 64 * 2
    assert fit_.tokens_per_head == int(fit_.capacity_bytes // 256)
    assert fit_.tokens_per_layer == int(fit_.capacity_bytes // (256 * 12))
    assert fit_.level == "lx"


def test_cli_lab_error_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["lab", "compare", "--db", str(tmp_path / "none.db")])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "--db" in result.output


def test_cli_startup_does_not_import_torch() -> None:
    code = "import sys, ridgeline.cli; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
