"""Prepacked linear layers for the CPU (oneDNN), so decode-shaped matmuls stream their weights.

At batch ≥ 4, ``F.linear`` (MKL sgemm on a ``[out, in]`` weight) re-packs the weight on every
call and reaches a third of the DRAM bandwidth on the lm_head (reference/lab.md §2: B=16 takes
2.8× the B=1 time). oneDNN's linear with the weight reordered once into its blocked layout
(``torch.ops.mkldnn._reorder_linear_weight``, the layout Inductor's freezing pass uses) stays
close to the B=1 time up to B=16 and works for any row count.

NOTE: a performance shortcut with a numerical cost: sums are reassociated, so fp32 logits move
by ~1e-6 relative. ``EngineConfig.pack_weights`` turns it off.
"""

from __future__ import annotations

import torch
from torch import nn

PACK_HINT_ROWS = 64  # the row count the blocked layout is tuned for; any count works


class PackedLinear(nn.Module):
    """``x @ Wᵀ + b`` with ``W`` held in oneDNN's blocked layout (the original is dropped)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        w = linear.weight.detach()
        self.out_features = w.shape[0]
        self.packed = torch.ops.mkldnn._reorder_linear_weight(w, PACK_HINT_ROWS)
        self.bias = None if linear.bias is None else linear.bias.detach().clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])  # [N, in]
        y = torch.ops.mkldnn._linear_pointwise(rows, self.packed, self.bias, "none", [], "")
        return y.view(*x.shape[:-1], self.out_features)  # [..., out]


def can_pack(device: torch.device) -> bool:
    """oneDNN packing applies on a CPU build with mkldnn."""
    return (
        device.type == "cpu"
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


def pack_linears(module: nn.Module) -> int:
    """Replace every ``nn.Linear`` under ``module`` by a ``PackedLinear``; returns how many.

    A tied lm_head gets its own packed copy; the embedding keeps the original matrix.
    """
    count = 0
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            setattr(module, name, PackedLinear(child))
            count += 1
        else:
            count += pack_linears(child)
    return count
