"""torch.profiler over decode steps: operators by time and by memory, the peak allocation and
what it is made of, a Chrome trace, and bytes allocated set against bytes moved.

The profiler's memory events carry each allocation's size (``nbytes``, negative for a free) and
time; their running sum from the start of the window is the memory allocated during it (blocks
allocated before the window have no free event, so it starts at zero; torch warns about it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

# Leaf operators grouped into the named causes of the gap (lab compare). Self time only, so a
# parent op (aten::linear) never counts its children (aten::addmm) twice.
ATTENTION_OPS = ("attention", "aten::bmm", "aten::baddbmm", "aten::_softmax", "aten::softmax")
GEMM_OPS = ("aten::mm", "aten::addmm", "mkldnn::_linear_pointwise")  # the last: prepacked
CONCAT_OPS = ("aten::cat",)
KV_WRITE_OPS = ("aten::index_copy_", "aten::index_copy", "aten::index_put_")
# the engine's C++ kernels are not aten ops; they run inside named profiler ranges
# (engine.packing / engine.paged_kernel), kept as literals so this module loads without them
PANEL_RANGE = "ridgeline::panel_linear"  # "ridgeline::paged_attention" matches "attention"


@dataclass(frozen=True, slots=True)
class OpRow:
    """One operator aggregated over the profiled steps, per step."""

    name: str
    calls_per_step: float
    self_s_per_step: float
    share: float  # of all operators' self time
    self_bytes_per_step: float  # net bytes the op itself allocated (frees negative)


@dataclass(frozen=True, slots=True)
class ProfileSummary:
    """What a profiled window of decode steps shows.

    Attributes:
        wall_s_per_step: wall time per step under the profiler.
        op_s_per_step: Σ self time of every operator per step; the rest of the wall time is
            Python and dispatch (framework overhead), inflated somewhat by the profiler itself.
        categories: seconds per step of each named group (cache concat, attention, ...).
        peak_window_bytes: the most memory allocated at once during the window, above its start.
        allocated_bytes_per_step: Σ of every allocation's size per step (what the allocator
            handed out), to set against the analytic bytes moved per step.
    """

    steps: int
    device: str
    wall_s_per_step: float
    op_s_per_step: float
    categories: dict[str, float]
    top_time: tuple[OpRow, ...]
    top_memory: tuple[OpRow, ...]
    peak_window_bytes: int
    allocated_bytes_per_step: float
    freed_bytes_per_step: float

    @property
    def overhead_s_per_step(self) -> float:
        return max(self.wall_s_per_step - self.op_s_per_step, 0.0)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["overhead_s_per_step"] = self.overhead_s_per_step
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProfileSummary:
        fields = {k: d[k] for k in cls.__dataclass_fields__}
        fields["top_time"] = tuple(OpRow(**r) for r in d["top_time"])
        fields["top_memory"] = tuple(OpRow(**r) for r in d["top_memory"])
        return cls(**fields)


def category(name: str, shapes: Any, vocab_size: int) -> str:
    """The named cause an operator's time belongs to (``lm_head`` is the GEMM that touches the
    vocabulary dimension)."""
    if name in CONCAT_OPS:
        return "cache concat"
    if name in KV_WRITE_OPS:
        return "kv write"
    if any(key in name for key in ATTENTION_OPS):
        return "attention"
    if name in GEMM_OPS:
        dims = {d for shape in (shapes or []) if isinstance(shape, list) for d in shape}
        return "lm_head" if vocab_size in dims else "linear GEMMs"
    if name.startswith(PANEL_RANGE):  # the engine's panel GEMM: "…[rows x out]"
        return "lm_head" if name.endswith(f"x{vocab_size}]") else "linear GEMMs"
    return "other ops"


def _self_time_s(e: Any, cuda: bool) -> float:
    us = e.self_device_time_total if cuda else e.self_cpu_time_total
    return float(us) * 1e-6


def _self_bytes(e: Any, cuda: bool) -> float:
    return float(e.self_device_memory_usage if cuda else e.self_cpu_memory_usage)


def _rows(averages: Any, steps: int, total_s: float, cuda: bool) -> list[OpRow]:
    return [
        OpRow(
            name=e.key,
            calls_per_step=e.count / steps,
            self_s_per_step=_self_time_s(e, cuda) / steps,
            share=_self_time_s(e, cuda) / total_s if total_s else 0.0,
            self_bytes_per_step=_self_bytes(e, cuda) / steps,
        )
        for e in averages
    ]


def _memory_walk(prof: Any, cuda: bool) -> tuple[int, int, int]:
    """(peak allocated above the window start, bytes allocated, bytes freed) from memory events."""
    want = "CUDA" if cuda else "CPU"
    events = [
        e
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and want in str(e.device_type())
    ]
    live = peak = allocated = freed = 0
    for e in sorted(events, key=lambda e: e.start_ns()):
        nbytes = int(e.nbytes())
        live += nbytes
        peak = max(peak, live)
        allocated += max(nbytes, 0)
        freed += max(-nbytes, 0)
    return peak, allocated, freed


def profile_steps(
    step: Callable[[], None],
    steps: int,
    vocab_size: int,
    device: str = "cpu",
    trace_path: str | Path | None = None,
    top: int = 12,
) -> ProfileSummary:
    """Run ``step`` ``steps`` times under torch.profiler (shapes and memory recorded)."""
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities, record_shapes=True, profile_memory=True) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
    if trace_path is not None:
        Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace_path))
    by_shape = prof.key_averages(group_by_input_shape=True)
    total_s = sum(_self_time_s(e, cuda) for e in by_shape)
    categories: dict[str, float] = {}
    for e in by_shape:
        cat = category(e.key, e.input_shapes, vocab_size)
        categories[cat] = categories.get(cat, 0.0) + _self_time_s(e, cuda) / steps
    rows = _rows(prof.key_averages(), steps, total_s, cuda)
    peak, allocated, freed = _memory_walk(prof, cuda)
    return ProfileSummary(
        steps=steps,
        device=device,
        wall_s_per_step=wall / steps,
        op_s_per_step=total_s / steps,
        categories=categories,
        top_time=tuple(sorted(rows, key=lambda r: -r.self_s_per_step)[:top]),
        top_memory=tuple(sorted(rows, key=lambda r: -r.self_bytes_per_step)[:top]),
        peak_window_bytes=peak,
        allocated_bytes_per_step=allocated / steps,
        freed_bytes_per_step=freed / steps,
    )


@dataclass(frozen=True, slots=True)
class PeakComposition:
    """The peak of memory allocated during the profiled decode steps, and what it consists of.

    ``temporaries`` is the most allocated at once during the window above its start: new K/V,
    DynamicCache's concatenated copies (old and new live together inside ``torch.cat``), logits
    and activations. Parameters and the KV already cached were allocated before the window.
    """

    parameters: int
    kv_at_start: int
    kv_at_end: int
    temporaries: int

    @property
    def peak(self) -> int:
        return self.parameters + self.kv_at_start + self.temporaries

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["peak"] = self.peak
        return d


@dataclass(frozen=True, slots=True)
class ProfileReport:
    """``lab profile``: the summary, the peak's composition, allocated vs moved bytes."""

    config: dict[str, Any]
    summary: ProfileSummary
    composition: PeakComposition
    analytic_bytes_per_step: float  # what a step reads and writes (analytic.op_terms)
    trace_path: str | None

    @property
    def allocated_over_moved(self) -> float:
        return self.summary.allocated_bytes_per_step / self.analytic_bytes_per_step

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.lab-profile/1",
            "config": self.config,
            "summary": self.summary.to_dict(),
            "composition": self.composition.to_dict(),
            "analytic_bytes_per_step": self.analytic_bytes_per_step,
            "allocated_over_moved": self.allocated_over_moved,
            "trace_path": self.trace_path,
        }


