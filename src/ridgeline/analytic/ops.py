"""Per-operator FLOPs and bytes of one inference step (prefill, decode, or a mixed chunk).

Every function here takes scalars *or* numpy arrays for the batch shape and broadcasts, so the
single-point API (``roofline.step_cost``) and the vectorised sweep (``roofline.sweep``) run the
same formulas.

Bookkeeping, stated once (LLM-Viewer, llm-analysis and the JAX scaling book's inference
chapter each count some of these terms differently, which is why their decode times disagree by
up to ±10%):
- Weights: every matrix an op uses is read once per step, whatever the batch (lm_head reads its
  whole [vocab, hidden] matrix; the embedding reads only the gathered rows, one per new token).
- KV cache: each sequence's cached context is read once per step per layer (not twice, and not
  at the final length); the new tokens' K and V are written once. A sliding-window layer reads
  at most ``window`` cached tokens.
- Activations: each op reads its inputs and writes its outputs (no fusion across ops, attention
  fused FlashAttention-style so S = QKᵀ never reaches memory). A GEMM reads its input in the
  format it multiplies in (``Dtypes.act``) and writes the residual stream's format
  (``Dtypes.stream``: bf16 beside 8- and 4-bit GEMMs); norms, activation functions and attention
  read and write the stream's format.
- Norms: a pre-norm block's residual add is fused into the next norm (TensorRT-LLM's fused
  add + RMSNorm, vLLM's ``fused_add_rms_norm``): it reads the sublayer output and the residual,
  writes the new residual and the normalised input of the next GEMM, four passes over
  [tokens, hidden].
- Quantised checkpoints (fp8, fp4) keep the embedding and lm_head in 16 bits (NVIDIA TensorRT
  Model Optimizer's FP8 and NVFP4 recipes quantise the decoder's linear layers only).
- MoE: a step reads the experts its tokens route to: E·(1 − (1 − k/E)^tokens) distinct experts in
  expectation under uniform routing, not top-k alone; the token permutation before the experts
  and the un-permutation after them are ops of their own (``_moe``).
- FLOPs: 2 per multiply-add; softmax and norms ~5 FLOPs per element (negligible, kept for honesty).
- lm_head runs on one row per sequence (the last token), as serving engines do.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import numpy as np

from ridgeline.analytic.workload import Dtypes
from ridgeline.specs.dtypes import DType
from ridgeline.specs.model import ModelSpec
from ridgeline.specs.params import attention_params, mlp_params, norm_params_per_layer

Array = float | np.ndarray

NORM_FLOPS_PER_ELEMENT = 5.0  # mean, variance, scale, shift: order-of-magnitude bookkeeping
SOFTMAX_FLOPS_PER_SCORE = 5.0  # max, subtract, exp, sum, divide


class OpClass(StrEnum):
    """What kind of kernel an operator runs: calibration prices each kind at its own efficiency
    (``analytic.calibrated.compute_term``)."""

    GEMM = "gemm"  # a dense weight GEMM (projections, MLP, lm_head, router)
    ATTENTION = "attention"  # fused attention over the KV cache
    EXPERTS = "experts"  # grouped MoE expert GEMMs
    ELEMENTWISE = "elementwise"  # norms, activation functions, gathers: memory traffic


class StepShape(Protocol):
    """What the operators need to know about a batch: sequences, new tokens, and sums over the
    sequences of the keys each new token attends to and of the cached tokens read."""

    @property
    def num_seqs(self) -> Array: ...

    @property
    def num_tokens(self) -> Array: ...

    @property
    def is_decode(self) -> bool: ...

    def attended(self, window: int | None) -> Array:
        """Σ over sequences and new tokens of the keys attended (causal, windowed)."""
        ...

    def cached(self, window: int | None) -> Array:
        """Σ over sequences of the cached tokens read (at most ``window`` each)."""
        ...

    def keys(self) -> Array:
        """Σ over sequences of prior + new tokens (every key of the step)."""
        ...

    def routed(self, num_experts: int, top_k: int) -> tuple[Array, Array]:
        """Distinct experts the step's tokens reach and rows each expert GEMM runs
        (``routed_uniformly`` of the new tokens)."""
        ...


def routed_uniformly(num_experts: int, top_k: int, tokens: Array) -> tuple[Array, Array]:
    """Distinct experts hit by ``tokens`` tokens routed uniformly to ``top_k`` of
    ``num_experts`` (``expected_distinct_experts``), and the rows of each hit expert's GEMM:
    the tokens' ``tokens · top_k`` expert slots shared among them."""
    distinct = expected_distinct_experts(num_experts, top_k, tokens)
    return distinct, tokens * top_k / np.maximum(distinct, 1e-9)


