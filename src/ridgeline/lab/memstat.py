"""Process memory probes on Linux: resident set, high-water mark, glibc allocator statistics.

``/proc/self/status`` gives VmRSS and VmHWM (kB); writing ``5`` to ``/proc/self/clear_refs``
resets VmHWM to the current RSS (proc(5)), so a peak can be measured over a window. glibc's
``mallinfo2()`` (glibc ≥ 2.33) gives bytes the allocator has handed out: ``uordblks`` (heap) plus
``hblkhd`` (mmap'd blocks). ``mallopt`` changes the mmap and trim thresholds at run time, the same
knobs as the ``MALLOC_*_`` environment variables (mallopt(3)). Every probe returns ``None`` where
the platform does not provide it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import resource
from dataclasses import dataclass
from pathlib import Path

# mallopt(3) parameter numbers from glibc's malloc.h
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def _status_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def rss_bytes() -> int | None:
    """Resident set size now (VmRSS)."""
    return _status_kb("VmRSS")


def hwm_bytes() -> int | None:
    """Resident high-water mark since start or the last ``reset_hwm`` (VmHWM)."""
    return _status_kb("VmHWM")


def reset_hwm() -> bool:
    """Reset VmHWM to the current RSS; False where /proc/self/clear_refs is not writable."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def malloc_in_use_bytes() -> int | None:
    """Bytes glibc malloc has handed out and not yet had back (heap + mmap'd blocks)."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def set_mallopt(param: int, value: int) -> bool:
    """Call glibc ``mallopt(param, value)``; False where unavailable or refused."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    return bool(libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)))


@dataclass(frozen=True, slots=True)
class Usage:
    """CPU time and page faults of this process so far (getrusage(2))."""

    user_s: float
    sys_s: float
    minor_faults: int
    major_faults: int

    def minus(self, before: Usage) -> Usage:
        return Usage(
            self.user_s - before.user_s,
            self.sys_s - before.sys_s,
            self.minor_faults - before.minor_faults,
            self.major_faults - before.major_faults,
        )


def usage() -> Usage:
    """User and system CPU seconds and page faults of this process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return Usage(r.ru_utime, r.ru_stime, r.ru_minflt, r.ru_majflt)
