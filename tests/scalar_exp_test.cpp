// drx::scalar::exp_f32, the float exp of the exp primitive (interpreted and compiled) and of
// softmax: within 1 ulp of the correctly rounded exp (float of double's exp, which is within
// 1e-16 relative, so its rounding is exact for all but astronomically rare cases) over every
// 211th float pattern and the edges: subnormal results, overflow, -inf, inf, NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "drx/ops/scalar_functions.h"

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

}  // namespace