@dataclass(frozen=True, slots=True)
class UniformShape:
    """A uniform batch: ``num_seqs`` sequences, each adding ``new_per_seq`` tokens on top of
    ``prior_per_seq`` cached ones. Fields broadcast as numpy arrays for sweeps (one point each)."""

    num_seqs: Array
    new_per_seq: Array
    prior_per_seq: Array

    @property
    def num_tokens(self) -> Array:
        return self.num_seqs * self.new_per_seq

    @property
    def is_decode(self) -> bool:
        """True when every sequence adds exactly one token (MLA then runs in absorbed form)."""
        return bool(np.all(np.asarray(self.new_per_seq) == 1))

    def attended(self, window: int | None) -> Array:
        return self.num_seqs * attended_keys(self.new_per_seq, self.prior_per_seq, window)

    def cached(self, window: int | None) -> Array:
        prior = self.prior_per_seq if window is None else np.minimum(self.prior_per_seq, window)
        return self.num_seqs * prior

    def keys(self) -> Array:
        return self.num_seqs * (self.prior_per_seq + self.new_per_seq)

    def routed(self, num_experts: int, top_k: int) -> tuple[Array, Array]:
        return routed_uniformly(num_experts, top_k, self.num_tokens)


@dataclass(frozen=True, slots=True)
class MixedShape:
    """One heterogeneous batch (a serving step): per-sequence new and cached token counts, e.g.
    prefill chunks and decode tokens together. Results are scalars."""

    new_tokens: np.ndarray
    prior_tokens: np.ndarray

    @property
    def num_seqs(self) -> float:
        return float(len(self.new_tokens))

    @property
    def num_tokens(self) -> float:
        return float(np.sum(self.new_tokens))

    @property
    def is_decode(self) -> bool:
        return bool(np.all(self.new_tokens == 1))

    def attended(self, window: int | None) -> float:
        return float(np.sum(attended_keys(self.new_tokens, self.prior_tokens, window)))

    def cached(self, window: int | None) -> float:
        prior = self.prior_tokens if window is None else np.minimum(self.prior_tokens, window)
        return float(np.sum(prior))

    def keys(self) -> float:
        return float(np.sum(self.prior_tokens + self.new_tokens))

    def routed(self, num_experts: int, top_k: int) -> tuple[Array, Array]:
        return routed_uniformly(num_experts, top_k, self.num_tokens)


@dataclass(frozen=True, slots=True)
class OpTerms:
    """FLOPs and bytes of one operator summed over the ``count`` layers it repeats in."""

    name: str
    count: int
    flops: Array
    weight_bytes: Array = 0.0
    kv_read_bytes: Array = 0.0
    kv_write_bytes: Array = 0.0
    act_read_bytes: Array = 0.0
    act_write_bytes: Array = 0.0
    gemm_rows: Array = 0.0  # rows (M) of the op's weight GEMM; 0 when it is not a GEMM
    op_class: OpClass = OpClass.ELEMENTWISE
    compute_dtype: DType = DType.BF16  # the format its arithmetic runs in (its peak)
    weight_dtype: DType | None = None  # the format of its weights (None: it has none)

    @property
    def bytes_read(self) -> Array:
        return self.weight_bytes + self.kv_read_bytes + self.act_read_bytes

    @property
    def bytes_written(self) -> Array:
        return self.kv_write_bytes + self.act_write_bytes


