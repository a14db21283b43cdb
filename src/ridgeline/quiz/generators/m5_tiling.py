"""Module 5, tiling and layout: the largest tile one Spyre core holds double-buffered, the
intensity a tile size buys, FlashAttention's block size, and bank conflicts of a strided read."""

from __future__ import annotations

import math
import random

from ridgeline.quiz.formulas import (
    bank_conflict_degree,
    flash_block_sizes,
    largest_square_tile,
    tile_resident_bytes,
    tiled_matmul_traffic_bytes,
)
from ridgeline.quiz.generators.common import givens, pick, sci, traps
from ridgeline.quiz.types import Kind, Mistake, Module, Question
from ridgeline.specs import DType, get_accelerator


def spyre_tile_q(rng: random.Random, dtype: str, align: int) -> Question:
    """Largest square matmul tile one Spyre core's LX holds, A and B double-buffered."""
    del rng
    lx = get_accelerator("ibm-spyre").level("lx")
    usable = lx.usable_bytes or lx.capacity_bytes
    b = DType.parse(dtype).bytes
    answer = largest_square_tile(usable, b, align, double_buffered=True)
    assert answer is not None
    candidates = [
        (Mistake.SINGLE_BUFFER, largest_square_tile(usable, b, align, double_buffered=False)),
        (Mistake.RAW_CAPACITY, largest_square_tile(lx.capacity_bytes, b, align, True)),
        (Mistake.NO_ALIGNMENT, math.isqrt(int(usable / (5 * b)))),
    ]
    return Question(
        generator="spyre_tile",
        module=Module.TILING,
        kind=Kind.NUMERIC,
        prompt=(
            f"A matmul runs on one IBM Spyre core with square tiles t×t in {dtype} (accumulator "
            f"kept in {dtype} too). The A and B tiles are double-buffered, the C tile is held "
            f"once, and t must be a multiple of {align}. What is the largest t that fits the "
            f"core's usable LX scratchpad?"
        ),
        givens=givens(
            [
                ("LX per core", f"{lx.capacity_bytes:,.0f} B"),
                ("LX usable by the compiler", f"{usable:,.0f} B"),
                ("bytes per element", f"{b:g}"),
                ("alignment", f"t multiple of {align}"),
            ]
        ),
        params={"dtype": dtype, "align": align},
        answer=float(answer),
        unit="elements",
        choices=traps(
            answer, [(m, float(v or 0)) for m, v in candidates], 0.0, lambda v: f"{v:.0f}"
        ),
        solution=(
            f"Resident bytes = 2×(A+B) + C = 5·t²·{b:g} B ≤ {usable:,.0f} B → t ≤ "
            f"{math.sqrt(usable / (5 * b)):.1f}; the largest multiple of {align} is {answer} "
            f"({tile_resident_bytes(answer, b, True):,.0f} B resident)."
        ),
    )


def spyre_tile(rng: random.Random) -> Question:
    """Draw a Spyre tile question: fp16 or fp8, aligned to 8–64 elements."""
    return spyre_tile_q(rng, pick(rng, ("fp16", "fp8")), pick(rng, (8, 16, 32, 64)))


def tile_intensity_q(rng: random.Random, size: int, depth: int, tile: int) -> Question:
    """Arithmetic intensity at DRAM of an output-stationary tiled matmul."""
    del rng
    b = DType.BF16.bytes
    traffic = tiled_matmul_traffic_bytes(size, size, depth, tile, tile, b)
    flops = 2 * size * size * depth
    answer = flops / traffic
    compulsory = flops / ((size * depth * 2 + size * size) * b)
    tol = 0.02
    return Question(
        generator="tile_intensity",
        module=Module.TILING,
        kind=Kind.NUMERIC,
        prompt=(
            f"C[M,N] = A[M,K]·B[K,N] in bf16 with M = N = {size}, K = {depth}, computed in "
            f"output tiles of {tile}×{tile}: each output tile streams its {tile} rows of A and "
            f"{tile} columns of B (all of K) from DRAM, and C is written once. What is the "
            f"arithmetic intensity at DRAM?"
        ),
        givens=givens(
            [
                ("M = N", str(size)),
                ("K", str(depth)),
                ("tile", f"{tile}×{tile}"),
                ("bytes per element", "2"),
            ]
        ),
        params={"size": size, "depth": depth, "tile": tile},
        answer=answer,
        unit="FLOP/B",
        rel_tol=tol,
        choices=traps(answer, [(Mistake.COMPULSORY_ONLY, compulsory)], tol, lambda v: sci(v)),
        solution=(
            f"FLOPs = 2·M·N·K = {sci(flops)}. Traffic = (M/t)(N/t)·K·2t·2 B + M·N·2 B = "
            f"{sci(traffic)} B, so intensity = {answer:.4g} FLOP/B ≈ t/2 for bf16: doubling the "
            f"tile doubles the reuse (each loaded element serves t outputs)."
        ),
    )


