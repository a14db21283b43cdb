"""The TPU orchestrator, computed (``analytic.pallas``), and the three orchestrators of one KV
cache against ``schedule`` and the compiled-shape simulator."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ridgeline.analytic import Phase, Workload
from ridgeline.analytic.dataflow import ScheduleOptions, compile_schedule
from ridgeline.analytic.orchestrate import orchestrate
from ridgeline.analytic.pallas import (
    best_matmul_block,
    matmul_pipeline,
    tensor_core,
    tpu_step,
)
from ridgeline.analytic.tiling import Matmul
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.specs import get_accelerator, get_model
from ridgeline.specs.calibration import CostMode

TPUS = ("tpu-v5e", "tpu-v6e")  # the TPUs whose catalog files give the MXU edge


def test_one_gemm_is_fill_plus_max_dma_mxu_per_step_plus_drain_by_hand() -> None:
    """[256x512]·[512x1024] bf16 on a TPU v5e (197 TFLOP/s, 819 GB/s) in (256, 512, 256) blocks:
    grid (1, 4, 1). A's block never changes, so only step 0 copies it; every step copies one
    B block (512·256·2 = 262,144 B) and completes one C block (256·256·2 = 131,072 B)."""
    core = tensor_core(get_accelerator("tpu-v5e"))
    mm = Matmul(256, 512, 1024)
    p = matmul_pipeline(mm, (256, 512, 256), core)
    bw, peak = 8.19e11, 1.97e14
    mxu = 2 * 256 * 512 * 256 / peak  # 3.4065e-7 s per step: every edge a multiple of 128
    a_and_b, b, c = 524_288, 262_144, 131_072
    fill = a_and_b / bw  # step 0's A and B blocks
    dma = [b, b + c, b + c, c]  # during step i: step i+1's B block, step i-1's C block
    steady = sum(max(x / bw, mxu) for x in dma)
    drain = c / bw  # the last C block
    assert p.block is not None and p.block.grid == (1, 4, 1)
    assert (p.fill_s, p.drain_s) == (pytest.approx(fill), pytest.approx(drain))
    assert p.steady_s == pytest.approx(steady)
    assert p.time_s == pytest.approx(fill + steady + drain)
    # two steps wait on MXU work (3.41e-7 > 3.20e-7 and 1.60e-7), two on the DMA (4.80e-7)
    assert p.time_s == pytest.approx(
        6.4016e-7 + 2 * 3.4065e-7 + 2 * 4.8012e-7 + 1.6004e-7, rel=1e-4
    )
    # VMEM: two copies of each block + an fp32 accumulator = 1.5 MiB
    assert p.vmem_bytes == 2 * (262_144 + 262_144 + 131_072) + 256 * 256 * 4 == 1_572_864


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(TPUS),
    st.integers(1, 4096),
    st.integers(1, 16384),
    st.integers(1, 16384),
    st.sampled_from((1, 2)),
)
def test_chosen_blocks_fit_vmem_double_buffered(hw: str, m: int, k: int, n: int, e: int) -> None:
    core = tensor_core(get_accelerator(hw))
    mm = Matmul(m, k, n, e, e, e)
    try:
        p = best_matmul_block(mm, core)
    except CapacityError:
        return
    b = p.block
    assert b is not None
    need = 2 * (b.bm * b.bk * e + b.bk * b.bn * e + b.bm * b.bn * e) + b.bm * b.bn * 4
    assert need == p.vmem_bytes <= core.vmem_bytes
    assert all(
        edge == full or edge % core.mxu_dim == 0 for edge, full in ((b.bm, m), (b.bk, k), (b.bn, n))
    )
    assert p.time_s >= max(p.dma_s, p.mxu_s) - 1e-15


def test_three_orchestrators_agree_with_schedule_and_the_tpu_pipeline() -> None:
    model, g = get_model("llama-3.1-8b"), get_accelerator
    rep = orchestrate(model, 3, 3000, g("h100-sxm"), g("tpu-v6e"), g("ibm-spyre"), CostMode.IDEAL)
    gpu, tpu, spyre = rep.rows
    w = Workload(Phase.DECODE, 3, 3000)
    sched = compile_schedule(model, g("ibm-spyre"), w, None, ScheduleOptions(keep_events=False))
    attn = next(o for o in sched.ops if o.name == "attn.core")
    assert spyre.time_s == pytest.approx(attn.time_s, rel=1e-12)
    # the Spyre row reads the (4, 4096) bucket's KV: 4 × 4096 × 131,072 B (plus new K/V)
    assert spyre.moves[0].moved_bytes >= 4 * 4096 * 131_072
    assert "(4, 4096)" in spyre.kv_home
    step = tpu_step(model, g("tpu-v6e"), w)
    assert tpu.time_s == pytest.approx(32 * step.op("attn.core").time_s, rel=1e-12)
    assert gpu.time_s == pytest.approx(gpu.moves[0].moved_bytes / 3.35e12)


def test_a_tpu_without_an_mxu_edge_is_refused() -> None:
    with pytest.raises(ConfigError, match="field array_dim"):
        tensor_core(get_accelerator("tpu-v5p"))
