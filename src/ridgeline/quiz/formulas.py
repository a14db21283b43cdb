"""Closed forms for the tiling questions, each citing its source.

NOTE: the tiling layer (``analytic.tiling``) is built in parallel; until it lands, the quiz
computes its questions with these small closed forms (issue 7: "until then, those modules'
questions use the closed forms of the foundation"). Module 7's questions already use the
serving runtime itself (``quiz.runtime``, ``serving.spec_decode``).
"""

from __future__ import annotations

import math


def tile_resident_bytes(
    tile: int, bytes_per_element: float, double_buffered: bool, acc_bytes: float | None = None
) -> float:
    """Bytes one square (tile × tile × tile) matmul step keeps in a scratchpad.

    The streamed input tiles A[t,t] and B[t,t] are double-buffered (the next pair loads while
    the current one computes), the output tile C[t,t] is held once (torch-spyre scratchpad
    planning [S37]; FlashAttention-style tiling, Dao et al. 2022 §3.1)::

        resident = (2 if double else 1) × (A + B) + C = (4 or 2)·t²·b_in + t²·b_acc
    """
    copies = 2 if double_buffered else 1
    acc = bytes_per_element if acc_bytes is None else acc_bytes
    return copies * 2 * tile * tile * bytes_per_element + tile * tile * acc


def largest_square_tile(
    capacity_bytes: float,
    bytes_per_element: float,
    align_elements: int,
    double_buffered: bool = True,
) -> int | None:
    """Largest tile side, a multiple of ``align_elements``, whose resident bytes fit.

    Returns:
        The side in elements, or ``None`` when even one aligned tile does not fit.
    """
    best = None
    tile = align_elements
    while tile_resident_bytes(tile, bytes_per_element, double_buffered) <= capacity_bytes:
        best = tile
        tile += align_elements
    return best


def tiled_matmul_traffic_bytes(
    m: int, n: int, k: int, tile_m: int, tile_n: int, bytes_per_element: float
) -> float:
    """DRAM bytes of C[M,N] = A[M,K]·B[K,N], output-stationary tiles (tile_m × tile_n).

    Each output tile streams its A rows (tile_m × K) and B columns (K × tile_n) once and writes
    C once (Hong & Kung 1981; the roofline tiling argument of Williams et al. 2009)::

        traffic = (M/tm)·(N/tn)·K·(tm + tn)·b + M·N·b = M·N·K·b·(1/tn + 1/tm) + M·N·b
    """
    tiles = (m // tile_m) * (n // tile_n)
    return tiles * k * (tile_m + tile_n) * bytes_per_element + m * n * bytes_per_element


def flash_block_sizes(sram_elements: int, head_dim: int) -> tuple[int, int]:
    """FlashAttention block sizes (Bc, Br) = (⌈M/4d⌉, min(⌈M/4d⌉, d)), with M the on-chip memory
    in elements (Dao et al., "FlashAttention", NeurIPS 2022, Algorithm 1 line 1)."""
    bc = math.ceil(sram_elements / (4 * head_dim))
    return bc, min(bc, head_dim)


def bank_conflict_degree(stride_words: int, num_banks: int) -> int:
    """Ways of the bank conflict when each of ``num_banks`` threads reads one word at
    ``stride_words`` apart: thread t hits bank (t·s) mod B, so B/gcd(s, B) distinct banks serve
    the warp and each is hit gcd(s, B) times (CUDA C Programming Guide, "Shared Memory")."""
    return math.gcd(stride_words, num_banks)
