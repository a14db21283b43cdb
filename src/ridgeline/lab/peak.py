"""KV growth seen through the process's peak memory, independently of the cache tensors.

The KV formula (Pope et al., MLSys 2023, §2) says each token adds 2 × layers × batch × kv_heads ×
head_dim × bytes to the cache. Reading Σ numel of the cache tensors checks the bookkeeping; this
checks the memory: the prompt is fed to a fresh transformers ``DynamicCache`` in fixed chunks, and
after each chunk the resident high-water mark (VmHWM, reset through /proc/self/clear_refs just
before the cache exists) is read. The chunk's temporaries are the same for every chunk, so the
slope of the peak against the tokens held is what the cache adds per token::

    peak(T) ≈ base + KV(T) + transient_l(T) + temporaries(chunk)
    slope    = formula per token × (1 + max(1 / (2 × layers), copies / layers))

because two things hold a layer's share of the cache a second time, one after the other: the
DynamicCache grows by concatenation (while layer l's new K is built, its old copy, 1/(2 ×
layers) of the cache, is alive: ``torch.cat``), and grouped-query attention expands each layer's
K and V to every query head (transformers' ``repeat_kv``: ``copies`` = heads ÷ kv_heads times
the layer's K and V; none for MHA, and a zero-stride view, no copy, for MQA).
"""

from __future__ import annotations

import gc
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from ridgeline.analytic import kv_bytes
from ridgeline.lab import memstat
from ridgeline.lab.hf import LabModel, new_cache, random_ids
from ridgeline.specs import DType

DEFAULT_CHUNK = 64


@dataclass(frozen=True, slots=True)
class PeakGrowth:
    """The resident peak above the pre-cache baseline after each chunk of a chunked prefill.

    Attributes:
        tokens: tokens per sequence held after each chunk.
        peak_bytes: VmHWM above the resident size before the cache existed, after each chunk.
        formula_bytes_per_token: KV bytes one token position adds for the whole batch.
        layers, heads, kv_heads: the shapes the transient copies depend on.
    """

    batch: int
    chunk: int
    layers: int
    heads: int
    kv_heads: int
    tokens: tuple[int, ...]
    peak_bytes: tuple[int, ...]
    formula_bytes_per_token: float

    @property
    def slope_bytes_per_token(self) -> float | None:
        """Least-squares slope of the peak against the tokens (None under three points)."""
        if len(self.tokens) < 3:
            return None
        return float(np.polyfit(self.tokens, self.peak_bytes, 1)[0])

    @property
    def expected_ratio(self) -> float:
        """Slope ÷ formula: 1 + max(1/(2·layers), copies/layers) (module docstring)."""
        grouped = 1 < self.kv_heads < self.heads
        copies = self.heads // self.kv_heads if grouped else 0
        return 1.0 + max(1.0 / (2 * self.layers), copies / self.layers)

    @property
    def ratio(self) -> float | None:
        s = self.slope_bytes_per_token
        return None if s is None else s / self.formula_bytes_per_token

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            slope_bytes_per_token=self.slope_bytes_per_token,
            ratio=self.ratio,
            expected_ratio=self.expected_ratio,
        )
        return d


def peak_growth(
    lm: LabModel, batch: int, context: int, chunk: int = DEFAULT_CHUNK, seed: int = 0
) -> PeakGrowth | None:
    """Feed ``batch`` × ``context`` random tokens to a fresh DynamicCache in chunks and read the
    resident peak after each; None where /proc gives no high-water mark (not Linux)."""
    ids = random_ids(batch, context, lm.vocab_size, seed, lm.device)  # [B, T]
    per_token = float(kv_bytes(lm.spec, batch, 1, DType.FP32))
    gc.collect()
    base = memstat.rss_bytes()
    if base is None or not memstat.reset_hwm():
        return None
    cache = new_cache(lm, "dynamic", context)
    tokens, peaks = [], []
    with torch.inference_mode():
        for start in range(0, context, chunk):
            part = ids[:, start : start + chunk]  # [B, chunk]
            out = lm.model(input_ids=part, cache=cache, use_cache=True, logits_to_keep=1)
            del out
            hwm = memstat.hwm_bytes()
            if hwm is None:
                return None
            tokens.append(min(start + chunk, context))
            peaks.append(hwm - base)
    del cache
    gc.collect()
    m = lm.spec
    return PeakGrowth(
        batch,
        chunk,
        m.num_layers,
        m.num_heads,
        m.num_kv_heads,
        tuple(tokens),
        tuple(peaks),
        per_token,
    )
