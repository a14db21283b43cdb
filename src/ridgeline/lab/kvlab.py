"""The KV-cache formula against real cache tensors and real memory, MHA/GQA/MQA side by side,
and how many tokens of KV a scratchpad holds.

Formula (Pope et al., "Efficiently Scaling Transformer Inference", MLSys 2023, §2): every layer
stores a key and a value vector per token per KV head, so

    KV bytes = 2 × layers × batch × context × kv_heads × head_dim × bytes_per_element

(``ridgeline.analytic.kv_bytes``). The lab checks it two ways: exactly, against Σ numel ×
element size of the cache's K and V tensors; and within 1%, against the memory released when the
cache is freed — glibc's ``mallinfo2`` in-use bytes, and the resident set size, which drops only
if freed blocks go back to the OS (hence ``mallopt(M_MMAP_THRESHOLD, 64 KiB)``, the in-process
equivalent of ``MALLOC_MMAP_THRESHOLD_=65536``; mallopt(3),
https://man7.org/linux/man-pages/man3/mallopt.3.html).
"""

from __future__ import annotations

import gc
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from ridgeline.analytic import kv_bytes
from ridgeline.errors import ConfigError
from ridgeline.lab import memstat
from ridgeline.lab.configs import model_spec, raw_config, with_positions
from ridgeline.lab.decode import torch_threads
from ridgeline.lab.hf import build_model, cache_length, kv_tensor_bytes, new_cache, random_ids
from ridgeline.lab.peak import PeakGrowth, peak_growth
from ridgeline.lab.scratchpad import ScratchpadFit, scratchpad_fit
from ridgeline.specs import DType

KIND = "kv"
MMAP_THRESHOLD_BYTES = 65536
GROWTH_CHUNK = 32  # tokens per chunk when watching the peak grow: temporaries stay small
GROWTH_POINTS = 8  # at most this many chunks: eight points fix a slope, and each costs a forward

# A small Llama-shaped model (distilgpt2's size): 6 layers, hidden 768, 12 query heads of 64,
# ffn 2048, GPT-2's vocabulary, tied embeddings. Only num_key_value_heads varies between the variants.
LLAMA_BASE: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 768,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "head_dim": 64,
    "intermediate_size": 2048,
    "vocab_size": 50257,
    "tie_word_embeddings": True,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
}
VARIANT_KV_HEADS = {"MHA": 12, "GQA": 4, "MQA": 1}