@dataclass(frozen=True, slots=True)
class _Kind:
    """An op's class and formats (``OpTerms``)."""

    op_class: OpClass = OpClass.ELEMENTWISE
    compute_dtype: DType = DType.BF16
    weight_dtype: DType | None = None


def _gemm(dt: Dtypes, op_class: OpClass = OpClass.GEMM) -> _Kind:
    return _Kind(op_class, dt.compute, dt.weight)


def _elementwise(dt: Dtypes) -> _Kind:
    return _Kind(OpClass.ELEMENTWISE, dt.stream, dt.weight)


def head_dtype(dt: Dtypes) -> DType:
    """The format of the embedding and lm_head weights: 16-bit beside fp8/fp4 decoder weights
    (module docstring), else the weights' format."""
    return dt.stream if dt.weight in (DType.FP8, DType.FP4) else dt.weight


def _op(
    name: str, count: int, gemm_rows: Array = 0.0, kind: _Kind = _Kind(), **terms: Array
) -> OpTerms:
    """An op whose per-layer terms are scaled by ``count`` layers (``gemm_rows`` is not)."""
    return OpTerms(
        name,
        count,
        gemm_rows=gemm_rows,
        op_class=kind.op_class,
        compute_dtype=kind.compute_dtype,
        weight_dtype=kind.weight_dtype,
        **{k: v * count for k, v in terms.items()},
    )


def attended_keys(new: Array, prior: Array, window: int | None) -> Array:
    """Σ over the ``new`` tokens of the keys each attends to (causal, optional sliding window).

    Token i (0-based) of the new ones sees ``min(prior + i + 1, window)`` keys. With
    S(x) = Σ_{k=1..x} min(k, W) = x(x+1)/2 for x ≤ W, else W(W+1)/2 + (x − W)·W,
    the sum is S(prior + new) − S(prior).
    """
    if window is None:
        return new * prior + new * (new + 1) / 2

    def s(x: Array) -> Array:
        x = np.asarray(x, dtype=float)
        return np.where(
            x <= window, x * (x + 1) / 2, window * (window + 1) / 2 + (x - window) * window
        )

    return s(prior + new) - s(prior)


def expected_distinct_experts(num_experts: int, top_k: int, tokens: Array) -> Array:
    """Expected distinct experts hit by ``tokens`` tokens, each routed to ``top_k`` of
    ``num_experts`` uniformly: E·(1 − (1 − k/E)^tokens) (docs/design.md, "Formulas"; balls
    into bins)."""
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** np.asarray(tokens, dtype=float))


def _norm_op(
    name: str, count: int, m: ModelSpec, tokens: Array, dt: Dtypes, residual: bool = True
) -> OpTerms:
    """A norm over [tokens, hidden]; with ``residual``, the fused residual add before it (module
    docstring): reads the sublayer output and the residual, writes the new residual (stream
    format) and the next GEMM's input (its format)."""
    h = m.hidden_size
    per_norm_weights = norm_params_per_layer(m) / m.norms_per_layer
    passes = 2.0 if residual else 1.0
    return _op(
        name,
        count,
        kind=_elementwise(dt),
        flops=NORM_FLOPS_PER_ELEMENT * tokens * h,
        weight_bytes=per_norm_weights * dt.stream.bytes,
        act_read_bytes=passes * tokens * h * dt.stream.bytes,
        act_write_bytes=tokens * h * ((passes - 1.0) * dt.stream.bytes + dt.act.bytes),
    )


def _linear(
    name: str, count: int, params: float, d_in: int, d_out: int, tokens: Array, dt: Dtypes
) -> OpTerms:
    """A [tokens, d_in] x [d_in, d_out] projection whose weights (and bias) hold ``params``:
    input in the GEMM's format, output in the stream's (module docstring)."""
    return _op(
        name,
        count,
        gemm_rows=tokens,
        kind=_gemm(dt),
        flops=2.0 * tokens * d_in * d_out,
        weight_bytes=params * dt.weight.bytes,
        act_read_bytes=tokens * d_in * dt.act.bytes,
        act_write_bytes=tokens * d_out * dt.stream.bytes,
    )


