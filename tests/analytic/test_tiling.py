"""Matmul tiling: hand-computed traffic, the tile search's constraints, Hypothesis properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ridgeline.analytic.tiling import (
    LoopOrder,
    Matmul,
    Scratchpad,
    Tile,
    best_tile,
    candidate_tiles,
    intensity_curve,
    plan,
    scratchpad_of,
    tile_report,
)
from ridgeline.errors import ConfigError
from ridgeline.specs import DType, get_accelerator

MM = Matmul(256, 512, 1024)  # bf16 operands
TILE = Tile(64, 128, 256)


def test_c_stationary_traffic_by_hand() -> None:
    # A = 256·512·2 = 262,144 B read ⌈1024/256⌉ = 4 times; B = 512·1024·2 = 1,048,576 B read
    # ⌈256/64⌉ = 4 times; C = 256·1024·2 = 524,288 B written once.
    p = plan(MM, TILE, LoopOrder.C_STATIONARY, capacity_bytes=1e9)
    assert p.a_traffic_bytes == 4 * 262_144
    assert p.b_traffic_bytes == 4 * 1_048_576
    assert p.c_traffic_bytes == 524_288
    assert p.traffic_bytes == 5_767_168
    # FLOPs = 2·256·512·1024 = 268,435,456 → 46.545... FLOP/B
    assert p.intensity == pytest.approx(268_435_456 / 5_767_168)
    # resident (double-buffered A and B, one C accumulator):
    # 2·(64·128·2 + 128·256·2) + 64·256·2 = 2·(16,384 + 65,536) + 32,768 = 196,608
    assert p.resident_bytes == 196_608


def test_a_stationary_partial_sums_by_hand() -> None:
    # A once (262,144); B ⌈256/64⌉ = 4 times (4,194,304); C partial sums: ⌈512/128⌉ = 4 writes,
    # 3 reads back → 7 · 524,288 = 3,670,016. Total 8,126,464.
    p = plan(MM, TILE, LoopOrder.A_STATIONARY, capacity_bytes=1e9)
    assert (p.passes.a_reads, p.passes.b_reads, p.passes.c_writes, p.passes.c_reads) == (1, 4, 4, 3)
    assert p.traffic_bytes == 262_144 + 4_194_304 + 3_670_016


def test_single_buffering_halves_the_streamed_tiles() -> None:
    p = plan(MM, TILE, LoopOrder.C_STATIONARY, 1e9, buffers=1)
    assert p.resident_bytes == 16_384 + 65_536 + 32_768


def test_decode_matvec_is_never_compute_bound_on_spyre() -> None:
    spyre = get_accelerator("ibm-spyre")
    pad = scratchpad_of(spyre, DType.FP16)
    curve = intensity_curve(Matmul(1, 4096, 14336), pad)
    assert curve.compute_bound_edge is None
    assert "never compute-bound" in curve.reason
    # ridge of one core = (98.3e12/32) / (200e9/32) = 491.5 FLOP/B
    assert curve.ridge_point == pytest.approx(98.3e12 / 200e9)
    assert max(p.intensity for p in curve.points) < 1.0  # ≤ 2·M/2 B = 1 FLOP/B


def test_spyre_tile_respects_array_and_stick() -> None:
    spyre = get_accelerator("ibm-spyre")
    pad = scratchpad_of(spyre, DType.FP16)
    assert pad.array_dim == 8 and pad.granule_bytes == 128
    assert pad.capacity_bytes == 1_625_292
    mm = Matmul(2048, 4096, 896)
    best = best_tile(mm, pad)
    assert best is not None and best.fits
    t = best.tile
    assert t.tm % 8 == 0
    assert (t.tk * 2) % 128 == 0 or t.tk == mm.k  # K is contiguous in row-major A
    assert (t.tn * 2) % 128 == 0 or t.tn == mm.n


def test_no_tile_fits_returns_none() -> None:
    pad = Scratchpad("tiny", capacity_bytes=100, array_dim=8, granule_bytes=128)
    assert best_tile(Matmul(64, 64, 64), pad) is None


def test_h100_report_names_smem() -> None:
    rep = tile_report(get_accelerator("h100-sxm"), Matmul(2048, 4096, 4096))
    assert rep.scratchpad.name == "h100-sxm:smem"
    assert rep.best is not None and rep.best.resident_bytes <= 233_472


def test_bad_dimension_names_the_field() -> None:
    with pytest.raises(ConfigError, match="field k"):
        Matmul(1, 0, 4)


dims = st.integers(1, 3000)
orders = st.sampled_from(list(LoopOrder))


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(m=dims, k=dims, n=dims, cap=st.floats(1e3, 4e6), a=st.sampled_from([8, 16, 128]))
def test_a_tile_that_does_not_fit_is_never_chosen(
    m: int, k: int, n: int, cap: float, a: int
) -> None:
    mm = Matmul(m, k, n)
    pad = Scratchpad("p", cap, a, 128, 1e12, 1e10)
    best = best_tile(mm, pad)
    if best is None:
        assert not any(
            plan(mm, t, o, cap).fits for t in candidate_tiles(mm, pad) for o in LoopOrder
        )
    else:
        assert best.resident_bytes <= cap


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(m=dims, k=dims, n=dims, tm=dims, tk=dims, tn=dims, order=orders, which=st.integers(0, 2))
def test_intensity_never_drops_as_the_tile_grows(
    m: int, k: int, n: int, tm: int, tk: int, tn: int, order: LoopOrder, which: int
) -> None:
    mm = Matmul(m, k, n)
    small = Tile(tm, tk, tn)
    grown = Tile(*(2 * e if i == which else e for i, e in enumerate((tm, tk, tn))))
    assert plan(mm, grown, order, 1e12).intensity >= plan(mm, small, order, 1e12).intensity