def llama_variant(kv_heads: int, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Llama-shaped config with ``kv_heads`` KV heads (12 = MHA, 1 = MQA, else GQA)."""
    cfg = dict(base or LLAMA_BASE)
    if cfg["num_attention_heads"] % kv_heads:
        raise ConfigError(
            f"field kv_heads: {kv_heads} does not divide {cfg['num_attention_heads']} heads"
        )
    cfg["num_key_value_heads"] = kv_heads
    return cfg


def variants(base: dict[str, Any] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """GPT-2 (distilgpt2's config) and the MHA, GQA and MQA Llama variants, by name."""
    out = [("gpt2 (distilgpt2)", raw_config("distilgpt2"))]
    out += [(f"llama {k} kv={h}", llama_variant(h, base)) for k, h in VARIANT_KV_HEADS.items()]
    return out


@dataclass(frozen=True, slots=True)
class KvCheck:
    """One model's KV cache after prefill of ``batch`` × ``context`` tokens.

    Attributes:
        formula_bytes: 2·L·B·T·kv_heads·head_dim·bytes (analytic.kv_bytes).
        tensor_bytes: Σ numel × element size of the cache tensors.
        freed_malloc_bytes: drop of glibc's in-use bytes when the cache is freed.
        freed_rss_bytes: drop of the resident set when the cache is freed.
        decode_median_s: median decode step at this point (``0`` if no steps were asked).
        growth: the resident peak against tokens during a chunked prefill (``lab.peak``),
            ``None`` when not asked for or not measurable here.
    """

    name: str
    attention: str
    num_kv_heads: int
    batch: int
    context: int
    dtype: str
    formula_bytes: int
    tensor_bytes: int
    freed_malloc_bytes: int | None
    freed_rss_bytes: int | None
    decode_median_s: float
    growth: PeakGrowth | None = None

    @property
    def exact(self) -> bool:
        return self.formula_bytes == self.tensor_bytes

    @property
    def malloc_error(self) -> float | None:
        """Relative error of the freed allocator bytes against the formula."""
        return _rel(self.freed_malloc_bytes, self.formula_bytes)

    @property
    def rss_error(self) -> float | None:
        return _rel(self.freed_rss_bytes, self.formula_bytes)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(exact=self.exact, malloc_error=self.malloc_error, rss_error=self.rss_error)
        d["growth"] = self.growth.to_dict() if self.growth is not None else None
        return d


def _rel(measured: int | None, formula: int) -> float | None:
    if measured is None or formula == 0:
        return None
    return (measured - formula) / formula


@dataclass(frozen=True, slots=True)
class KvReport:
    checks: tuple[KvCheck, ...]
    scratchpad: tuple[ScratchpadFit, ...]
    mmap_threshold_set: bool

    @staticmethod
    def merge(reports: list[KvReport]) -> KvReport:
        """One report of several runs (one model each), in order."""
        return KvReport(
            tuple(c for r in reports for c in r.checks),
            tuple(s for r in reports for s in r.scratchpad),
            all(r.mmap_threshold_set for r in reports),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.lab-kv/1",
            "checks": [c.to_dict() for c in self.checks],
            "scratchpad": [s.to_dict() for s in self.scratchpad],
            "mmap_threshold_set": self.mmap_threshold_set,
        }


def _memory() -> tuple[int | None, int | None]:
    gc.collect()
    return memstat.malloc_in_use_bytes(), memstat.rss_bytes()


def _drop(before: int | None, after: int | None) -> int | None:
    return None if before is None or after is None else before - after


def check_kv(
    raw: dict[str, Any],
    name: str,
    batch: int,
    context: int,
    decode_steps: int = 0,
    attn: str = "sdpa",
    threads: int = 1,
    growth_chunk: int = 0,
) -> KvCheck:
    """Prefill a random-weight model, compare its cache with the formula, time a few decode
    steps, then free the cache and measure what memory it gave back; with ``growth_chunk``,
    also watch the resident peak grow as a fresh cache is filled in chunks of that size."""
    raw = with_positions(raw, context + decode_steps + 1)
    lm = build_model(raw, name, attn=attn)
    formula = int(kv_bytes(lm.spec, batch, context, DType.FP32))
    times: list[float] = []
    with torch_threads(threads), torch.inference_mode():
        ids = random_ids(batch, context, lm.vocab_size, 0, lm.device)  # [B, T]
        cache = new_cache(lm, "dynamic", context)
        out = lm.model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
        del out
        assert cache_length(cache) == context
        tensor = kv_tensor_bytes(cache)
        held = _memory()
        del cache
        freed = _memory()
        if decode_steps:
            times = _decode_times(lm, ids, decode_steps)
    growth = peak_growth(lm, batch, context, growth_chunk) if growth_chunk else None
    return KvCheck(
        name=name,
        attention=lm.spec.attention.value,
        num_kv_heads=lm.spec.num_kv_heads,
        batch=batch,
        context=context,
        dtype="fp32",
        formula_bytes=formula,
        tensor_bytes=tensor,
        freed_malloc_bytes=_drop(held[0], freed[0]),
        freed_rss_bytes=_drop(held[1], freed[1]),
        decode_median_s=statistics.median(times) if times else 0.0,
        growth=growth,
    )


def _decode_times(lm: Any, ids: Any, steps: int) -> list[float]:
    cache = new_cache(lm, "dynamic", 0)
    out = lm.model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
    nxt = out.logits[:, -1:].argmax(-1)  # [B, 1]
    times = []
    for _ in range(steps + 1):  # the first step is warm-up
        start = time.perf_counter()
        out = lm.model(input_ids=nxt, cache=cache, use_cache=True)
        nxt = out.logits[:, -1:].argmax(-1)  # [B, 1]
        times.append(time.perf_counter() - start)
    return times[1:]


def run_kv(
    batch: int,
    context: int,
    decode_steps: int = 5,
    set_mmap_threshold: bool = True,
    scratchpad_hw: str = "ibm-spyre",
    scratchpad_dtype: DType = DType.FP16,
    models: list[tuple[str, dict[str, Any]]] | None = None,
) -> KvReport:
    """Check the formula on GPT-2 and the MHA/GQA/MQA variants, and fit each into a scratchpad.

    NOTE: ``set_mmap_threshold`` changes this process's allocator for good (mallopt cannot give
    back glibc's dynamic threshold); the lab kv command runs in its own process.
    """
    mmap_set = set_mmap_threshold and memstat.set_mallopt(
        memstat.M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES
    )
    checks = []
    fits = []
    for name, raw in models or variants():
        # without the threshold, RSS hides growth
        chunk = max(GROWTH_CHUNK, -(-context // GROWTH_POINTS)) if mmap_set else 0
        checks.append(check_kv(raw, name, batch, context, decode_steps, growth_chunk=chunk))
        fits.append(scratchpad_fit(model_spec(raw, name), scratchpad_hw, scratchpad_dtype))
    return KvReport(tuple(checks), tuple(fits), mmap_set)
