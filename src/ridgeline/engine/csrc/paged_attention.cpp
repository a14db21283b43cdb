// Paged attention over KV blocks read in place (PagedAttention, Kwon et al. 2023) with the online
// softmax of FlashAttention (Dao et al. 2022; Milakov & Gimelshein 2018); see paged_kernel.py.
#include "kernels.h"

namespace ridgeline {

// One row = one query token: all its heads at once, so each block's [bs, kv_heads, d] keys and
// values are read front to back, once, in memory order.
template <typename T>
static void paged_rows(const T* q, const T* kc, const T* vc, const int* tables,
                       const int* lens, T* out, int64_t rows, int64_t heads, int64_t kv_heads,
                       int64_t d, int64_t bs, int64_t max_blocks, float scale) {
  const int64_t group = heads / kv_heads;
  const int64_t slot_stride = kv_heads * d;      // one token of one layer: [kv_heads, d]
  const float kFloor = -1e30f;                   // finite "minus infinity" (fast-math safe)
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qf(heads * d), acc(heads * d), m(heads), l(heads), s(heads * bs);
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t i = 0; i < heads * d; ++i) qf[i] = float(q[r * heads * d + i]) * scale;
      std::fill(acc.begin(), acc.end(), 0.f);
      std::fill(m.begin(), m.end(), kFloor);
      std::fill(l.begin(), l.end(), 0.f);
      const int64_t len = lens[r];
      for (int64_t j = 0; j * bs < len; ++j) {
        const int64_t block = tables[r * max_blocks + j];
        const int64_t n = std::min(bs, len - j * bs);
        const T* kb = kc + block * bs * slot_stride;
        const T* vb = vc + block * bs * slot_stride;
        // prefetch the next block of the table while this one computes (it lies anywhere)
        const int64_t next = (j + 1) * bs < len ? tables[r * max_blocks + j + 1] : block;
        const char* kn = reinterpret_cast<const char*>(kc + next * bs * slot_stride);
        const char* vn = reinterpret_cast<const char*>(vc + next * bs * slot_stride);
        const int64_t row_bytes = slot_stride * int64_t(sizeof(T));
        for (int64_t t = 0; t < n; ++t) {            // s[h, t] = q_h . k_t
          const T* kt = kb + t * slot_stride;
          for (int64_t b = 0; b < row_bytes; b += 64) {
            __builtin_prefetch(kn + t * row_bytes + b);
            __builtin_prefetch(vn + t * row_bytes + b);
          }
          for (int64_t h = 0; h < heads; ++h) {
            const float* qh = &qf[h * d];
            const T* kh = kt + (h / group) * d;
            float dot = 0.f;
#pragma omp simd reduction(+ : dot)
            for (int64_t i = 0; i < d; ++i) dot += qh[i] * float(kh[i]);
            s[h * bs + t] = dot;
          }
        }
        for (int64_t h = 0; h < heads; ++h) {        // online softmax update
          float* sh = &s[h * bs];
          float mx = m[h];
          for (int64_t t = 0; t < n; ++t) mx = std::max(mx, sh[t]);
          float sum = 0.f;
#pragma omp simd reduction(+ : sum)
          for (int64_t t = 0; t < n; ++t) {
            sh[t] = std::exp(sh[t] - mx);
            sum += sh[t];
          }
          const float alpha = std::exp(m[h] - mx);
          float* ah = &acc[h * d];
#pragma omp simd
          for (int64_t i = 0; i < d; ++i) ah[i] *= alpha;
          l[h] = l[h] * alpha + sum;
          m[h] = mx;
        }
        for (int64_t t = 0; t < n; ++t) {            // acc_h += p[h, t] v_t
          const T* vt = vb + t * slot_stride;
          for (int64_t h = 0; h < heads; ++h) {
            const float p = s[h * bs + t];
            const T* vh = vt + (h / group) * d;
            float* ah = &acc[h * d];
#pragma omp simd
            for (int64_t i = 0; i < d; ++i) ah[i] += p * float(vh[i]);
          }
        }
      }
      for (int64_t h = 0; h < heads; ++h) {
        const float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
        T* o = out + (r * heads + h) * d;
        for (int64_t i = 0; i < d; ++i) o[i] = T(acc[h * d + i] * inv);
      }
    }
  });
}

#if defined(__AVX512F__)

