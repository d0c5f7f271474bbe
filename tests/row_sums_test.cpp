// Row sums in double (drx/ops/row_sums.h) and the kernels built on them (softmax's
// denominator, the f32 sum over a last axis), bitwise against the sequential loops that
// define them, written here.
#include "drx/ops/row_sums.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "drx/core/trace.h"
#include "drx/drx.h"
#include "drx/exec/executable.h"
#include "drx/ops/axis_loops.h"
#include "drx/ops/scalar_functions.h"

namespace {

using drx::row_sums::kSumRows;

// Floats whose magnitudes span 2^-40 .. 2^20, with both signs: a sum of them in double
// rounds differently in another order.
std::vector<float> wide_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> expo(-40, 20), sign(0, 1);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(mant(gen), expo(gen)) * (sign(gen) ? -1.0f : 1.0f);
  return v;
}

double in_order(const float* row, int64_t n, int64_t step = 1) {
  double s = 0;
  for (int64_t j = 0; j < n; ++j) s += static_cast<double>(row[j * step]);
  return s;
}

TEST(RowSums, EachRowIsItsInOrderDoubleSumBitwise) {
  for (int64_t n : {0, 1, 15, 16, 17, 31, 64, 100}) {
    for (int64_t pad : {0, 3}) {
      const int64_t stride = n + pad;
      const std::vector<float> x =
          wide_floats(static_cast<size_t>(stride * kSumRows), static_cast<uint32_t>(n * 7 + pad));
      double got[kSumRows];
      drx::row_sums::sum_rows_f64(x.data(), stride, n, got);
      bool order_matters = false;
      for (int k = 0; k < kSumRows; ++k) {
        const float* row = x.data() + k * stride;
        const double want = in_order(row, n);
        EXPECT_EQ(std::memcmp(&got[k], &want, sizeof want), 0)
            << "n " << n << " stride " << stride << " row " << k << ": " << got[k] << " vs "
            << want;
        double backwards = 0;
        for (int64_t j = n - 1; j >= 0; --j) backwards += static_cast<double>(row[j]);
        order_matters = order_matters || backwards != want;
      }
      if (n >= 64) {
        EXPECT_TRUE(order_matters) << "the data cannot tell the order apart";
      }
    }
  }
}

TEST(RowSums, NaNAndInfinitiesPropagate) {
  std::vector<float> x(static_cast<size_t>(kSumRows * 20), 1.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[20 + 17] = std::numeric_limits<float>::infinity();
  x[40 + 5] = -std::numeric_limits<float>::infinity();
  double got[kSumRows];
  drx::row_sums::sum_rows_f64(x.data(), 20, 20, got);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(got[1], std::numeric_limits<double>::infinity());
  EXPECT_EQ(got[2], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(got[3], 20.0);
}

// softmax's definition (drx/ops/axis_loops.h), one row at a time.
void softmax_by_definition(const float* x, int64_t n, int64_t step, float* y) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const float v = x[j * step];
    if (v > m || v != v) m = v;
  }
  if (!(std::abs(m) < std::numeric_limits<float>::infinity())) m = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float d = x[j * step] - m;
    y[j * step] = d == -std::numeric_limits<float>::infinity() ? 0.0f : drx::scalar::Exp{}(d);
  }
  const auto total = static_cast<float>(in_order(y, n, step));
  for (int64_t j = 0; j < n; ++j) y[j * step] /= total;
}

// Rows of 16 and a remainder, contiguous and strided, with masked (-inf), NaN, +inf, -0 and
// all -inf rows: the vectorised max and sum give the definition's bits.
TEST(RowSums, SoftmaxRowsAreTheDefinitionBitwise) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {5, 16, 64, 70}) {
    const int64_t rows = 37;
    std::vector<float> x = wide_floats(static_cast<size_t>(rows * n), static_cast<uint32_t>(n));
    for (float& v : x) v = std::fmod(v, 30.0f);
    for (int64_t r = 0; r < rows; ++r)  // a causal mask
      for (int64_t j = r % n + 1; j < n; ++j) x[static_cast<size_t>(r * n + j)] = -inf;
    x[static_cast<size_t>(1 * n + 0)] = std::numeric_limits<float>::quiet_NaN();
    x[static_cast<size_t>(2 * n + n - 1)] = inf;
    x[static_cast<size_t>(3 * n + 0)] = -0.0f;
    for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(4 * n + j)] = -inf;
    for (int64_t j = 0; j < n; ++j) x[static_cast<size_t>(5 * n + j)] = j % 2 ? 0.0f : -0.0f;
    // Along the last axis ([rows, n]) and along the first ([n, rows] read down columns).
    for (bool last : {true, false}) {
      std::vector<float> in(x.size()), got(x.size()), want(x.size());
      if (last) {
        in = x;
      } else {
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < n; ++j)
            in[static_cast<size_t>(j * rows + r)] = x[static_cast<size_t>(r * n + j)];
      }
      const drx::axis_loops::AxisLayout l =
          last ? drx::axis_loops::AxisLayout{rows, n, 1} : drx::axis_loops::AxisLayout{1, n, rows};
      drx::axis_loops::softmax<float>(in.data(), l, got.data());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t base = last ? r * n : r, step = last ? 1 : rows;
        softmax_by_definition(in.data() + base, n, step, want.data() + base);
      }
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
          << "n " << n << (last ? " along the last axis" : " along the first axis");
    }
  }
}

// The compiled f32 sum over a last axis, on 16-row blocks and a remainder.
TEST(RowSums, CompiledSumOverLastAxisIsTheInOrderDoubleSum) {
  const int64_t rows = 37, n = 50;
  const std::vector<float> x = wide_floats(static_cast<size_t>(rows * n), 11);
  drx::Program p = drx::trace_function(
                       [](const std::vector<drx::Value>& in) -> std::vector<drx::Value> {
                         return {drx::sum(in[0], {1})};
                       },
                       {drx::Type(drx::DType::f32, {rows, n})})
                       .program;
  const drx::Array got = drx::compile(p).run({drx::Array::from_vector<float>(x, {rows, n})})[0];
  for (int64_t r = 0; r < rows; ++r) {
    const auto want = static_cast<float>(in_order(x.data() + r * n, n));
    const float g = got.data<float>()[r];
    EXPECT_EQ(std::memcmp(&g, &want, sizeof g), 0) << "row " << r << ": " << g << " vs " << want;
  }
}

}  // namespace
