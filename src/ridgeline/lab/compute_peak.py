"""The CPU's physical compute peak, and the calibrated peak beside it (torch-free).

Physical peak of one core, fp32 (Hennessy & Patterson, "Computer Architecture", 6th ed., §4.10:
peak = FLOPs per cycle × clock)::

    FLOP/s = FMA pipes × min(pipe bits, widest vector ISA) / 32 lanes × 2 FLOP per FMA × clock

The pipes and their width come from a table of microarchitectures (``data/cpu/
microarchitectures.toml``, a source per entry) matched on the vendor, family and model that
/proc/cpuinfo reports; the widest ISA from its flags (avx512f: 512, avx2 or avx: 256, else 128);
the clock from sysfs ``cpuinfo_max_freq`` (the highest clock the driver knows, boost included),
else the "@ x GHz" of the model name (the base clock), else /proc/cpuinfo's "cpu MHz" (the clock
when it was read; under a hypervisor, the host's TSC rate). The last two are estimates: a core
may boost above them. Under a hypervisor (flag ``hypervisor``) the family and model may be the
CPU model the hypervisor presents rather than the host's, so the table entry is an estimate too.
A CPU with no table entry, or no FMA flag, has an unknown peak: ``None``, never a guess.

The calibrated peak is the best rate a kernel reached on this machine (an FMA loop, the
engine's GEMM, torch.mm; ``lab calibrate``). It can only be below the real physical peak; where
it is above the table's figure, the table entry or the clock is wrong for the CPU that runs.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ridgeline.errors import ConfigError

FLOPS_PER_FMA = 2  # a fused multiply-add is one multiply and one add
FP32_BITS = 32
_ISA_BITS = (("avx512f", 512), ("avx2", 256), ("avx", 256))
SSE_BITS = 128
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
SYSFS_MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
PROC_CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True, slots=True)
class CpuInfo:
    """What the OS reports about the first CPU."""

    vendor: str
    family: int | None
    model: int | None
    model_name: str
    flags: frozenset[str]
    clock_hz: float | None
    clock_source: str
    clock_is_estimate: bool

    @property
    def vector_bits(self) -> int:
        """The widest vector registers the flags allow."""
        return next((bits for flag, bits in _ISA_BITS if flag in self.flags), SSE_BITS)

    @property
    def virtualised(self) -> bool:
        return "hypervisor" in self.flags

    @property
    def has_bf16_path(self) -> bool:
        """bf16 dot products in hardware (AVX-512 BF16 or AMX); without them a bf16 matmul
        falls back to scalar code (~1.4 GFLOP/s on Zen 1): minutes for one calibration."""
        return bool(BF16_FLAGS & self.flags)


@dataclass(frozen=True, slots=True)
class Microarch:
    """One core design: its FMA pipes and their width (one table entry)."""

    name: str
    vendor: str
    family: int
    models: tuple[tuple[int, int], ...]
    fma_pipes: int
    pipe_bits: int
    source: str
    estimate: str = ""

    def matches(self, info: CpuInfo) -> bool:
        return (
            info.vendor == self.vendor
            and info.family == self.family
            and info.model is not None
            and any(lo <= info.model <= hi for lo, hi in self.models)
        )


@dataclass(frozen=True, slots=True)
class PhysicalPeak:
    """The fp32 peak of one core, or why it is unknown (``flops_per_s`` None)."""

    cpu: str
    microarch: str | None
    fma_pipes: int | None
    vector_bits: int | None  # the width one FMA pipe completes per cycle here
    clock_hz: float | None
    source: str
    estimates: tuple[str, ...]  # what is a guess; empty when nothing is

    @property
    def fp32_lanes(self) -> int | None:
        return None if self.vector_bits is None else self.vector_bits // FP32_BITS

    @property
    def flops_per_cycle(self) -> int | None:
        if self.fma_pipes is None or self.fp32_lanes is None:
            return None
        return self.fma_pipes * self.fp32_lanes * FLOPS_PER_FMA

    @property
    def flops_per_s(self) -> float | None:
        """Per core; ``None`` where the table or the clock is unknown."""
        per_cycle = self.flops_per_cycle
        return None if per_cycle is None or self.clock_hz is None else per_cycle * self.clock_hz

    @property
    def is_estimate(self) -> bool:
        return bool(self.estimates)

    def at_clock(self, clock_hz: float) -> float | None:
        """The same pipes at another clock (e.g. the clock a probe measured)."""
        per_cycle = self.flops_per_cycle
        return None if per_cycle is None else per_cycle * clock_hz


class _EntryFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    vendor: str
    family: int
    models: tuple[tuple[int, int], ...]
    fma_pipes: Annotated[int, Field(ge=1)]
    pipe_bits: Annotated[int, Field(ge=FP32_BITS)]
    source: Annotated[str, Field(min_length=1)]
    estimate: str = ""


def _entry(raw: dict[str, object]) -> Microarch:
    try:
        e = _EntryFile.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        raise ConfigError(
            f"microarchitecture table, entry {raw.get('name', '?')}: field {field}: {first['msg']}"
        ) from None
    return Microarch(
        e.name, e.vendor, e.family, e.models, e.fma_pipes, e.pipe_bits, e.source, e.estimate
    )


@cache
def microarchitectures() -> tuple[Microarch, ...]:
    """The shipped table (package data)."""
    text = resources.files("ridgeline.data").joinpath("cpu/microarchitectures.toml").read_text()
    return tuple(_entry(e) for e in tomllib.loads(text)["microarch"])


def _fields(cpuinfo_text: str) -> dict[str, str]:
    """The first processor's ``name: value`` lines of /proc/cpuinfo."""
    out: dict[str, str] = {}
    for line in cpuinfo_text.splitlines():
        if not line.strip():
            if out:
                break
            continue
        name, _, value = line.partition(":")
        out.setdefault(name.strip().lower(), value.strip())
    return out