// e^x for x <= 0 (scores minus their running max): 2^n · p(r), r = x − n·ln2 in [−ln2/2, ln2/2],
// p the degree-6 Taylor polynomial (relative error < 2e-7 on that range, Cephes expf's method).
static inline __m512 exp_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));  // below: e^x underflows; 0 is close enough
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// Lane t of the result = the sum of v[t]'s 16 lanes: a transpose-and-add tree (45 shuffles and
// adds for 16 dot products, against ~8 per dot for one horizontal sum each).
static inline __m512 hsum16(const __m512* v) {
  __m512 a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i)    // per 128-bit lane: [v0+v2, w0+w2, v1+v3, w1+w3]
    a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)    // per 128-bit lane k: the lane's sums of v[4i .. 4i+3]
    b[i] = _mm512_add_ps(_mm512_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int i = 0; i < 2; ++i)    // lanes 0+1 and 2+3 of each group of four vectors
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// A row's start: its query scaled into qf, the accumulators and sums zeroed, the running max
// at the floor.
static inline void start_row(const float* q, int64_t n, float scale, std::vector<float>& qf,
                             std::vector<float>& acc, std::vector<float>& m,
                             std::vector<float>& l) {
  for (int64_t i = 0; i < n; ++i) qf[i] = q[i] * scale;
  std::fill(acc.begin(), acc.end(), 0.f);
  std::fill(m.begin(), m.end(), -1e30f);
  std::fill(l.begin(), l.end(), 0.f);
}

// acc[j] += Σ_t p[j, t] · v_t for HG query heads j of one KV head (GQA): each value row is
// loaded once for the HG heads, whose HG·D accumulators stay in registers (≤ 16 of 32 zmm).
// v: the chunk's first token row, its head at offset g_off; p: [HG, 16]; acc: [HG, 16·D].
template <int D, int HG>
static inline void add_values(const float* v, int64_t stride, int64_t g_off, const float* p,
                              float* acc, int64_t nc) {
  __m512 a[HG][D];
  for (int j = 0; j < HG; ++j)
    for (int c = 0; c < D; ++c) a[j][c] = _mm512_loadu_ps(acc + j * 16 * D + 16 * c);
  for (int64_t t = 0; t < nc; ++t) {
    const float* vt = v + t * stride + g_off;
    __m512 vv[D];
    for (int c = 0; c < D; ++c) vv[c] = _mm512_loadu_ps(vt + 16 * c);
    for (int j = 0; j < HG; ++j) {
      const __m512 pj = _mm512_set1_ps(p[j * 16 + t]);
      for (int c = 0; c < D; ++c) a[j][c] = _mm512_fmadd_ps(pj, vv[c], a[j][c]);
    }
  }
  for (int j = 0; j < HG; ++j)
    for (int c = 0; c < D; ++c) _mm512_storeu_ps(acc + j * 16 * D + 16 * c, a[j][c]);
}

