"""GPT-2 and Llama-family decoders written directly in torch, built from a ``ModelSpec``.

One module tree covers both families; the spec picks the pieces:

    GPT-2 (Radford et al. 2019)       Llama family (Touvron et al. 2023; Mistral, Qwen2)
    learned positions                 RoPE (Su et al. 2021), llama3 / linear scaling
    LayerNorm                         RMSNorm (Zhang & Sennrich 2019)
    fused QKV with bias               fused QKV, bias for Qwen2; GQA/MQA (Ainslie et al. 2023)
    GELU (tanh) MLP                   SwiGLU MLP (Shazeer 2020): down(silu(gate) * up)

Every layer is pre-norm: ``x += attn(norm1(x)); x += mlp(norm2(x))``. Tokens of a step are one
flat ``[T, hidden]`` tensor (no batch dimension, no padding); attention finds each request's
keys through ``AttentionMetadata``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ridgeline.engine.attention import AttentionMetadata, DecodeKernel, paged_attention
from ridgeline.engine.fused_layer import FusedLayer, LayerWeights, layer_weights
from ridgeline.engine.fused_ops import FusedOps
from ridgeline.engine.kv_cache import KVCache
from ridgeline.engine.paged_kernel import PagedKernel
from ridgeline.engine.rope import apply_rope, rope_table
from ridgeline.errors import ConfigError
from ridgeline.specs.model import ModelSpec, Norm, Position

_ACTIVATIONS = {
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's tanh approximation
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu": F.gelu,
    "silu": F.silu,
    "swish": F.silu,
    "relu": F.relu,
}


def check_supported(spec: ModelSpec) -> None:
    """Raise ``ConfigError`` for what this engine does not run (MLA, MoE, QK-norm, Gemma-2)."""
    problems = []
    if spec.mla is not None:
        problems.append("MLA attention")
    if spec.is_moe:
        problems.append("mixture-of-experts layers")
    if spec.qk_norm:
        problems.append("QK-norm")
    if spec.norms_per_layer != 2 or spec.family.startswith("gemma"):
        problems.append(f"the {spec.family} norm layout")
    if spec.activation not in _ACTIVATIONS:
        problems.append(f"activation '{spec.activation}'")
    if problems:
        raise ConfigError(f"model '{spec.name}': engine does not support {', '.join(problems)}")


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x²) + eps) · w``, computed in fp32 (Zhang & Sennrich 2019)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()  # [T, hidden]
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)  # [T, hidden]
        return self.weight * x32.to(x.dtype)  # [T, hidden]


def _norm(spec: ModelSpec) -> nn.Module:
    if spec.norm is Norm.LAYERNORM:
        return nn.LayerNorm(spec.hidden_size, eps=spec.norm_eps)
    return RMSNorm(spec.hidden_size, spec.norm_eps)


def _add_norm(
    ops: FusedOps, residual: torch.Tensor, x: torch.Tensor | None, norm: nn.Module
) -> torch.Tensor:
    """``residual += x`` in place (if given), then ``norm(residual)``: one fused call."""
    if isinstance(norm, RMSNorm):
        return ops.add_rms_norm(residual, x, norm.weight, norm.eps)
    assert isinstance(norm, nn.LayerNorm) and norm.bias is not None
    return ops.add_layer_norm(residual, x, norm.weight, norm.bias, norm.eps)


class Attention(nn.Module):
    """Fused QKV projection, RoPE (when the spec says so), paged attention, output projection."""

    def __init__(self, spec: ModelSpec, layer: int) -> None:
        super().__init__()
        self.layer = layer
        self.num_heads, self.kv_heads, self.head_dim = (
            spec.num_heads,
            spec.num_kv_heads,
            spec.head_dim,
        )
        width = (spec.num_heads + 2 * spec.num_kv_heads) * spec.head_dim
        self.qkv = nn.Linear(spec.hidden_size, width, bias=spec.qkv_bias)
        self.o_proj = nn.Linear(spec.num_heads * spec.head_dim, spec.hidden_size, bias=spec.o_bias)

    def forward(self, x: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        t = x.shape[0]
        q_width, kv_width = self.num_heads * self.head_dim, self.kv_heads * self.head_dim
        qkv = self.qkv(x)  # [T, q_width + 2 kv_width]
        qk = qkv[:, : q_width + kv_width].unflatten(-1, (-1, self.head_dim))  # [T, H + kv, d]
        if ctx.cos is not None and ctx.sin is not None:
            if ctx.ops is not None and qk.dtype == torch.float32:
                ctx.ops.rope_(qk, ctx.cos, ctx.sin)  # in place, in the qkv output
            else:
                qk = apply_rope(qk, ctx.cos, ctx.sin)  # queries and keys in one pass
        q, k = qk.split([self.num_heads, self.kv_heads], dim=1)  # [T, H, d], [T, kv_heads, d]
        v = qkv[:, q_width + kv_width :].unflatten(-1, (self.kv_heads, self.head_dim))
        out = paged_attention(q, k, v, ctx.cache, self.layer, ctx.meta, ctx.kernel)  # [T, H, d]
        return self.o_proj(out.reshape(t, q_width))  # [T, hidden]


class MLP(nn.Module):
    """SwiGLU ``down(act(gate) · up)`` with gate and up fused, or GPT-2's ``proj(act(fc))``."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.gated = spec.gated_mlp
        width = 2 * spec.ffn if spec.gated_mlp else spec.ffn
        self.up = nn.Linear(spec.hidden_size, width, bias=spec.mlp_bias)
        self.down = nn.Linear(spec.ffn, spec.hidden_size, bias=spec.mlp_bias)
        self.act = _ACTIVATIONS[spec.activation]
        self.silu = spec.activation in ("silu", "swish")
        self.gelu_tanh = spec.activation in ("gelu_new", "gelu_pytorch_tanh")

    def forward(self, x: torch.Tensor, ops: FusedOps | None = None) -> torch.Tensor:
        h = self.up(x)  # [T, 2·ffn] (gated) or [T, ffn]
        if self.gated and self.silu and ops is not None and h.dtype == torch.float32:
            return self.down(ops.silu_mul(h))  # [T, hidden]
        if self.gated:
            gate, up = h.chunk(2, dim=-1)  # [T, ffn] each
            h = self.act(gate) * up  # [T, ffn]
        elif self.gelu_tanh and ops is not None and h.dtype == torch.float32:
            h = ops.gelu_tanh(h)  # [T, ffn]
        else:
            h = self.act(h)  # [T, ffn]
        return self.down(h)  # [T, hidden]