def _attention_core(
    name: str,
    count: int,
    m: ModelSpec,
    shape: StepShape,
    window: int | None,
    qk_dim: int,
    v_dim: int,
    kv_elems: int,
    dt: Dtypes,
) -> OpTerms:
    """Fused attention over the cache: scores, softmax, weighted values.

    ``qk_dim``/``v_dim`` are per-head widths of the dot products; ``kv_elems`` is what the cache
    stores per token per layer. Reads Q and the new K/V as activations, the cached context as KV.
    """
    heads = m.num_heads
    pairs = shape.attended(window)
    tokens = shape.num_tokens
    return _op(
        name,
        count,
        kind=_Kind(OpClass.ATTENTION, dt.stream),
        flops=pairs * heads * (2.0 * qk_dim + 2.0 * v_dim + SOFTMAX_FLOPS_PER_SCORE),
        kv_read_bytes=shape.cached(window) * kv_elems * dt.kv.bytes,
        kv_write_bytes=tokens * kv_elems * dt.kv.bytes,
        act_read_bytes=tokens * (heads * qk_dim + kv_elems) * dt.stream.bytes,
        act_write_bytes=tokens * heads * v_dim * dt.stream.bytes,
    )


def _windows(m: ModelSpec) -> Counter[int | None]:
    return Counter(layer.window for layer in m.layers)


def _window_label(window: int | None) -> str:
    return "attn.core" if window is None else f"attn.core[window={window}]"


def _standard_attention(m: ModelSpec, shape: StepShape, dt: Dtypes) -> list[OpTerms]:
    h, hd, n = m.hidden_size, m.head_dim, m.num_layers
    q_dim, kv_dim = m.num_heads * hd, m.num_kv_heads * hd
    tokens = shape.num_tokens
    o_params = q_dim * h + (h if m.o_bias else 0)
    qkv_params = attention_params(m) - o_params
    ops = [_linear("attn.qkv_proj", n, qkv_params, h, q_dim + 2 * kv_dim, tokens, dt)]
    for window, count in _windows(m).items():
        ops.append(
            _attention_core(_window_label(window), count, m, shape, window, hd, hd, 2 * kv_dim, dt)
        )
    ops.append(_linear("attn.o_proj", n, o_params, q_dim, h, tokens, dt))
    return ops


def _mla_attention(m: ModelSpec, shape: StepShape, dt: Dtypes) -> list[OpTerms]:
    """MLA (DeepSeek-V2 §2.1): decode in the weight-absorbed form that attends in the latent
    space (W_UK folded into the query, W_UV applied after), prefill in the plain form that
    expands the latent into per-head K and V for every key."""
    assert m.mla is not None
    a, h, heads, n = m.mla, m.hidden_size, m.num_heads, m.num_layers
    tokens = shape.num_tokens
    q_out = heads * a.qk_head_dim
    if a.q_lora_rank is None:
        q_params = h * q_out
    else:
        q_params = h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * q_out
    kv_a_params = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
    q_proj = _op(
        "attn.q_proj",
        n,
        gemm_rows=tokens,
        kind=_gemm(dt),
        flops=2.0 * tokens * q_params,
        weight_bytes=q_params * dt.weight.bytes,
        act_read_bytes=tokens * h * dt.act.bytes,
        act_write_bytes=tokens * q_out * dt.stream.bytes,
    )
    ops = [q_proj, _linear("attn.kv_a_proj", n, kv_a_params, h, a.cache_width, tokens, dt)]
    ops += _mla_absorbed(m, shape, dt) if shape.is_decode else _mla_expanded(m, shape, dt)
    o_params = heads * a.v_head_dim * h
    ops.append(_linear("attn.o_proj", n, o_params, heads * a.v_head_dim, h, tokens, dt))
    return ops


