"""Two C++ probes of one core: the FMA rate it sustains and the clock it runs at.

- **FMA loop**: ``ACC`` independent chains of ``acc = acc · b + c`` in the widest vector registers
  the build targets (``-march=native``: AVX-512, else AVX2 + FMA). Twelve chains cover the FMA
  latency × pipes of every table entry (Zen 1: 5 cycles × 1 full-width FMA per cycle; Skylake-SP:
  4 × 2; Zen 4: 4 × 2), so the loop is bound by the FMA pipes alone, not by a chain's latency
  (Agner Fog, instruction tables). 2 FLOP per lane per FMA.
- **Clock**: a chain of dependent integer adds, one cycle each on every x86-64 core since the
  P6 (Agner Fog), so adds per second = cycles per second: the clock the core ran the loop at,
  boost included, which /proc/cpuinfo under a hypervisor does not show.

Both are timed in thread CPU time (``CLOCK_THREAD_CPUTIME_ID``): a thread the OS deschedules on a
shared machine is not slower, it is waiting. ``threads`` > 1 runs one loop per OpenMP thread and
adds their rates (each over its own CPU time).

Built the way the engine's kernels are (``engine.cpp_ext.compile_inline``: torch's
``load_inline``, ``-O3 -march=native``); without a compiler the probe is ``None``.
"""

from __future__ import annotations

from typing import Any

from ridgeline.engine.cpp_ext import OPENMP, compile_inline
from ridgeline.lab.peak import CoreProbe

_SOURCE = r"""
#include <torch/extension.h>
#include <omp.h>
#include <time.h>
#include <vector>
#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

static double thread_cpu_s() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

#if defined(__AVX512F__)
typedef __m512 vec;
static inline vec vset(float x) { return _mm512_set1_ps(x); }
static inline vec vfma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
static inline float vfirst(vec a) { return _mm512_cvtss_f32(a); }
#define LANES 16
#elif defined(__FMA__)
typedef __m256 vec;
static inline vec vset(float x) { return _mm256_set1_ps(x); }
static inline vec vfma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
static inline float vfirst(vec a) { return _mm256_cvtss_f32(a); }
#define LANES 8
#else
#define LANES 0
#endif

#define ACC 12

// FLOPs per second of one thread's FMA loop (its own CPU time), 0 without FMA.
static double fma_rate(int64_t iters, float* sink) {
#if LANES > 0
  vec acc[ACC];
  for (int j = 0; j < ACC; ++j) acc[j] = vset(1.0f + j);
  const vec b = vset(0.999999f), c = vset(1e-7f);
  const double start = thread_cpu_s();
  // NOTE: no asm barrier on the chains: it spills them to the stack (half the rate on Zen 1);
  // the final sum keeps every FMA live.
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < ACC; ++j) acc[j] = vfma(acc[j], b, c);
  }
  const double seconds = thread_cpu_s() - start;
  float s = 0.0f;
  for (int j = 0; j < ACC; ++j) s += vfirst(acc[j]);
  *sink = s;
  return 2.0 * LANES * ACC * static_cast<double>(iters) / seconds;
#else
  (void)iters; *sink = 0.0f;
  return 0.0;
#endif
}

// Per-thread FMA rates (FLOP/s), one per OpenMP thread.
std::vector<double> fma_rates(int64_t iters, int64_t threads) {
  std::vector<double> rates(threads, 0.0);
  std::vector<float> sinks(threads, 0.0f);
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int64_t t = 0; t < threads; ++t) rates[t] = fma_rate(iters, &sinks[t]);
  return rates;
}

// Dependent integer adds per second of thread CPU time (= the clock), 0 off x86-64.
double add_chain_hz(int64_t iters) {
#if defined(__x86_64__)
  int64_t x = 0;
  const double start = thread_cpu_s();
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                 "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
  }
  return 8.0 * static_cast<double>(iters) / (thread_cpu_s() - start);
#else
  (void)iters;
  return 0.0;
#endif
}

int64_t fma_lanes() { return LANES; }
"""

_FUNCTIONS = ("fma_rates", "add_chain_hz", "fma_lanes")
FMA_ITERS = 20_000_000  # 12 × 20 M FMAs: ~0.1-0.3 s per timing on a 2-4 GHz core
CLOCK_ITERS = 50_000_000  # 400 M adds: ~0.1-0.2 s


def _module() -> Any | None:
    return compile_inline(
        "ridgeline_lab_fma_probe_v2",
        _SOURCE,
        _FUNCTIONS,
        OPENMP,
        OPENMP,
        fallback="the lab's FMA probe is skipped",
    )


def probe_core(threads: int = 1, repeats: int = 5) -> CoreProbe | None:
    """Best FMA rate and clock over ``repeats``; None without a compiler or FMA instructions."""
    mod = _module()
    if mod is None or mod.fma_lanes() == 0:
        return None
    rates = [sum(mod.fma_rates(FMA_ITERS, threads)) for _ in range(repeats)]
    clocks = [mod.add_chain_hz(CLOCK_ITERS) for _ in range(repeats)]
    return CoreProbe(
        threads=threads,
        fma_flops_per_s=max(rates),
        clock_hz=max(clocks) or None,
        lanes=int(mod.fma_lanes()),
    )
