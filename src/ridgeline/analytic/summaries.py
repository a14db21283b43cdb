"""Summaries that every face renders: one model, one KV sizing (one accelerator lives in
``chip_summary``, which loads no numpy). The CLI prints them as tables, the explorer returns
their ``to_dict()``; neither builds them itself.

Each summary is a frozen dataclass with ``to_dict()`` (the stable JSON of ``ridgeline model show
--json`` and ``kv --json``, and of the explorer's ``/api/...`` routes) and ``_repr_html_()`` for
notebooks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ridgeline.analytic.deployment import Deployment, auto_deployment
from ridgeline.analytic.kv import (
    Technique,
    crossover_context,
    kv_bytes,
    kv_bytes_per_token,
    techniques,
    weights_bytes,
)
from ridgeline.analytic.memory import KvFit, MemoryRule, kv_fit
from ridgeline.analytic.workload import Dtypes, Phase, Workload
from ridgeline.errors import CapacityError
from ridgeline.specs import Accelerator, DType, ModelSpec, ParamCounts, param_counts
from ridgeline.specs.html import html_table


@dataclass(frozen=True, slots=True)
class ModelSummary:
    """One model's shapes, parameter counts, KV bytes per token and weight bytes."""

    model: ModelSpec
    params: ParamCounts
    kv_dtype: DType
    kv_bytes_per_token: float
    weights_bytes: float

    def to_dict(self) -> dict[str, Any]:
        m = self.model
        return {
            "name": m.name,
            "family": m.family,
            "params": self.params.total,
            "active_params": self.params.active,
            "layers": m.num_layers,
            "hidden_size": m.hidden_size,
            "heads": m.num_heads,
            "kv_heads": m.num_kv_heads,
            "kv_heads_cached": m.kv_heads_cached,
            "head_dim": m.head_dim,
            "ffn": m.ffn,
            "vocab_size": m.vocab_size,
            "attention": m.attention.value,
            "tied_embeddings": m.tied_embeddings,
            "sliding_windows": sorted({lyr.window for lyr in m.layers if lyr.window is not None}),
            "moe": _moe_dict(m),
            "mla": None if m.mla is None else _mla_dict(m),
            "kv_dtype": self.kv_dtype.value,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "weights_bytes": self.weights_bytes,
            "param_breakdown": self.params.to_dict(),
        }

    def _repr_html_(self) -> str:
        d = self.to_dict()
        keys = (
            "params",
            "active_params",
            "layers",
            "hidden_size",
            "heads",
            "kv_heads",
            "head_dim",
            "attention",
            "kv_bytes_per_token",
            "weights_bytes",
        )
        return html_table(("field", "value"), [(k, d[k]) for k in keys], self.model.name)


def _moe_dict(m: ModelSpec) -> dict[str, Any] | None:
    if m.moe is None:
        return None
    return {
        "experts": m.moe.num_experts,
        "top_k": m.moe.top_k,
        "expert_ffn": m.moe.expert_ffn,
        "shared_ffn": m.moe.shared_ffn,
        "moe_layers": sum(lyr.moe for lyr in m.layers),
    }


def _mla_dict(m: ModelSpec) -> dict[str, Any]:
    assert m.mla is not None
    return {
        "q_lora_rank": m.mla.q_lora_rank,
        "kv_lora_rank": m.mla.kv_lora_rank,
        "qk_rope_head_dim": m.mla.qk_rope_head_dim,
    }


def model_summary(m: ModelSpec, kv_dtype: DType = DType.BF16) -> ModelSummary:
    """``m``'s parameter counts (``param_counts``), KV bytes per token at ``kv_dtype`` and bf16
    weight bytes."""
    return ModelSummary(
        m, param_counts(m), kv_dtype, kv_bytes_per_token(m, kv_dtype), weights_bytes(m)
    )


