#pragma once
// Loops along one axis of a row-major array, shared by the reference
// semantics (Primitive::eval of argmax, argmin, cumsum, softmax) and the compiled
// kernels (drx/exec/kernels_axis.cpp), so that both compute the same bits
// from one definition.
//
// An array of shape s seen along `axis` is [outer, n, inner] with
// outer = prod(s[:axis]), n = s[axis], inner = prod(s[axis+1:]).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "drx/array/dtype.h"
#include "drx/ops/row_sums.h"
#include "drx/ops/scalar_functions.h"

namespace drx::axis_loops {

struct AxisLayout {
  int64_t outer = 1, n = 1, inner = 1;
};

inline AxisLayout layout_along(const Shape& s, int64_t axis) {
  AxisLayout l;
  for (int64_t d = 0; d < axis; ++d) l.outer *= s[static_cast<size_t>(d)];
  l.n = s[static_cast<size_t>(axis)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) l.inner *= s[d];
  return l;
}

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return false;
}

// The ascending order every sort uses (as jnp): `<`, except that NaN comes
// after every number and ties with every NaN. -0.0 and 0.0 tie.
template <class T>
bool before_ascending(T a, T b) {
  if (is_nan(a)) return false;
  if (is_nan(b)) return true;
  return a < b;
}

// argmax (Max) or argmin along the axis: the first position of the largest
// (smallest) element; the first NaN if there is one (NaN propagates, as in
// jnp). n must be positive (the primitives reject empty axes).
template <bool Max, class T>
void arg_reduce(const T* x, const AxisLayout& l, int32_t* out) {
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < l.inner; ++i) {
      const T* row = x + o * l.n * l.inner + i;
      T best = row[0];
      int64_t at = 0;
      for (int64_t j = 1; j < l.n && !is_nan(best); ++j) {
        const T v = row[j * l.inner];
        // Strict comparisons keep the first of equal elements.
        if (is_nan(v) || (Max ? best < v : v < best)) {
          best = v;
          at = j;
        }
      }
      out[o * l.inner + i] = static_cast<int32_t>(at);
    }
}

// Running sums along the axis (from its end when `reverse`). They accumulate
// in double (floats) and round once per element, as the sum reduction does,
// so the last running sum equals sum() over the axis; integers wrap around
// (accumulated in uint64, where overflow is defined).
// out may be x itself: each element is read before its position is written.
template <class T>
void cumsum(const T* x, const AxisLayout& l, bool reverse, T* out) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
  std::vector<Acc> acc(static_cast<size_t>(l.inner));
  for (int64_t o = 0; o < l.outer; ++o) {
    std::fill(acc.begin(), acc.end(), Acc{0});
    for (int64_t step = 0; step < l.n; ++step) {
      const int64_t j = reverse ? l.n - 1 - step : step;
      const int64_t base = (o * l.n + j) * l.inner;
      for (int64_t i = 0; i < l.inner; ++i) {
        Acc& a = acc[static_cast<size_t>(i)];
        a += static_cast<Acc>(x[base + i]);
        out[base + i] = static_cast<T>(a);
      }
    }
  }
}

// The largest of a row's n elements, or NaN if one is NaN (not necessarily that one). A
// contiguous float row is read 16 elements at a time by GCC vector operations, so that the
// loop is one vmaxps per 16 elements on every target. The order of the comparisons cannot
// change how softmax uses the result: only a finite max is subtracted, and the orders differ
// only in the sign of a zero max, which changes x - m only for x = -0, between -0 and +0,
// whose exps are both 1.
template <class T>
[[gnu::always_inline]] inline T row_max(const T* row, int64_t n, int64_t step) {
  T m = -std::numeric_limits<T>::infinity();
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    using Floats = float __attribute__((vector_size(64)));
    using Ints = int32_t __attribute__((vector_size(64)));
    constexpr int64_t kLanes = sizeof(Floats) / sizeof(float);
    if (step == 1 && n >= kLanes) {
      Floats lane = m - Floats{};
      Ints nan = {};
      for (; j + kLanes <= n; j += kLanes) {
        Floats v;
        std::memcpy(&v, row + j, sizeof v);
        lane = v > lane ? v : lane;  // vmaxps: a NaN v leaves the lane, `nan` records it
        nan |= v != v;
      }
      for (int i = 0; i < kLanes; ++i) {
        if (nan[i]) return std::numeric_limits<T>::quiet_NaN();
        if (lane[i] > m) m = lane[i];
      }
    }
  }
  for (; j < n; ++j) {
    const T v = row[j * step];
    if (v > m || v != v) m = v;
  }
  return m;
}

