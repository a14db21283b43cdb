"""The calibrated machine as data (torch-free): measured bandwidths and matmul peaks, and their
rendering as an accelerator catalog file, so ``--hw measured`` predicts for this machine.

Specs are written to the user hardware directory (``ridgeline.specs.catalog.user_hardware_dir``:
``$RIDGELINE_HW_DIR``, else ``$XDG_CONFIG_HOME/ridgeline/hardware``, else
``~/.config/ridgeline/hardware``), where ``get_accelerator`` finds them by name.
"""

from __future__ import annotations

import json
import math
import os
import time
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ridgeline.lab.compute_peak import (
    CoreProbe,
    CpuInfo,
    KernelRate,
    PeakReport,
    cpu_info_from_dict,
    physical_peak,
    read_cpu_info,
    unknown_peak,
)
from ridgeline.lab.steadiness import Steadiness
from ridgeline.specs.catalog import load_accelerator_file, parse_accelerator, user_hardware_dir
from ridgeline.specs.hardware import Accelerator
from ridgeline.specs.units import MiB

KIND = "calibrate"
DEFAULT_SIZES_MIB = (1, 4, 16, 64, 256, 1024)
DEFAULT_DTYPES = ("fp32", "bf16")  # fp16 on CPU has no fast path here (~2 GFLOP/s): opt in


@dataclass(frozen=True, slots=True)
class BandwidthPoint:
    """One kernel at one array size and thread count (``size_bytes`` is one array's size)."""

    kernel: str
    size_bytes: int
    threads: int
    best_bytes_per_s: float
    median_bytes_per_s: float


@dataclass(frozen=True, slots=True)
class MatmulPoint:
    dtype: str
    n: int
    threads: int
    best_flops_per_s: float


@dataclass(frozen=True, slots=True)
class GemmPoint:
    """A decode-shaped GEMM: [batch, n_in] × [n_out, n_in]ᵀ (an lm_head-sized weight matrix
    streamed once), timed at one batch size and thread count."""

    batch: int
    n_out: int
    n_in: int
    threads: int
    best_s: float

    @property
    def weight_bytes_per_s(self) -> float:
        """fp32 weight bytes streamed per second: the effective bandwidth at this batch."""
        return self.n_out * self.n_in * 4 / self.best_s

    @property
    def flops_per_s(self) -> float:
        """2 FLOPs per weight per row."""
        return 2.0 * self.batch * self.n_out * self.n_in / self.best_s