def tile_intensity(rng: random.Random) -> Question:
    """Draw a tiled-matmul intensity question: square matrices, tiles of 32–256."""
    return tile_intensity_q(
        rng, pick(rng, (2048, 4096, 8192)), pick(rng, (4096, 8192)), pick(rng, (32, 64, 128, 256))
    )


FLASH_LEVELS = (
    ("h100-sxm", "smem"),
    ("a100-80gb", "smem"),
    ("b200", "smem"),
    ("mi300x", "lds"),
    ("ibm-spyre", "lx"),
)


def flash_block_q(rng: random.Random, accelerator: str, level: str, head_dim: int) -> Question:
    """FlashAttention's column block size Bc for an on-chip memory and head dim."""
    del rng
    lvl = get_accelerator(accelerator).level(level)
    mem_bytes = int(lvl.usable_bytes or lvl.capacity_bytes)
    elements = mem_bytes // int(DType.BF16.bytes)
    bc, br = flash_block_sizes(elements, head_dim)
    wrong, _ = flash_block_sizes(mem_bytes, head_dim)
    return Question(
        generator="flash_block",
        module=Module.TILING,
        kind=Kind.NUMERIC,
        prompt=(
            f"FlashAttention (Dao et al. 2022, Algorithm 1) sets its K/V block size to "
            f"Bc = ⌈M / 4d⌉, with M the on-chip memory in elements. For bf16 on the "
            f"{accelerator} {level} with head dim d = {head_dim}, what is Bc?"
        ),
        givens=givens(
            [
                (f"{level} per {lvl.scope.value}", f"{mem_bytes:,} B"),
                ("bytes per element (bf16)", "2"),
                ("head dim d", str(head_dim)),
            ]
        ),
        params={"accelerator": accelerator, "level": level, "head_dim": head_dim},
        answer=float(bc),
        unit="rows",
        choices=traps(bc, [(Mistake.BYTES_FOR_ELEMENTS, float(wrong))], 0.0, lambda v: f"{v:.0f}"),
        solution=(
            f"M = {mem_bytes:,} B ÷ 2 B = {elements:,} elements; Bc = ⌈{elements:,} ÷ "
            f"(4·{head_dim})⌉ = {bc}, and Br = min(Bc, d) = {br}. The factor 4 leaves room for "
            f"the Q, K, V and O blocks at once."
        ),
    )


def flash_block(rng: random.Random) -> Question:
    """Draw a FlashAttention block-size question on a GPU SM, an MI300X CU or a Spyre core."""
    acc, level = pick(rng, FLASH_LEVELS)
    return flash_block_q(rng, acc, level, pick(rng, (64, 128)))


def bank_conflict_q(rng: random.Random, num_banks: int, stride_words: int) -> Question:
    """Conflict degree of a strided shared-memory read."""
    del rng
    degree = bank_conflict_degree(stride_words, num_banks)
    return Question(
        generator="bank_conflict",
        module=Module.TILING,
        kind=Kind.NUMERIC,
        prompt=(
            f"A shared memory has {num_banks} banks of 4-byte words (word w lives in bank "
            f"w mod {num_banks}). {num_banks} threads each read one word, thread t reading word "
            f"t·{stride_words}. How many ways is the bank conflict (reads serialised per bank)?"
        ),
        givens=givens(
            [
                ("banks", str(num_banks)),
                ("stride", f"{stride_words} words"),
                ("threads", str(num_banks)),
            ]
        ),
        params={"num_banks": num_banks, "stride_words": stride_words},
        answer=float(degree),
        unit="ways",
        choices=traps(
            degree, [(Mistake.STRIDE_AS_DEGREE, float(stride_words))], 0.0, lambda v: f"{v:.0f}"
        ),
        solution=(
            f"Thread t hits bank (t·{stride_words}) mod {num_banks}: {num_banks // degree} "
            f"distinct banks, each hit gcd({stride_words}, {num_banks}) = {degree} times, so the "
            f"read takes {degree} passes and runs at 1/{degree} of the bank bandwidth. An odd "
            f"stride (or padding a row by one word) makes it conflict-free."
        ),
    )


def bank_conflict(rng: random.Random) -> Question:
    """Draw a strided shared-memory read over 16 or 32 banks."""
    return bank_conflict_q(rng, pick(rng, (16, 32)), pick(rng, (2, 3, 4, 6, 8, 12, 24, 48, 64)))
