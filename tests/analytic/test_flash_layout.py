"""FlashAttention IO and the layout models against hand-computed values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ridgeline.analytic.flash import (
    FlashOrder,
    attention_io,
    block_sizes,
    decode_io,
    flash_for_model,
    lengths_up_to,
)
from ridgeline.analytic.layout import (
    Order,
    alignment,
    bank_conflicts,
    level_bank_conflicts,
    padded_bytes,
    strided_efficiency,
    traversal,
)
from ridgeline.errors import ConfigError
from ridgeline.specs import get_accelerator


def test_block_sizes_by_hand() -> None:
    # M = 262,144 B / 2 B = 131,072 elements; Bc = ⌈131,072 / (4·128)⌉ = 256; Br = min(256, 128)
    b = block_sizes(262_144, 128, 2)
    assert (b.memory_elems, b.bc, b.br) == (131_072, 256, 128)
    # H100 SM: 233,472 B / 2 = 116,736 elements; 116,736 / 512 = 228 exactly
    assert block_sizes(233_472, 128, 2).bc == 228
    # Spyre core: 1,625,292 B / 2 = 812,646 elements; ⌈812,646 / 512⌉ = 1,588
    assert block_sizes(1_625_292, 128, 2).bc == 1_588


def test_attention_traffic_by_hand() -> None:
    io = attention_io(4096, 128, 262_144)
    # standard: (4·4096·128 + 4·4096²)·2 = (2,097,152 + 67,108,864)·2
    assert io.standard_bytes == 138_412_032
    # Tc = 4096/256 = 16: (2·N·d + 16·3·N·d)·2 + 16·4·N·4 (fp32 m, l)
    #   = (1,048,576 + 25,165,824)·2 + 1,048,576 = 53,477,376
    assert io.flash_bytes == 53_477_376
    assert (io.kv_passes, io.q_passes) == (1, 16)
    io2 = attention_io(4096, 128, 262_144, order=FlashOrder.Q_OUTER)
    # Tr = 4096/128 = 32: (2·N·d + 32·2·N·d)·2 + N·4 = 69,206,016 + 16,384
    assert io2.flash_bytes == 69_222_400
    assert io2.kv_passes == 32


def test_flash_scales_as_n2d2_over_m() -> None:
    # Theorem 2: doubling M halves the Q/O passes; traffic tends to a factor 2 smaller
    big, small = attention_io(65_536, 128, 4 << 20), attention_io(65_536, 128, 2 << 20)
    assert small.q_passes == 2 * big.q_passes
    assert 1.8 < small.flash_bytes / big.flash_bytes < 2.0


def test_decode_split_k_by_hand() -> None:
    blocks = block_sizes(262_144, 128, 2)  # Bc = 256
    io = decode_io(4096, 128, blocks, cores=32)
    # S = min(32, ⌈4096/256⌉ = 16) = 16 splits
    # kv = 2·4096·128·2 = 2,097,152; + (16·128 + 2·16·128 + 128)·2 = 12,544; + 2·16·4 = 128
    assert io.splits == 16
    assert io.kv_bytes == 2_097_152
    assert io.flash_bytes == 2_097_152 + 12_544 + 128
    assert io.standard_bytes == (2 * 4096 * 128 + 2 * 128 + 4 * 4096) * 2


def test_memory_too_small_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="memory_bytes"):
        block_sizes(100, 128, 2)


def test_flash_table_for_three_memories() -> None:
    accs = tuple(get_accelerator(n) for n in ("h100-sxm", "tpu-v6e", "ibm-spyre"))
    t = flash_for_model("llama-3.1-8b", 128, 32, accs, 8192)
    assert lengths_up_to(8192) == (512, 1024, 2048, 4096, 8192)
    assert len(t.rows) == 15
    tpu = [r for r in t.rows if r.memory.startswith("tpu")]
    assert all(r.prefill.q_passes == 1 for r in tpu)  # 128 MiB VMEM: one K/V block


@pytest.mark.parametrize(
    ("stride", "degree"), [(1, 1), (2, 2), (4, 4), (6, 2), (32, 32), (33, 1), (0, 1)]
)
def test_bank_conflict_degree(stride: int, degree: int) -> None:
    # 32 banks of 4 B, 32 lanes: lane i reads word i·stride → gcd(stride, 32)-way (stride 0:
    # every lane reads one word, a broadcast)
    acc = bank_conflicts(stride, 32, 4, peak_bytes_per_s=128.0)
    assert acc.conflict_degree == degree
    assert acc.effective_bytes_per_s == pytest.approx(128.0 / degree)


def test_h100_shared_memory_banks_come_from_the_catalog() -> None:
    smem = get_accelerator("h100-sxm").level("smem")
    a = level_bank_conflicts(smem, stride_words=2)
    # 32 banks x 4 B; one SM's share of 33.45 TB/s over 132 SMs = 253.4 GB/s, halved
    assert (a.banks, a.bank_width_bytes, a.conflict_degree) == (32, 4, 2)
    assert a.effective_bytes_per_s == pytest.approx(3.345e13 / 132 / 2)
    with pytest.raises(ConfigError, match="field banks"):
        level_bank_conflicts(get_accelerator("ibm-spyre").level("lx"), 1)


def test_alignment_and_sticks() -> None:
    # 256 B at offset 64 with 128-B sticks: ⌈(64 + 256)/128⌉ = 3 sticks instead of 2
    a = alignment(64, 256, 128)
    assert (a.granules_aligned, a.granules_touched) == (2, 3)
    assert a.efficiency == pytest.approx(256 / 384)
    # a [3, 100] fp16 array stickified: each row 200 B → 2 sticks → 3·256 = 768 B
    assert padded_bytes(3, 100, 2, 128) == 768


def test_access_order() -> None:
    # [1024, 1024] fp32, 128-B lines: row order fetches exactly 4 MiB; column order fetches a
    # line per element (32×) unless 1024 lines (128 KiB) stay cached
    row = traversal(1024, 1024, 4, 128, Order.ROW)
    col = traversal(1024, 1024, 4, 128, Order.COLUMN)
    cached = traversal(1024, 1024, 4, 128, Order.COLUMN, cache_bytes=128 * 1024)
    assert row.amplification == 1.0
    assert col.amplification == 32.0
    assert cached.amplification == 1.0
    assert strided_efficiency(2, 2, 128) == 0.5
    assert strided_efficiency(64, 2, 128) == pytest.approx(2 / 128)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(stride=st.integers(1, 4096))
def test_bank_conflict_degree_is_gcd_with_32_banks(stride: int) -> None:
    assert bank_conflicts(stride, 32, 4).conflict_degree == math.gcd(stride, 32)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(offset=st.integers(0, 10_000), size=st.integers(1, 10_000))
def test_misalignment_costs_at_most_one_granule(offset: int, size: int) -> None:
    a = alignment(offset, size, 128)
    assert a.granules_touched - a.granules_aligned in (0, 1)
    assert a.granules_touched == a.granules_aligned or offset % 128 != 0
