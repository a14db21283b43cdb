"""The one tiling question the tiling layer does not answer directly: the largest *square*,
aligned tile that fits a scratchpad. It searches with ``analytic.tiling.resident_bytes``, so the
fit is the tiling layer's own (C-stationary: A and B tiles ``buffers``-buffered, C held once;
torch-spyre scratchpad planning [S37])."""

from __future__ import annotations

from ridgeline.analytic.tiling import LoopOrder, Matmul, Tile, resident_bytes


def square_resident_bytes(tile: int, bytes_per_element: float, buffers: int) -> float:
    """Scratchpad bytes of a t×t×t step: ``buffers`` × (A + B) + C (``analytic.tiling``)."""
    b = bytes_per_element
    mm = Matmul(tile, tile, tile, b, b, b)
    return resident_bytes(mm, Tile(tile, tile, tile), LoopOrder.C_STATIONARY, buffers)


def largest_square_tile(
    capacity_bytes: float, bytes_per_element: float, align_elements: int, buffers: int = 2
) -> int | None:
    """Largest tile side, a multiple of ``align_elements``, whose resident bytes fit.

    Returns:
        The side in elements, or ``None`` when even one aligned tile does not fit.
    """
    best = None
    tile = align_elements
    while square_resident_bytes(tile, bytes_per_element, buffers) <= capacity_bytes:
        best = tile
        tile += align_elements
    return best
