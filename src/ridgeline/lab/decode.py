"""One measured point of decode: prefill once, then time decode steps, then (separately) watch
memory over a few more steps, then profile a few more.

Three phases on one prefilled cache, because they interfere: reading /proc and the allocator
between steps perturbs timing, and the profiler slows every operator. The KV length grows by one
token per step, so the phases see contexts T+1 ... T+warmup+steps+memory+profile; ``kv_len_mean``
records the mean length the timed steps read.

A fourth phase times the step's linear layers alone at the point's batch (``gemm_probe``; CPU
only): the weight term of the fitted model, measured rather than fitted.

Timing (docs/lab.md, method): intra-op threads fixed (1 by default: on a shared machine a
second OpenMP thread collapses under contention), median and spread over steps after warm-up,
``time.process_time()`` beside wall time to expose contention, user/sys time and page faults
per step to expose the allocator, Python's GC paused while timing.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import torch

from ridgeline.errors import ConfigError
from ridgeline.lab import memstat
from ridgeline.lab.gemm_probe import GemmProbe, linear_layers, probe_layers
from ridgeline.lab.hf import (
    LabModel,
    cache_length,
    kv_tensor_bytes,
    new_cache,
    random_ids,
)
from ridgeline.lab.points import PointConfig
from ridgeline.lab.profile import ProfileSummary, profile_steps


@dataclass(frozen=True, slots=True)
class Timing:
    """Prefill and decode-step times (seconds) of one point."""

    prefill_s: float
    step_s: tuple[float, ...]
    cpu_step_s: tuple[float, ...]  # process_time per step: ≈ wall on a quiet machine
    user_s_per_step: float
    sys_s_per_step: float  # kernel time: page faults and zeroing of fresh allocations
    minor_faults_per_step: float

    @property
    def median_s(self) -> float:
        return statistics.median(self.step_s)

    @property
    def p10_s(self) -> float:
        return _quantile(self.step_s, 0.1)

    @property
    def p90_s(self) -> float:
        return _quantile(self.step_s, 0.9)

    @property
    def cpu_median_s(self) -> float:
        return statistics.median(self.cpu_step_s)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(
            median_s=self.median_s,
            p10_s=self.p10_s,
            p90_s=self.p90_s,
            cpu_median_s=self.cpu_median_s,
        )
        return d


def _quantile(values: tuple[float, ...], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True, slots=True)
class Memory:
    """Memory of one point, measured in its own phase (not while timing).

    ``kv_bytes`` is Σ numel × element size over the cache's K and V tensors (a StaticCache
    holds ``max_len`` tokens from the start). CPU peaks come from VmHWM reset at the start of the
    phase (the resident high-water mark above the resident size then) and from glibc's
    ``mallinfo2`` sampled after each step; CUDA peaks from ``max_memory_allocated``.
    """

    param_bytes: int
    kv_bytes: int
    kv_tokens: int
    rss_start_bytes: int | None = None
    rss_peak_above_start_bytes: int | None = None
    malloc_start_bytes: int | None = None
    malloc_max_above_start_bytes: int | None = None
    cuda_start_bytes: int | None = None
    cuda_peak_above_start_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class PointResult:
    timing: Timing
    memory: Memory
    profile: ProfileSummary | None = None
    notes: tuple[str, ...] = field(default=())
    gemm: GemmProbe | None = None  # the step's linear layers timed alone at the point's batch

    def to_dict(self) -> dict[str, Any]:
        return {
            "timing": self.timing.to_dict(),
            "memory": self.memory.to_dict(),
            "profile": self.profile.to_dict() if self.profile else None,
            "gemm": self.gemm.to_dict() if self.gemm else None,
            "notes": list(self.notes),
        }


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run with ``n`` intra-op threads, restoring the previous count after."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class StepRunner(Protocol):
    """What the phases need from a backend: prefill once, then one decode step at a time."""

    @property
    def device(self) -> torch.device: ...

    @property
    def param_bytes(self) -> int: ...

    def prefill(self) -> float: ...

    def step(self) -> None: ...

    def kv_bytes(self) -> int: ...

    def kv_tokens(self) -> int: ...

    @property
    def module(self) -> torch.nn.Module:
        """The model whose linear layers the GEMM probe times."""
        ...


class Decoder:
    """Greedy decode on one transformers cache (random weights: the argmax is meaningless, the
    cost is not)."""

    __slots__ = ("lm", "cache", "ids")

    def __init__(self, lm: LabModel, cache: Any, ids: Any) -> None:
        self.lm, self.cache, self.ids = lm, cache, ids

    @property
    def device(self) -> torch.device:
        return self.lm.device

    @property
    def param_bytes(self) -> int:
        return self.lm.param_bytes

    def kv_bytes(self) -> int:
        return kv_tensor_bytes(self.cache)

    def kv_tokens(self) -> int:
        return cache_length(self.cache)

    @property
    def module(self) -> torch.nn.Module:
        return self.lm.model

    def prefill(self) -> float:
        start = time.perf_counter()
        out = self.lm.model(input_ids=self.ids, cache=self.cache, use_cache=True, logits_to_keep=1)
        self.ids = out.logits[:, -1:].argmax(-1)  # [B, 1]
        _sync(self.device)
        return time.perf_counter() - start

    def step(self) -> None:
        out = self.lm.model(input_ids=self.ids, cache=self.cache, use_cache=True)
        self.ids = out.logits[:, -1:].argmax(-1)  # [B, 1]


def _time_steps(dec: StepRunner, cfg: PointConfig) -> tuple[list[float], list[float], Any]:
    for _ in range(cfg.warmup):
        dec.step()
    _sync(dec.device)
    wall, cpu = [], []
    gc.collect()
    gc.disable()
    before = memstat.usage()
    try:
        for _ in range(cfg.steps):
            w0, c0 = time.perf_counter(), time.process_time()
            dec.step()
            _sync(dec.device)
            wall.append(time.perf_counter() - w0)
            cpu.append(time.process_time() - c0)
    finally:
        gc.enable()
    return wall, cpu, memstat.usage().minus(before)


def _memory_phase(dec: StepRunner, cfg: PointConfig) -> Memory:
    cuda = dec.device.type == "cuda"
    gc.collect()
    rss0, malloc0 = memstat.rss_bytes(), memstat.malloc_in_use_bytes()
    reset = memstat.reset_hwm()
    if cuda:
        torch.cuda.reset_peak_memory_stats(dec.device)
    cuda0 = torch.cuda.memory_allocated(dec.device) if cuda else None
    malloc_max = malloc0
    for _ in range(cfg.memory_steps):
        dec.step()
        _sync(dec.device)
        now = memstat.malloc_in_use_bytes()
        if now is not None and malloc_max is not None:
            malloc_max = max(malloc_max, now)
    hwm = memstat.hwm_bytes() if reset else None
    cuda_peak = torch.cuda.max_memory_allocated(dec.device) if cuda else None
    return Memory(
        param_bytes=dec.param_bytes,
        kv_bytes=dec.kv_bytes(),
        kv_tokens=dec.kv_tokens(),
        rss_start_bytes=rss0,
        rss_peak_above_start_bytes=(hwm - rss0) if hwm is not None and rss0 else None,
        malloc_start_bytes=malloc0,
        malloc_max_above_start_bytes=(malloc_max - malloc0)
        if malloc_max is not None and malloc0 is not None and cfg.memory_steps
        else None,
        cuda_start_bytes=cuda0,
        cuda_peak_above_start_bytes=(cuda_peak - cuda0)
        if cuda_peak is not None and cuda0 is not None
        else None,
    )


def run_phases(dec: StepRunner, cfg: PointConfig, vocab_size: int) -> PointResult:
    """Prefill, then the timing, memory and profile phases, under ``cfg.threads`` threads."""
    with torch_threads(cfg.threads), torch.inference_mode():
        prefill_s = dec.prefill()
        wall, cpu, use = _time_steps(dec, cfg)
        memory = _memory_phase(dec, cfg)
        prof = None
        if cfg.profile_steps:
            prof = profile_steps(dec.step, cfg.profile_steps, vocab_size, str(dec.device))
        layers = linear_layers(dec.module) if dec.device.type == "cpu" else []
        gemm = probe_layers(layers, cfg.batch) if layers else None
    timing = Timing(
        prefill_s=prefill_s,
        step_s=tuple(wall),
        cpu_step_s=tuple(cpu),
        user_s_per_step=use.user_s / cfg.steps,
        sys_s_per_step=use.sys_s / cfg.steps,
        minor_faults_per_step=use.minor_faults / cfg.steps,
    )
    return PointResult(timing, memory, prof, gemm=gemm)


def measure_point(lm: LabModel, cfg: PointConfig) -> PointResult:
    """Prefill ``cfg.context`` random tokens for ``cfg.batch`` sequences of a transformers
    model, then time, watch memory and profile decode steps, in that order."""
    if cfg.backend != "hf":
        raise ConfigError(f"field backend: measure_point runs 'hf' only, got '{cfg.backend}'")
    with torch.inference_mode():
        cache = new_cache(lm, cfg.cache, cfg.context + cfg.decode_tokens)
        ids = random_ids(cfg.batch, cfg.context, lm.vocab_size, cfg.seed, lm.device)
    return run_phases(Decoder(lm, cache, ids), cfg, lm.vocab_size)