@dataclass(frozen=True, slots=True)
class CalibrationSpec:
    """What to measure. Sizes are per array, in bytes; ``threads`` e.g. (1, all)."""

    sizes_bytes: tuple[int, ...] = tuple(s * MiB for s in DEFAULT_SIZES_MIB)
    threads: tuple[int, ...] = (1, os.cpu_count() or 1)
    dtypes: tuple[str, ...] = DEFAULT_DTYPES
    matmul_n: int = 2048
    repeats: int = 5
    device: str = "cpu"
    gemm_shape: tuple[int, int] = (50257, 768)  # GPT-2's lm_head: 154 MB of fp32 weights
    gemm_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Calibration:
    """The measured machine. ``llc_bytes`` is the last-level cache as the OS reports it."""

    spec: CalibrationSpec
    device_name: str
    llc_bytes: int
    memory_bytes: int
    bandwidth: tuple[BandwidthPoint, ...]
    matmul: tuple[MatmulPoint, ...]
    gemm: tuple[GemmPoint, ...] = ()
    engine_gemm: tuple[GemmPoint, ...] = ()  # the engine's packed GEMM, same shape and batches
    core: tuple[CoreProbe, ...] = ()  # FMA loop and clock per thread count
    cpu: CpuInfo | None = None  # what the OS reported (physical peak)
    steadiness: Steadiness | None = None  # load and a repeated probe (``lab.steadiness``)

    def gemm_bandwidth(self, threads: int, batch: int) -> float | None:
        """Weight bytes per second of a decode-shaped GEMM at ``batch`` (log-log interpolation
        between the measured batches; ``None`` if none were measured at ``threads``)."""
        pts = sorted((p for p in self.gemm if p.threads == threads), key=lambda p: p.batch)
        if not pts:
            return None
        xs = [math.log(p.batch) for p in pts]
        ys = [math.log(p.weight_bytes_per_s) for p in pts]
        x = min(max(math.log(batch), xs[0]), xs[-1])
        for i in range(len(xs) - 1):
            if xs[i] <= x <= xs[i + 1]:
                w = (x - xs[i]) / (xs[i + 1] - xs[i]) if xs[i + 1] > xs[i] else 0.0
                return math.exp(ys[i] + w * (ys[i + 1] - ys[i]))
        return math.exp(ys[0])

    def bandwidth_at(self, threads: int, kernel: str = "read", largest: bool = True) -> float:
        """Best bandwidth of ``kernel`` at ``threads``: at the largest size (memory), or the
        best over cache-resident sizes (≤ half the LLC) when ``largest`` is False."""
        pts = [p for p in self.bandwidth if p.threads == threads and p.kernel == kernel]
        if not pts:
            raise KeyError(f"no {kernel} bandwidth measured at {threads} threads")
        if largest:
            return max(pts, key=lambda p: p.size_bytes).best_bytes_per_s
        small = [p for p in pts if p.size_bytes * 2 <= self.llc_bytes] or pts
        return max(p.best_bytes_per_s for p in small)

    def peak_at(self, threads: int) -> dict[str, float]:
        """Best matmul FLOP/s per dtype at ``threads``; fp32 is the calibrated peak (the fastest
        of the FMA loop, the engine's GEMM and torch.mm) where the probes ran."""
        out: dict[str, float] = {}
        for p in self.matmul:
            if p.threads == threads:
                out[p.dtype] = max(out.get(p.dtype, 0.0), p.best_flops_per_s)
        best = self.peak_report(threads).calibrated
        if best is not None and self.spec.device == "cpu":
            out["fp32"] = best.flops_per_s
        return out

    def peak_report(self, threads: int) -> PeakReport:
        """Physical peak, measured clock and every fp32 kernel's rate at ``threads``."""
        kernels = [
            KernelRate(f"torch.mm n={p.n}", p.best_flops_per_s)
            for p in self.matmul
            if p.threads == threads and p.dtype == "fp32"
        ]
        gemm = [g for g in self.engine_gemm if g.threads == threads]
        if gemm:
            g = max(gemm, key=lambda g: g.flops_per_s)
            kernels.append(
                KernelRate(f"engine GEMM [{g.batch}x{g.n_in}]x[{g.n_in}x{g.n_out}]", g.flops_per_s)
            )
        core = next((c for c in self.core if c.threads == threads), None)
        if core is not None:
            kernels.append(KernelRate(f"FMA loop ({core.lanes} lanes)", core.fma_flops_per_s))
        return PeakReport(
            threads=threads,
            physical=physical_peak(self.cpu) if self.cpu is not None else unknown_peak(),
            measured_clock_hz=core.clock_hz if core is not None else None,
            measured_flops_per_cycle=core.flops_per_cycle_per_core if core is not None else None,
            kernels=tuple(kernels),
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for g, point in zip(d["gemm"], self.gemm, strict=True):
            g["weight_bytes_per_s"] = point.weight_bytes_per_s
        if self.cpu is not None:
            d["cpu"]["flags"] = sorted(self.cpu.flags)
        if self.steadiness is not None:
            d["steadiness"] = self.steadiness.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        spec = d["spec"]
        return cls(
            spec=CalibrationSpec(
                sizes_bytes=tuple(spec["sizes_bytes"]),
                threads=tuple(spec["threads"]),
                dtypes=tuple(spec["dtypes"]),
                matmul_n=spec["matmul_n"],
                repeats=spec["repeats"],
                device=spec["device"],
                gemm_shape=tuple(spec.get("gemm_shape", (50257, 768))),  # type: ignore[arg-type]
                gemm_batches=tuple(spec.get("gemm_batches", (1, 2, 4, 8, 16, 32))),
            ),
            device_name=d["device_name"],
            llc_bytes=d["llc_bytes"],
            memory_bytes=d["memory_bytes"],
            bandwidth=tuple(BandwidthPoint(**p) for p in d["bandwidth"]),
            matmul=tuple(MatmulPoint(**p) for p in d["matmul"]),
            gemm=_gemm_points(d.get("gemm", ())),
            engine_gemm=_gemm_points(d.get("engine_gemm", ())),
            core=tuple(CoreProbe(**c) for c in d.get("core", ())),
            cpu=cpu_info_from_dict(d["cpu"]) if d.get("cpu") else None,
            steadiness=Steadiness.from_dict(d["steadiness"]) if d.get("steadiness") else None,
        )


def _gemm_points(rows: Any) -> tuple[GemmPoint, ...]:
    return tuple(
        GemmPoint(p["batch"], p["n_out"], p["n_in"], p["threads"], p["best_s"]) for p in rows
    )


def llc_bytes() -> int:
    """Size of the largest CPU cache the OS reports (sysfs), 32 MiB where unknown."""
    best = 0
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in root.glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1024, "M": MiB, "G": 1024 * MiB}.get(text[-1], 1)
        best = max(best, int(text.rstrip("KMG")) * scale)
    return best or 32 * MiB


def _source(what: str, when: str, cal: Calibration | None = None) -> str:
    flag = ""
    if cal is not None and cal.steadiness is not None and not cal.steadiness.steady:
        flag = "; UNDER LOAD: " + "; ".join(cal.steadiness.reasons)
    return f"measured: ridgeline lab calibrate, {what}, {when}{flag}"


def _notes(cal: Calibration, threads: int) -> str:
    notes = [f"Calibrated at {threads} thread(s); array sizes {_sizes(cal)}."]
    if cal.steadiness is not None and not cal.steadiness.steady:
        notes.append(cal.steadiness.warning())
    return "notes = [" + ", ".join(json.dumps(n) for n in notes) + "]"


