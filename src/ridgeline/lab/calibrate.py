"""Calibrate this machine: memory bandwidth (read, copy, triad) from cache-resident sizes to far
beyond the last-level cache at one and all threads, matmul peak per dtype, and on CUDA the
device's HBM bandwidth and tensor-core peak.

On the CPU it also measures the compute peak three ways (``compute_peak``): an FMA loop with the
clock the core runs at (``fma_probe``), the engine's own GEMM (``gemm_probe``) and torch.mm; the
fastest is the calibrated peak, shown beside the physical one (FMA pipes × lanes × clock).

Kernels and byte counts follow STREAM (J. McCalpin, "Memory Bandwidth and Machine Balance",
IEEE TCCA newsletter 1995): read ``s = Σ a`` counts n·e bytes, copy ``b = a`` counts 2·n·e,
triad ``a = b + q·c`` counts 3·n·e (write-allocate traffic not counted). Each figure is the best
of ``repeats`` timings, as STREAM reports. Matmul FLOPs = 2·n³ per [n,n]×[n,n] product.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.lab import env as lab_env
from ridgeline.lab.builds import Say, build_all, load_average
from ridgeline.lab.compute_peak import CoreProbe, read_cpu_info
from ridgeline.lab.decode import torch_threads
from ridgeline.lab.fma_probe import probe_core
from ridgeline.lab.gemm_probe import engine_gemm
from ridgeline.lab.hf import TORCH_DTYPES
from ridgeline.lab.machine import (
    BandwidthPoint,
    Calibration,
    CalibrationSpec,
    GemmPoint,
    MatmulPoint,
    llc_bytes,
)
from ridgeline.lab.steadiness import Steadiness
from ridgeline.specs.units import MiB

KERNEL_ARRAYS = {"read": 1, "copy": 2, "triad": 3}  # arrays touched; bytes = arrays × size
MIN_SECONDS = 0.02  # each timing runs the kernel enough times to last at least this long


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _best_time(
    fn: Callable[[], Any], repeats: int, device: torch.device, threads: int = 0
) -> tuple[float, float]:
    """(best, median) seconds per call; each timing loops long enough to be measurable.

    NOTE: on the CPU with one thread, each timing is min(wall, process CPU time): on a shared
    machine a descheduled thread's wall time is not the kernel's (docs/lab.md, known limits).
    """
    cpu_timer = device.type == "cpu" and threads == 1
    fn()
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    once = max(time.perf_counter() - start, 1e-7)
    inner = max(1, int(MIN_SECONDS / once))
    times = []
    for _ in range(repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        for _ in range(inner):
            fn()
        _sync(device)
        wall = time.perf_counter() - start
        if cpu_timer:
            wall = min(wall, max(time.process_time() - cpu_start, 1e-9))
        times.append(wall / inner)
    return min(times), statistics.median(times)


def _kernels(n: int, device: torch.device) -> dict[str, Callable[[], Any]]:
    a = torch.ones(n, dtype=torch.float32, device=device)  # [n]
    b = torch.ones(n, dtype=torch.float32, device=device)  # [n]
    c = torch.ones(n, dtype=torch.float32, device=device)  # [n]
    return {
        "read": lambda: a.sum(),
        "copy": lambda: b.copy_(a),
        "triad": lambda: torch.add(b, c, alpha=3.0, out=a),
    }


def measure_bandwidth(spec: CalibrationSpec) -> list[BandwidthPoint]:
    """Read, copy and triad bandwidth at every size and thread count of ``spec``."""
    device = torch.device(spec.device)
    out = []
    for size in spec.sizes_bytes:
        kernels = _kernels(size // 4, device)
        for threads in spec.threads:
            with torch_threads(threads):
                for name, fn in kernels.items():
                    moved = KERNEL_ARRAYS[name] * size
                    best, median = _best_time(fn, spec.repeats, device, threads)
                    out.append(BandwidthPoint(name, size, threads, moved / best, moved / median))
        del kernels
    return out


def measure_matmul(spec: CalibrationSpec) -> list[MatmulPoint]:
    """Best [n,n]×[n,n] FLOP/s per dtype and thread count (2·n³ FLOPs per product)."""
    device = torch.device(spec.device)
    n = spec.matmul_n
    out = []
    for dtype in spec.dtypes:
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(n, n, generator=gen).to(device=device, dtype=TORCH_DTYPES[dtype])  # [n, n]
        y = torch.randn(n, n, generator=gen).to(device=device, dtype=TORCH_DTYPES[dtype])  # [n, n]

        def product(x: torch.Tensor = x, y: torch.Tensor = y) -> torch.Tensor:
            return torch.mm(x, y)  # [n, n]

        for threads in spec.threads:
            with torch_threads(threads):
                best, _ = _best_time(product, spec.repeats, device, threads)
            out.append(MatmulPoint(dtype, n, threads, 2.0 * n**3 / best))
    return out


GEMM_BATCHES = (1, 2, 4, 8, 16, 32)
GEMM_SHAPE = (50257, 768)  # GPT-2's lm_head: 154 MB of fp32 weights, far beyond most LLCs


def measure_gemm(
    spec: CalibrationSpec,
    shape: tuple[int, int] = GEMM_SHAPE,
    batches: tuple[int, ...] = GEMM_BATCHES,
) -> list[GemmPoint]:
    """Decode-shaped GEMMs, x [B, n_in] × Wᵀ [n_in, n_out], per batch and thread count (fp32).

    At batch 1 this is a GEMV that streams W at memory bandwidth; at a few rows the BLAS may
    switch to a GEMM kernel that streams it far slower (measured here: MKL at B≥4 takes about
    twice the B=1 time, docs/lab.md). The lab's fitted model uses this curve for the weight term.
    """
    device = torch.device(spec.device)
    n_out, n_in = spec.gemm_shape
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(n_out, n_in, generator=gen).to(device)  # [n_out, n_in]
    out = []
    for batch in spec.gemm_batches:
        x = torch.randn(batch, n_in, generator=gen).to(device)  # [B, n_in]

        def linear(x: torch.Tensor = x) -> torch.Tensor:
            return torch.nn.functional.linear(x, w)  # [B, n_out]

        for threads in spec.threads:
            with torch_threads(threads):
                best, _ = _best_time(linear, spec.repeats, device, threads)
            out.append(GemmPoint(batch, n_out, n_in, threads, best))
    return out


def _device(spec: CalibrationSpec) -> tuple[str, int, int]:
    """(name, memory bytes, last-level cache bytes) of the device measured."""
    device = torch.device(spec.device)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        llc = int(getattr(props, "L2_cache_size", 0) or 0)
        return torch.cuda.get_device_name(device), int(props.total_memory), llc
    return lab_env.cpu_model(), lab_env.memory_bytes(), llc_bytes()


def calibrate(spec: CalibrationSpec, say: Say | None = None) -> Calibration:
    """Measure the machine (or the CUDA device when ``spec.device`` is cuda), saying each step
    (``say``: one line per stage, with the C++ builds announced first on a CPU), and check that
    it stayed quiet (``lab.steadiness``)."""
    tell = say or _quiet
    cpu = spec.device == "cpu"
    load_start = load_average()
    if cpu:
        build_all(tell)
    name, memory, llc = _device(spec)
    n = len(spec.sizes_bytes) * len(spec.threads)
    tell(
        f"1/5 bandwidth: read, copy and triad at {n} (size, threads) pairs, best of {spec.repeats}"
    )
    bandwidth = tuple(measure_bandwidth(spec))
    tell(f"2/5 matmul: [{spec.matmul_n}, {spec.matmul_n}] in {', '.join(spec.dtypes)}")
    matmul = tuple(measure_matmul(spec))
    tell(f"3/5 decode-shaped GEMMs at batches {', '.join(map(str, spec.gemm_batches))}")
    gemm = tuple(measure_gemm(spec))
    engine: list[GemmPoint] = []
    core: tuple[CoreProbe, ...] = ()
    if cpu:
        tell("4/5 compute peak: the engine's GEMM, the FMA loop and the clock")
        engine = engine_gemm(spec.gemm_shape, spec.gemm_batches, spec.threads, spec.repeats)
        core = measure_core(spec)
    tell("5/5 the DRAM read again, to check the machine stayed the same")
    steadiness = check_steadiness(spec, bandwidth, load_start)
    return Calibration(
        spec=spec,
        device_name=name,
        llc_bytes=llc or 32 * MiB,
        memory_bytes=memory,
        bandwidth=bandwidth,
        matmul=matmul,
        gemm=gemm,
        engine_gemm=tuple(engine) if cpu else (),
        core=core,
        cpu=read_cpu_info() if cpu else None,
        steadiness=steadiness,
    )


def _quiet(message: str) -> None:
    del message


def check_steadiness(
    spec: CalibrationSpec, bandwidth: tuple[BandwidthPoint, ...], load_start: float | None
) -> Steadiness:
    """The largest read at the most threads measured again, beside the first reading, one
    thread's and the load at the start and now."""
    largest, most = max(spec.sizes_bytes), max(spec.threads)

    def first(threads: int) -> float | None:
        reads = [p for p in bandwidth if p.kernel == "read" and p.size_bytes == largest]
        return next((p.best_bytes_per_s for p in reads if p.threads == threads), None)

    device = torch.device(spec.device)
    read = _kernels(largest // 4, device)["read"]
    with torch_threads(most):
        best, _ = _best_time(read, max(2, spec.repeats // 2), device, most)
    again = largest / best
    one = first(1) if most > 1 else None
    return Steadiness(
        cores=os.cpu_count() or 1,
        load_start=load_start,
        load_end=load_average(),
        probe_threads=most,
        first_bytes_per_s=first(most) or again,
        again_bytes_per_s=again,
        one_thread_bytes_per_s=one,
    )


def measure_core(spec: CalibrationSpec) -> tuple[CoreProbe, ...]:
    """The FMA loop and the clock probe at every thread count (none without a compiler)."""
    probes = (probe_core(threads, spec.repeats) for threads in spec.threads)
    return tuple(p for p in probes if p is not None)
