"""The ``ridgeline`` backend: the engine (``ridgeline.engine.LLM``: serving scheduler, paged KV
blocks, its own GPT-2/Llama model) timed like the transformers backends.

``batch`` requests of ``context`` random tokens are added at once; the token budget lets one
step prefill them all, and every later step decodes one token per request. A step is
``LLM.step()``: schedule → execute (block tables, forward pass over the paged cache, sampling)
→ update, so scheduling and bookkeeping count as framework overhead, as they do in serving.
KV bytes are the engine's preallocated block pool (sized to the point, like a StaticCache).

NOTE: the engine's compiled kernels (paged attention, the panel GEMM of its linear layers) are
not aten operators; while a profiler is on they run inside named ranges
(``ridgeline::paged_attention``, ``ridgeline::panel_linear[rows x out]``), which the profile
groups with attention and the GEMMs.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

from ridgeline.errors import ConfigError
from ridgeline.lab.configs import model_spec, raw_config, with_positions
from ridgeline.lab.decode import PointResult, run_phases
from ridgeline.lab.points import PointConfig
from ridgeline.specs import DType, param_counts

BLOCK_SIZE = 16


class EngineDecoder:
    """``StepRunner`` over the engine: one ``LLM.step()`` per decode step of the whole batch."""

    __slots__ = ("llm", "cfg", "_steps")

    def __init__(self, cfg: PointConfig) -> None:
        from ridgeline.engine.llm import LLM
        from ridgeline.engine.sampling import SamplingParams

        max_output_tokens = cfg.decode_tokens + 2  # prefill's token, every phase's steps, one spare
        total = cfg.context + max_output_tokens
        spec = model_spec(with_positions(raw_config(cfg.model), total + 1), cfg.model)
        blocks = cfg.batch * math.ceil(total / BLOCK_SIZE)
        self.llm = LLM(
            spec,
            weights=cfg.weights,
            block_size=BLOCK_SIZE,
            max_num_batched_tokens=cfg.batch * cfg.context,
            max_num_seqs=cfg.batch,
            max_model_len=total,
            prefix_caching=False,
            dtype=cfg.dtype,
            device=cfg.device,
            seed=cfg.seed,
            num_blocks=blocks,
        )
        gen = torch.Generator().manual_seed(cfg.seed)
        ids = torch.randint(0, spec.vocab_size, (cfg.batch, cfg.context), generator=gen)  # [B, T]
        params = SamplingParams(max_output_tokens=max_output_tokens)
        for row in ids.tolist():
            self.llm.add_request(row, params)
        if not self.llm.scheduler.has_unfinished:
            raise ConfigError(
                f"field --backend ridgeline: the engine rejected {cfg.batch} x {cfg.context} "
                f"tokens (max_model_len {total}, {blocks} blocks)"
            )
        self.cfg = cfg
        self._steps = 0

    @property
    def device(self) -> torch.device:
        return torch.device(self.cfg.device)

    @property
    def param_bytes(self) -> int:
        """Weight bytes from the spec (analytic count): the engine's prepacked oneDNN weights
        are not ``parameters()``."""
        return int(param_counts(self.llm.spec).total * DType.parse(self.cfg.dtype).bytes)

    def prefill(self) -> float:
        """Steps until every request has its first token (one step with the default budget)."""
        start = time.perf_counter()
        while self.llm.stats.tokens < self.cfg.batch:
            if not self.llm.scheduler.has_unfinished:
                raise ConfigError("field --backend ridgeline: the engine has nothing to run")
            self.llm.step()
        return time.perf_counter() - start

    def step(self) -> None:
        self.llm.step()
        self._steps += 1

    def kv_bytes(self) -> int:
        cache: Any = self.llm.cache
        return sum(t.numel() * t.element_size() for t in (*cache.k, *cache.v))

    def kv_tokens(self) -> int:
        return self.cfg.context + self._steps

    @property
    def module(self) -> torch.nn.Module:
        return self.llm.model


def measure_engine_point(cfg: PointConfig) -> PointResult:
    """One point on the engine, in the same three phases as the transformers backends."""
    dec = EngineDecoder(cfg)
    return run_phases(dec, cfg, dec.llm.spec.vocab_size)