def accelerator_toml(cal: Calibration, name: str, threads: int) -> str:
    """A catalog file (see ``specs/catalog.py``) for the calibrated machine at ``threads``.

    The device level's bandwidth is the best read bandwidth at the largest size measured (decode
    streams weights and KV, reading); the cache level's is the best read bandwidth over
    cache-resident sizes. Peaks are the best matmul FLOP/s per dtype.
    """
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    cuda = cal.spec.device.startswith("cuda")
    peaks = cal.peak_at(threads)
    if "bf16" not in peaks and "fp16" not in peaks and "fp32" in peaks:
        peaks["bf16"] = peaks["fp32"]  # NOTE: the catalog wants a 16-bit peak; say it is fp32's
    largest = max(cal.spec.sizes_bytes)
    lines = [
        f"# Written by `ridgeline lab calibrate` on {when}; every number measured on this machine.",
        f'name = "{name}"',
        f'kind = "{"gpu" if cuda else "cpu"}"',
        'vendor = "measured"',
        f'description = "{cal.device_name} as measured, {threads} thread(s)"',
        f'device_level = "{"hbm" if cuda else "dram"}"',
        f'cores = {{ value = {threads}, source = "{_source("threads used", when)}" }}',
        'core_name = "thread"',
        _notes(cal, threads),
        "",
        "[peak_flops_per_s]",
    ]
    lines += _peak_lines(cal, peaks, threads, when)
    cache_bw = cal.bandwidth_at(threads, largest=False)
    dram_bw = cal.bandwidth_at(threads, largest=True)
    lines += [
        "",
        "[[levels]]",
        f'name = "{"l2" if cuda else "llc"}"',
        'managed_by = "hardware"',
        'scope = "chip"',
        f'capacity_bytes = {{ value = {cal.llc_bytes}, source = "{"cudaDeviceProp" if cuda else "sysfs cpu0 cache"}" }}',
        f'bandwidth_bytes_per_s = {{ value = {cache_bw:.6g}, source = "{_source("best read over cache-resident sizes", when)}" }}',
        "",
        "[[levels]]",
        f'name = "{"hbm" if cuda else "dram"}"',
        'managed_by = "runtime"',
        f'scope = "{"card" if cuda else "system"}"',
        f'capacity_bytes = {{ value = {cal.memory_bytes}, source = "{"cudaDeviceProp" if cuda else "/proc/meminfo MemTotal"}" }}',
        f"bandwidth_bytes_per_s = {{ value = {dram_bw:.6g}, source = {json.dumps(_source(f'best read of {largest // MiB} MiB', when, cal))} }}",
        "",
    ]
    return "\n".join(lines)


def _peak_lines(cal: Calibration, peaks: dict[str, float], threads: int, when: str) -> list[str]:
    """``dtype = { value, source }`` per peak; a CPU's fp32 names the kernel it came from."""
    best = cal.peak_report(threads).calibrated if cal.spec.device == "cpu" else None
    lines = []
    for dtype, value in sorted(peaks.items()):
        what = f"best {dtype} mm n={cal.spec.matmul_n}"
        if dtype == "fp32" and best is not None:
            what = f"calibrated peak: fastest kernel, {best.kernel}"
        lines.append(f'{dtype} = {{ value = {value:.6g}, source = "{_source(what, when)}" }}')
    return lines


def accelerator(cal: Calibration, name: str, threads: int) -> Accelerator:
    """The calibrated machine at ``threads`` as an ``Accelerator`` (no file written)."""
    return parse_accelerator(tomllib.loads(accelerator_toml(cal, name, threads)), f"lab/{name}")


def _sizes(cal: Calibration) -> str:
    return ", ".join(f"{s // MiB} MiB" for s in cal.spec.sizes_bytes)


@dataclass(frozen=True, slots=True)
class WrittenSpec:
    name: str
    threads: int
    path: Path
    accelerator: Accelerator


def write_specs(
    cal: Calibration, name: str = "measured", out_dir: str | Path | None = None
) -> list[WrittenSpec]:
    """Write ``<name>.toml`` (all threads measured) and ``<name>-t1.toml`` (one thread) and load
    them back (so a file that would not load is caught here)."""
    folder = Path(out_dir) if out_dir is not None else user_hardware_dir()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    most = max(cal.spec.threads)
    variants = [(name, most)] + ([(f"{name}-t1", 1)] if 1 in cal.spec.threads and most != 1 else [])
    for spec_name, threads in variants:
        path = folder / f"{spec_name}.toml"
        path.write_text(accelerator_toml(cal, spec_name, threads))
        written.append(WrittenSpec(spec_name, threads, path, load_accelerator_file(path)))
    return written


def default_dtypes(device: str) -> tuple[str, ...]:
    """fp32, and bf16 where it has a fast path: CUDA, or a CPU with bf16 instructions."""
    if device.startswith("cuda") or read_cpu_info().has_bf16_path:
        return DEFAULT_DTYPES
    return ("fp32",)


def default_threads() -> tuple[int, ...]:
    return tuple(sorted({1, os.cpu_count() or 1}))