// fp32 GQA and MQA (MHA: paged_rows_mha4), head_dim = 16·D. Per row, per 16-token chunk, per
// KV head: the chunk's keys are read once into registers and dotted with every query head of
// the group (GQA reuse), the scores of a head form one 16-lane vector (online softmax on
// vectors), then the accumulators of up to four heads of a KV head stay in registers while the
// chunk's values stream past them (add_values). With GQA 16:4 this is compute-bound at ~21
// GB/s even from L2; the skipped rescale and the shared value loads took it from 2.44 to 2.30
// and 2.20 ms per layer at B16 × 1024 (llama-350m shape, the same script before and after).
template <int D>
static void paged_rows_avx512(const float* q, const float* kc, const float* vc,
                              const int* tables, const int* lens, float* out, int64_t rows,
                              int64_t heads, int64_t kv_heads, int64_t bs, int64_t max_blocks,
                              float scale) {
  constexpr int64_t d = 16 * D;
  const int64_t group = heads / kv_heads;
  const int64_t slot_stride = kv_heads * d;
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qf(heads * d), acc(heads * d), m(heads), l(heads * 16);  // l: 16 lanes a head
    std::vector<float> sc(heads * 16), pr(heads * 16);
    for (int64_t r = begin; r < end; ++r) {
      start_row(q + r * heads * d, heads * d, scale, qf, acc, m, l);
      const int64_t len = lens[r];
      for (int64_t j = 0; j * bs < len; ++j) {
        const int64_t block = tables[r * max_blocks + j];
        const int64_t n = std::min(bs, len - j * bs);
        const float* kb = kc + block * bs * slot_stride;
        const float* vb = vc + block * bs * slot_stride;
        // the next block of this row, or after its last the next row's first (a row of 8
        // blocks would otherwise start cold one time in eight)
        const int64_t next = (j + 1) * bs < len     ? tables[r * max_blocks + j + 1]
                             : r + 1 < end && lens[r + 1] > 0 ? tables[(r + 1) * max_blocks]
                                                               : block;
        const char* kn = reinterpret_cast<const char*>(kc + next * bs * slot_stride);
        const char* vn = reinterpret_cast<const char*>(vc + next * bs * slot_stride);
        const int64_t row_bytes = slot_stride * int64_t(sizeof(float));
        for (int64_t t0 = 0; t0 < n; t0 += 16) {
          const int64_t nc = std::min<int64_t>(16, n - t0);
          const __mmask16 mask = __mmask16((1u << nc) - 1u);
          // prefetch the next block's chunk into L2, spread over the heads' score loops (a burst
          // of hundreds of prefetches stalls on the line-fill buffers: 3.6 → 2.9 ms per layer at
          // B16 × 1024, llama-350m shape), and with GQA this chunk's values into L1 (2.9 → 2.7
          // ms; each value row serves several heads; MHA, which never comes here, lost 4% to it).
          const int64_t chunk_bytes = nc * row_bytes;
          const int64_t per_head = ((chunk_bytes + 63) / 64 + heads - 1) / heads * 64;
          int64_t ahead = t0 * row_bytes;
          const int64_t ahead_end = ahead + chunk_bytes;
          const char* v_now = reinterpret_cast<const char*>(vb + t0 * slot_stride);
          for (int64_t g = 0; g < kv_heads; ++g) {    // scores: sc[h, t] = q_h . k_t
            const float* kg = kb + t0 * slot_stride + g * d;
            for (int64_t h = g * group; h < (g + 1) * group; ++h) {
              for (int64_t b = 0; b < per_head && ahead < ahead_end; b += 64, ahead += 64) {
                _mm_prefetch(kn + ahead, _MM_HINT_T1);
                _mm_prefetch(vn + ahead, _MM_HINT_T1);
                // and this chunk's values into L1, which the softmax·V pass reads next
                _mm_prefetch(v_now + (ahead - t0 * row_bytes), _MM_HINT_T0);
              }
              __m512 qv[D];
              for (int c = 0; c < D; ++c) qv[c] = _mm512_loadu_ps(&qf[h * d + 16 * c]);
              __m512 part[16];
#pragma GCC unroll 16
              for (int t = 0; t < 16; ++t) {
                part[t] = _mm512_setzero_ps();
                if (t < nc) {
                  const float* kt = kg + t * slot_stride;
                  for (int c = 0; c < D; ++c)
                    part[t] = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kt + 16 * c), part[t]);
                }
              }
              _mm512_storeu_ps(&sc[h * 16], hsum16(part));
            }
          }
          // online softmax on one vector per head. The running max rarely grows after the first
          // blocks, and then the rescale (a scalar exp and D multiplies) is skipped; the sum stays
          // a 16-lane vector until the row ends (no horizontal add per chunk).
          for (int64_t h = 0; h < heads; ++h) {
            const __m512 s = _mm512_mask_blend_ps(mask, _mm512_set1_ps(-1e30f), _mm512_loadu_ps(&sc[h * 16]));
            const float block_max = _mm512_reduce_max_ps(s);
            __m512 lv = _mm512_loadu_ps(&l[h * 16]);
            if (block_max > m[h]) {
              const __m512 av = _mm512_set1_ps(std::exp(m[h] - block_max));
              m[h] = block_max;
              lv = _mm512_mul_ps(av, lv);
              float* ah = &acc[h * d];
              for (int c = 0; c < D; ++c) _mm512_storeu_ps(ah + 16 * c, _mm512_mul_ps(av, _mm512_loadu_ps(ah + 16 * c)));
            }
            const __m512 p = _mm512_maskz_mov_ps(mask, exp_nonpositive(_mm512_sub_ps(s, _mm512_set1_ps(m[h]))));
            _mm512_storeu_ps(&pr[h * 16], p);
            _mm512_storeu_ps(&l[h * 16], _mm512_add_ps(lv, p));
          }
          const float* vc0 = vb + t0 * slot_stride;  // acc_h += Σ_t p[h, t] v_t
          if (D == 4 && group % 4 == 0) {
            for (int64_t h = 0; h < heads; h += 4) add_values<D, 4>(vc0, slot_stride, h / group * d, &pr[h * 16], &acc[h * d], nc);
          } else if (D <= 8 && group % 2 == 0) {
            for (int64_t h = 0; h < heads; h += 2) add_values<D, 2>(vc0, slot_stride, h / group * d, &pr[h * 16], &acc[h * d], nc);
          } else {
            for (int64_t h = 0; h < heads; ++h) add_values<D, 1>(vc0, slot_stride, h / group * d, &pr[h * 16], &acc[h * d], nc);
          }
        }
      }
      for (int64_t h = 0; h < heads; ++h) {
        const float sum = _mm512_reduce_add_ps(_mm512_loadu_ps(&l[h * 16]));
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        for (int64_t i = 0; i < d; ++i) out[(r * heads + h) * d + i] = acc[h * d + i] * inv;
      }
    }
  });
}