class DecoderLayer(nn.Module):
    """One pre-norm block: ``x += attn(norm1(x)); x += mlp(norm2(x))``."""

    def __init__(self, spec: ModelSpec, layer: int) -> None:
        super().__init__()
        self.attn_norm = _norm(spec)
        self.attn = Attention(spec, layer)
        self.mlp_norm = _norm(spec)
        self.mlp = MLP(spec)

    def forward(self, x: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), ctx)  # [T, hidden]
        return x + self.mlp(self.mlp_norm(x))  # [T, hidden]

    def forward_fused(
        self, h: torch.Tensor, residual: torch.Tensor, next_norm: nn.Module, ctx: StepContext
    ) -> torch.Tensor:
        """The same layer on the residual stream: ``h`` is ``attn_norm(residual)``; adds this
        layer's attention and MLP to ``residual`` in place and returns ``next_norm(residual)``
        (each add fused with the norm after it, as in vLLM's ``fused_add_rms_norm``)."""
        assert ctx.ops is not None
        a = self.attn(h, ctx)  # [T, hidden]
        h = _add_norm(ctx.ops, residual, a, self.mlp_norm)
        m = self.mlp(h, ctx.ops)  # [T, hidden]
        return _add_norm(ctx.ops, residual, m, next_norm)


class StepContext:
    """What every layer of one forward pass shares: the cache, the metadata, RoPE rows.

    NOTE: passed explicitly down the module tree instead of a module-level global (nano-vllm's
    ``_CONTEXT``), so two models (target and draft) can run in one process.
    """

    __slots__ = ("cache", "meta", "kernel", "cos", "sin", "ops")

    def __init__(
        self,
        cache: KVCache,
        meta: AttentionMetadata,
        kernel: DecodeKernel | None,
        rope: tuple[torch.Tensor, torch.Tensor] | None,
        ops: FusedOps | None = None,
    ) -> None:
        self.cache, self.meta, self.kernel, self.ops = cache, meta, kernel, ops
        self.cos = rope[0][meta.positions] if rope is not None else None  # [T, d]
        self.sin = rope[1][meta.positions] if rope is not None else None  # [T, d]


