// The lab's core probes (lab/fma_probe.py): an FMA loop in the widest vector registers the build
// targets and a dependent-add chain that measures the clock. Built by engine/kernel_build.py like
// the engine's kernels (-O3 -march=native, one module per build key).
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

bool has_avx512() {
#if defined(__AVX512F__)
  return true;
#else
  return false;
#endif
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("fma_rates", &fma_rates, "per-thread FMA-loop FLOP/s");
  m.def("add_chain_hz", &add_chain_hz, "dependent adds per second of thread CPU time");
  m.def("fma_lanes", &fma_lanes, "fp32 lanes of the loop's vectors (0: no FMA)");
  m.def("has_avx512", &has_avx512, "whether this build targets AVX-512F");
}
