#pragma once
// Sums of float rows in double, each row's elements added in increasing order: the bits of
// the sequential loop `double s = 0; for (j) s += x[j];` that the sum reduction and softmax
// define, computed for kSumRows rows at once.
#include <cstdint>

namespace drx::row_sums {

constexpr int kSumRows = 16;

// out[k] = the in-order double sum of x[k * stride + j] for j < n, k < kSumRows. On CPUs with
// AVX-512 the rows are read in 16 x 16 tiles, transposed in registers, and the 16 sums advance
// as two vectors of doubles; elsewhere the rows advance together as scalars. Same bits.
void sum_rows_f64(const float* x, int64_t stride, int64_t n, double* out);

}  // namespace drx::row_sums
