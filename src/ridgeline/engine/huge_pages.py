"""Tensors on transparent huge pages, for the buffers a decode step streams (weights, KV blocks).

A decode step reads every weight and every cached key once, so it runs at the DRAM read rate,
and on this KVM guest that rate depends on the pages under the buffer. With 4 KiB pages, 1 GiB
buffers read at 25–33 GB/s (``sum``, one thread) depending on where they land: in one process
the first buffers allocated read slowest (three runs; first to fourth buffer: 25–28, 27–29,
30–31, 30–33 GB/s). Each 4 KiB page costs a TLB miss, and a miss in a guest is a
two-dimensional page walk (the guest's tables, and the host's for each of their entries; AMD64
APM vol. 2, §15.25 "Nested Paging"), whose cost depends on how the host backs that region. On
2 MiB pages the same four buffers read 30–34 GB/s, all alike (docs/engine.md, "Huge pages").

So the engine allocates what it streams with ``madvise(MADV_HUGEPAGE)`` (Linux THP in
``madvise`` mode, this machine's default). Where that does not apply (not Linux, THP
``never``, a buffer under 2 MiB) it is an ordinary allocation and nothing else changes.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import mmap

import torch

HUGE_PAGE_BYTES = 1 << 21  # x86-64 transparent huge page: 2 MiB


def _round_up(n: int, to: int) -> int:
    return -(-n // to) * to


def huge_page_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A zero-filled CPU tensor on 2 MiB-aligned memory advised for huge pages.

    The memory is an anonymous mapping, so it is zero until written and the kernel backs each
    2 MiB of it with one huge page at first touch (when THP allows); the tensor owns the mapping
    (``torch.frombuffer`` keeps it alive). Buffers under 2 MiB, and platforms without
    ``MADV_HUGEPAGE``, get ``torch.zeros``.
    """
    element = torch.empty((), dtype=dtype).element_size()
    nbytes = math.prod(shape) * element
    if nbytes < HUGE_PAGE_BYTES or not hasattr(mmap, "MADV_HUGEPAGE"):
        return torch.zeros(shape, dtype=dtype)
    length = _round_up(nbytes, HUGE_PAGE_BYTES)
    # private: a shared anonymous mapping is shmem, which THP (`shmem_enabled`) leaves alone
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    buffer = mmap.mmap(-1, length + HUGE_PAGE_BYTES, flags=flags)  # slack for 2 MiB alignment
    anchor = ctypes.c_char.from_buffer(buffer)
    address = ctypes.addressof(anchor)
    del anchor  # releases the export; frombuffer takes its own
    offset = (-address) % HUGE_PAGE_BYTES
    with contextlib.suppress(OSError):  # THP compiled out: the mapping works on 4 KiB pages
        buffer.madvise(mmap.MADV_HUGEPAGE, offset, length)
    flat = torch.frombuffer(buffer, dtype=dtype, count=math.prod(shape), offset=offset)
    return flat.view(shape)


def huge_page_copy(src: torch.Tensor) -> torch.Tensor:
    """``src`` copied onto huge pages (``huge_page_empty``), same shape and dtype."""
    out = huge_page_empty(tuple(src.shape), src.dtype)
    out.copy_(src)
    return out