def run_profile(cfg: Any, trace_path: str | Path | None, warmup: int = 2) -> ProfileReport:
    """Prefill, warm up, then profile ``cfg.profile_steps`` decode steps of one point
    (``cfg`` is a ``PointConfig``)."""
    # NOTE: imported here because decode imports this module (its profile phase)
    from ridgeline.lab.configs import raw_config, with_positions
    from ridgeline.lab.decode import Decoder, torch_threads
    from ridgeline.lab.hf import build_model, kv_tensor_bytes, new_cache, random_ids
    from ridgeline.lab.scratchpad import analytic_step_bytes

    steps = max(cfg.profile_steps, 1)
    raw = with_positions(raw_config(cfg.model), cfg.context + warmup + steps + 1)
    lm = build_model(raw, cfg.model, cfg.attn, cfg.dtype, cfg.device, cfg.weights, cfg.seed)
    with torch_threads(cfg.threads), torch.inference_mode():
        cache = new_cache(lm, cfg.cache, cfg.context + warmup + steps)
        dec = Decoder(
            lm, cache, random_ids(cfg.batch, cfg.context, lm.vocab_size, cfg.seed, lm.device)
        )
        dec.prefill()
        for _ in range(warmup):
            dec.step()
        kv_start = kv_tensor_bytes(cache)
        summary = profile_steps(dec.step, steps, lm.vocab_size, cfg.device, trace_path)
        kv_end = kv_tensor_bytes(cache)
    kv_len = cfg.context + warmup + steps / 2
    moved = analytic_step_bytes(lm.spec, cfg.batch, round(kv_len), cfg.dtype)
    return ProfileReport(
        config=cfg.to_dict(),
        summary=summary,
        composition=PeakComposition(lm.param_bytes, kv_start, kv_end, summary.peak_window_bytes),
        analytic_bytes_per_step=moved,
        trace_path=str(trace_path) if trace_path is not None else None,
    )
