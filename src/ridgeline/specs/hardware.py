"""Accelerators as data: memory levels (fastest first), who manages each, and compute peaks.

Every number comes from a catalog file with a source tag beside it (``sources``); nothing about
hardware is a literal in code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from ridgeline.errors import ConfigError
from ridgeline.specs.calibration import IDEAL, Calibration
from ridgeline.specs.dtypes import DType


class ManagedBy(StrEnum):
    """Who decides what lives in a memory level (course module 3).

    TPU VMEM is ``compiler``: XLA's compiled program places every buffer there and emits the
    HBM↔VMEM DMAs, and a Pallas kernel only declares its tiles (``BlockSpec``), from which the
    Pallas/Mosaic compiler emits the double-buffered DMA pipeline (JAX Scaling Book, "How to
    Think About TPUs"; Pallas TPU docs, "Pipelining"). ``kernel`` is for memories whose loads
    and stores the kernel's own code issues (CUDA shared memory via ``cp.async``/TMA, AMD LDS).
    """

    HARDWARE = "hardware"  # a cache: the hardware decides on every access
    KERNEL = "kernel"  # a scratchpad filled by kernel code (CUDA shared memory, AMD LDS)
    COMPILER = "compiler"  # static placement (registers, TPU VMEM, Spyre LX, Groq SRAM)
    RUNTIME = "runtime"  # an allocator at run time (vLLM's block manager in HBM)

    @property
    def local_memory(self) -> LocalMemory | None:
        """Which of the course's three kinds of local memory a level of this manager is (None
        for a runtime-managed level: device or host memory, not local to the compute)."""
        return _LOCAL_MEMORY.get(self)

    @property
    def role(self) -> str:
        """The manager as a layer of an orchestrator: ``kernels`` (the kernels' code), else the
        value (``runtime``, ``compiler``, ``hardware``)."""
        return "kernels" if self is ManagedBy.KERNEL else self.value


class LocalMemory(StrEnum):
    """The three kinds of local memory of course module 3, by who decides what lives there."""

    CACHE = "hardware-managed cache"
    SCRATCHPAD = "software-managed scratchpad"
    COMPILER_MANAGED = "compiler-managed local memory"


_LOCAL_MEMORY = {
    ManagedBy.HARDWARE: LocalMemory.CACHE,
    ManagedBy.KERNEL: LocalMemory.SCRATCHPAD,
    ManagedBy.COMPILER: LocalMemory.COMPILER_MANAGED,
}


class Scope(StrEnum):
    """What one instance of a memory level belongs to."""

    CORE = "core"
    CHIP = "chip"
    CARD = "card"
    SYSTEM = "system"


@dataclass(frozen=True, slots=True)
class MemoryLevel:
    """One level of an accelerator's memory hierarchy.

    Attributes:
        name: short name (``hbm``, ``l2``, ``smem``, ``lx``...).
        capacity_bytes: capacity of one instance (one per core for per-core levels).
        instances: how many instances the accelerator has (cores for per-core levels).
        bandwidth_bytes_per_s: aggregate bandwidth of all instances, ``None`` where unknown.
        managed_by: who decides what lives here.
        scope: what one instance belongs to.
        usable_bytes: capacity of one instance left to the program (ECC, reservations), if less.
        granule_bytes: the unit data moves in to or out of this level (Spyre's 128-B sticks),
            ``None`` where unknown.
        banks: independent banks of one instance (CUDA shared memory: 32), ``None`` if unknown.
        bank_width_bytes: bytes one bank serves per cycle, ``None`` where unknown.
        sources: source tag per field name, e.g. ``{"capacity_bytes": "[S1]"}``.
    """

    name: str
    capacity_bytes: float
    managed_by: ManagedBy
    scope: Scope
    instances: int = 1
    bandwidth_bytes_per_s: float | None = None
    usable_bytes: float | None = None
    note: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)
    granule_bytes: float | None = None
    banks: int | None = None
    bank_width_bytes: float | None = None

    @property
    def usable_capacity_bytes(self) -> float:
        """Capacity of one instance left to the program."""
        return self.usable_bytes if self.usable_bytes is not None else self.capacity_bytes

    @property
    def total_capacity_bytes(self) -> float:
        """Capacity of all instances together."""
        return self.capacity_bytes * self.instances

    @property
    def usable_total_bytes(self) -> float:
        """Capacity left to programs, all instances together."""
        per = self.usable_bytes if self.usable_bytes is not None else self.capacity_bytes
        return per * self.instances


class Topology(StrEnum):
    """How an accelerator's chip-to-chip links join chips together."""

    SWITCH = "switch"  # every chip reaches every other through a switch (NVLink/NVSwitch)
    FULLY_CONNECTED = "fully_connected"  # a direct link to each peer (MI300X Infinity Fabric)
    TORUS_2D = "torus_2d"  # TPU v5e/v6e ICI
    TORUS_3D = "torus_3d"  # TPU v5p/7x ICI
    DRAGONFLY = "dragonfly"  # Groq: fully connected nodes, nodes linked to each other
    NETWORK = "network"  # Ethernet through switches (Cerebras system I/O)
    PCIE = "pcie"  # cards that talk over PCIe (IBM Spyre)


class Parallelism(StrEnum):
    """How a model too big for one chip is usually split on an accelerator."""

    TENSOR = "tensor"  # every layer split across the chips (Megatron-LM), within a fast domain
    PIPELINE = "pipeline"  # layers split into stages, one stage per chip or chip group


@dataclass(frozen=True, slots=True)
class Interconnect:
    """The chip-to-chip links of an accelerator: one more memory level whose bandwidth can bind.

    Attributes:
        kind: the link technology (``nvlink4``, ``ici``, ``groq-c2c``, ``100gbe``, ``pcie5``...).
        topology: how the links join chips.
        parallelism: the split that deployments of this accelerator prefer.
        links: links per chip.
        link_bandwidth_bytes_per_s: one link, one direction.
        egress_bandwidth_bytes_per_s: what one chip sends at once, one direction, to the peers of a
            ring collective or to the next pipeline stage (all links a ring can drive).
        latency_s: time of one hop (one step of a ring), whatever the message size.
        domain_chips: chips that one tensor-parallel group may span (an NVLink node, a TPU pod, a
            Groq node, one Cerebras wafer); pipeline stages may span domains.
        note: free text.
        sources: source tag per field name.
    """

    kind: str
    topology: Topology
    parallelism: Parallelism
    links: int
    link_bandwidth_bytes_per_s: float
    egress_bandwidth_bytes_per_s: float
    latency_s: float
    domain_chips: int
    note: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def bidirectional_bytes_per_s(self) -> float:
        """All links, both directions: the figure vendors usually quote (900 GB/s for NVLink 4)."""
        return 2.0 * self.links * self.link_bandwidth_bytes_per_s


@dataclass(frozen=True, slots=True)
class Accelerator:
    """An accelerator: memory levels fastest first, dense compute peaks by dtype, cores.

    ``device_level`` names the level where weights and the KV cache live (HBM on a GPU, on-chip
    SRAM on Groq and Cerebras, LPDDR5 on Spyre); decode streams from it. ``interconnect`` is
    ``None`` for a user file that does not describe its links (then only one-chip deployments).

    ``array_dim`` is the edge of the matrix unit a matmul tile should be a multiple of (Spyre's
    8x8 systolic arrays, a TPU MXU's 128x128); ``ring_bandwidth_bytes_per_s`` the bandwidth of
    one direction of an on-chip ring between cores (Spyre). Both ``None`` where not given.
    ``calibration`` holds the terms of the calibrated cost model (``specs.calibration``).
    """

    name: str
    kind: str
    vendor: str
    description: str
    levels: tuple[MemoryLevel, ...]
    device_level: str
    peak_flops_per_s: Mapping[DType, float]
    cores: int
    core_name: str = "core"
    sources: Mapping[str, str] = field(default_factory=dict)
    references: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    interconnect: Interconnect | None = None
    array_dim: int | None = None
    ring_bandwidth_bytes_per_s: float | None = None
    calibration: Calibration = IDEAL

    def level(self, name: str) -> MemoryLevel:
        """The memory level called ``name``."""
        for lvl in self.levels:
            if lvl.name == name:
                return lvl
        raise ConfigError(f"{self.name}: no memory level '{name}' (has {self.level_names})")

    @property
    def level_names(self) -> list[str]:
        return [lvl.name for lvl in self.levels]

    @property
    def device(self) -> MemoryLevel:
        """The level holding weights and KV cache."""
        return self.level(self.device_level)

    @property
    def device_bandwidth_bytes_per_s(self) -> float:
        bw = self.device.bandwidth_bytes_per_s
        assert bw is not None, "validated at load time"
        return bw

    @property
    def device_capacity_bytes(self) -> float:
        """Usable capacity of the device level, all instances."""
        return self.device.usable_total_bytes

    @property
    def device_installed_bytes(self) -> float:
        """Installed capacity of the device level, all instances (ECC and reservations included:
        Spyre's 128 GB of LPDDR5, 112 GB of them usable)."""
        return self.device.total_capacity_bytes

    @property
    def kv_path(self) -> tuple[MemoryLevel, ...]:
        """The KV cache's home (the device level) and the levels it crosses to reach compute:
        upward through hardware caches to the first level software manages (the scratchpad a
        kernel or the compiler stages tiles in). A device level that software places on chip
        (Groq, Cerebras SRAM) is read where it lives."""
        names = self.level_names
        home = names.index(self.device_level)
        path = [self.levels[home]]
        if self.device.managed_by is not ManagedBy.RUNTIME:
            return tuple(path)
        for lvl in reversed(self.levels[:home]):
            path.append(lvl)
            if lvl.managed_by is not ManagedBy.HARDWARE:
                break
        return tuple(path)

    @property
    def orchestrator(self) -> str:
        """Who orchestrates the KV cache: the managers along ``kv_path`` other than hardware
        caches, from where the KV lives to where it is computed on (``runtime + kernels`` on a
        GPU, ``runtime + compiler`` on a TPU and on Spyre, ``compiler`` on Groq and Cerebras)."""
        roles: list[str] = []
        for lvl in self.kv_path:
            role = lvl.managed_by.role
            if lvl.managed_by is not ManagedBy.HARDWARE and role not in roles:
                roles.append(role)
        return " + ".join(roles)

    def peak(self, dtype: DType) -> float:
        """Dense peak FLOP/s for a compute dtype, falling back to a wider format when missing.

        A chip without an fp8 or int4 path runs those formats at its 16-bit rate (dequantised
        on the fly), so the fallback goes toward bf16/fp16, then fp32.
        """
        for candidate in _PEAK_FALLBACK[dtype]:
            if candidate in self.peak_flops_per_s:
                return self.peak_flops_per_s[candidate]
        raise ConfigError(f"{self.name}: no peak_flops_per_s for {dtype.value} or a fallback")

    def ridge_point(self, dtype: DType = DType.BF16, level: str | None = None) -> float | None:
        """Ridge point (FLOP/byte) = peak FLOP/s ÷ bandwidth of the level the operands come from.

        Source: Williams, Waterman, Patterson, "Roofline", CACM 2009. ``None`` where the level's
        bandwidth is unknown.
        """
        lvl = self.device if level is None else self.level(level)
        if lvl.bandwidth_bytes_per_s is None:
            return None
        return self.peak(dtype) / lvl.bandwidth_bytes_per_s


_PEAK_FALLBACK: dict[DType, tuple[DType, ...]] = {
    DType.FP32: (DType.FP32,),
    DType.BF16: (DType.BF16, DType.FP16, DType.FP32),
    DType.FP16: (DType.FP16, DType.BF16, DType.FP32),
    DType.FP8: (DType.FP8, DType.INT8, DType.BF16, DType.FP16),
    DType.INT8: (DType.INT8, DType.FP8, DType.BF16, DType.FP16),
    DType.INT4: (DType.INT4, DType.INT8, DType.FP8, DType.BF16, DType.FP16),
    DType.FP4: (DType.FP4, DType.FP8, DType.INT8, DType.BF16, DType.FP16),
}
