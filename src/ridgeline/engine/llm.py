"""``LLM``: the serving scheduler and block pool driving a real model.

``step()`` is nano-vllm's loop — schedule → execute → update — with ``serving.Scheduler``
choosing every batch and ``TorchExecutor`` running it; the loop itself is ``serving.ServingLoop``,
the one the tests and the HTTP server (``ridgeline.serve``) drive too::

    Scheduler.schedule() ──ScheduledBatch──▶ TorchExecutor.execute() ──StepResult──▶ update()
         ▲  block tables, chunks, preemption          forward pass over paged KV        │
         └──────────────────── tokens, finished requests ◀──────────────────────────────┘
Time is the engine's own clock: the sum of measured step times, jumping over idle gaps to the
next arrival, so staggered arrivals cost no sleeping and TTFT/TPOT are measured step times."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from ridgeline.analytic.deployment import Deployment
from ridgeline.analytic.memory import MemoryRule, kv_pool_bytes
from ridgeline.analytic.workload import Dtypes
from ridgeline.engine.executor import TorchExecutor
from ridgeline.engine.fused_layer import load_fused_layer
from ridgeline.engine.fused_ops import load_fused_ops
from ridgeline.engine.kernel_build import KernelTarget
from ridgeline.engine.kv_cache import KVCache, cache_shape
from ridgeline.engine.model import CausalLM, early_exit
from ridgeline.engine.packing import Layout, can_pack, pack_linears, resolve
from ridgeline.engine.paged_kernel import load_paged_kernel
from ridgeline.engine.panel_gemm import load_panel_gemm
from ridgeline.engine.sampling import SamplingParams
from ridgeline.engine.spec_decode import Drafter
from ridgeline.engine.weights import init_random, load_safetensors_dir
from ridgeline.errors import CapacityError, ConfigError
from ridgeline.serving.block_pool import BlockPool
from ridgeline.serving.driver import ServingLoop, StepOutcome
from ridgeline.serving.eviction import make_eviction
from ridgeline.serving.executor import ScheduledBatch, StepResult
from ridgeline.serving.kv_manager import KVCacheManager
from ridgeline.serving.policies import PolicyKind
from ridgeline.serving.request import FinishReason, Request
from ridgeline.serving.scheduler import PreemptionMode, Scheduler, SchedulerConfig
from ridgeline.serving.spec_decode import SpecDecodeConfig
from ridgeline.serving.tiers import KVTiers, TierSpec
from ridgeline.specs import Accelerator, DType, ModelSpec, get_accelerator, get_model
from ridgeline.specs.inputs import check_int, check_real
from ridgeline.specs.limits import (
    MAX_BATCH,
    MAX_BLOCK_SIZE,
    MAX_BYTES,
    MAX_CONTEXT,
    MAX_DRAFT_TOKENS,
    MAX_LAYERS,
    MAX_SEED,
)
from ridgeline.specs.model import Position

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DEFAULT_KV_BUDGET_BYTES = 1 << 30  # 1 GiB when neither hw nor a budget is given
STATS_WINDOW_STEPS = 4096  # steps ``EngineStats`` keeps (a serve-check fit uses a few hundred)


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """How the engine is built and scheduled.

    Attributes:
        block_size: tokens per KV block.
        max_num_batched_tokens: the scheduler's token budget per step.
        max_num_seqs: most requests running at once.
        max_model_len: longest request (None: the model's position limit).
        prefix_caching: reuse cached prefix blocks.
        dtype: fp32, bf16 or fp16 for weights, activations and KV.
        kv_budget_bytes: KV memory, overriding the rule (vLLM's ``kv_cache_memory_bytes``;
            None: the KV-pool rule on ``hw``, else 1 GiB).
        memory_utilization: fraction of ``hw``'s device memory for weights, reserve and KV
            (vLLM's ``gpu_memory_utilization``; None: the runtime's default; ``analytic.memory``).
        num_blocks: pool size in blocks (overrides the budget).
        policy: scheduler policy (fcfs, priority).
        preemption: recompute (free the victim's blocks) or swap (copy them to host memory).
        swap_bytes: host-tier capacity for swapped blocks.
        draft_model: a separate draft model (catalog name or config path).
        draft_layers: self-draft with the target's first layers (early exit).
        num_speculative_tokens: k drafts per step (0: off).
        paged_kernel: use the compiled in-place kernel (falls back to gather without a compiler).
        pack_weights: how linear weights are packed on the CPU (``packing.Layout``): "auto"
            (column panels where AVX-512 and fp32 allow, else "dual"), "panel", "dual" (two
            oneDNN copies), "onednn" (one) or "off" (plain ``F.linear``); True means auto.
        fused_ops: fused RMSNorm(+residual), RoPE and SwiGLU on the CPU at fp32 (``fused_ops``),
            and each decode-step layer in one C++ call where the weights are in panels
            (``fused_layer``).
        kernels: which build of the C++ kernels: "native" (-march=native, AVX-512 where the
            CPU has it) or "portable" (no AVX-512; ``kernel_build``).
        device: torch device.
        seed: random weights and unseeded requests.
        init_std: standard deviation of random weights.
    """

    block_size: int = 16
    max_num_batched_tokens: int = 512
    max_num_seqs: int = 64
    max_model_len: int | None = None
    prefix_caching: bool = True
    dtype: DType = DType.FP32
    kv_budget_bytes: float | None = None
    memory_utilization: float | None = None
    num_blocks: int | None = None
    policy: PolicyKind = PolicyKind.FCFS
    preemption: PreemptionMode = PreemptionMode.RECOMPUTE
    swap_bytes: float = 2**30
    draft_model: str | None = None
    draft_layers: int | None = None
    num_speculative_tokens: int = 0
    paged_kernel: bool = True
    pack_weights: str | bool = "auto"
    fused_ops: bool = True
    kernels: str = "native"
    device: str = "cpu"
    seed: int = 0
    init_std: float = 0.02

    def __post_init__(self) -> None:
        check_engine_sizes(self)
        # names are accepted (the CLI passes its options' strings) and become the enums
        if self.dtype not in _DTYPES:
            raise ConfigError(f"field dtype: one of {', '.join(_DTYPES)}, got '{self.dtype}'")
        object.__setattr__(self, "dtype", DType(self.dtype))
        if self.preemption not in tuple(PreemptionMode):
            raise ConfigError(f"field preemption: recompute or swap, got '{self.preemption}'")
        object.__setattr__(self, "preemption", PreemptionMode(self.preemption))
        object.__setattr__(self, "policy", PolicyKind.parse(self.policy))
        Layout.parse(self.pack_weights)
        KernelTarget.parse(self.kernels)
        if self.num_speculative_tokens and not (self.draft_model or self.draft_layers):
            raise ConfigError("field num_speculative_tokens: needs draft_model or draft_layers")


def check_engine_sizes(cfg: EngineConfig) -> None:
    """Every size of an ``EngineConfig`` within ``specs.limits`` (a block size of 0 divides by
    zero; a NaN budget sizes a pool of no blocks).

    Raises:
        ConfigError: naming the field.
    """
    check_int("block_size", cfg.block_size, 1, MAX_BLOCK_SIZE)
    check_int("max_num_batched_tokens", cfg.max_num_batched_tokens, 1, MAX_CONTEXT)
    check_int("max_num_seqs", cfg.max_num_seqs, 1, MAX_BATCH)
    check_int("num_speculative_tokens", cfg.num_speculative_tokens, 0, MAX_DRAFT_TOKENS)
    check_int("seed", cfg.seed, 0, MAX_SEED)
    for name, high in (("max_model_len", MAX_CONTEXT), ("num_blocks", 1 << 30)):
        if getattr(cfg, name) is not None:
            check_int(name, getattr(cfg, name), 1, high)
    if cfg.draft_layers is not None:
        check_int("draft_layers", cfg.draft_layers, 1, MAX_LAYERS)
    if cfg.kv_budget_bytes is not None:
        check_real("kv_budget_bytes", cfg.kv_budget_bytes, 0, MAX_BYTES, low_open=True)
    if cfg.memory_utilization is not None:
        check_real("memory_utilization", cfg.memory_utilization, 0, 1, low_open=True)
    check_real("swap_bytes", cfg.swap_bytes, 0, MAX_BYTES)
    check_real("init_std", cfg.init_std, 0, 1e3, low_open=True)


@dataclass(frozen=True, slots=True)
class RequestOutput:
    """One finished request.

    Attributes:
        ttft_s: arrival → first token, on the engine clock (measured step times).
        tpot_s: mean time per output token after the first (None for one token).
        num_cached_tokens: prompt tokens served from the prefix cache.
    """

    request_id: str
    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    text: str | None
    finish_reason: FinishReason | None
    ttft_s: float | None
    tpot_s: float | None
    num_cached_tokens: int
    num_preemptions: int
    reject_reason: str = ""


@dataclass(slots=True)
class _Timing:
    arrival_s: float
    first_s: float | None = None
    last_s: float | None = None


@dataclass(slots=True)
class EngineStats:
    """Counters over the engine's life, and its last steps.

    The counters are running totals; ``batches`` and ``step_times`` keep the last
    ``window``..2·``window`` steps only (trimmed by halves, amortised O(1) a step), so a server
    that runs for weeks holds a bounded history. ``recent(since)`` returns the steps after
    step number ``since`` while the window still holds them.
    """

    steps: int = 0
    busy_s: float = 0.0
    tokens: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    batches: list[ScheduledBatch] = field(default_factory=list)
    step_times: list[float] = field(default_factory=list)
    window: int = STATS_WINDOW_STEPS

    def record(self, batch: ScheduledBatch, time_s: float) -> None:
        """Count one step and keep it in the window."""
        self.steps += 1
        self.busy_s += time_s
        self.batches.append(batch)
        self.step_times.append(time_s)
        if len(self.batches) >= 2 * self.window:
            del self.batches[: self.window]
            del self.step_times[: self.window]

    def recent(self, since: int) -> tuple[list[ScheduledBatch], list[float]]:
        """The batches and times of steps ``since + 1`` .. ``steps``.

        Raises:
            ConfigError: the window no longer holds them all (ask for fewer steps).
        """
        first = self.steps - len(self.batches)  # the step number before the window's first
        if since < first:
            raise ConfigError(
                f"field since: steps after {since} asked, the window starts after {first}"
            )
        start = since - first
        return self.batches[start:], self.step_times[start:]


def set_threads(n: int) -> None:
    """Intra-op threads of torch (lab.md: 1 thread is steadier on a shared CPU)."""
    torch.set_num_threads(n)


def torch_dtype(name: str) -> torch.dtype:
    return _DTYPES[name]  # the engine's dtype names (EngineConfig.dtype) as torch's


def _max_len(spec: ModelSpec, cfg: EngineConfig) -> int:
    limit = spec.max_position_embeddings
    if spec.position is Position.LEARNED:
        limit -= cfg.num_speculative_tokens  # proposals run k positions ahead
    windows = [w for w in (layer.window for layer in spec.layers) if w is not None]
    if windows:  # NOTE: sliding windows are not implemented; cap requests inside the window
        limit = min(limit, min(windows))
    return min(cfg.max_model_len or limit, limit)


def build_model(
    spec: ModelSpec, cfg: EngineConfig, weights: str | Path | None, max_positions: int
) -> CausalLM:
    """The target model: random (seeded) weights, or a local safetensors directory."""
    model = CausalLM(spec, max_positions)
    if weights is None:
        init_random(model, torch.Generator().manual_seed(cfg.seed), cfg.init_std)
    else:
        load_safetensors_dir(model, weights)
    model = model.to(device=cfg.device, dtype=torch_dtype(cfg.dtype)).eval()
    layout = Layout.parse(cfg.pack_weights)
    if can_pack(torch.device(cfg.device)) and layout is not Layout.OFF:
        wants_panel = layout in (Layout.AUTO, Layout.PANEL) and cfg.dtype == "fp32"
        panel = load_panel_gemm(cfg.kernels) if wants_panel else None
        pack_linears(model, resolve(layout, torch_dtype(cfg.dtype), panel), panel)
    if cfg.fused_ops and cfg.device == "cpu" and cfg.dtype == "fp32":
        model.fused_ops = load_fused_ops(cfg.kernels)
        if model.fused_ops is not None:
            model.use_fused_layer(load_fused_layer(cfg.kernels))
    return model


def kv_budget_bytes(spec: ModelSpec, cfg: EngineConfig, hw: Accelerator | None) -> float:
    """Explicit budget, else the one KV-pool rule on one chip of ``hw`` (``analytic.memory``:
    the simulator's and ``predict``'s), its reserve for a step of ``max_num_batched_tokens`` tokens."""
    if cfg.kv_budget_bytes is not None:
        return cfg.kv_budget_bytes
    if hw is None:
        return DEFAULT_KV_BUDGET_BYTES
    dt = DType.parse(cfg.dtype)
    rule = MemoryRule(cfg.memory_utilization, cfg.max_num_batched_tokens, cfg.max_num_seqs)
    return kv_pool_bytes(spec, Deployment(hw), Dtypes(dt, dt, dt), rule)


class LLM:
    """A paged-KV inference engine under the serving scheduler.

    Args:
        model: catalog name, config.json path or directory, or a ``ModelSpec``.
        hw: accelerator whose device memory sizes the KV pool (None: ``kv_budget_bytes``).
        weights: a local Hugging Face directory of ``*.safetensors`` (None: random weights).
        tokenizer: a local tokenizer directory (None: prompts and outputs are token ids).
        **options: ``EngineConfig`` fields (block_size, max_num_batched_tokens, prefix_caching, ...).
    """

    def __init__(
        self,
        model: str | ModelSpec,
        hw: str | Accelerator | None = None,
        weights: str | Path | None = None,
        tokenizer: str | Path | None = None,
        **options: Any,
    ) -> None:
        self.config = EngineConfig(**options)
        self.spec = get_model(model)
        self.hw = get_accelerator(hw) if isinstance(hw, str) else hw
        self.max_model_len = _max_len(self.spec, self.config)
        positions = self.max_model_len + self.config.num_speculative_tokens + 1
        self.model = build_model(self.spec, self.config, weights, positions)
        self.tokenizer = _load_tokenizer(tokenizer) if tokenizer is not None else None
        cpu = torch.device(self.config.device).type == "cpu"  # the kernel reads host pointers
        wants_kernel = self.config.paged_kernel and cpu
        self.kernel = load_paged_kernel(self.config.kernels) if wants_kernel else None
        self.num_blocks, self.cache, drafter = self._build_cache(positions)
        self.executor = TorchExecutor(
            self.model, self.cache, self.kernel, drafter, self.config.seed
        )
        self.scheduler = self._build_scheduler()
        self.loop = ServingLoop(self.scheduler, self.executor)
        self.clock_s = 0.0
        self.stats = EngineStats()
        self._timing: dict[str, _Timing] = {}
        self._requests: dict[str, Request] = {}
        self._next_id = 0

    # ---- construction ----------------------------------------------------------------------

    def _build_cache(self, positions: int) -> tuple[int, KVCache, Drafter | None]:
        cfg, spec = self.config, self.spec
        dtype, device = torch_dtype(cfg.dtype), torch.device(cfg.device)
        budget = kv_budget_bytes(spec, cfg, self.hw)
        shape = cache_shape(spec, cfg.block_size, budget, dtype)
        num_blocks = cfg.num_blocks or shape.num_blocks
        k = cfg.num_speculative_tokens
        scratch = cfg.max_num_seqs * (1 + -(-k // cfg.block_size)) if k else 0
        geometry = replace(shape, num_blocks=num_blocks + scratch)
        cache = KVCache(geometry, device)
        if not k:
            return num_blocks, cache, None
        if cfg.draft_layers:
            draft = early_exit(self.model, cfg.draft_layers)
            view = KVCache.sharing(cache, cfg.draft_layers)
            return num_blocks, cache, Drafter(draft, view, num_blocks, k, True)
        assert cfg.draft_model is not None
        dspec = get_model(cfg.draft_model)
        if dspec.vocab_size != spec.vocab_size:
            raise ConfigError(
                f"draft '{dspec.name}' has vocab {dspec.vocab_size}, target {spec.vocab_size}"
            )
        draft_model = build_model(dspec, cfg, None, positions)
        # the target's blocks and dtype, the draft's layers and heads
        dshape = replace(
            geometry,
            num_layers=dspec.num_layers,
            kv_heads=dspec.num_kv_heads,
            head_dim=dspec.head_dim,
        )
        return (
            num_blocks,
            cache,
            Drafter(draft_model, KVCache(dshape, device), num_blocks, k, False),
        )

    def _build_scheduler(self) -> Scheduler:
        cfg = self.config
        spec = SpecDecodeConfig(cfg.num_speculative_tokens) if cfg.num_speculative_tokens else None
        sched_cfg = SchedulerConfig(
            max_num_batched_tokens=cfg.max_num_batched_tokens,
            max_num_seqs=cfg.max_num_seqs,
            max_model_len=self.max_model_len,
            policy=cfg.policy,
            preemption=cfg.preemption,
            spec=spec,
        )
        # NOTE: no offload of evicted prefix blocks to the tier (on_evict None): a tier prefix
        # hit carries no block moves in the batch, so the engine could not restore its KV.
        pool = BlockPool(self.num_blocks, cfg.block_size, make_eviction("lru"), None)
        kv = KVCacheManager(pool, cfg.prefix_caching, self._swap_tier())
        return Scheduler(sched_cfg, kv, self._propose)

    def _swap_tier(self) -> KVTiers | None:
        """Host memory for swapped-out blocks. Its priced bandwidth is infinite: the engine
        measures the copies (``KVCache.swap_out``/``swap_in``) as part of the step."""
        if self.config.preemption != "swap":
            return None
        host = TierSpec("host", self.config.swap_bytes, float("inf"))
        return KVTiers((host,), self.cache.shape.bytes_per_block)

    def _propose(self, request: Request, k: int) -> tuple[int, ...]:
        """The scheduler's draft source: the drafter's proposal, padded with the last token
        when there is none (a deterministic proposal, which verification still handles
        exactly)."""
        drafts = self.executor.drafts(request.request_id)[:k]
        last = request.token(request.num_tokens - 1)
        return drafts + (last,) * (k - len(drafts))

    # ---- requests ----------------------------------------------------------------------------

    def add_request(
        self, prompt: str | Sequence[int], params: SamplingParams, arrival_s: float | None = None
    ) -> str:
        """Queue one request; returns its id."""
        ids = self._encode(prompt)
        rid = f"req-{self._next_id}"
        self._next_id += 1
        arrival = self.clock_s if arrival_s is None else arrival_s
        req = Request(rid, tuple(ids), params, arrival)
        self._timing[rid] = _Timing(arrival)
        self.executor.add_request(rid, params)
        self._requests[rid] = req
        if not self.scheduler.add_request(req):
            self.executor.remove_request(rid)
        return rid

    def _encode(self, prompt: str | Sequence[int]) -> list[int]:
        if not isinstance(prompt, str):
            ids = [int(t) for t in prompt]
            bad = [t for t in ids if not 0 <= t < self.spec.vocab_size]
            if bad:
                raise ConfigError(
                    f"token id {bad[0]} outside the vocabulary ({self.spec.vocab_size})"
                )
            return ids
        if self.tokenizer is None:
            raise ConfigError("text prompts need a tokenizer: pass token ids or a tokenizer dir")
        return list(self.tokenizer.encode(prompt))

    # ---- the loop ----------------------------------------------------------------------------

    def step(self) -> StepOutcome | None:
        """One schedule → execute → update round of the serving loop; None when no request
        could run (nothing unfinished, or nothing fits now)."""
        outcome = self.loop.step()
        if outcome is None:
            return None
        self.clock_s += outcome.result.time_s
        self._account(outcome.batch, outcome.result)
        for req in outcome.finished:
            self.executor.remove_request(req.request_id)
        return outcome

    def abort(self, request_id: str) -> bool:
        """Stop an unfinished request and free its KV blocks (its client went away); False
        when it is not running or waiting. Its output keeps the tokens sampled so far."""
        req = self.scheduler.abort(request_id)
        self.executor.remove_request(request_id)
        return req is not None

    def request(self, request_id: str) -> Request:
        """The live state of a request added and not yet collected (``take_output``)."""
        return self._requests[request_id]

    def take_output(self, request_id: str) -> RequestOutput:
        """The output of a finished (or aborted, or rejected) request; forgets it."""
        return self._output(request_id)

    def _account(self, batch: ScheduledBatch, result: StepResult) -> None:
        st = self.stats
        st.record(batch, result.time_s)
        for sr in batch.requests:
            toks = result.sampled.get(sr.request_id, ())
            if not toks:
                continue
            st.tokens += len(toks)
            st.draft_tokens += sr.num_draft_tokens
            st.accepted_tokens += len(toks) - 1
            t = self._timing[sr.request_id]
            t.first_s = self.clock_s if t.first_s is None else t.first_s
            t.last_s = self.clock_s

    def generate(
        self,
        prompts: Sequence[str] | Sequence[Sequence[int]],
        params: SamplingParams | Sequence[SamplingParams] = SamplingParams(),
        arrivals_s: Sequence[float] | None = None,
    ) -> list[RequestOutput]:
        """Run every prompt to completion (continuous batching) and return them in order.

        Args:
            prompts: texts (needs a tokenizer) or token-id lists.
            params: one ``SamplingParams`` for all, or one per prompt.
            arrivals_s: arrival time of each prompt on the engine clock (default: all now).
        """
        n = len(prompts)
        plist = [params] * n if isinstance(params, SamplingParams) else list(params)
        start = self.clock_s
        arrivals = [start + a for a in arrivals_s] if arrivals_s is not None else [start] * n
        if len(plist) != n or len(arrivals) != n:
            raise ConfigError("params and arrivals_s need one entry per prompt")
        order = sorted(range(n), key=lambda i: arrivals[i])
        ids: list[str] = [""] * n
        pending = list(order)
        while pending or self.scheduler.has_unfinished:
            while pending and arrivals[pending[0]] <= self.clock_s:
                i = pending.pop(0)
                ids[i] = self.add_request(prompts[i], plist[i], arrivals[i])
            if not self.scheduler.has_unfinished:  # idle, or the last ones were rejected
                if pending:
                    self.clock_s = arrivals[pending[0]]  # jump to the next arrival
                continue
            if self.step() is None:  # nothing schedulable
                if not pending:
                    raise CapacityError("the scheduler can make no progress: KV pool too small?")
                self.clock_s = max(self.clock_s, arrivals[pending[0]])
        return [self._output(rid) for rid in ids]

    def _output(self, rid: str) -> RequestOutput:
        req = self._requests.pop(rid)
        t = self._timing.pop(rid)
        out = tuple(req.output_token_ids)
        ttft = None if t.first_s is None else t.first_s - t.arrival_s
        tpot = None
        if t.first_s is not None and t.last_s is not None and len(out) > 1:
            tpot = (t.last_s - t.first_s) / (len(out) - 1)
        text = self.tokenizer.decode(list(out)) if self.tokenizer is not None and out else None
        return RequestOutput(
            request_id=rid,
            prompt_token_ids=tuple(req.prompt_token_ids),
            token_ids=out,
            text=text,
            finish_reason=req.finish_reason,
            ttft_s=ttft,
            tpot_s=tpot,
            num_cached_tokens=req.num_cached_tokens or 0,
            num_preemptions=req.num_preemptions,
            reject_reason=req.reject_reason,
        )


def _load_tokenizer(path: str | Path) -> Any:
    """A tokenizer from a local directory only (no network)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception as e:
        raise ConfigError(f"{path}: no usable local tokenizer ({type(e).__name__})") from e


@dataclass(frozen=True, slots=True)
class GenerationReport:
    """A ``generate`` run: per-request outputs and the engine's counters."""

    model: str
    outputs: tuple[RequestOutput, ...]
    steps: int
    busy_s: float
    tokens: int
    draft_tokens: int
    accepted_tokens: int

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` payload (schema ``ridgeline.generate/1``)."""
        return {
            "schema": "ridgeline.generate/1",
            "model": self.model,
            "requests": [
                {
                    "request_id": o.request_id,
                    "prompt_tokens": len(o.prompt_token_ids),
                    "token_ids": list(o.token_ids),
                    "text": o.text,
                    "finish_reason": o.finish_reason and o.finish_reason.value,
                    "ttft_s": o.ttft_s,
                    "tpot_s": o.tpot_s,
                    "num_cached_tokens": o.num_cached_tokens,
                    "num_preemptions": o.num_preemptions,
                }
                for o in self.outputs
            ],
            "stats": {
                "steps": self.steps,
                "busy_s": self.busy_s,
                "tokens": self.tokens,
                "tokens_per_s": self.tokens / self.busy_s if self.busy_s else 0.0,
                "draft_tokens": self.draft_tokens,
                "accepted_tokens": self.accepted_tokens,
            },
        }


def generation_report(llm: LLM, outputs: Sequence[RequestOutput]) -> GenerationReport:
    """Outputs plus the engine's counters so far."""
    st = llm.stats
    return GenerationReport(
        llm.spec.name,
        tuple(outputs),
        st.steps,
        st.busy_s,
        st.tokens,
        st.draft_tokens,
        st.accepted_tokens,
    )