def _mla_absorbed(m: ModelSpec, shape: StepShape, dt: Dtypes) -> list[OpTerms]:
    """Decode: W_UK absorbed into the query, attention over the cached latent (width
    ``cache_width``, values of width ``kv_lora_rank``), W_UV applied to the result."""
    assert m.mla is not None
    a, heads, n, tokens = m.mla, m.num_heads, m.num_layers, shape.num_tokens
    uk_params = a.kv_lora_rank * heads * a.qk_nope_head_dim
    uv_params = a.kv_lora_rank * heads * a.v_head_dim
    latent = heads * a.kv_lora_rank
    ops = [_linear("attn.q_absorb", n, uk_params, heads * a.qk_nope_head_dim, latent, tokens, dt)]
    for window, count in _windows(m).items():
        label = _window_label(window)
        ops.append(
            _attention_core(
                label, count, m, shape, window, a.cache_width, a.kv_lora_rank, a.cache_width, dt
            )
        )
    ops.append(_linear("attn.v_up", n, uv_params, latent, heads * a.v_head_dim, tokens, dt))
    return ops


def _mla_expanded(m: ModelSpec, shape: StepShape, dt: Dtypes) -> list[OpTerms]:
    """Prefill: the latent of every key expanded into per-head K and V (W_UK and W_UV as one
    ``kv_b_proj``), then ordinary attention with head dims ``qk_head_dim`` and ``v_head_dim``."""
    assert m.mla is not None
    a, heads, n = m.mla, m.num_heads, m.num_layers
    up_params = a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim)
    width = heads * (a.qk_nope_head_dim + a.v_head_dim)
    ops = [_linear("attn.kv_b_proj", n, up_params, a.kv_lora_rank, width, shape.keys(), dt)]
    for window, count in _windows(m).items():
        label = _window_label(window)
        ops.append(
            _attention_core(
                label, count, m, shape, window, a.qk_head_dim, a.v_head_dim, a.cache_width, dt
            )
        )
    return ops


def _mlp(name: str, count: int, m: ModelSpec, ffn: int, tokens: Array, dt: Dtypes) -> list[OpTerms]:
    """Dense MLP: up (and gate) projection with the activation, then down projection."""
    h = m.hidden_size
    up_width = 2 * ffn if m.gated_mlp else ffn
    down_params = ffn * h + (h if m.mlp_bias else 0)
    up_params = mlp_params(m, ffn) - down_params
    up = _linear(
        f"{name}.up_gate" if m.gated_mlp else f"{name}.up",
        count,
        up_params,
        h,
        up_width,
        tokens,
        dt,
    )
    act = _op(
        f"{name}.act",
        count,
        kind=_elementwise(dt),
        flops=NORM_FLOPS_PER_ELEMENT * tokens * ffn,
        act_read_bytes=tokens * up_width * dt.stream.bytes,
        act_write_bytes=tokens * ffn * dt.act.bytes,
    )
    down = _linear(f"{name}.down", count, down_params, ffn, h, tokens, dt)
    return [up, act, down]


