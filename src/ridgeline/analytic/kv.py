"""KV-cache sizing: per token, in total, against the weights and against device memory.

KV bytes = Σ_layers 2 × batch × min(context, window_l) × kv_heads × head_dim × bytes_per_element
(Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023, §2); MLA stores
(kv_lora_rank + qk_rope_head_dim) elements per token per layer instead of 2 × kv_heads × head_dim
(DeepSeek-V2, arXiv:2405.04434, Table 1). A sliding-window layer keeps at most ``window`` tokens.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from ridgeline.analytic.workload import MAX_BATCH, MAX_CONTEXT, Dtypes, check_size
from ridgeline.specs.dtypes import DType
from ridgeline.specs.model import Attention, LayerSpec, MLASpec, ModelSpec
from ridgeline.specs.params import param_counts


def kv_bytes_per_token(m: ModelSpec, kv_dtype: DType = DType.BF16) -> float:
    """KV bytes one token adds across all layers (while the context is inside every window)."""
    return m.num_layers * m.kv_elements_per_token_per_layer * kv_dtype.bytes


def kv_bytes(m: ModelSpec, batch: Any, context: Any, kv_dtype: DType = DType.BF16) -> Any:
    """KV bytes held for ``batch`` sequences of ``context`` tokens (arrays broadcast)."""
    ctx = np.asarray(context, dtype=float)
    per_layer = m.kv_elements_per_token_per_layer * kv_dtype.bytes
    total: Any = 0.0
    for layer in m.layers:
        held = ctx if layer.window is None else np.minimum(ctx, layer.window)
        total = total + held * per_layer
    out = np.asarray(batch, dtype=float) * total
    return float(out) if np.ndim(out) == 0 else out


def weights_bytes(m: ModelSpec, weight_dtype: DType = DType.BF16) -> float:
    """Bytes of all parameters at ``weight_dtype`` (tied embeddings once)."""
    return param_counts(m).total * weight_dtype.bytes


def _smallest_context(
    m: ModelSpec, batch: int, target: float, kv_dtype: DType, limit: int = 1 << 40
) -> int | None:
    """Smallest integer context whose KV reaches ``target`` bytes; None if it never does."""
    if kv_bytes(m, batch, limit, kv_dtype) < target:
        return None
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi) // 2
        if kv_bytes(m, batch, mid, kv_dtype) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def crossover_context(m: ModelSpec, dtypes: Dtypes | None = None, batch: int = 1) -> int | None:
    """Context (tokens per sequence) at which the KV of ``batch`` sequences reaches the weights.

    Without windows this is weights ÷ (batch × kv_bytes_per_token); with sliding windows the KV
    growth slows past the window and may never reach the weights (then ``None``).
    """
    dt = dtypes or Dtypes()
    return _smallest_context(m, batch, weights_bytes(m, dt.weight), dt.kv)


@dataclass(frozen=True, slots=True)
class Technique:
    """One way of shrinking the KV cache, applied to a model."""

    name: str
    description: str
    kv_bytes_per_token: float
    kv_bytes: float
    ratio_to_mha: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mha_head_dim(m: ModelSpec) -> float:
    """The per-head width that gives a model's MHA equivalent its KV bytes: ``head_dim``, or
    for MLA the mean of the key width (qk_nope + qk_rope) and the value width, since plain
    attention would cache a 192-wide key and a 128-wide value per head on DeepSeek-V3
    (DeepSeek-V2 §2.1.1: k_t = [k_C; k_R], v_t of width d_h)."""
    if m.mla is None:
        return float(m.head_dim)
    return (m.mla.qk_head_dim + m.mla.v_head_dim) / 2


def _mha(m: ModelSpec) -> ModelSpec:
    width = mha_head_dim(m)
    # NOTE: an odd key + value width cannot be an integer head_dim; the bytes then round down.
    return replace(
        m.with_kv_heads(m.num_heads),
        mla=None,
        head_dim=int(width),
        layers=tuple(LayerSpec(None, layer.moe) for layer in m.layers),
    )


def techniques(
    m: ModelSpec, batch: int, context: int, kv_dtype: DType = DType.BF16, window: int = 4096
) -> list[Technique]:
    """The four techniques of course module 6, side by side for one model: GQA/MQA,
    quantised KV, sliding window, MLA — each against the model's MHA equivalent."""
    check_size("batch", batch, 1, MAX_BATCH)
    check_size("context", context, 1, MAX_CONTEXT)
    mha = _mha(m)
    base = kv_bytes(mha, batch, context, kv_dtype)
    gqa_heads = 8 if m.num_heads % 8 == 0 and m.num_heads > 8 else max(1, m.num_heads // 4)
    variants: list[tuple[str, str, ModelSpec, DType]] = [
        ("mha", f"{m.num_heads} KV heads, one per query head", mha, kv_dtype),
        ("as configured", f"{m.attention.value}, {m.kv_heads_cached} KV heads cached", m, kv_dtype),
        ("gqa", f"{gqa_heads} KV heads", mha.with_kv_heads(gqa_heads), kv_dtype),
        ("mqa", "1 KV head", mha.with_kv_heads(1), kv_dtype),
        ("fp8 kv", "MHA with an 8-bit KV cache", mha, DType.FP8),
        ("int4 kv", "MHA with a 4-bit KV cache", mha, DType.INT4),
        (
            f"window {window}",
            f"MHA, every layer keeps the last {window} tokens",
            replace(mha, layers=tuple(LayerSpec(window, layer.moe) for layer in m.layers)),
            kv_dtype,
        ),
        (
            "mla",
            "latent 512 + rope 64 per token (DeepSeek-V2/V3 ranks)",
            replace(
                mha, attention=Attention.MLA, mla=MLASpec(None, 512, m.head_dim, 64, m.head_dim)
            ),
            kv_dtype,
        ),
    ]
    out = []
    for name, desc, spec, dtype in variants:
        total = kv_bytes(spec, batch, context, dtype)
        out.append(Technique(name, desc, kv_bytes_per_token(spec, dtype), total, total / base))
    return out
