#include <gtest/gtest.h>

#include "drx/drx.h"

TEST(Core, TraceIota) {
  auto f = [](drx::Value) { return drx::iota({2, 3}, 1, drx::i32); };
  drx::Program p = drx::trace(f, {drx::Type(drx::f32, {2})});
  EXPECT_EQ(p.eqns.size(), 1u);
  auto out = drx::run(p, {drx::zeros({2})});
  EXPECT_EQ(out[0].to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
}

TEST(Core, JitCountsTraces) {
  auto j = drx::jit([](drx::Value x) { return x; });
  drx::Array a = drx::Array::from_vector<float>({1, 2}, {2});
  EXPECT_EQ(j(a).to_vector<float>(), (std::vector<float>{1, 2}));
  j(a);
  EXPECT_EQ(j.trace_count(), 1);
  j(drx::zeros({3}));
  EXPECT_EQ(j.trace_count(), 2);
}
