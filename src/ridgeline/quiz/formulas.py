"""Closed forms for the tiling and serving questions, each citing its source.

NOTE: the tiling (``analytic.tiling``) and serving (``serving``) layers are built in parallel;
until they land, the quiz computes their questions with these small closed forms (issue 7:
"until then, those modules' questions use the closed forms of the foundation").
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


def paged_blocks(num_tokens: int, block_size: int) -> int:
    """Blocks a request of ``num_tokens`` holds under PagedAttention: ⌈tokens / block⌉
    (Kwon et al., "Efficient Memory Management for LLM Serving with PagedAttention", SOSP 2023)."""
    return -(-num_tokens // block_size)


def paged_waste_tokens(num_tokens: int, block_size: int) -> int:
    """Token slots allocated but unused under paging: only the last block's tail."""
    return paged_blocks(num_tokens, block_size) * block_size - num_tokens


def contiguous_waste_tokens(num_tokens: int, max_len: int) -> int:
    """Token slots reserved but unused when a request reserves ``max_len`` up front (the
    pre-PagedAttention baseline; Kwon et al. 2023 §2.3)."""
    return max_len - num_tokens


def prefix_shared_blocks(prefix_len: int, block_size: int) -> int:
    """Blocks of a shared prefix that prefix caching reuses: only full blocks are hashed and
    shared (vLLM automatic prefix caching design; SGLang RadixAttention shares tokens)."""
    return prefix_len // block_size


def prefix_saved_bytes(
    num_requests: int, prefix_len: int, block_size: int, kv_bytes_per_token: float
) -> float:
    """KV bytes prefix caching saves when ``num_requests`` share one prefix: every request
    but the first reuses the shared full blocks instead of storing its own copy."""
    shared_tokens = prefix_shared_blocks(prefix_len, block_size) * block_size
    return (num_requests - 1) * shared_tokens * kv_bytes_per_token


def spec_expected_tokens(accept_rate: float, num_draft: int) -> float:
    """Expected tokens per target step with ``num_draft`` drafted tokens accepted i.i.d. with
    rate α: (1 − α^(k+1)) / (1 − α) (Leviathan, Kalman, Matias, ICML 2023, Eq. 1)."""
    if accept_rate >= 1.0:
        return float(num_draft + 1)
    return (1 - accept_rate ** (num_draft + 1)) / (1 - accept_rate)