// fp32 MHA, head_dim = 16·D: four chunks of a row in lockstep, read token row by token row.
// One 48 KiB block read alone streams at ~21 GB/s on this machine's DRAM (the prefetchers start
// cold at every block), four read together at ~27, the rate of a 192 KiB run; reading them head
// by head, as paged_rows_avx512 does, gets no such gain (19.4 GB/s for two). So the loops go
// token, head, chunk: a head's query is loaded once for the four chunks and its accumulators
// once for their four value rows, and the 16 dot products of four heads × four chunks reduce
// in one hsum16, whose lane 4i + s is head i's score in chunk s: a head's four lanes are one
// 128-bit lane, where its running max is taken. distilgpt2's shape, B4 × 1024, each call from
// DRAM: 1.26–1.36 → 0.92–1.09 ms per layer (20 → 25–27 GB/s).
template <int D>
static void paged_rows_mha4(const float* q, const float* kc, const float* vc, const int* tables,
                            const int* lens, float* out, int64_t rows, int64_t heads, int64_t bs,
                            int64_t max_blocks, float scale) {
  constexpr int S = 4;                       // chunks in lockstep
  constexpr int64_t d = 16 * D;
  const int64_t slot_stride = heads * d;
  const int64_t groups = (heads + 3) / 4;    // four heads to a score vector
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    // q and the accumulators padded to whole groups; sc: [16 tokens][groups][lane 4i + s]
    std::vector<float> qf(groups * 4 * d, 0.f), acc(groups * 4 * d), m(groups * 16),
        l(groups * 16), sc(16 * groups * 16, 0.f);
    for (int64_t r = begin; r < end; ++r) {
      start_row(q + r * heads * d, heads * d, scale, qf, acc, m, l);
      const int64_t len = lens[r];
      int64_t j = 0, t0 = 0;                  // the next chunk: block j of the row, token t0
      while (j * bs + t0 < len) {
        const float* kp[S];
        const float* vp[S];
        int64_t nc[S], tn = 0;                // tokens of each chunk, the most of them
        for (int s = 0; s < S; ++s) {
          kp[s] = vp[s] = nullptr;
          nc[s] = 0;
          if (j * bs + t0 >= len) continue;
          const int64_t block = tables[r * max_blocks + j];
          const int64_t n = std::min(bs, len - j * bs);
          kp[s] = kc + (block * bs + t0) * slot_stride;
          vp[s] = vc + (block * bs + t0) * slot_stride;
          nc[s] = std::min<int64_t>(16, n - t0);
          tn = std::max(tn, nc[s]);
          t0 += 16;
          if (t0 >= n) ++j, t0 = 0;
        }
        for (int64_t t = 0; t < tn; ++t) {    // scores: sc[t][g][4i + s] = q_{4g+i} . k_t of s
          for (int64_t g = 0; g < groups; ++g) {
            __m512 part[16];
            for (int i = 0; i < 4; ++i) {
              const int64_t h = g * 4 + i;
              __m512 qv[D];
              for (int c = 0; c < D; ++c) qv[c] = _mm512_loadu_ps(&qf[h * d + 16 * c]);
              for (int s = 0; s < S; ++s) {
                part[4 * i + s] = _mm512_setzero_ps();
                if (t >= nc[s] || h >= heads) continue;
                const float* kh = kp[s] + t * slot_stride + h * d;
                for (int c = 0; c < D; ++c)
                  part[4 * i + s] = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kh + 16 * c), part[4 * i + s]);
              }
            }
            _mm512_storeu_ps(&sc[(t * groups + g) * 16], hsum16(part));
          }
        }
        __mmask16 present[16];                // lanes 4i + s of the chunks holding token t
        for (int64_t t = 0; t < tn; ++t) {
          unsigned bits = 0;
          for (int s = 0; s < S; ++s) bits |= unsigned(t < nc[s]) << s;
          present[t] = __mmask16(bits * 0x1111u);
        }
        for (int64_t g = 0; g < groups; ++g) {  // online softmax, four lanes to a head
          const __m512 m_old = _mm512_loadu_ps(&m[g * 16]);
          __m512 mx = m_old;
          for (int64_t t = 0; t < tn; ++t)
            mx = _mm512_mask_max_ps(mx, present[t], mx, _mm512_loadu_ps(&sc[(t * groups + g) * 16]));
          mx = _mm512_max_ps(mx, _mm512_permute_ps(mx, _MM_SHUFFLE(2, 3, 0, 1)));
          mx = _mm512_max_ps(mx, _mm512_permute_ps(mx, _MM_SHUFFLE(1, 0, 3, 2)));
          __m512 lv = _mm512_loadu_ps(&l[g * 16]);
          const __mmask16 grow = _mm512_cmp_ps_mask(mx, m_old, _CMP_GT_OQ);
          if (grow) {                           // rare after the first chunks
            const __m512 alpha = exp_nonpositive(_mm512_sub_ps(m_old, mx));
            lv = _mm512_mul_ps(alpha, lv);
            alignas(64) float al[16];
            _mm512_store_ps(al, alpha);
            for (int i = 0; i < 4; ++i) {
              if (!((grow >> (4 * i)) & 1)) continue;
              const __m512 a = _mm512_set1_ps(al[4 * i]);
              float* ah = &acc[(g * 4 + i) * d];
              for (int c = 0; c < D; ++c) _mm512_storeu_ps(ah + 16 * c, _mm512_mul_ps(a, _mm512_loadu_ps(ah + 16 * c)));
            }
            _mm512_storeu_ps(&m[g * 16], mx);
          }
          for (int64_t t = 0; t < tn; ++t) {
            float* p = &sc[(t * groups + g) * 16];
            const __m512 e = _mm512_maskz_mov_ps(present[t], exp_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(p), mx)));
            _mm512_storeu_ps(p, e);
            lv = _mm512_add_ps(lv, e);
          }
          _mm512_storeu_ps(&l[g * 16], lv);
        }
        for (int64_t t = 0; t < tn; ++t) {    // acc_h += Σ_s p[t][h, s] v_t of s
          for (int64_t h = 0; h < heads; ++h) {
            const float* p = &sc[(t * groups + h / 4) * 16 + 4 * (h % 4)];
            float* ah = &acc[h * d];
            __m512 a[D];
            for (int c = 0; c < D; ++c) a[c] = _mm512_loadu_ps(ah + 16 * c);
            for (int s = 0; s < S; ++s) {
              if (t >= nc[s]) continue;
              const __m512 ps = _mm512_set1_ps(p[s]);
              const float* vh = vp[s] + t * slot_stride + h * d;
              for (int c = 0; c < D; ++c) a[c] = _mm512_fmadd_ps(ps, _mm512_loadu_ps(vh + 16 * c), a[c]);
            }
            for (int c = 0; c < D; ++c) _mm512_storeu_ps(ah + 16 * c, a[c]);
          }
        }
      }
      for (int64_t h = 0; h < heads; ++h) {   // a head's sum: its four lanes
        const float* lh = &l[(h / 4) * 16 + 4 * (h % 4)];
        const float sum = lh[0] + lh[1] + lh[2] + lh[3];
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        for (int64_t i = 0; i < d; ++i) out[(r * heads + h) * d + i] = acc[h * d + i] * inv;
      }
    }
  });
}
#endif