// softmax along the axis, as the composite exp(x - m) / sum(exp(x - m)) computes it (drx's
// softmax before it was a primitive, and still its StableHLO lowering): m is the row's max
// (NaN-propagating), or 0 where that is not finite (a row of -inf gives 0 / 0 = NaN, as the
// composite does); each exp(x - m) in T (scalar::Exp, the exp primitive's function); their sum in
// double in increasing order, rounded to T once; each quotient in T. Bitwise the composite's. out
// may not be x.
//
// N rows advance together through the sum, so that their chains of double adds (each
// waiting on the last) overlap instead of running one after another.
template <int N, class T>
[[gnu::always_inline]] inline void softmax_rows(const T* x, const AxisLayout& l,
                                                const int64_t* base, T* out) {
  const int64_t n = l.n, step = l.inner;
  T m[N];
  double s[N];
  for (int k = 0; k < N; ++k) m[k] = row_max(x + base[k], n, step), s[k] = 0;
  for (int k = 0; k < N; ++k) {
    if (!(std::abs(m[k]) < std::numeric_limits<T>::infinity())) m[k] = T{0};
    const T* row = x + base[k];
    T* y = out + base[k];
    // exp(-inf) is +0 exactly; masked entries (causal attention's upper triangle) skip exp.
    auto shifted_exp = [&](T v) {
      const T d = static_cast<T>(v - m[k]);
      return d == -std::numeric_limits<T>::infinity() ? T{0} : scalar::Exp{}(d);
    };
    if (step == 1)
      for (int64_t j = 0; j < n; ++j) y[j] = shifted_exp(row[j]);
    else
      for (int64_t j = 0; j < n; ++j) y[j * step] = shifted_exp(row[j * step]);
  }
  bool summed = false;
  if constexpr (std::is_same_v<T, float> && N == row_sums::kSumRows)
    if (step == 1) {  // contiguous rows, n apart
      row_sums::sum_rows_f64(out + base[0], n, n, s);
      summed = true;
    }
  if (!summed)
    for (int64_t j = 0; j < n; ++j)
      for (int k = 0; k < N; ++k) s[k] += static_cast<double>(out[base[k] + j * step]);
  for (int k = 0; k < N; ++k) {
    const T total = static_cast<T>(s[k]);
    T* y = out + base[k];
    if (step == 1)
      for (int64_t j = 0; j < n; ++j) y[j] = static_cast<T>(y[j] / total);
    else
      for (int64_t j = 0; j < n; ++j) y[j * step] = static_cast<T>(y[j * step] / total);
  }
}

template <class T>
void softmax(const T* x, const AxisLayout& l, T* out);
// float's is compiled for AVX2 too (drx/ops/softmax_rows.cpp): the same bits, faster.
template <>
void softmax<float>(const float* x, const AxisLayout& l, float* out);

template <class T>
[[gnu::always_inline]] inline void softmax_all_rows(const T* x, const AxisLayout& l, T* out) {
  constexpr int kRows = row_sums::kSumRows;
  const int64_t rows = l.outer * l.inner;
  if (rows == 0 || l.n == 0) return;
  auto base_of = [&](int64_t r) { return (r / l.inner) * l.n * l.inner + r % l.inner; };
  int64_t r = 0;
  for (; r + kRows <= rows; r += kRows) {
    int64_t base[kRows];
    for (int k = 0; k < kRows; ++k) base[k] = base_of(r + k);
    softmax_rows<kRows>(x, l, base, out);
  }
  for (; r < rows; ++r) {
    const int64_t base = base_of(r);
    softmax_rows<1>(x, l, &base, out);
  }
}

template <class T>
void softmax(const T* x, const AxisLayout& l, T* out) {
  softmax_all_rows(x, l, out);
}

}  // namespace drx::axis_loops
