"""Fused fp32 elementwise ops for the CPU decode step: one call where torch takes five to ten.

At decode the tensors between the matmuls are tiny (``[B, hidden]``), so their cost is the
dispatch, not the arithmetic: torch's RMSNorm on the CPU is eight aten calls (pow, mean, add,
rsqrt, mul, mul and two copies), RoPE in the rotate-half form six, SwiGLU three. Over 24
layers of llama-350m that was ~7 ms of a 177 ms step at batch 16 (docs/engine.md). Each op
here is one loop over the rows:

    add_rms_norm:  r ← r + x;  y = r / sqrt(mean(r²) + eps) · w      (Zhang & Sennrich 2019)
    rope:          x ← x·cos + rotate_half(x)·sin, in place           (Su et al. 2021)
    silu_mul:      y = silu(h[:, :f]) · h[:, f:]                      (Shazeer 2020)
    add_layer_norm: r ← r + x;  y = (r − mean) / sqrt(var + eps) · w + b  (Ba et al. 2016)
    gelu_tanh:     y = x · sigmoid(2·sqrt(2/π)(x + 0.044715x³))       (Hendrycks & Gimpel 2016)
    argmax_rows:   the greedy token of each row of logits

The C++ is ``csrc/fused_ops.cpp`` (no AVX-512 requirement: plain loops the compiler
vectorises); ``load_fused_ops`` returns None without a compiler and the model keeps the torch
path.
"""

from __future__ import annotations

from typing import Any

import torch

from ridgeline.engine.cpp_ext import load_kernels
from ridgeline.engine.kernel_build import KernelTarget


class FusedOps:
    """The compiled ops (fp32, CPU)."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def add_rms_norm(
        self, residual: torch.Tensor, x: torch.Tensor | None, weight: torch.Tensor, eps: float
    ) -> torch.Tensor:
        """``residual += x`` in place (if given), then RMSNorm of it: [T, hidden]."""
        return self._module.add_rms_norm(residual, x, weight, eps)

    def rope_(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
        """Rotate ``x`` [T, heads, d] in place (rotate-half form) by ``cos``/``sin`` [T, d]."""
        self._module.rope_(x, cos, sin)

    def silu_mul(self, h: torch.Tensor) -> torch.Tensor:
        """SwiGLU's ``silu(gate) · up`` for ``h`` = [gate | up] [T, 2f] → [T, f]."""
        return self._module.silu_mul(h)

    def add_layer_norm(
        self,
        residual: torch.Tensor,
        x: torch.Tensor | None,
        weight: torch.Tensor,
        bias: torch.Tensor,
        eps: float,
    ) -> torch.Tensor:
        """``residual += x`` in place (if given), then LayerNorm of it: [T, hidden]."""
        return self._module.add_layer_norm(residual, x, weight, bias, eps)

    def gelu_tanh(self, h: torch.Tensor) -> torch.Tensor:
        """GELU in the tanh form (GPT-2's ``gelu_new``), elementwise."""
        return self._module.gelu_tanh(h)

    def argmax_rows(self, x: torch.Tensor) -> torch.Tensor:
        """The first index of each row's maximum: [N, vocab] → [N] (torch's ``argmax(-1)``
        takes ~3.4 ns per element here, 0.7 ms for 16 rows of GPT-2's vocabulary)."""
        return self._module.argmax_rows(x)


def load_fused_ops(target: KernelTarget | str = KernelTarget.NATIVE) -> FusedOps | None:
    """The ops of the ``target`` build; None, with a warning, if the kernels cannot be built."""
    module = load_kernels(target, fallback="using torch's ops")
    return None if module is None else FusedOps(module)
