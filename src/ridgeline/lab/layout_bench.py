"""Strided and misaligned reads on this CPU against the layout model (``analytic.layout``).

Two reads of one large fp32 buffer (larger than the last-level cache), each timed as the median
of several passes on one thread, beside the plain contiguous read in the same pass:

1. Strided: every ``s``-th element. The model (``strided_efficiency``) moves a whole cache line
   for each element once 4·s bytes pass the line, so time per useful byte grows as
   1 ÷ efficiency: s for s ≤ line/4, line/4 beyond.
2. Misaligned: rows of one cache line (16 floats) at a 4 KiB pitch, starting ``offset`` bytes
   past a line boundary. The model (``alignment``) touches ⌈(offset + 64) ÷ 64⌉ lines instead of
   one.

The cache line is read from the OS (sysfs ``coherency_line_size``, else ``sysconf``). Hardware
prefetchers fetch neighbouring lines on their own, so the measured ratios can sit below the
model's: the table says by how much.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ridgeline.analytic.layout import alignment, strided_efficiency
from ridgeline.errors import ConfigError
from ridgeline.lab.decode import torch_threads

FLOAT_BYTES = 4
ROW_PITCH_BYTES = 4096


@dataclass(frozen=True, slots=True)
class LayoutPoint:
    """One read: measured time per useful byte relative to the baseline read, and the model's."""

    kind: str  # "stride" or "offset"
    value: int  # elements (stride) or bytes (offset)
    useful_bytes: float
    median_s: float
    measured_ratio: float
    model_ratio: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class LayoutBench:
    """Strided and misaligned reads against the model on this machine."""

    line_bytes: int
    buffer_bytes: int
    passes: int
    points: tuple[LayoutPoint, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "ridgeline.lab-layout/1",
            "line_bytes": self.line_bytes,
            "buffer_bytes": self.buffer_bytes,
            "passes": self.passes,
            "points": [p.to_dict() for p in self.points],
        }


def cache_line_bytes() -> int:
    """The L1 data cache line the OS reports (sysfs, else sysconf)."""
    sysfs = Path("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size")
    try:
        line = int(sysfs.read_text())
    except (OSError, ValueError):
        try:
            line = os.sysconf("SC_LEVEL1_DCACHE_LINESIZE")
        except (ValueError, OSError):
            line = 0
    if line <= 0:
        raise ConfigError("field line_bytes: the OS does not report a cache line; give one")
    return int(line)


def _median_s(fn: Callable[[], object], passes: int) -> float:
    times = []
    for _ in range(passes):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _strided(
    buf: torch.Tensor, strides: tuple[int, ...], line: int, passes: int
) -> list[LayoutPoint]:
    n = buf.numel()
    base_s = _median_s(buf.sum, passes)
    out = []
    for s in strides:
        view = buf[::s]  # (n/s,) every s-th element
        t = _median_s(view.sum, passes)
        useful = view.numel() * FLOAT_BYTES
        measured = (t / useful) / (base_s / (n * FLOAT_BYTES))
        model = 1.0 / strided_efficiency(s, FLOAT_BYTES, line)
        out.append(LayoutPoint("stride", s, useful, t, measured, model))
    return out


def _rows(buf: torch.Tensor, offset_bytes: int, line: int) -> torch.Tensor:
    """(rows, line/4) view: one line's worth of floats every 4 KiB, ``offset_bytes`` in."""
    per = line // FLOAT_BYTES
    pitch = ROW_PITCH_BYTES // FLOAT_BYTES
    rows = (buf.numel() - per - offset_bytes // FLOAT_BYTES) // pitch
    return buf.as_strided((rows, per), (pitch, 1), offset_bytes // FLOAT_BYTES)


def _misaligned(
    buf: torch.Tensor, offsets: tuple[int, ...], line: int, passes: int
) -> list[LayoutPoint]:
    aligned = _rows(buf, 0, line)
    base_s = _median_s(aligned.sum, passes)
    out = []
    for o in offsets:
        rows = _rows(buf, o, line)
        t = _median_s(rows.sum, passes)
        a = alignment(o, line, line)
        out.append(
            LayoutPoint(
                "offset",
                o,
                rows.numel() * FLOAT_BYTES,
                t,
                t / base_s,
                a.granules_touched / a.granules_aligned,
            )
        )
    return out


def run_layout_bench(
    buffer_bytes: int = 256 * 2**20,
    strides: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64),
    offsets: tuple[int, ...] = (0, 4, 16, 32, 60),
    passes: int = 5,
    line_bytes: int | None = None,
) -> LayoutBench:
    """Time strided and misaligned reads of a ``buffer_bytes`` fp32 buffer (one thread)."""
    line = line_bytes or cache_line_bytes()
    if offsets and max(offsets) >= line:
        raise ConfigError(f"field offsets: must be below the {line}-B line, got {max(offsets)}")
    buf = torch.rand(buffer_bytes // FLOAT_BYTES)  # (n,) fp32, touched once so pages exist
    with torch_threads(1), torch.inference_mode():
        points = _strided(buf, strides, line, passes) + _misaligned(buf, offsets, line, passes)
    return LayoutBench(line, buffer_bytes, passes, tuple(points))