def _int(text: str | None) -> int | None:
    try:
        return int(text, 0) if text is not None else None
    except ValueError:
        return None


def _clock(fields: dict[str, str], max_freq_khz: str | None) -> tuple[float | None, str, bool]:
    """(Hz, where from, is it an estimate), best source first."""
    khz = _int(max_freq_khz.strip()) if max_freq_khz else None
    if khz:
        return khz * 1e3, "sysfs cpuinfo_max_freq", False
    named = re.search(r"@\s*([0-9.]+)\s*GHz", fields.get("model name", ""))
    if named:
        return float(named.group(1)) * 1e9, "model name (base clock; may boost above)", True
    try:
        mhz = float(fields.get("cpu mhz", ""))
    except ValueError:
        return None, "unknown", True
    return mhz * 1e6, "/proc/cpuinfo cpu MHz (clock when read; may boost above)", True


def parse_cpu_info(cpuinfo_text: str, max_freq_khz: str | None = None) -> CpuInfo:
    """``CpuInfo`` from the text of /proc/cpuinfo and of sysfs ``cpuinfo_max_freq`` (kHz)."""
    fields = _fields(cpuinfo_text)
    clock_hz, clock_source, clock_guess = _clock(fields, max_freq_khz)
    return CpuInfo(
        vendor=fields.get("vendor_id", ""),
        family=_int(fields.get("cpu family")),
        model=_int(fields.get("model")),
        model_name=fields.get("model name", "unknown CPU"),
        flags=frozenset(fields.get("flags", "").split()),
        clock_hz=clock_hz,
        clock_source=clock_source,
        clock_is_estimate=clock_guess,
    )


def read_cpu_info() -> CpuInfo:
    """This machine's first CPU (empty fields where the files are missing)."""

    def text(path: Path) -> str | None:
        try:
            return path.read_text()
        except OSError:
            return None

    return parse_cpu_info(text(PROC_CPUINFO) or "", text(SYSFS_MAX_FREQ))


def physical_peak(info: CpuInfo, table: tuple[Microarch, ...] | None = None) -> PhysicalPeak:
    """One core's fp32 peak from ``info`` through the microarchitecture ``table``."""
    entry = next((m for m in table or microarchitectures() if m.matches(info)), None)
    cpu = f"{info.model_name} ({info.vendor} family {info.family} model {info.model})"
    if entry is None or "fma" not in info.flags:
        why = "no FMA flag" if entry is not None else "not in the microarchitecture table"
        return PhysicalPeak(cpu, None, None, None, info.clock_hz, why, ("peak unknown: " + why,))
    estimates = []
    if entry.estimate:
        estimates.append(entry.estimate)
    if info.virtualised:
        estimates.append("under a hypervisor: family/model may be the CPU model it presents")
    if info.clock_is_estimate:
        estimates.append(f"clock from {info.clock_source}")
    return PhysicalPeak(
        cpu=cpu,
        microarch=entry.name,
        fma_pipes=entry.fma_pipes,
        vector_bits=min(entry.pipe_bits, info.vector_bits),
        clock_hz=info.clock_hz,
        source=entry.source,
        estimates=tuple(estimates),
    )


