#include "drx/ops/row_sums.h"

#include <immintrin.h>

// GCC 12 reports the `_mm512_undefined_*` placeholders inside its own AVX-512 intrinsics as
// maybe-uninitialized where they are inlined (a false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace drx::row_sums {
namespace {

void sum_rows_scalar(const float* x, int64_t stride, int64_t n, int64_t j0, double* s) {
  for (int64_t j = j0; j < n; ++j)
    for (int k = 0; k < kSumRows; ++k) s[k] += static_cast<double>(x[k * stride + j]);
}

void sum_rows_portable(const float* x, int64_t stride, int64_t n, double* out) {
  for (int k = 0; k < kSumRows; ++k) out[k] = 0;
  sum_rows_scalar(x, stride, n, 0, out);
}

using SumRows = void (*)(const float*, int64_t, int64_t, double*);

#if defined(__x86_64__) && defined(__GNUC__)
// r[k] holds elements j..j+15 of row k; afterwards c[i] holds element j + i of rows 0..15.
// Three stages: pairs of rows interleave (unpack ps), pairs of pairs (unpack pd), and the
// 128-bit lanes of four groups of four rows meet (two rounds of shuffle_f32x4).
[[gnu::target("avx512f")]] inline void transpose_16x16(const __m512 r[16], __m512 c[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[4g + m] holds, in 128-bit lane L, element 4L + m of rows 4g .. 4g + 3.
  for (int g = 0; g < 4; ++g) {
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 2]);
    const __m512d c2 = _mm512_castps_pd(t[4 * g + 1]), d = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c2, d));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c2, d));
  }
  for (int m = 0; m < 4; ++m) {
    // Lanes 0-1 of groups 0 and 1, lanes 2-3 of groups 0 and 1; likewise groups 2 and 3.
    const __m512 v0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x44);
    const __m512 v1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xEE);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x44);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xEE);
    c[m] = _mm512_shuffle_f32x4(v0, w0, 0x88);       // lane 0 of each group
    c[4 + m] = _mm512_shuffle_f32x4(v0, w0, 0xDD);   // lane 1
    c[8 + m] = _mm512_shuffle_f32x4(v1, w1, 0x88);   // lane 2
    c[12 + m] = _mm512_shuffle_f32x4(v1, w1, 0xDD);  // lane 3
  }
}

[[gnu::target("avx512f")]] void sum_rows_avx512(const float* x, int64_t stride, int64_t n,
                                                double* out) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();  // rows 0-7 and 8-15
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m512 r[16], c[16];
    for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_ps(x + k * stride + j);
    transpose_16x16(r, c);
    for (int i = 0; i < 16; ++i) {
      lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(c[i])));
      hi = _mm512_add_pd(
          hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(c[i]), 1))));
    }
  }
  _mm512_storeu_pd(out, lo);
  _mm512_storeu_pd(out + 8, hi);
  sum_rows_scalar(x, stride, n, j, out);
}

SumRows pick() { return __builtin_cpu_supports("avx512f") ? sum_rows_avx512 : sum_rows_portable; }
#else
SumRows pick() { return sum_rows_portable; }
#endif

}  // namespace

void sum_rows_f64(const float* x, int64_t stride, int64_t n, double* out) {
  static const SumRows impl = pick();
  impl(x, stride, n, out);
}

}  // namespace drx::row_sums
