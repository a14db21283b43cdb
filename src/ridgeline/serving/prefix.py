"""Prefix caching: chained block hashes over token ids, and the longest cached prefix.

Block i's hash is hash(block i-1's hash, tokens of block i), so equal hashes mean equal whole
prefixes (vLLM v1 ``hash_block_tokens`` in ``vllm/v1/core/kv_cache_utils.py``). Only full
blocks are hashed::

    tokens  a b c d | e f g h | i j
    hashes  h0=H(None, abcd)  h1=H(h0, efgh)     (ij is partial: not hashed)

NOTE: Python's hash of a tuple of ints is deterministic across processes (no PYTHONHASHSEED
salt for ints) and fast; vLLM defaults to sha256 to make collisions practically impossible. A
64-bit collision would reuse a wrong block; for a simulator and a small engine we accept that.
"""

from __future__ import annotations

from collections.abc import Callable

from ridgeline.serving.request import Request

NONE_HASH = 0x5EED  # parent hash of the first block (vLLM derives it from a seed)


def hash_block(parent: int, tokens: tuple[int, ...]) -> int:
    """Chained hash of one full block."""
    return hash((parent, tokens))


def update_block_hashes(request: Request, block_size: int) -> None:
    """Extend ``request.block_hashes`` over every full block of its current tokens."""
    hashes = request.block_hashes
    full = request.num_tokens // block_size
    parent = hashes[-1] if hashes else NONE_HASH
    for i in range(len(hashes), full):
        parent = hash_block(parent, request.tokens(i * block_size, (i + 1) * block_size))
        hashes.append(parent)


def longest_hit(
    block_hashes: list[int], num_tokens: int, block_size: int, is_cached: Callable[[int], bool]
) -> int:
    """Number of leading blocks whose hashes are cached, stopping at the first miss.

    The hit is capped so that at least one token is left to compute: the last token must run
    through the model to produce logits (vLLM v1 ``get_computed_blocks``).
    """
    max_blocks = (num_tokens - 1) // block_size
    n = 0
    for h in block_hashes[:max_blocks]:
        if not is_cached(h):
            break
        n += 1
    return n
