"""The measurement lab on tiny random-weight models (torch tier: CPU, seconds each)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from ridgeline.cli import app  # noqa: E402
from ridgeline.lab.calibrate import calibrate  # noqa: E402
from ridgeline.lab.gap import compare_records  # noqa: E402
from ridgeline.lab.kvlab import LLAMA_BASE, check_kv, llama_variant  # noqa: E402
from ridgeline.lab.machine import Calibration, CalibrationSpec, write_specs  # noqa: E402
from ridgeline.lab.points import PointConfig  # noqa: E402
from ridgeline.lab.profile import run_profile  # noqa: E402
from ridgeline.lab.store import ResultsStore  # noqa: E402
from ridgeline.lab.sweep import Backend, SweepSpec, run_sweep  # noqa: E402
from ridgeline.specs import get_accelerator  # noqa: E402

pytestmark = pytest.mark.torch

TINY_GPT2: dict[str, Any] = {
    "model_type": "gpt2",
    "n_layer": 2,
    "n_embd": 32,
    "n_head": 4,
    "n_positions": 128,
    "vocab_size": 256,
}
TINY_LLAMA = {
    **LLAMA_BASE,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "head_dim": 8,
    "intermediate_size": 64,
    "vocab_size": 256,
}


@pytest.fixture
def tiny_gpt2(tmp_path: Path) -> str:
    path = tmp_path / "tiny-gpt2.json"
    path.write_text(json.dumps(TINY_GPT2))
    return str(path)


@pytest.mark.parametrize(
    ("name", "raw", "kv_heads"),
    [
        ("gpt2", TINY_GPT2, 4),
        ("llama-mha", llama_variant(4, TINY_LLAMA), 4),
        ("llama-gqa", llama_variant(2, TINY_LLAMA), 2),
        ("llama-mqa", llama_variant(1, TINY_LLAMA), 1),
    ],
)
def test_kv_cache_tensors_equal_the_formula_exactly(name: str, raw: dict, kv_heads: int) -> None:
    check = check_kv(raw, name, batch=3, context=20)
    # 2 (K, V) x 2 layers x 3 seqs x 20 tokens x kv_heads x 8 head_dim x 4 bytes (fp32)
    assert check.formula_bytes == 2 * 2 * 3 * 20 * kv_heads * 8 * 4
    assert check.tensor_bytes == check.formula_bytes
    assert check.exact
    assert check.num_kv_heads == kv_heads


@pytest.mark.slow
def test_interrupted_sweep_resumes_and_stores_each_point_once(
    tiny_gpt2: str, tmp_path: Path
) -> None:
    spec = SweepSpec(
        (Backend.parse("hf:dynamic:sdpa"),),
        (1, 2),
        (8, 16),
        PointConfig(model=tiny_gpt2, steps=2, warmup=1, memory_steps=1, profile_steps=1),
    )
    db = tmp_path / "lab.db"
    done: list[PointConfig] = []

    def interrupt_after_two(cfg: PointConfig, status: str) -> None:
        done.append(cfg)
        if len(done) == 2:
            raise KeyboardInterrupt

    with ResultsStore(db) as store, pytest.raises(KeyboardInterrupt):
        run_sweep(spec, store, interrupt_after_two)
    with ResultsStore(db) as store:
        assert store.count("decode") == 2
        outcome = run_sweep(spec, store)
        assert (outcome.measured, outcome.skipped, outcome.total) == (2, 2, 4)
        records = store.records("decode")
    keys = sorted((r.config["batch"], r.config["context"]) for r in records)
    assert keys == [(1, 8), (1, 16), (2, 8), (2, 16)]
    first = records[0].result
    assert first["timing"]["median_s"] > 0 and len(first["timing"]["step_s"]) == 2
    assert records[0].env["threads"] == 1 and records[0].env["allocator"]


def test_calibrate_gives_plausible_figures_and_a_loadable_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = CalibrationSpec(
        sizes_bytes=(64 * 1024, 1 << 20),
        threads=(1,),
        dtypes=("fp32", "bf16"),
        matmul_n=64,
        repeats=1,
        gemm_shape=(256, 64),
        gemm_batches=(1, 4),
    )
    cal = calibrate(spec)
    assert len(cal.bandwidth) == 2 * 3
    for p in cal.bandwidth:
        assert 1e8 < p.best_bytes_per_s < 1e13, p  # 0.1 GB/s .. 10 TB/s
        assert p.best_bytes_per_s >= p.median_bytes_per_s
    for m in cal.matmul:
        assert 1e6 < m.best_flops_per_s < 1e15, m
    assert [g.batch for g in cal.gemm] == [1, 4]
    assert cal.gemm_bandwidth(1, 2) is not None and cal.gemm_bandwidth(1, 2) > 1e8
    # the calibrated fp32 peak is the fastest kernel: torch.mm, the engine's GEMM, the FMA loop
    rep = cal.peak_report(1)
    assert [g.batch for g in cal.engine_gemm] == [1, 4] and rep.calibrated is not None
    assert cal.peak_at(1)["fp32"] == max(k.flops_per_s for k in rep.kernels)
    assert cal.peak_at(1)["fp32"] >= max(
        m.best_flops_per_s for m in cal.matmul if m.dtype == "fp32"
    )
    assert cal.cpu is not None and Calibration.from_dict(cal.to_dict()) == cal
    # the largest read was measured again at the end, and the load around it kept
    assert cal.steadiness is not None and cal.steadiness.probe_threads == 1
    assert cal.steadiness.again_bytes_per_s > 1e8
    # the FMA loop (lab/csrc, built by engine.kernel_build) runs the table's FLOP per cycle at
    # the clock its add chain measured, where the table knows this CPU
    (core,) = cal.core
    table = rep.physical.flops_per_cycle
    if table is not None and rep.measured_flops_per_cycle is not None:
        # never above the table; below it by how busy the other core is (a loaded 2-core machine
        # read 0.45 of it), but a scalar or broken loop (2 FLOP/cycle) stays far below a quarter
        assert table / 4 < rep.measured_flops_per_cycle <= table * 1.15
    assert core.lanes in (8, 16) and rep.calibrated.flops_per_s >= core.fma_flops_per_s
    monkeypatch.setenv("RIDGELINE_HW_DIR", str(tmp_path))
    (written,) = write_specs(cal)
    acc = get_accelerator("measured")
    assert acc.name == "measured" and written.path == tmp_path / "measured.toml"
    assert acc.device_bandwidth_bytes_per_s == pytest.approx(cal.bandwidth_at(1), rel=1e-5)


def test_profile_names_the_top_operators(tiny_gpt2: str, tmp_path: Path) -> None:
    cfg = PointConfig(model=tiny_gpt2, batch=2, context=16, profile_steps=2)
    rep = run_profile(cfg, tmp_path / "trace.json", warmup=1)
    names = {r.name for r in rep.summary.top_time}
    assert "aten::addmm" in names  # GPT-2's Conv1D projections
    assert "aten::cat" in names  # DynamicCache.update
    assert {"linear GEMMs", "lm_head", "cache concat"} <= set(rep.summary.categories)
    c = rep.composition
    assert c.parameters > 0 and c.peak == c.parameters + c.kv_at_start + c.temporaries
    assert rep.composition.kv_at_end > rep.composition.kv_at_start > 0
    assert (tmp_path / "trace.json").stat().st_size > 0
    assert rep.analytic_bytes_per_step > 0


def test_compare_and_report_from_a_tiny_sweep(tiny_gpt2: str, tmp_path: Path) -> None:
    from ridgeline.report.lab_sections import build_lab_report

    spec = SweepSpec(
        (Backend.parse("hf:dynamic:sdpa"), Backend.parse("hf:static:sdpa")),
        (1, 2),
        (8,),
        PointConfig(model=tiny_gpt2, steps=2, warmup=1, memory_steps=1, profile_steps=1),
    )
    cal = calibrate(CalibrationSpec((1 << 20,), (1,), ("fp32",), 64, 1, "cpu", (256, 64), (1, 4)))
    db = tmp_path / "lab.db"
    with ResultsStore(db) as store:
        run_sweep(spec, store)
        store.put("calibrate", {"t": 1}, {"host": "x"}, cal.to_dict())
        cmp = compare_records(store.records())
    assert len(cmp.points) == 4 and len(cmp.fits) == 2
    for p in cmp.points:
        explained = p.predicted_s + sum(c.seconds for c in p.causes)
        assert explained == pytest.approx(p.measured_s, rel=1e-6)
        assert p.fitted_s is not None and p.fitted_s > 0
    files = build_lab_report(db, tmp_path / "out")
    assert "lab-compare" in files.sections and "lab-gap" in files.sections
    assert "measured against predicted" in files.markdown.read_text()
    result = CliRunner().invoke(
        app,
        ["report", "-m", "distilgpt2", "--out", str(tmp_path / "main"), "--lab", str(db)],
    )
    assert result.exit_code == 0, result.output
    sections = json.loads((tmp_path / "main" / "report.json").read_text())["sections"]
    assert {"roofline", "lab-compare", "lab-gap", "lab-memory"} <= set(sections)


@pytest.mark.gpu
def test_cuda_calibration_and_decode_point(tiny_gpt2: str, tmp_path: Path) -> None:
    cal = calibrate(CalibrationSpec((1 << 24,), (1,), ("bf16",), 1024, 1, "cuda", (4096, 1024)))
    assert cal.bandwidth_at(1) > 1e10 and cal.peak_at(1)["bf16"] > 1e12
    spec = SweepSpec(
        (Backend.parse("hf:static:sdpa"),),
        (2,),
        (8,),
        PointConfig(model=tiny_gpt2, steps=2, warmup=1, memory_steps=1, device="cuda"),
    )
    with ResultsStore(tmp_path / "lab.db") as store:
        run_sweep(spec, store)
        (rec,) = store.records("decode")
    assert rec.result["memory"]["cuda_peak_above_start_bytes"] is not None


def test_engine_backend_measures_a_point(tiny_gpt2: str, tmp_path: Path) -> None:
    spec = SweepSpec(
        (Backend.parse("ridgeline"),),
        (2,),
        (8,),
        PointConfig(model=tiny_gpt2, steps=2, warmup=1, memory_steps=1, profile_steps=1),
    )
    with ResultsStore(tmp_path / "lab.db") as store:
        assert run_sweep(spec, store).measured == 1
        (rec,) = store.records("decode")
    assert rec.config["backend"] == "ridgeline" and rec.result["timing"]["median_s"] > 0
    # the engine's block pool: 2 seqs x ceil((8 + 6) / 16) blocks x 16 tokens, K and V, 2 layers,
    # 4 heads x 8 dims, fp32
    assert rec.result["memory"]["kv_bytes"] == 2 * 1 * 16 * 2 * 2 * 4 * 8 * 4
    # the GEMM probe: 2 rows through 2 layers of qkv [32->96], o [32->32], up [32->128],
    # down [128->32], then the lm_head [32->256]
    gemm = rec.result["gemm"]
    assert (gemm["rows"], gemm["layers"]) == (2, 9)
    assert gemm["weight_params"] == 2 * (32 * 96 + 32 * 32 + 32 * 128 + 128 * 32) + 32 * 256
    assert 0 < gemm["best_s"] <= gemm["median_s"] < rec.result["timing"]["median_s"] * 10


def test_a_steps_heap_rise_is_one_token_of_kv_per_sequence() -> None:
    """What notebook 08's "heap rise in a step" column shows: the bytes a decode step leaves
    allocated are the new token's K and V for each sequence (its temporaries are freed by then).
    distilgpt2 in fp32: 6 layers × K and V × 768 × 4 B = 36,864 B per token."""
    import torch

    from ridgeline.lab.configs import raw_config
    from ridgeline.lab.decode import measure_point
    from ridgeline.lab.hf import build_model

    lm = build_model(raw_config("distilgpt2"), "distilgpt2")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for batch in (1, 4):
            cfg = PointConfig(batch=batch, context=64, steps=2, warmup=1, memory_steps=1)
            rise = measure_point(lm, cfg).memory.malloc_max_above_start_bytes
            if rise is None:
                pytest.skip("this system's allocator does not report its in-use bytes (not glibc)")
            assert rise == pytest.approx(batch * 36_864, rel=0.1, abs=4096)
    finally:
        torch.set_num_threads(threads)
