"""One decoder layer of a decode step in one C++ call: the per-layer Python cost, removed.

A decode step at small batch spends 1.5–2 ms of distilgpt2's 13 ms outside its kernels (the
module calls, views and ~10 extension calls per layer between them). Half of that is the weight
stream itself: it evicts the interpreter's working set from L2 and L3 between every two calls,
and a tiny GPT-2's step with nothing else to do takes 0.9 ms warm, 1.8 ms after a 64 MiB read
(docs/engine.md). This module runs ``DecoderLayer.forward_fused`` in C++ (``csrc/fused_layer.cpp``)
on the same kernels — the panel GEMM, the fused norms and activations, the paged attention and
its K/V write — from the same module, so the same arithmetic runs in the same order:

    qkv = h · W_qkv (+ b);  rope(q, k) in place            (Llama family)
    write k, v at the step's slots;  a = paged_attention(q)
    h2 = add_norm(residual += a · W_o (+ b))
    m = act(h2 · W_up (+ b)) · W_down (+ b)                 silu·up (SwiGLU) or tanh GELU
    return add_norm(residual += m)                          with the next layer's norm

It applies to fp32 decode steps where every row attends over paged blocks (``all_paged``), the
weights are in panels and the ops are compiled; ``CausalLM`` keeps the Python layers otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ridgeline.engine.cpp_ext import load_kernels
from ridgeline.engine.kernel_build import KernelTarget
from ridgeline.engine.packing import PanelLinear

if TYPE_CHECKING:
    from ridgeline.engine.model import DecoderLayer


@dataclass(frozen=True, slots=True)
class LayerWeights:
    """What ``decode_layer`` takes for one layer, gathered once."""

    tensors: list[torch.Tensor]  # qkv, o, up, down (panels, bias), mlp norm, next norm (w, b)
    dims: list[int]  # heads, kv_heads, head_dim, gated, the up projection's width
    scalars: list[float]  # the MLP norm's eps, the next norm's, the attention scale


def _bias(t: torch.Tensor | None) -> torch.Tensor:
    return torch.empty(0) if t is None else t


def _norm(norm: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Weight, bias (empty for an RMSNorm) and eps of a LayerNorm or an RMSNorm."""
    weight, bias, eps = norm.weight, getattr(norm, "bias", None), getattr(norm, "eps", None)
    assert isinstance(weight, torch.Tensor) and isinstance(eps, float)
    return weight.detach(), _bias(None if bias is None else bias.detach()), eps


def layer_weights(layer: DecoderLayer, next_norm: torch.nn.Module) -> LayerWeights | None:
    """The layer's operands, or None where it does not fit (weights not in panels, an
    activation other than SwiGLU's silu or tanh GELU)."""
    attn, mlp = layer.attn, layer.mlp
    linears = (attn.qkv, attn.o_proj, mlp.up, mlp.down)
    if not all(isinstance(x, PanelLinear) for x in linears):
        return None
    if not ((mlp.gated and mlp.silu) or (not mlp.gated and mlp.gelu_tanh)):
        return None
    tensors: list[torch.Tensor] = []
    for lin in linears:
        assert isinstance(lin, PanelLinear)
        tensors += [lin.panels, _bias(lin.bias)]
    w2, b2, eps2 = _norm(layer.mlp_norm)
    wn, bn, epsn = _norm(next_norm)
    tensors += [w2, b2, wn, bn]
    dims = [attn.num_heads, attn.kv_heads, attn.head_dim, int(mlp.gated), mlp.up.out_features]
    scale = attn.head_dim**-0.5  # as PagedKernel computes it
    return LayerWeights(tensors, dims, [eps2, epsn, scale])


class FusedLayer:
    """The compiled layer: ``run`` one decode layer on the residual stream."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def run(
        self,
        h: torch.Tensor,
        residual: torch.Tensor,
        weights: LayerWeights,
        rope: tuple[torch.Tensor, torch.Tensor] | None,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        slots: torch.Tensor,
        tables: torch.Tensor,
        lens: torch.Tensor,
    ) -> torch.Tensor:
        """``h`` [T, hidden] (this layer's normed input); adds the layer to ``residual`` in
        place and returns the next norm of it."""
        cos, sin = rope if rope is not None else (None, None)
        return self._module.decode_layer(
            h,
            residual,
            weights.tensors,
            weights.dims,
            weights.scalars,
            cos,
            sin,
            k_cache,
            v_cache,
            slots,
            tables,
            lens,
        )


def load_fused_layer(target: KernelTarget | str = KernelTarget.NATIVE) -> FusedLayer | None:
    """The layer of the ``target`` build; None, with a warning, if the kernels cannot be built,
    and None where the panel GEMM does not apply (no AVX-512)."""
    module = load_kernels(target, fallback="running the layers in Python")
    return FusedLayer(module) if module is not None and module.has_avx512() else None
