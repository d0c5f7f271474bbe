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

TEST(Core, ExternalArraysAreReadInPlaceAndKeepTheirOwnerAlive) {
  using namespace drx;
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
  std::weak_ptr<std::vector<float>> watch = owner;
  const int64_t before = live_array_buffers();
  {
    Array a = Array::external(f32, {2, 3}, owner->data(), owner);
    owner.reset();
    EXPECT_FALSE(watch.expired());            // the array holds its owner
    EXPECT_EQ(live_array_buffers(), before);  // memory drx did not allocate is not counted
    auto f = jit([](Value x) { return x * 2.0; });
    EXPECT_EQ(f(a).to_vector<float>(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
    EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));  // never written
  }
  EXPECT_TRUE(watch.expired());
  {
    Array mine(f32, {3});
    EXPECT_EQ(live_array_buffers(), before + 1);
  }
  EXPECT_EQ(live_array_buffers(), before);
  float unaligned[3];
  void* off = reinterpret_cast<char*>(unaligned) + 1;
  try {
    Array::external(f32, {1}, off, nullptr);
    ADD_FAILURE() << "no error for memory not aligned for f32";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not aligned for its dtype"), std::string::npos);
  }
  EXPECT_THROW(Array::external(f32, {-1}, unaligned, nullptr), Error);
}
