"""Huge-page tensors: zeroed, aligned, owned by the tensor; what the engine streams uses them."""

from __future__ import annotations

import gc
import mmap

import pytest

torch = pytest.importorskip("torch")

from ridgeline.engine.huge_pages import (  # noqa: E402
    HUGE_PAGE_BYTES,
    huge_page_copy,
    huge_page_empty,
)
from ridgeline.engine.kv_cache import CacheShape, KVCache  # noqa: E402
from ridgeline.engine.panel_gemm import load_panel_gemm  # noqa: E402

pytestmark = pytest.mark.torch
LINUX_THP = hasattr(mmap, "MADV_HUGEPAGE")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_buffer_is_zeroed_aligned_and_outlives_its_mapping_object(dtype: torch.dtype) -> None:
    t = huge_page_empty((3, 1 << 20), dtype)  # 6–12 MiB
    assert t.shape == (3, 1 << 20) and t.dtype == dtype and t.is_contiguous()
    assert t.abs().sum().item() == 0
    gc.collect()  # only the tensor holds the mapping now
    t[2, -1] = 7
    assert t[2, -1].item() == 7 and t.sum().item() == 7
    if LINUX_THP:
        assert t.data_ptr() % HUGE_PAGE_BYTES == 0


def test_small_buffer_is_an_ordinary_tensor() -> None:
    t = huge_page_empty((4, 5), torch.float32)
    assert t.shape == (4, 5) and t.abs().sum().item() == 0


def test_copy_keeps_values_shape_and_dtype() -> None:
    src = torch.randn(5, 1 << 18)
    out = huge_page_copy(src)
    assert torch.equal(out, src) and out.data_ptr() != src.data_ptr()


@pytest.mark.skipif(not LINUX_THP, reason="madvise(MADV_HUGEPAGE) is Linux-only")
def test_kv_blocks_and_packed_panels_sit_on_huge_page_boundaries() -> None:
    cache = KVCache(CacheShape(2, 256, 16, 4, 64, torch.float32), torch.device("cpu"))  # 4 MiB
    assert all(t.data_ptr() % HUGE_PAGE_BYTES == 0 for t in (*cache.k, *cache.v))
    assert all(t.abs().sum().item() == 0 for t in cache.k)
    panel = load_panel_gemm()
    if panel is not None:
        packed = panel.pack(torch.randn(2048, 512))  # 4 MiB of panels
        assert packed.data_ptr() % HUGE_PAGE_BYTES == 0