@dataclass(frozen=True, slots=True)
class KvSummary:
    """KV sizing of one model at one batch and context (course module 6): bytes per token and in
    total, the crossover with the weights, the techniques that shrink it and, when an
    accelerator is given, what fits its deployment under the KV-pool rule (``analytic.memory``;
    ``capacity_error`` says why nothing does).
    """

    model: str
    batch: int
    context: int
    dtypes: Dtypes
    kv_bytes_per_token: float
    kv_bytes: float
    weights_bytes: float
    crossover_context_tokens: int | None
    techniques: tuple[Technique, ...]
    accelerator: str | None = None
    device_capacity_bytes: float | None = None
    fit: KvFit | None = None
    capacity_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        fit = self.fit
        return {
            "schema": "ridgeline.kv/2",
            "model": self.model,
            "batch": self.batch,
            "context": self.context,
            "kv_dtype": self.dtypes.kv.value,
            "weight_dtype": self.dtypes.weight.value,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes": self.kv_bytes,
            "weights_bytes": self.weights_bytes,
            "crossover_context_tokens": self.crossover_context_tokens,
            "techniques": [t.to_dict() for t in self.techniques],
            "accelerator": self.accelerator,
            "device_capacity_bytes": self.device_capacity_bytes,
            "capacity": None if fit is None else fit.to_dict(),
            "capacity_error": self.capacity_error,
            "max_batch": None if fit is None else fit.max_batch,
            "max_context": None if fit is None else fit.max_context,
        }

    def _repr_html_(self) -> str:
        rows = [(t.name, t.description, t.kv_bytes_per_token, t.kv_bytes) for t in self.techniques]
        title = (
            f"{self.model}: {self.kv_bytes_per_token:,.0f} B of KV per token; batch {self.batch} x "
            f"{self.context} tokens = {self.kv_bytes:,.0f} B"
        )
        return html_table(("technique", "what", "KV B/token", "KV bytes"), rows, title)


def _fit(
    m: ModelSpec,
    target: Accelerator | Deployment,
    dt: Dtypes,
    shape: tuple[int, int],
    rule: MemoryRule | None,
) -> KvFit:
    """What fits on ``target``: a deployment as given, or an accelerator's one chip, or the
    smallest deployment of it whose chips hold the weights (``chosen``) when one chip cannot."""
    if isinstance(target, Deployment):
        return kv_fit(m, target, dt, shape, rule)
    one_token = Workload(Phase.DECODE, 1, 0, dtypes=dt)
    dep = auto_deployment(m, target, one_token, rule)
    return kv_fit(m, dep, dt, shape, rule, chosen=dep.chips > 1)


def kv_summary(
    m: ModelSpec,
    batch: int,
    context: int,
    dtypes: Dtypes | None = None,
    target: Accelerator | Deployment | None = None,
    rule: MemoryRule | None = None,
) -> KvSummary:
    """KV bytes (``kv_bytes``), crossover (``crossover_context``), ``techniques`` and, on
    ``target``, what fits (``analytic.memory.kv_fit``) — a model that fits no deployment is a
    result here (``capacity_error``), not an error."""
    dt = dtypes or Dtypes()
    fit, error = None, None
    acc = target.accelerator if isinstance(target, Deployment) else target
    if target is not None:
        try:
            fit = _fit(m, target, dt, (context, batch), rule)
        except CapacityError as e:
            error = str(e)
    return KvSummary(
        model=m.name,
        batch=batch,
        context=context,
        dtypes=dt,
        kv_bytes_per_token=kv_bytes_per_token(m, dt.kv),
        kv_bytes=float(kv_bytes(m, batch, context, dt.kv)),
        weights_bytes=weights_bytes(m, dt.weight),
        crossover_context_tokens=crossover_context(m, dt, batch),
        techniques=tuple(techniques(m, batch, context, dt.kv)),
        accelerator=None if acc is None else acc.name,
        device_capacity_bytes=None if acc is None else acc.device_capacity_bytes,
        fit=fit,
        capacity_error=error,
    )


def kv_curve(
    m: ModelSpec, batch: int, kv_dtype: DType, up_to_context: int, points: int = 96
) -> tuple[np.ndarray, np.ndarray]:
    """KV bytes of ``batch`` sequences at ``points`` log-spaced whole contexts from 1 to
    ``up_to_context`` (for a plot of the footprint against context)."""
    contexts = np.unique(np.geomspace(1, max(up_to_context, 2), points).round())
    return contexts, np.atleast_1d(np.asarray(kv_bytes(m, batch, contexts, kv_dtype), float))
