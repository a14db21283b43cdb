"""Prepacked linear layers for the CPU, so decode-shaped matmuls run at the roofline.

At batch ≥ 4, ``F.linear`` (MKL sgemm on a ``[out, in]`` weight) re-packs the weight on every
call and reaches a third of the DRAM bandwidth on the lm_head (measured on the development
machine: B=16 takes 2.8× the B=1 time, docs/lab.md). Three ways out, measured on llama-350m's
shapes, one thread, fp32 (docs/engine.md):

    layout                         1 row (decode B=1)       16 rows (decode B=16)
    oneDNN, hint 1 row             15–21 GB/s of weights    52 GFLOP/s
    oneDNN, hint ≥ 2 rows          12–15 GB/s               67–87 GFLOP/s
    panels (``panel_gemm``)        21–24 GB/s               80–98 GFLOP/s   (matmul peak: 95)

oneDNN reorders a weight once into its blocked layout (``torch.ops.mkldnn._reorder_linear_weight``,
the layout Inductor's freezing pass uses) for a hinted row count, and picks one of two layouts
from the hint; no single one serves both ends, so ``Layout.DUAL`` keeps both (twice the weight
memory). ``Layout.PANEL`` keeps one copy in ``panel_gemm``'s column panels and serves every row
count; it needs AVX-512 and fp32. ``Layout.AUTO`` takes PANEL where it applies, else DUAL.

NOTE: a performance shortcut with a numerical cost: sums are reassociated, so fp32 logits move
by ~1e-6 relative. ``EngineConfig.pack_weights = "off"`` turns it off.
"""

from __future__ import annotations

from enum import Enum

import torch
from torch import nn
from torch.profiler import record_function

from ridgeline.engine.panel_gemm import PanelGemm
from ridgeline.errors import ConfigError

PANEL_LINEAR_RANGE = "ridgeline::panel_linear"  # profiler range name, then [rows x out]
GEMV_HINT_ROWS = 1  # oneDNN's layout for one row: a GEMV at the memory bandwidth
GEMM_HINT_ROWS = 16  # its layout for a few rows upwards (any hint ≥ 2 picks the same one)


class Layout(Enum):
    """How the linear layers hold their weights."""

    OFF = "off"  # plain F.linear on the [out, in] weight
    ONEDNN = "onednn"  # one oneDNN copy, tuned for batches; one row at ~2/3 of the bandwidth
    DUAL = "dual"  # oneDNN copies for one row and for more: 2 × weight memory
    PANEL = "panel"  # one copy in column panels (AVX-512, fp32)
    AUTO = "auto"  # PANEL where it applies, else DUAL

    @classmethod
    def parse(cls, value: str | bool) -> Layout:
        if isinstance(value, bool):  # the old boolean switch
            return cls.AUTO if value else cls.OFF
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(m.value for m in cls)
            raise ConfigError(f"field pack_weights: one of {names}, got '{value}'") from None


def _onednn(rows: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(rows, packed, bias, "none", [], "")


def _bias(linear: nn.Linear) -> torch.Tensor | None:
    return None if linear.bias is None else linear.bias.detach().clone()


class PackedLinear(nn.Module):
    """``x @ Wᵀ + b`` with ``W`` in oneDNN's blocked layout(s) (the original is dropped)."""

    def __init__(self, linear: nn.Linear, layout: Layout = Layout.DUAL) -> None:
        super().__init__()
        w = linear.weight.detach()
        self.out_features = w.shape[0]
        self.packed = torch.ops.mkldnn._reorder_linear_weight(w, GEMM_HINT_ROWS)
        self.one_row: torch.Tensor | None = None
        if layout is Layout.DUAL:
            self.one_row = torch.ops.mkldnn._reorder_linear_weight(w, GEMV_HINT_ROWS)
        self.bias = _bias(linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])  # [N, in]
        one = self.one_row is not None and rows.shape[0] == 1
        y = _onednn(rows, self.one_row if one else self.packed, self.bias)  # type: ignore[arg-type]
        return y.view(*x.shape[:-1], self.out_features)  # [..., out]


class PanelLinear(nn.Module):
    """``x @ Wᵀ + b`` with ``W`` in ``panel_gemm``'s column panels (one copy, any row count)."""

    def __init__(self, linear: nn.Linear, kernel: PanelGemm) -> None:
        super().__init__()
        self.out_features = linear.weight.shape[0]
        self.panels = kernel.pack(linear.weight)  # [⌈out/16⌉, in, 16]
        self.bias = _bias(linear)
        self.kernel = kernel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])  # [N, in]
        if torch._C._autograd._profiler_enabled():  # a named range: not an aten op otherwise
            with record_function(f"{PANEL_LINEAR_RANGE}[{rows.shape[0]}x{self.out_features}]"):
                y = self.kernel.linear(rows, self.panels, self.bias, self.out_features)
        else:
            y = self.kernel.linear(rows, self.panels, self.bias, self.out_features)  # [N, out]
        return y.view(*x.shape[:-1], self.out_features)  # [..., out]


def can_pack(device: torch.device) -> bool:
    """oneDNN packing applies on a CPU build with mkldnn."""
    return (
        device.type == "cpu"
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
    )


def resolve(layout: Layout, dtype: torch.dtype, panel: PanelGemm | None) -> Layout:
    """The layout ``AUTO`` stands for here, and PANEL checked against what it needs."""
    fits = panel is not None and dtype == torch.float32
    if layout is Layout.AUTO:
        return Layout.PANEL if fits else Layout.DUAL
    if layout is Layout.PANEL and not fits:
        raise ConfigError("field pack_weights: 'panel' needs fp32 and an AVX-512 C++ build")
    return layout


def pack_linears(
    module: nn.Module, layout: Layout = Layout.DUAL, panel: PanelGemm | None = None
) -> int:
    """Replace every ``nn.Linear`` under ``module`` by a packed one; returns how many.

    A tied lm_head gets its own packed copy; the embedding keeps the original matrix.
    """
    if layout is Layout.OFF:
        return 0
    assert layout is not Layout.AUTO, "resolve() the layout first"
    count = 0
    for name, child in list(module.named_children()):
        if isinstance(child, nn.Linear):
            packed: nn.Module
            if layout is Layout.PANEL:
                assert panel is not None
                packed = PanelLinear(child, panel)
            else:
                packed = PackedLinear(child, layout)
            setattr(module, name, packed)
            count += 1
        else:
            count += pack_linears(child, layout, panel)
    return count
