#pragma once
// LayerNorm's normalisation of rows: for each row x of n elements,
//   m = sum(x) / n,  c = x - m,  v = sum(c * c) / n,  r = 1 / sqrt(v + eps),  y = c * r
// op for op as the composite nn::layer_norm was written (mean, square, rsqrt of drx's ops):
// sums in double in increasing order, rounded to T once; every other op in T. Shared by
// the primitive's reference semantics and the compiled kernel, so both give the
// composite's bits. On float rows the two sums go 16 rows at a time (drx/ops/row_sums.h).
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "drx/ops/row_sums.h"

namespace drx::layer_norm_rows {

// Rows [first, first + count) of x (rows of n, contiguous); y like x, r one per row. The
// sums of `count` rows come from `sums`, which fills s[k] with row k's in-order double sum.
template <class T, class Sums>
[[gnu::always_inline]] inline void block(const T* x, int64_t count, int64_t n, T eps, T* y, T* r,
                                         T* squares, const Sums& sums) {
  const T len = static_cast<T>(n);
  double s[row_sums::kSumRows];
  sums(x, s);
  for (int64_t k = 0; k < count; ++k) {
    const T m = static_cast<T>(static_cast<T>(s[k]) / len);
    const T* xr = x + k * n;
    T* yr = y + k * n;
    T* qr = squares + k * n;
    for (int64_t j = 0; j < n; ++j) {
      const T c = static_cast<T>(xr[j] - m);
      yr[j] = c;
      qr[j] = static_cast<T>(c * c);
    }
  }
  sums(squares, s);
  for (int64_t k = 0; k < count; ++k) {
    const T v = static_cast<T>(static_cast<T>(s[k]) / len);
    const T rr = static_cast<T>(T{1} / std::sqrt(static_cast<T>(v + eps)));
    r[k] = rr;
    T* yr = y + k * n;
    for (int64_t j = 0; j < n; ++j) yr[j] = static_cast<T>(yr[j] * rr);
  }
}

template <class T>
void normalize(const T* x, int64_t rows, int64_t n, double eps, T* y, T* r) {
  const T e = static_cast<T>(eps);
  constexpr int64_t kRows = row_sums::kSumRows;
  std::vector<T> squares(static_cast<size_t>(kRows * n));
  int64_t row = 0;
  if constexpr (std::is_same_v<T, float>)
    for (; row + kRows <= rows; row += kRows)
      block(x + row * n, kRows, n, e, y + row * n, r + row, squares.data(),
            [n](const float* rows16, double* s) { row_sums::sum_rows_f64(rows16, n, n, s); });
  for (; row < rows; ++row)
    block(x + row * n, 1, n, e, y + row * n, r + row, squares.data(), [n](const T* one, double* s) {
      double acc = 0;
      for (int64_t j = 0; j < n; ++j) acc += static_cast<double>(one[j]);
      s[0] = acc;
    });
}

}  // namespace drx::layer_norm_rows
