"""Probes of the GEMMs a decode step runs, timed alone: the weight term of the lab's model.

A decode step of batch ``B`` multiplies ``B`` rows by every weight matrix once. This probe times
exactly that, on the backend's own linear layers (transformers' ``nn.Linear`` and GPT-2's
``Conv1D``, the engine's oneDNN-prepacked or panel layers), with random rows and nothing else in
between: no attention, no cache, no Python of the step. What a step spends there is then a
measured input of the fitted model, not a fitted number:

    weights at the decode-GEMM rate = Σ over linear layers of t(layer, B rows)

Timing follows ``calibrate``: a warm-up pass, then ``repeats`` passes, each min(wall, process CPU
time) (one thread: a descheduled thread is waiting, not slow); median and best are kept.

The engine's GEMM on an lm_head-sized matrix (``engine_gemm``) is also one of the kernels the
calibrated compute peak is taken from.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from ridgeline.lab.machine import GemmPoint

# the engine's packed layers (engine/packing.py) and transformers' Conv1D keep their input width
# in different places: [out, in] packed weights, [⌈out/16⌉, in, 16] panels, [in, out] Conv1D
_IN_FEATURES: dict[str, Callable[[Any], int]] = {
    "PackedLinear": lambda m: int(m.packed.shape[1]),
    "PanelLinear": lambda m: int(m.panels.shape[1]),
    "Conv1D": lambda m: int(m.weight.shape[0]),
}


@dataclass(frozen=True, slots=True)
class GemmProbe:
    """One pass over a model's linear layers at ``rows`` rows (one decode step's GEMMs)."""

    rows: int
    layers: int
    weight_params: int
    median_s: float
    best_s: float

    @property
    def flops_per_s(self) -> float:
        """2 FLOPs per weight per row, over the median pass."""
        return 2.0 * self.rows * self.weight_params / self.median_s

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "flops_per_s": self.flops_per_s}


def in_features(module: nn.Module) -> int | None:
    """The input width of a linear layer, or None for any other module."""
    if isinstance(module, nn.Linear):
        return module.in_features
    reader = _IN_FEATURES.get(type(module).__name__)
    return reader(module) if reader is not None else None


def linear_layers(model: nn.Module) -> list[tuple[nn.Module, int]]:
    """Every linear layer of ``model`` with its input width, each module once."""
    seen: set[int] = set()
    out = []
    for module in model.modules():
        width = in_features(module)
        if width is not None and id(module) not in seen:
            seen.add(id(module))
            out.append((module, width))
    return out


def _weight_params(module: nn.Module, width: int, rows: torch.Tensor) -> int:
    return width * int(module(rows).shape[-1])


def _timed(fn: Callable[[], object]) -> float:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return min(time.perf_counter() - wall, max(time.process_time() - cpu, 1e-9))


def probe_layers(
    layers: Sequence[tuple[nn.Module, int]], rows: int, repeats: int = 5, seed: int = 0
) -> GemmProbe:
    """Time one pass over ``layers`` at ``rows`` rows (run under the caller's threads)."""
    gen = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(rows, width, generator=gen) for _, width in layers]  # [rows, in]
    with torch.inference_mode():
        params = sum(_weight_params(m, w, x[:1]) for (m, w), x in zip(layers, inputs, strict=True))

        def one_pass() -> None:
            for (module, _), x in zip(layers, inputs, strict=True):
                module(x)  # [rows, out]

        one_pass()
        times = [_timed(one_pass) for _ in range(repeats)]
    return GemmProbe(rows, len(layers), params, statistics.median(times), min(times))


def engine_linear(weight: torch.Tensor) -> nn.Module:
    """``weight`` [out, in] as the engine packs an fp32 linear layer on this CPU."""
    from ridgeline.engine.packing import Layout, can_pack, pack_linears, resolve
    from ridgeline.engine.panel_gemm import load_panel_gemm

    linear = nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    with torch.no_grad():
        linear.weight.copy_(weight)
    holder = nn.Sequential(linear)
    if can_pack(torch.device("cpu")):
        panel = load_panel_gemm()
        pack_linears(holder, resolve(Layout.AUTO, torch.float32, panel), panel)
    return holder[0]


def engine_gemm(
    shape: tuple[int, int], batches: Sequence[int], threads: Sequence[int], repeats: int
) -> list[GemmPoint]:
    """The engine's GEMM, [B, in] × [out, in]ᵀ, per batch and thread count (fp32)."""
    from ridgeline.lab.decode import torch_threads

    n_out, n_in = shape
    gen = torch.Generator().manual_seed(0)
    layer = engine_linear(torch.randn(n_out, n_in, generator=gen))  # [n_out, n_in]
    out = []
    for batch in batches:
        for n in threads:
            with torch_threads(n):
                probe = probe_layers([(layer, n_in)], batch, repeats)
            out.append(GemmPoint(batch, n_out, n_in, n, probe.best_s))
    return out