def _moe(m: ModelSpec, count: int, shape: StepShape, dt: Dtypes) -> list[OpTerms]:
    """Router, the token permutation, routed experts (distinct experts touched), the
    un-permutation, shared experts.

    The permutation copies each token's row once per expert it routes to, grouped by expert,
    into the experts' input buffer; the un-permutation reads the experts' [tokens·k, hidden]
    outputs back and writes their weighted sum per token (TensorRT-LLM's CUTLASS MoE:
    ``expandInputRowsKernel``, ``finalizeMoeRoutingKernel``; vLLM's ``fused_moe`` gathers the
    rows inside its GEMM and sums them in ``moe_sum``). Each is a kernel of its own: its traffic
    does not hide under the expert GEMMs' compute."""
    assert m.moe is not None
    e, h, tokens = m.moe, m.hidden_size, shape.num_tokens
    per_expert = mlp_params(m, e.expert_ffn)
    distinct, rows = shape.routed(e.num_experts, e.top_k)
    router_params = h * e.num_experts + (e.num_experts if e.router_bias else 0)
    slots = tokens * e.top_k
    ops = [
        _linear("moe.router", count, router_params, h, e.num_experts, tokens, dt),
        _op(
            "moe.permute",
            count,
            kind=_elementwise(dt),
            flops=0.0,
            act_read_bytes=tokens * h * dt.act.bytes,
            act_write_bytes=slots * h * dt.act.bytes,
        ),
        _op(
            "moe.experts",
            count,
            gemm_rows=rows,
            kind=_gemm(dt, OpClass.EXPERTS),
            flops=2.0 * tokens * e.top_k * per_expert,
            weight_bytes=distinct * per_expert * dt.weight.bytes,
            act_read_bytes=slots * h * dt.act.bytes,
            act_write_bytes=slots * h * dt.stream.bytes,
        ),
        _op(
            "moe.unpermute",
            count,
            kind=_elementwise(dt),
            flops=2.0 * slots * h,  # the weighted sum over each token's k expert outputs
            act_read_bytes=slots * h * dt.stream.bytes,
            act_write_bytes=tokens * h * dt.stream.bytes,
        ),
    ]
    if e.shared_ffn:
        ops += _mlp("moe.shared", count, m, e.shared_ffn, tokens, dt)
        if e.shared_expert_gate:
            ops.append(_linear("moe.shared_gate", count, h, h, 1, tokens, dt))
    return ops


def _embedding(m: ModelSpec, shape: StepShape, dt: Dtypes) -> list[OpTerms]:
    """Row gathers: only the rows of this step's tokens are read (capped at the table)."""
    tokens = shape.num_tokens
    h = m.hidden_size
    rows = np.minimum(tokens, m.vocab_size)
    table = head_dtype(dt)
    ops = [
        _op(
            "embedding",
            1,
            kind=_Kind(OpClass.ELEMENTWISE, dt.stream, table),
            flops=0.0,
            weight_bytes=rows * h * table.bytes,
            act_write_bytes=tokens * h * dt.stream.bytes,
        )
    ]
    if m.position.value == "learned":
        pos_rows = np.minimum(tokens, m.max_position_embeddings)
        ops.append(
            _op(
                "positions",
                1,
                kind=_Kind(OpClass.ELEMENTWISE, dt.stream, table),
                flops=tokens * h,
                weight_bytes=pos_rows * h * table.bytes,
                act_read_bytes=tokens * h * dt.stream.bytes,
                act_write_bytes=tokens * h * dt.stream.bytes,
            )
        )
    return ops


def op_terms(m: ModelSpec, shape: StepShape, dt: Dtypes) -> list[OpTerms]:
    """All operators of one step, in execution order (layers folded into ``count``)."""
    tokens = shape.num_tokens
    n = m.num_layers
    num_moe = sum(1 for layer in m.layers if layer.moe)
    ops = _embedding(m, shape, dt)
    ops.append(_norm_op("attn_norm", n, m, tokens, dt))
    ops += _mla_attention(m, shape, dt) if m.mla is not None else _standard_attention(m, shape, dt)
    ops.append(_norm_op("mlp_norm", n, m, tokens, dt))
    if m.norms_per_layer > 2:
        extra = n * (m.norms_per_layer - 2)
        ops.append(_norm_op("extra_norms", extra, m, tokens, dt, residual=False))
    if n - num_moe:
        ops += _mlp("mlp", n - num_moe, m, m.ffn, tokens, dt)
    if num_moe:
        ops += _moe(m, num_moe, shape, dt)
    ops.append(_norm_op("final_norm", 1, m, tokens, dt))
    rows = shape.num_seqs
    head = Dtypes(weight=head_dtype(dt), act=dt.stream, kv=dt.kv)
    ops.append(
        _linear("lm_head", 1, m.vocab_size * m.hidden_size, m.hidden_size, m.vocab_size, rows, head)
    )
    return ops
