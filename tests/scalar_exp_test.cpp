// drx::scalar::exp_f32, the float exp of the exp primitive (interpreted and compiled) and of
// softmax: within 1 ulp of the correctly rounded exp (float of double's exp, which is within
// 1e-16 relative, so its rounding is exact for all but astronomically rare cases) over every
// 211th float pattern and the edges: subnormal results, overflow, -inf, inf, NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "drx/drx.h"
#include "drx/ops/scalar_functions.h"
#include "test_util.h"

namespace {

int64_t ordered(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return (b >> 31) ? -static_cast<int64_t>(b & 0x7fffffffu) - 1 : static_cast<int64_t>(b);
}

TEST(ScalarExp, WithinOneUlpOfTheCorrectlyRoundedExpOverTheFloats) {
  int64_t worst = 0, off = 0, n = 0;
  float worst_at = 0;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 211) {
    const auto u = static_cast<uint32_t>(bits);
    float x;
    std::memcpy(&x, &u, 4);
    const float got = drx::scalar::exp_f32(x);
    const auto want = static_cast<float>(std::exp(static_cast<double>(x)));
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(got)) << x;
      continue;
    }
    const int64_t d = std::llabs(ordered(got) - ordered(want));
    if (d > worst) worst = d, worst_at = x;
    off += d != 0;
    ++n;
  }
  EXPECT_LE(worst, 1) << "at x = " << worst_at;
  EXPECT_LT(static_cast<double>(off) / static_cast<double>(n), 0.01);  // measured 0.4%
}

TEST(ScalarExp, EdgesSaturateAndSubnormalsRoundOnce) {
  const float inf = std::numeric_limits<float>::infinity();
  using drx::scalar::exp_f32;
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(exp_f32(inf), inf);
  EXPECT_EQ(exp_f32(-inf), 0.0f);
  EXPECT_FALSE(std::signbit(exp_f32(-inf)));
  EXPECT_TRUE(std::isnan(exp_f32(std::nanf(""))));
  EXPECT_EQ(exp_f32(88.72283f), std::exp(88.72283f));  // the largest finite result
  EXPECT_EQ(exp_f32(88.7229f), inf);
  EXPECT_EQ(exp_f32(1000.0f), inf);
  EXPECT_EQ(exp_f32(-103.97f), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(exp_f32(-104.0f), 0.0f);
  EXPECT_EQ(exp_f32(-1000.0f), 0.0f);
  for (float x : {-87.3f, -90.0f, -95.5f, -100.0f, -103.0f})  // subnormal results
    EXPECT_EQ(exp_f32(x), static_cast<float>(std::exp(static_cast<double>(x)))) << x;
  EXPECT_EQ(exp_f32(1.0f), static_cast<float>(M_E));
}

// drx's float erf (the erf primitive; its StableHLO expansion op for op, with exp_f32): within
// 1 ulp of glibc's erff over every 97th float pattern, odd, and +-1, NaN at the ends.
TEST(ScalarErf, WithinOneUlpOfLibmOverTheFloats) {
  std::vector<float> xs;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 97) {
    const auto u = static_cast<uint32_t>(bits);
    float x;
    std::memcpy(&x, &u, 4);
    xs.push_back(x);
  }
  for (float x : {0.0f, -0.0f, 1.0f, -1.0f, 4.0f, 3.99f, 0.999f, 1e-30f, 1e30f}) xs.push_back(x);
  const auto n = static_cast<int64_t>(xs.size());
  drx::Array in(drx::DType::f32, {n});
  std::memcpy(in.data<float>(), xs.data(), xs.size() * sizeof(float));
  const drx::Array got = drx::jit([](drx::Value v) { return drx::erf(v); })(in);
  int64_t worst = 0;
  float worst_at = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = xs[static_cast<size_t>(i)], g = got.data<float>()[i], w = std::erf(x);
    if (std::isnan(x)) {
      ASSERT_TRUE(std::isnan(g)) << x;
      continue;
    }
    const int64_t d = std::llabs(ordered(g) - ordered(w));
    if (d > worst) worst = d, worst_at = x;
  }
  EXPECT_LE(worst, 1) << "at x = " << worst_at;
  const drx::Array ends = drx::jit([](drx::Value v) { return drx::erf(v); })(
      drx::testing::f32_array({1e30f, -1e30f, std::numeric_limits<float>::infinity()}, {3}));
  EXPECT_EQ(ends.data<float>()[0], 1.0f);
  EXPECT_EQ(ends.data<float>()[1], -1.0f);
  EXPECT_EQ(ends.data<float>()[2], 1.0f);
}

}  // namespace
