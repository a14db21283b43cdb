"""Why paged attention reads below the roofline's bandwidth, and what the MHA kernel recovers.

    python benchmarks/paged_reads.py              # needs torch and a C++ compiler (AVX-512)

Two measurements, each beside a 1 GiB ``sum`` on huge pages in the same pass (the roofline's
kind of read), five passes, medians, one thread:

1. Plain reads of runs of ``n`` KiB at shuffled places in a 1 GiB buffer on huge pages, one
   run after another (a paged KV block is such a run: distilgpt2's 16-token block is 48 KiB of
   keys, llama-350m's 16 KiB), and four runs read together, line by line.
2. The paged kernel over shuffled 16-token blocks, every call starting from DRAM (a 1 GiB
   ``sum`` evicts the caches first), at distilgpt2's shape (MHA 12 heads, the four-chunk path)
   and llama-350m's (GQA 16:4, the head-major path), batch 4 × 1024 tokens, six layers.

The ratio column is the read's rate ÷ ``sum``'s in the same pass.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

import torch
from torch.utils.cpp_extension import load_inline

from ridgeline.engine.huge_pages import huge_page_copy
from ridgeline.engine.paged_kernel import load_paged_kernel

PASSES = 5
RUN_KIB = (16, 48, 96, 192, 384, 1024, 4096)

_READS = r"""
#include <torch/extension.h>
#include <immintrin.h>
// Runs of `lines` 64-byte lines at x + tab[i] · lines · 64, `together` runs at a time,
// interleaved line by line (together = 1: one run after another).
double read_runs(torch::Tensor x, torch::Tensor tab, int64_t lines, int64_t together) {
  const float* base = x.data_ptr<float>();
  const int* t = tab.data_ptr<int>();
  const int64_t n = tab.numel() / together * together;
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += together)
    for (int64_t l = 0; l < lines; ++l)
      for (int64_t s = 0; s < together; ++s)
        acc = _mm512_add_ps(acc, _mm512_loadu_ps(base + (int64_t(t[i + s]) * lines + l) * 16));
  return _mm512_reduce_add_ps(acc);
}
"""


def _median_rate(passes: list[float]) -> float:
    return statistics.median(passes) / 1e9


def plain_reads(gib: torch.Tensor, evict: torch.Tensor) -> list[tuple[str, float, float]]:
    """(label, GB/s, ratio to sum) for runs of each size, alone and four together."""
    module = load_inline(  # needs a C++ compiler and AVX-512 (a probe of this benchmark only)
        "ridgeline_bench_read_runs",
        _READS,
        functions=["read_runs"],
        extra_cflags=["-O3", "-march=native"],
    )
    rates: dict[str, list[float]] = {}
    for p in range(PASSES):
        t0 = time.perf_counter()
        gib.sum()
        rates.setdefault("sum", []).append(gib.numel() * 4 / (time.perf_counter() - t0))
        for kib in RUN_KIB:
            lines, runs = kib * 16, gib.numel() * 4 // (kib * 1024)
            order = list(range(runs))
            random.Random(p).shuffle(order)
            tab = torch.tensor(order[: runs // 2], dtype=torch.int32)
            for together in (1, 4):
                evict.sum()
                t0 = time.perf_counter()
                module.read_runs(gib, tab, lines, together)
                seconds = time.perf_counter() - t0
                label = f"{kib} KiB runs" + (", four together" if together > 1 else "")
                rates.setdefault(label, []).append(
                    len(tab) // together * together * kib * 1024 / seconds
                )
    return _with_ratios(rates)


def _with_ratios(rates: dict[str, list[float]]) -> list[tuple[str, float, float]]:
    """Each read's median rate, and the median over passes of its rate ÷ sum's."""
    out = []
    for label, passes in rates.items():
        ratio = statistics.median(r / s for r, s in zip(passes, rates["sum"], strict=True))
        out.append((label, _median_rate(passes), ratio))
    return out


def kernel_reads(gib: torch.Tensor) -> list[tuple[str, float, float]]:
    """(shape, GB/s, ratio to sum) of the paged kernel from DRAM, B4 × 1024, 16-token blocks."""
    kernel = load_paged_kernel()
    assert kernel is not None, "needs a C++ compiler"
    shapes = {"distilgpt2 (MHA 12, d 64)": (12, 12), "llama-350m (GQA 16:4, d 64)": (16, 4)}
    batch, context, bs, d, layers = 4, 1024, 16, 64, 6
    per_seq = context // bs
    blocks = batch * per_seq
    gen = torch.Generator().manual_seed(0)
    order = list(range(blocks))
    random.Random(0).shuffle(order)
    tables = torch.tensor(order, dtype=torch.int32).view(batch, per_seq)  # paged for real
    lens = torch.full((batch,), context, dtype=torch.int32)
    runs: dict[str, tuple[Callable[[], None], int]] = {}
    for label, (heads, kv_heads) in shapes.items():

        def caches(kv_heads: int = kv_heads) -> list[torch.Tensor]:  # [blocks, bs, kv, d] each
            shape = (blocks, bs, kv_heads, d)
            return [huge_page_copy(torch.randn(shape, generator=gen)) for _ in range(layers)]

        k, v = caches(), caches()
        q = torch.randn(batch, heads, d, generator=gen)  # [B, heads, d]

        def attend(
            k: list[torch.Tensor] = k, v: list[torch.Tensor] = v, q: torch.Tensor = q
        ) -> None:
            for layer in range(layers):
                kernel(q, k[layer], v[layer], tables, lens)

        runs[label] = (attend, 2 * k[0].numel() * 4 * layers)
    rates: dict[str, list[float]] = {}
    for _ in range(PASSES):
        t0 = time.perf_counter()
        gib.sum()
        rates.setdefault("sum", []).append(gib.numel() * 4 / (time.perf_counter() - t0))
        for label, (run, nbytes) in runs.items():
            rates.setdefault(label, []).append(nbytes / _timed_from_dram(run, gib))
    return _with_ratios(rates)


def _timed_from_dram(run: Callable[[], None], gib: torch.Tensor) -> float:
    gib.sum()  # evicts every cache level
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def _print(title: str, rows: list[tuple[str, float, float]]) -> None:
    print(title)
    for label, rate, ratio in rows:
        print(f"  {label:34s} {rate:6.1f} GB/s  {ratio:5.2f}× sum")


def main() -> None:
    torch.set_num_threads(1)
    gib = huge_page_copy(torch.ones(1 << 28))  # [2^28] fp32 = 1 GiB
    evict = huge_page_copy(torch.ones(1 << 24))  # 64 MiB: more than L3
    _print("plain reads, shuffled runs on huge pages (medians of 5)", plain_reads(gib, evict))
    _print("paged kernel from DRAM, B4 × 1024, 16-token blocks", kernel_reads(gib))


if __name__ == "__main__":
    main()