// The vectorised fp32 path for head_dim 64 and 128 where the compiler targets AVX-512.
static bool fast_rows(const at::Tensor& q, const at::Tensor& kc, const at::Tensor& vc,
                      const int* tables, const int* lens, at::Tensor& out, int64_t max_blocks,
                      float scale) {
#if defined(__AVX512F__)
  if (q.scalar_type() != at::kFloat) return false;
  const int64_t rows = q.size(0), heads = q.size(1), d = q.size(2);
  const int64_t bs = kc.size(1), kv_heads = kc.size(2);
  auto run = [&](auto kernel) {
    kernel(q.data_ptr<float>(), kc.data_ptr<float>(), vc.data_ptr<float>(), tables, lens,
           out.data_ptr<float>(), rows, heads, kv_heads, bs, max_blocks, scale);
    return true;
  };
  if (kv_heads == heads) {  // MHA: four chunks in lockstep
    auto mha = [&](auto kernel) {
      kernel(q.data_ptr<float>(), kc.data_ptr<float>(), vc.data_ptr<float>(), tables, lens,
             out.data_ptr<float>(), rows, heads, bs, max_blocks, scale);
      return true;
    };
    if (d == 64) return mha(paged_rows_mha4<4>);
    if (d == 128) return mha(paged_rows_mha4<8>);
  }
  if (d == 64) return run(paged_rows_avx512<4>);
  if (d == 128) return run(paged_rows_avx512<8>);
#endif
  return false;
}

