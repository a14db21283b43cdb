"""Decode-shaped fp32 matmuls for the CPU: ``x [M, in] · Wᵀ`` with ``W`` packed in column panels.

A decode step multiplies a few rows (one per sequence) by every weight matrix. At one row that is
a GEMV bound by the memory bandwidth; at 16 rows it does 8 FLOPs per weight byte, above this
CPU's one-thread ridge (~95 GFLOP/s ÷ ~21 GB/s ≈ 4.5), so it is bound by the FMA units. oneDNN's
prepacked layouts serve one end each (``packing``). This kernel serves both from one copy:

    W [N, K]  →  panels [⌈N/16⌉, K, 16]        (16 output columns, contiguous along K)

    for each group of NP panels:                 acc[NP][MR] in zmm registers
        for k in 0 … K−1:
            w_j = panel_j[k, 0:16]                one 64-byte load per panel
            acc[j][m] += x[m, k] · w_j            MR broadcast-FMAs per load

Each panel is one sequential stream, so NP panels are NP streams, and each stream reads on into
the next panel of its run (``chunk``), so the hardware prefetcher follows it from tile to tile.
Few rows are memory-bound: two streams read at ``sum``'s rate on huge pages. As rows grow, the
accumulators take the registers and the FMAs start to bound the tile; from 13 rows on, one panel
with up to sixteen accumulators is FMA-bound. Rows beyond 16 run as further chunks of 16, each
re-reading the panels: at 8 FLOPs per byte that stays under the bandwidth, so a long prefill
chunk is FMA-bound too. Measured on distilgpt2's and llama-350m's shapes, one thread, panels on
huge pages (docs/engine.md): 29–34 GB/s at 1–4 rows, within 1–4% of ``sum`` in the same minute
(oneDNN's one-row layout: 15–21 on 4 KiB pages), 80–98 GFLOP/s at 16 rows (oneDNN: 67–87).

The C++ is ``csrc/panel_gemm.cpp``. AVX-512 only: where the build does not target it
``load_panel_gemm`` returns None and ``packing`` uses oneDNN.
"""

from __future__ import annotations

from typing import Any

import torch

from ridgeline.engine.cpp_ext import load_kernels
from ridgeline.engine.huge_pages import huge_page_copy
from ridgeline.engine.kernel_build import KernelTarget

PANEL = 16  # output columns per panel: one zmm register of fp32


class PanelGemm:
    """The compiled kernel: ``pack`` a weight once, then ``linear`` any number of rows."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def pack(self, w: torch.Tensor) -> torch.Tensor:
        """``[N, K]`` fp32 → panels ``[⌈N/16⌉, K, 16]``, on huge pages (``huge_pages``)."""
        return huge_page_copy(self._module.pack(w.detach().float().contiguous()))

    def linear(
        self, x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None, n: int
    ) -> torch.Tensor:
        """``x`` [M, K] → [M, n]."""
        return self._module.linear(x, panels, bias, n)


def load_panel_gemm(target: KernelTarget | str = KernelTarget.NATIVE) -> PanelGemm | None:
    """The kernel of the ``target`` build; None where it does not apply (no AVX-512) or the
    kernels cannot be built."""
    module = load_kernels(target, fallback="using oneDNN's layouts")
    return PanelGemm(module) if module is not None and module.has_avx512() else None
