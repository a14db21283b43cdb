"""Decode-step timing of the engine against the roofline, for ``ridgeline bench engine`` and
``benchmarks/engine.py``.

A point fills a paged cache of ``context`` random keys/values per sequence (values do not change
a step's time, and a real prefill would cost minutes on a CPU), scatters each sequence over
shuffled blocks, then times ``TorchExecutor.execute`` on one decode token per sequence: median
of ``steps`` after ``warmup``, wall and CPU time (CPU time exposes contention on a busy machine).
The roofline is per operator max(bytes ÷ bandwidth, FLOPs ÷ matmul peak) at fp32, both measured
here (the fastest of ``sum`` and a one-row panel GEMV over 1 GiB, each on 4 KiB and on huge
pages, and a 2048² matmul; the median of five passes) unless given; the bytes alone ÷
bandwidth are reported beside it.
"""

from __future__ import annotations

import functools
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ridgeline.analytic import Dtypes, UniformShape, op_terms
from ridgeline.engine.attention import DecodeKernel
from ridgeline.engine.executor import TorchExecutor
from ridgeline.engine.fused_layer import load_fused_layer
from ridgeline.engine.fused_ops import load_fused_ops
from ridgeline.engine.huge_pages import huge_page_empty
from ridgeline.engine.kv_cache import CacheShape, KVCache
from ridgeline.engine.model import CausalLM
from ridgeline.engine.packing import Layout, can_pack, pack_linears, resolve
from ridgeline.engine.paged_kernel import load_paged_kernel
from ridgeline.engine.panel_gemm import PANEL, PanelGemm, load_panel_gemm
from ridgeline.engine.weights import init_random
from ridgeline.serving.executor import ScheduledBatch, ScheduledRequest
from ridgeline.specs import DType, ModelSpec
from ridgeline.specs.model import Position

FP32 = Dtypes(DType.FP32, DType.FP32, DType.FP32)
BANDWIDTH_PROBE_ELEMENTS = 1 << 28  # fp32: 1 GiB
PROBE_GEMV_IN = 4096  # in-features of the probe GEMV's weight: [65536, 4096] fp32 = 1 GiB


@dataclass(frozen=True, slots=True)
class Timing:
    """Median wall and CPU milliseconds of one step."""

    wall_ms: float
    cpu_ms: float


@dataclass(frozen=True, slots=True)
class DecodePoint:
    """One (batch, context) point: the engine's step against the roofline and the bytes alone."""

    model: str
    batch: int
    context: int
    roofline_ms: float
    bytes_ms: float
    step: Timing

    @property
    def ratio(self) -> float:
        return self.step.wall_ms / self.roofline_ms


def load_average() -> tuple[float, float, float]:
    """1-, 5- and 15-minute load averages (printed with every timing)."""
    return os.getloadavg()


PROBE_PASSES = 5


def _passes(read: Callable[[], object], nbytes: int) -> list[float]:
    """Bytes per second of ``PROBE_PASSES`` calls of ``read``, one by one."""
    rates = []
    for _ in range(PROBE_PASSES):
        t0 = time.perf_counter()
        read()
        rates.append(nbytes / (time.perf_counter() - t0))
    return rates


def _ones_4k(shape: tuple[int, ...]) -> torch.Tensor:
    return torch.ones(shape)  # torch's allocator: 4 KiB pages here (THP in madvise mode)


def _ones_huge(shape: tuple[int, ...]) -> torch.Tensor:
    return huge_page_empty(shape, torch.float32).fill_(1)


PAGES: dict[str, Callable[[tuple[int, ...]], torch.Tensor]] = {
    "4k": _ones_4k,
    "huge": _ones_huge,
}