// Store this step's keys and values [T, kv_heads, d] (rows may be strided, as the views into
// the QKV projection are) at their slots of the caches [num_blocks, bs, kv_heads, d].
void write_kv(at::Tensor kc, at::Tensor vc, at::Tensor slots, at::Tensor k,
              at::Tensor v) {
  TORCH_CHECK(kc.is_contiguous() && vc.is_contiguous() && slots.scalar_type() == at::kLong);
  TORCH_CHECK(k.scalar_type() == kc.scalar_type() && v.scalar_type() == vc.scalar_type());
  const int64_t rows = slots.numel(), row = kc.size(2) * kc.size(3);  // kv_heads · d per slot
  const int64_t num_slots = kc.size(0) * kc.size(1);
  auto flat_rows = [&](at::Tensor t) {  // [T, kv_heads, d] with each row contiguous
    TORCH_CHECK(t.dim() == 3 && t.size(0) == rows && t.size(1) * t.size(2) == row);
    return t.stride(2) == 1 && t.stride(1) == t.size(2) ? t : t.contiguous();
  };
  auto kr = flat_rows(k), vr = flat_rows(v);
  auto sc = slots.contiguous();
  const int64_t* s = sc.data_ptr<int64_t>();
  const int64_t elem = kc.element_size(), bytes = row * elem;
  char* kd = static_cast<char*>(kc.data_ptr());
  char* vd = static_cast<char*>(vc.data_ptr());
  const char* ks = static_cast<const char*>(kr.data_ptr());
  const char* vs = static_cast<const char*>(vr.data_ptr());
  for (int64_t r = 0; r < rows; ++r) {
    TORCH_CHECK(s[r] >= 0 && s[r] < num_slots, "slot ", s[r], " outside the cache");
    std::memcpy(kd + s[r] * bytes, ks + r * kr.stride(0) * elem, bytes);
    std::memcpy(vd + s[r] * bytes, vs + r * vr.stride(0) * elem, bytes);
  }
}

at::Tensor paged_attention_rows(at::Tensor q, at::Tensor k_cache, at::Tensor v_cache,
                                   at::Tensor block_tables, at::Tensor context_lens,
                                   double scale) {
  TORCH_CHECK(q.is_contiguous() && k_cache.is_contiguous() && v_cache.is_contiguous());
  TORCH_CHECK(block_tables.scalar_type() == at::kInt && context_lens.scalar_type() == at::kInt);
  auto tables = block_tables.contiguous();
  auto lens = context_lens.contiguous();
  auto out = at::empty_like(q);
  const int64_t rows = q.size(0), heads = q.size(1), d = q.size(2);
  const int64_t bs = k_cache.size(1), kv_heads = k_cache.size(2);
  const int64_t max_blocks = tables.size(1);
  if (fast_rows(q, k_cache, v_cache, tables.data_ptr<int>(), lens.data_ptr<int>(), out,
                max_blocks, float(scale))) {
    return out;
  }
  if (q.scalar_type() == at::kFloat) {
    paged_rows<float>(q.data_ptr<float>(), k_cache.data_ptr<float>(), v_cache.data_ptr<float>(),
                      tables.data_ptr<int>(), lens.data_ptr<int>(), out.data_ptr<float>(), rows,
                      heads, kv_heads, d, bs, max_blocks, float(scale));
  } else {
    TORCH_CHECK(q.scalar_type() == at::kBFloat16, "fp32 or bf16 only");
    using B = at::BFloat16;
    paged_rows<B>(q.data_ptr<B>(), k_cache.data_ptr<B>(), v_cache.data_ptr<B>(),
                  tables.data_ptr<int>(), lens.data_ptr<int>(), out.data_ptr<B>(), rows, heads,
                  kv_heads, d, bs, max_blocks, float(scale));
  }
  return out;
}

}  // namespace ridgeline