class CausalLM(nn.Module):
    """A decoder-only language model over a paged KV cache.

    Args:
        spec: the architecture (``ridgeline.specs.get_model``).
        max_positions: positions the RoPE table / learned embedding must cover.
        num_layers: build only the first ``num_layers`` layers (a self-draft model), or all.
    """

    def __init__(self, spec: ModelSpec, max_positions: int, num_layers: int | None = None) -> None:
        super().__init__()
        check_supported(spec)
        self.spec = spec
        self.num_layers = num_layers or spec.num_layers
        self.embed_tokens = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.embed_positions: nn.Embedding | None = None
        if spec.position is Position.LEARNED:
            self.embed_positions = nn.Embedding(spec.max_position_embeddings, spec.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(spec, i) for i in range(self.num_layers))
        self.final_norm = _norm(spec)
        self.lm_head = nn.Linear(spec.hidden_size, spec.vocab_size, bias=False)
        if spec.tied_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.rope: tuple[torch.Tensor, torch.Tensor] | None = None
        self.fused_ops: FusedOps | None = None  # set by use_fused_ops (CPU, fp32)
        self.fused_layer: FusedLayer | None = None  # set by use_fused_layer
        self.layer_weights: list[LayerWeights] = []
        if spec.position is Position.ROPE:
            self.rope = rope_table(spec, max_positions)

    def forward(
        self,
        input_ids: torch.Tensor,
        cache: KVCache,
        meta: AttentionMetadata,
        kernel: DecodeKernel | None = None,
    ) -> torch.Tensor:
        """Hidden states ``[T, hidden]`` after the final norm for the step's ``input_ids`` [T]."""
        rope = None
        if self.rope is not None:
            rope = (self.rope[0].to(input_ids.device), self.rope[1].to(input_ids.device))
        ctx = StepContext(cache, meta, kernel, rope, self.fused_ops)
        x = self.embed_tokens(input_ids)  # [T, hidden]
        if self.embed_positions is not None:
            x = x + self.embed_positions(meta.positions)  # [T, hidden]
        if self._fused_stream(x):
            return self._forward_fused(x, ctx)
        for layer in self.layers:
            x = layer(x, ctx)  # [T, hidden]
        return self.final_norm(x)  # [T, hidden]

    def _fused_stream(self, x: torch.Tensor) -> bool:
        return self.fused_ops is not None and x.dtype == torch.float32

    def use_fused_layer(self, fused: FusedLayer | None) -> None:
        """Run each layer of a decode step in one C++ call (``fused_layer``) when every layer
        fits it (weights in panels, SwiGLU or tanh GELU); otherwise, or with None, in Python."""
        layers: list[DecoderLayer] = list(self.layers)  # type: ignore[arg-type]
        norms = [layer.attn_norm for layer in layers[1:]] + [self.final_norm]
        weights = [layer_weights(layer, nxt) for layer, nxt in zip(layers, norms, strict=True)]
        fits = fused is not None and all(w is not None for w in weights)
        self.fused_layer = fused if fits else None
        self.layer_weights = [w for w in weights if w is not None] if fits else []

    def _layers_in_cpp(self, ctx: StepContext) -> bool:
        """A pure decode step on the compiled kernels, not under the profiler (whose per-kernel
        ranges the Python layers provide)."""
        return (
            self.fused_layer is not None
            and ctx.meta.all_paged
            and isinstance(ctx.kernel, PagedKernel)
            and ctx.cache.shape.dtype == torch.float32
            and not torch._C._autograd._profiler_enabled()
        )

    def _forward_fused(self, residual: torch.Tensor, ctx: StepContext) -> torch.Tensor:
        assert ctx.ops is not None
        layers: list[DecoderLayer] = list(self.layers)  # type: ignore[arg-type]
        norms = [layer.attn_norm for layer in layers] + [self.final_norm]
        residual = residual.contiguous()  # updated in place from here on
        h = _add_norm(ctx.ops, residual, None, norms[0])  # [T, hidden]
        if self._layers_in_cpp(ctx):
            return self._forward_cpp(h, residual, ctx)
        for layer, nxt in zip(layers, norms[1:], strict=True):
            h = layer.forward_fused(h, residual, nxt, ctx)
        return h

    def _forward_cpp(
        self, h: torch.Tensor, residual: torch.Tensor, ctx: StepContext
    ) -> torch.Tensor:
        assert self.fused_layer is not None
        meta, run = ctx.meta, self.fused_layer.run
        rope = (ctx.cos, ctx.sin) if ctx.cos is not None and ctx.sin is not None else None
        for i, w in enumerate(self.layer_weights):
            k, v = ctx.cache.k[i], ctx.cache.v[i]
            h = run(
                h, residual, w, rope, k, v, meta.slot_mapping, meta.block_tables, meta.context_lens
            )
        return h  # [T, hidden]

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """fp32 logits ``[N, vocab]`` for the rows of ``hidden`` that sample."""
        return self.lm_head(hidden).float()  # [N, vocab]


def early_exit(target: CausalLM, num_layers: int) -> CausalLM:
    """A self-draft: the target's first ``num_layers`` layers, then its final norm and lm_head
    (early exit, as in LayerSkip, Elhoushi et al. 2024). Shares every weight with ``target``."""
    if not 0 < num_layers < target.num_layers:
        raise ConfigError(f"draft layers must be in [1, {target.num_layers - 1}], got {num_layers}")
    with torch.device("meta"):
        draft = CausalLM(target.spec, max_positions=1, num_layers=num_layers)
    draft.embed_tokens = target.embed_tokens
    draft.embed_positions = target.embed_positions
    draft.layers = nn.ModuleList(list(target.layers)[:num_layers])
    draft.final_norm, draft.lm_head, draft.rope = target.final_norm, target.lm_head, target.rope
    draft.fused_ops = target.fused_ops
    draft.use_fused_layer(target.fused_layer)  # its last layer's next norm is the final norm
    return draft