@dataclass(frozen=True, slots=True)
class CoreProbe:
    """The FMA loop and the clock probe at ``threads`` threads (``lab/fma_probe.py``)."""

    threads: int
    fma_flops_per_s: float  # all threads together
    clock_hz: float | None  # one thread's add chain; None off x86-64
    lanes: int  # fp32 lanes of the vectors the loop used

    @property
    def flops_per_cycle_per_core(self) -> float | None:
        """Measured FLOP per cycle of one core: the table's figure, checked."""
        if not self.clock_hz:
            return None
        return self.fma_flops_per_s / self.threads / self.clock_hz


@dataclass(frozen=True, slots=True)
class KernelRate:
    """The best fp32 rate one kernel reached (FLOP/s, all threads together)."""

    kernel: str
    flops_per_s: float


@dataclass(frozen=True, slots=True)
class PeakReport:
    """Physical peak, measured clock and the kernels' rates at ``threads`` threads, side by side.

    The calibrated peak is the fastest kernel: what the roofline uses, so that no measured step
    can run faster than its roofline because the peak came from a slow kernel.
    """

    threads: int
    physical: PhysicalPeak
    measured_clock_hz: float | None
    measured_flops_per_cycle: float | None  # per core, FMA loop ÷ clock
    kernels: tuple[KernelRate, ...]

    @property
    def calibrated(self) -> KernelRate | None:
        return max(self.kernels, key=lambda k: k.flops_per_s, default=None)

    @property
    def physical_flops_per_s(self) -> float | None:
        """Table × reported clock × threads."""
        per_core = self.physical.flops_per_s
        return None if per_core is None else per_core * self.threads

    @property
    def physical_at_measured_clock(self) -> float | None:
        """Table × measured clock × threads."""
        if self.measured_clock_hz is None:
            return None
        per_core = self.physical.at_clock(self.measured_clock_hz)
        return None if per_core is None else per_core * self.threads

    def notes(self) -> tuple[str, ...]:
        """What the measurements say about the table's figure."""
        out = []
        table, got = self.physical.flops_per_cycle, self.measured_flops_per_cycle
        if table is not None and got is not None:
            verdict = "confirms" if abs(got - table) <= 0.1 * table else "contradicts"
            out.append(f"FMA loop: {got:.1f} FLOP/cycle per core {verdict} the table's {table}")
        best, phys = self.calibrated, self.physical_flops_per_s
        if best is not None and phys is not None and best.flops_per_s > phys:
            out.append(
                f"{best.kernel} runs above the peak at the reported clock: the core runs faster"
                " than that clock (boost) or is not the CPU reported"
            )
        return tuple(out)


def unknown_peak(why: str = "CPU not recorded") -> PhysicalPeak:
    """A physical peak nobody can state (no CPU information)."""
    return PhysicalPeak("unknown CPU", None, None, None, None, why, ("peak unknown: " + why,))


def cpu_info_from_dict(d: dict[str, Any]) -> CpuInfo:
    """The inverse of ``dataclasses.asdict`` (flags stored as a list)."""
    return CpuInfo(
        vendor=d["vendor"],
        family=d["family"],
        model=d["model"],
        model_name=d["model_name"],
        flags=frozenset(d["flags"]),
        clock_hz=d["clock_hz"],
        clock_source=d["clock_source"],
        clock_is_estimate=d["clock_is_estimate"],
    )


def peak_rows(rep: PeakReport) -> list[tuple[str, float | None, str]]:
    """(what, FLOP/s or None, how it was found) rows for a table: physical, then measured."""
    phys = rep.physical
    per_cycle = phys.flops_per_cycle
    pipes = (
        f"{phys.fma_pipes} FMA x {phys.fp32_lanes} lanes x 2 = {per_cycle} FLOP/cycle"
        if per_cycle is not None
        else phys.source
    )
    clock = f"{phys.clock_hz / 1e9:.2f} GHz" if phys.clock_hz else "clock unknown"
    guess = f" (estimate: {'; '.join(phys.estimates)})" if phys.is_estimate else ""
    rows: list[tuple[str, float | None, str]] = [
        (
            f"physical peak, {phys.microarch or phys.cpu}",
            rep.physical_flops_per_s,
            f"{pipes} x {clock} x {rep.threads} core(s); {phys.source}{guess}",
        ),
    ]
    if rep.measured_clock_hz is not None:
        rows.append(
            (
                "physical peak at the measured clock",
                rep.physical_at_measured_clock,
                f"{per_cycle} FLOP/cycle x {rep.measured_clock_hz / 1e9:.2f} GHz (add chain)",
            )
        )
    rows += [(k.kernel, k.flops_per_s, "measured") for k in rep.kernels]
    best = rep.calibrated
    if best is not None:
        rows.append(("calibrated peak (the roofline's)", best.flops_per_s, best.kernel))
    rows += [("note", None, n) for n in rep.notes()]
    return rows