class ReadProbe:
    """Read bandwidth, pass by pass, by method and pages, over buffers allocated once:
    ``"sum/4k"``, five ``sum`` passes over ``elements`` fp32 values from torch's allocator,
    ``"sum/huge"`` the same on huge pages (``huge_pages``), and, when ``panel`` is given,
    ``"gemv/4k"`` and ``"gemv/huge"``, five one-row GEMVs over a weight of the same size in
    column panels.

    A roofline must not sit below what the engine attains, so the probes try each way of
    reading that could be faster: the engine's own GEMV (27–28 against torch ``sum``'s 24–25
    GB/s when a neighbour loads the memory bus), and huge pages, which the engine's weights and
    KV cache use (30–34 against 25–33 GB/s on 4 KiB pages, by where the buffer lands). The
    buffers (4 GiB with the GEMV) are kept, so a benchmark that probes before every point does
    not allocate, fault in and free them each time.
    """

    def __init__(
        self, elements: int = BANDWIDTH_PROBE_ELEMENTS, panel: PanelGemm | None = None
    ) -> None:
        self.nbytes = elements * 4
        self.reads: dict[str, Callable[[], object]] = {}
        for pages, alloc in PAGES.items():
            self.reads[f"sum/{pages}"] = alloc((elements,)).sum  # [elements] fp32
        if panel is not None:
            k = PROBE_GEMV_IN
            row = torch.ones(1, k)  # [1, k]
            for pages, alloc in PAGES.items():
                # values do not matter: the panel layout directly, not through pack's copies
                w = alloc((elements // (k * PANEL), k, PANEL))  # [elements / k / 16, k, 16]
                gemv = functools.partial(panel.linear, row, w, None, elements // k)
                self.reads[f"gemv/{pages}"] = gemv

    def rates(self) -> dict[str, list[float]]:
        """Bytes per second of each read, ``PROBE_PASSES`` passes each."""
        return {name: _passes(read, self.nbytes) for name, read in self.reads.items()}


def read_rates_bytes_per_s(
    elements: int = BANDWIDTH_PROBE_ELEMENTS, panel: PanelGemm | None = None
) -> dict[str, list[float]]:
    """One ``ReadProbe``'s rates, its buffers freed after."""
    return ReadProbe(elements, panel).rates()


def fastest(rates: dict[str, list[float]], statistic: Callable[[list[float]], float]) -> float:
    """The faster read method, each summarised by ``statistic`` over its passes."""
    return max(statistic(r) for r in rates.values())


def read_bandwidth_bytes_per_s(
    elements: int = BANDWIDTH_PROBE_ELEMENTS, panel: PanelGemm | None = None
) -> float:
    """The best pass of ``read_rates_bytes_per_s``: the machine's peak one-thread read."""
    return fastest(read_rates_bytes_per_s(elements, panel), max)


def sustained_read_bytes_per_s(
    elements: int = BANDWIDTH_PROBE_ELEMENTS, panel: PanelGemm | None = None
) -> float:
    """The median pass of the faster read: the statistic of a step time it is compared with
    (the best pass against a median step would count a neighbour's noise as the step's gap)."""
    return fastest(read_rates_bytes_per_s(elements, panel), statistics.median)


MATMUL_PROBE_N = 2048  # fp32 square matmul: 2·n³ FLOPs, far beyond any cache


def matmul_rates_flops_per_s(n: int = MATMUL_PROBE_N) -> list[float]:
    """Five ``n × n`` fp32 matmuls, pass by pass (the same probe as ``lab calibrate``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)  # [n, n] each
    rates = []
    for _ in range(PROBE_PASSES):
        t0 = time.perf_counter()
        torch.mm(a, b)
        rates.append(2 * n**3 / (time.perf_counter() - t0))
    return rates


def matmul_peak_flops_per_s(n: int = MATMUL_PROBE_N) -> float:
    """The best of ``matmul_rates_flops_per_s``."""
    return max(matmul_rates_flops_per_s(n))


def bytes_ms(spec: ModelSpec, batch: int, context: int, bw: float) -> float:
    """Analytic decode-step bytes at fp32 (weights + KV read + KV written + activations) ÷ bw."""
    terms = op_terms(spec, UniformShape(float(batch), 1.0, float(context)), FP32)
    return sum(float(t.bytes_read + t.bytes_written) for t in terms) / bw * 1e3


def roofline_ms(spec: ModelSpec, batch: int, context: int, bw: float, peak: float) -> float:
    """The roofline of the step (Williams et al. 2009), operator by operator at fp32:
    Σ_op max(bytes_op ÷ bw, FLOPs_op ÷ peak). At batch 16 the weight GEMMs do 8 FLOPs per
    byte, above this CPU's one-thread ridge (~95 GFLOP/s ÷ ~22 GB/s ≈ 4), so they are bound by
    the matmul peak, not by the bytes."""
    terms = op_terms(spec, UniformShape(float(batch), 1.0, float(context)), FP32)
    return 1e3 * sum(
        max(float(t.bytes_read + t.bytes_written) / bw, float(t.flops) / peak) for t in terms
    )


def timed(step: Callable[[int], None], warmup: int, steps: int) -> Timing:
    """Median wall and CPU time of ``step(i)`` over ``steps`` calls after ``warmup``."""
    for i in range(warmup):
        step(i)
    wall, cpu = [], []
    for i in range(warmup, warmup + steps):
        w0, c0 = time.perf_counter(), time.process_time()
        step(i)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return Timing(statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3)


def bench_model(spec: ModelSpec, seed: int = 0, max_positions: int = 2048) -> CausalLM:
    """fp32 random weights; learned-position models get ``max_positions`` rows (lab.md: GPT-2's
    1024 overflows at context 1024 plus decode steps)."""
    if spec.position is Position.LEARNED:
        spec = replace(
            spec, max_position_embeddings=max(spec.max_position_embeddings, max_positions)
        )
    model = CausalLM(spec, max_positions)
    init_random(model, torch.Generator().manual_seed(seed))
    return model.eval()


def decode_step(
    model: CausalLM, kernel: DecodeKernel | None, batch: int, context: int, steps: int
) -> Callable[[int], None]:
    """A step function: one token for each of ``batch`` sequences at ``context`` (+ i)."""
    s, bs = model.spec, 16
    per_seq = -(-(context + steps) // bs)
    num_blocks = batch * per_seq
    shape = CacheShape(s.num_layers, num_blocks, bs, s.num_kv_heads, s.head_dim, torch.float32)
    cache = KVCache(shape, torch.device("cpu"))
    for t in (*cache.k, *cache.v):
        t.normal_()
    order = list(range(num_blocks))
    random.Random(0).shuffle(order)  # paged for real: no sequence owns contiguous blocks
    tables = [tuple(order[i * per_seq : (i + 1) * per_seq]) for i in range(batch)]
    executor = TorchExecutor(model, cache, kernel)

    def step(i: int) -> None:
        reqs = tuple(
            ScheduledRequest(f"s{b}", (1 + b,), context + i, tables[b]) for b in range(batch)
        )
        executor.execute(ScheduledBatch(i, reqs, bs))

    return step


def decode_grid(
    spec: ModelSpec,
    batches: list[int],
    contexts: list[int],
    bandwidth_bytes_per_s: float | None = None,
    warmup: int = 2,
    steps: int = 5,
    peak_flops_per_s: float | None = None,
) -> list[DecodePoint]:
    """The engine's decode step over a (batch × context) grid, with the roofline of each point.

    Runs on one thread with packed weights (``Layout.AUTO``) and the paged kernel when available.
    The roofline's bandwidth and peak default to the median passes of the probes, measured once
    before the grid (``benchmarks/engine.py`` probes before every point).
    """
    torch.set_num_threads(1)
    bw = bandwidth_bytes_per_s or sustained_read_bytes_per_s(panel=load_panel_gemm())
    peak = peak_flops_per_s or statistics.median(matmul_rates_flops_per_s())
    model = bench_model(spec)
    if can_pack(torch.device("cpu")):
        panel = load_panel_gemm()
        pack_linears(model, resolve(Layout.AUTO, torch.float32, panel), panel)
    model.fused_ops = load_fused_ops()
    model.use_fused_layer(load_fused_layer() if model.fused_ops is not None else None)
    kernel = load_paged_kernel()
    points = []
    with torch.inference_mode():
        for b in batches:
            for t in contexts:
                step = decode_step(model, kernel, b, t, warmup + steps)
                timing = timed(step, warmup, steps)
                roof = roofline_ms(spec, b, t, bw, peak)
                points.append(DecodePoint(spec.name, b, t, roof, bytes_ms(spec, b, t, bw), timing))
    return points
