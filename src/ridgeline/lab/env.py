"""The environment a measurement ran in: machine, versions, threads, allocator settings, load.

Every stored result carries one, because on a CPU the same decode step takes twice as long under a
different glibc malloc setting or with a busy neighbour (docs/lab.md).
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

# The environment variables that change how fast or how big a measurement is.
ALLOCATOR_VARS = (
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "MALLOC_ARENA_MAX",
    "LD_PRELOAD",
)
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True, slots=True)
class Environment:
    """Where and how a measurement ran.

    Attributes:
        allocator: the allocator settings in force, e.g. ``glibc default`` or
            ``MALLOC_MMAP_THRESHOLD_=65536``; ``mallopt`` calls made by the lab are appended.
        threads: intra-op threads torch used.
        load_avg_1m: the 1-minute load average when the measurement started (contention);
            None where the system does not report one.
    """

    host: str
    cpu_model: str
    logical_cpus: int
    memory_bytes: int
    device: str
    python: str
    torch: str
    transformers: str
    platform: str
    threads: int
    allocator: str
    thread_env: str
    load_avg_1m: float | None
    started_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Environment:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (or platform.processor())."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def memory_bytes() -> int:
    """Physical memory (MemTotal), 0 where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def allocator_settings(extra: str = "") -> str:
    """The allocator environment variables that are set, or ``glibc default``."""
    parts = [f"{k}={os.environ[k]}" for k in ALLOCATOR_VARS if k in os.environ]
    if extra:
        parts.append(extra)
    return " ".join(parts) if parts else "glibc default"


def load_average() -> float | None:
    """The 1-minute load average, or None where the system does not report one."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def capture(threads: int, device: str = "cpu", allocator_extra: str = "") -> Environment:
    """The environment now, for a measurement that runs with ``threads`` on ``device``."""
    return Environment(
        host=socket.gethostname(),
        cpu_model=cpu_model(),
        logical_cpus=os.cpu_count() or 0,
        memory_bytes=memory_bytes(),
        device=device,
        python=sys.version.split()[0],
        torch=_version("torch"),
        transformers=_version("transformers"),
        platform=platform.platform(),
        threads=threads,
        allocator=allocator_settings(allocator_extra),
        thread_env=" ".join(f"{k}={os.environ[k]}" for k in THREAD_VARS if k in os.environ),
        load_avg_1m=load_average(),
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
