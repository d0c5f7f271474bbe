// Indexing primitives (take, scatter_add) and one_hot: values against plain-loop
// references, run-time index errors, gradients and every vmap batching pattern.
#include <cstring>
#include <functional>

#include "test_util.h"

namespace {

using drx::Array;
using drx::Shape;
using drx::Value;
using drx::testing::ArrayNear;
using drx::testing::expect_error;
using drx::testing::random_array;
using drx::testing::to_doubles;

Array i32s(const std::vector<int32_t>& v, Shape s) {
  return Array::from_vector<int32_t>(v, std::move(s));
}
Array f64s(const std::vector<double>& v, Shape s) {
  return drx::testing::f64_array(v, std::move(s));
}

// Row b of a leading batch axis.
Array row(const Array& a, int64_t b) {
  Shape s(a.shape().begin() + 1, a.shape().end());
  Array r(a.dtype(), s);
  std::memcpy(r.raw(), static_cast<const std::byte*>(a.raw()) + b * r.nbytes(), r.nbytes());
  return r;
}

// Reference gather along `axis` with numpy wrap of negative indices.
std::vector<double> take_ref(const Array& x, const std::vector<int64_t>& idx, int64_t axis) {
  const Shape& s = x.shape();
  int64_t outer = 1, inner = 1, n = s[static_cast<size_t>(axis)];
  for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  std::vector<double> xv = to_doubles(x), out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : idx)
      for (int64_t k = 0; k < inner; ++k)
        out.push_back(xv[static_cast<size_t>((o * n + (i < 0 ? i + n : i)) * inner + k)]);
  return out;
}

std::vector<int64_t> as_i64(const Array& a) {
  std::vector<int64_t> v;
  for (double d : to_doubles(a)) v.push_back(static_cast<int64_t>(d));
  return v;
}

// ---- take ---------------------------------------------------------------------

TEST(IndexingTake, MiddleAxisWith2DIndices) {
  Array x = random_array({2, 4, 3}, drx::f64, 1);
  Array idx = i32s({3, 0, -1, 1}, {2, 2});
  Array y = drx::jit([](Value a, Value i) { return drx::take(a, i, 1); })(x, idx);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2, 3}));
  std::vector<double> xv = x.to_vector<double>(), want;
  const int cols[4] = {3, 0, 3, 1};  // -1 wraps to 3
  for (int a = 0; a < 2; ++a)
    for (int j = 0; j < 4; ++j)
      for (int c = 0; c < 3; ++c)
        want.push_back(xv[static_cast<size_t>((a * 4 + cols[j]) * 3 + c)]);
  EXPECT_TRUE(ArrayNear(y, want, 0, 0));
}

TEST(IndexingTake, I64IndicesScalarIndexAndIntegerData) {
  Array x = Array::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array idx = Array::from_vector<int64_t>({2, 2, 0}, {3});
  Array y = drx::jit([](Value a, Value i) { return drx::take(a, i, -1); })(x, idx);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{3, 3, 1, 6, 6, 4}));
  Array s =
      drx::jit([](Value a, Value i) { return drx::take(a, i, 0); })(x, Array::scalar<int32_t>(1));
  EXPECT_EQ(s.shape(), (Shape{3}));
  EXPECT_EQ(s.to_vector<int32_t>(), (std::vector<int32_t>{4, 5, 6}));
  Array e = drx::jit([](Value a, Value i) { return drx::take(a, i, 1); })(
      x, Array::from_vector<int32_t>({}, {0}));
  EXPECT_EQ(e.shape(), (Shape{2, 0}));
}

TEST(IndexingTake, OutOfRangeIndexThrowsAtRunTime) {
  auto f = drx::jit([](Value a, Value i) { return drx::take(a, i, 1); });
  Array x = random_array({2, 4}, drx::f32, 2);
  expect_error([&] { f(x, i32s({0, 4}, {2})); }, {"take", "index 4", "size 4"});
  expect_error([&] { f(x, i32s({-5}, {1})); }, {"take", "index -5", "size 4"});
  EXPECT_TRUE(ArrayNear(f(x, i32s({-4}, {1})), take_ref(x, {0}, 1), 0, 0));
  auto g = drx::jit([](Value a, Value i) { return drx::take(a, i, 0); });
  expect_error([&] { g(Array(drx::f32, {0, 3}), i32s({0}, {1})); }, {"take", "size 0"});
}

TEST(IndexingTake, TypeErrors) {
  auto f = [](Value a, Value i) { return drx::take(a, i, 0); };
  expect_error(
      [&] {
        drx::trace(f, {drx::Type(drx::f32, {3}), drx::Type(drx::f32, {2})});
      },
      {"take", "f32[2]", "i32 or i64"});
  auto g = [](Value a, Value i) { return drx::take(a, i, 2); };
  expect_error(
      [&] {
        drx::trace(g, {drx::Type(drx::f32, {3, 2}), drx::Type(drx::i32, {2})});
      },
      {"take"});
  expect_error(
      [&] {
        drx::trace(f, {drx::Type(drx::f32, {}), drx::Type(drx::i32, {2})});
      },
      {"take", "scalar"});
}

TEST(IndexingTake, GradientAccumulatesDuplicateIndices) {
  Array x = random_array({2, 4, 3}, drx::f64, 3);
  Array idx = i32s({1, 3, 1, -3}, {2, 2});  // index 1 three times (incl. -3)
  Array w = random_array({2, 2, 2, 3}, drx::f64, 4);
  auto loss = [w](Value a, Value i) { return drx::sum(drx::take(a, i, 1) * drx::constant(w)); };
  Array g = drx::jit(drx::grad(loss))(x, idx);
  std::vector<double> wv = w.to_vector<double>(), want(24, 0.0);
  const int cols[4] = {1, 3, 1, 1};
  for (int a = 0; a < 2; ++a)
    for (int j = 0; j < 4; ++j)
      for (int c = 0; c < 3; ++c)
        want[static_cast<size_t>((a * 4 + cols[j]) * 3 + c)] +=
            wv[static_cast<size_t>((a * 4 + j) * 3 + c)];
  EXPECT_TRUE(ArrayNear(g, want, 1e-12, 1e-12));
}

TEST(IndexingTake, JvpAndSecondOrder) {
  // f(x) = sum(take(x, idx)^3): H v = 6 * x * v * count(idx == position).
  Array x = random_array({5}, drx::f64, 5);
  Array v = random_array({5}, drx::f64, 6);
  Array idx = i32s({4, 0, 4, 2}, {4});
  auto f = [](Value a, Value i) {
    Value t = drx::take(a, i, 0);
    return drx::sum(t * t * t);
  };
  auto gv = [f, v](Value a, Value i) { return drx::sum(drx::grad(f)(a, i) * drx::constant(v)); };
  Array h = drx::jit(drx::grad(gv))(x, idx);
  std::vector<double> xv = x.to_vector<double>(), vv = v.to_vector<double>(), want;
  const int count[5] = {1, 0, 1, 0, 2};
  for (size_t k = 0; k < 5; ++k) want.push_back(6 * xv[k] * vv[k] * count[k]);
  EXPECT_TRUE(ArrayNear(h, want, 1e-10, 1e-12));

  auto fj = [](Value a, Value t, Value i) {
    auto [y, ty] = drx::jvp([i](Value b) { return drx::take(b, i, 0); }, {a}, {t});
    (void)y;
    return ty;
  };
  Array ty = drx::jit(fj)(x, v, idx);
  EXPECT_TRUE(ArrayNear(ty, take_ref(v, {4, 0, 4, 2}, 0), 0, 0));
}

TEST(IndexingTake, VmapEveryBatchingPattern) {
  auto f = [](Value a, Value i) { return drx::take(a, i, 1); };
  auto single = drx::jit(f);
  Array xs = random_array({3, 2, 4}, drx::f64, 7);
  Array is = i32s({0, -1, 2, 3, 3, 1, -4, 2, 0, 1, 1, -2}, {3, 2, 2});
  Array x1 = row(xs, 1), i1 = row(is, 2);
  struct Case {
    drx::Axes axes;
    Array x, i;
    bool bx, bi;
  };
  std::vector<Case> cases = {{{0, std::nullopt}, xs, i1, true, false},
                             {{std::nullopt, 0}, x1, is, false, true},
                             {{0, 0}, xs, is, true, true}};
  for (const Case& c : cases) {
    Array got = drx::jit(drx::vmap(f, c.axes))(c.x, c.i);
    ASSERT_EQ(got.shape(), (Shape{3, 2, 2, 2})) << c.bx << c.bi;
    for (int64_t b = 0; b < 3; ++b) {
      Array want = single(c.bx ? row(c.x, b) : c.x, c.bi ? row(c.i, b) : c.i);
      EXPECT_TRUE(ArrayNear(row(got, b), to_doubles(want), 0, 0))
          << "row " << b << " batched x " << c.bx << " batched idx " << c.bi;
      EXPECT_TRUE(ArrayNear(
          want, take_ref(c.bx ? row(c.x, b) : c.x, as_i64(c.bi ? row(c.i, b) : c.i), 1), 0, 0));
    }
  }
}

TEST(IndexingTake, VmapWithBatchedIndicesStillRejectsOutOfRange) {
  auto f = [](Value a, Value i) { return drx::take(a, i, 0); };
  auto vf = drx::jit(drx::vmap(f, {0, 0}));
  Array xs = random_array({2, 3}, drx::f64, 8);
  // Row 0's index 3 would be a valid position of row 1 once the batch is folded.
  expect_error([&] { vf(xs, i32s({3, 0}, {2, 1})); }, {"take", "out of range"});
  expect_error([&] { vf(xs, i32s({0, -4}, {2, 1})); }, {"take", "out of range"});
  Array ok = vf(xs, i32s({-1, 0}, {2, 1}));
  std::vector<double> xv = xs.to_vector<double>();
  EXPECT_TRUE(ArrayNear(ok, {xv[2], xv[3]}, 0, 0));
}

// ---- scatter_add --------------------------------------------------------------

TEST(IndexingScatterAdd, DuplicateIndicesAccumulate) {
  auto f0 = drx::jit([](Value x, Value i, Value u) { return drx::scatter_add(x, i, u, 0); });
  Array y = f0(f64s({10, 20, 30, 40, 50}, {5}), i32s({1, 1, 3, -1}, {4}), f64s({1, 2, 3, 4}, {4}));
  EXPECT_TRUE(ArrayNear(y, {10, 23, 30, 43, 54}, 0, 0));

  auto f1 = drx::jit([](Value x, Value i, Value u) { return drx::scatter_add(x, i, u, 1); });
  Array z = f1(Array::from_vector<int32_t>({1, 1, 1, 1, 1, 1}, {2, 3}), i32s({2, 2, 0}, {3}),
               Array::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_EQ(z.to_vector<int32_t>(), (std::vector<int32_t>{4, 1, 4, 7, 1, 10}));

  // 2-D indices at a middle axis.
  Array x = random_array({2, 3, 2}, drx::f64, 9);
  Array idx = i32s({0, 2, 2, 0}, {2, 2});
  Array u = random_array({2, 2, 2, 2}, drx::f64, 10);
  Array r = f1(x, idx, u);
  std::vector<double> want = x.to_vector<double>(), uv = u.to_vector<double>();
  const int pos[4] = {0, 2, 2, 0};
  for (int a = 0; a < 2; ++a)
    for (int j = 0; j < 4; ++j)
      for (int c = 0; c < 2; ++c)
        want[static_cast<size_t>((a * 3 + pos[j]) * 2 + c)] +=
            uv[static_cast<size_t>((a * 4 + j) * 2 + c)];
  EXPECT_TRUE(ArrayNear(r, want, 1e-15, 1e-15));
}

TEST(IndexingScatterAdd, Errors) {
  auto f = [](Value x, Value i, Value u) { return drx::scatter_add(x, i, u, 0); };
  expect_error(
      [&] {
        drx::trace(f, {drx::Type(drx::f32, {4, 2}), drx::Type(drx::i32, {3}),
                       drx::Type(drx::f32, {3, 3})});
      },
      {"scatter_add", "f32[3,3]", "f32[3,2]"});
  expect_error(
      [&] {
        drx::trace(f,
                   {drx::Type(drx::f32, {4}), drx::Type(drx::i32, {3}), drx::Type(drx::f64, {3})});
      },
      {"scatter_add"});
  expect_error(
      [&] {
        drx::trace(f,
                   {drx::Type(drx::f32, {4}), drx::Type(drx::f32, {3}), drx::Type(drx::f32, {3})});
      },
      {"scatter_add", "i32 or i64"});
  auto jf = drx::jit(f);
  expect_error(
      [&] {
        jf(f64s({0, 0}, {2}), i32s({0, 2}, {2}), f64s({1, 1}, {2}));
      },
      {"scatter_add", "index 2", "size 2"});
}

TEST(IndexingScatterAdd, GradientsByHand) {
  Array x = random_array({4, 2}, drx::f64, 11);
  Array idx = i32s({3, 3, 0}, {3});
  Array u = random_array({3, 2}, drx::f64, 12);
  Array w = random_array({4, 2}, drx::f64, 13);
  auto loss = [w](Value a, Value i, Value v) {
    return drx::sum(drx::scatter_add(a, i, v, 0) * drx::constant(w));
  };
  auto g = drx::jit(drx::grad(loss, std::vector<int>{0, 2}))(x, idx, u);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(ArrayNear(g[0], to_doubles(w), 0, 0));  // linear in x with slope w
  EXPECT_TRUE(ArrayNear(g[1], take_ref(w, {3, 3, 0}, 0), 0, 0));
}

TEST(IndexingScatterAdd, VmapEveryBatchingPattern) {
  auto f = [](Value x, Value i, Value u) { return drx::scatter_add(x, i, u, 1); };
  auto single = drx::jit(f);
  Array xs = random_array({3, 2, 4}, drx::f64, 14);
  Array is = i32s({0, -1, 3, 3, 1, 1, 2, 0, -4}, {3, 3});
  Array us = random_array({3, 2, 3}, drx::f64, 15);
  for (int mask = 1; mask < 8; ++mask) {
    bool bx = mask & 1, bi = mask & 2, bu = mask & 4;
    Array x = bx ? xs : row(xs, 0), i = bi ? is : row(is, 1), u = bu ? us : row(us, 2);
    drx::Axes axes = {bx ? std::optional<int64_t>(0) : std::nullopt,
                      bi ? std::optional<int64_t>(0) : std::nullopt,
                      bu ? std::optional<int64_t>(0) : std::nullopt};
    Array got = drx::jit(drx::vmap(f, axes))(x, i, u);
    ASSERT_EQ(got.shape(), (Shape{3, 2, 4})) << "mask " << mask;
    for (int64_t b = 0; b < 3; ++b) {
      Array xb = bx ? row(x, b) : x, ib = bi ? row(i, b) : i, ub = bu ? row(u, b) : u;
      // Reference: plain loops.
      std::vector<double> want = xb.to_vector<double>(), uv = ub.to_vector<double>();
      std::vector<int64_t> iv = as_i64(ib);
      for (int a = 0; a < 2; ++a)
        for (size_t j = 0; j < iv.size(); ++j)
          want[static_cast<size_t>(a * 4 + (iv[j] < 0 ? iv[j] + 4 : iv[j]))] +=
              uv[static_cast<size_t>(a * 3) + j];
      EXPECT_TRUE(ArrayNear(row(got, b), want, 1e-15, 1e-15)) << "mask " << mask << " row " << b;
      EXPECT_TRUE(ArrayNear(single(xb, ib, ub), want, 1e-15, 1e-15));
    }
  }
}

TEST(IndexingScatterAdd, VmapWithBatchedIndicesStillRejectsOutOfRange) {
  auto f = [](Value x, Value i, Value u) { return drx::scatter_add(x, i, u, 0); };
  auto vf = drx::jit(drx::vmap(f, {0, 0, 0}));
  expect_error(
      [&] {
        vf(Array(drx::f64, {2, 3}), i32s({3, 0}, {2, 1}), Array(drx::f64, {2, 1}));
      },
      {"scatter_add", "out of range"});
}

// ---- one_hot ------------------------------------------------------------------

TEST(IndexingOneHot, ValuesAndOutOfRangeLabels) {
  Array y =
      drx::jit([](Value l) { return drx::one_hot(l, 3, drx::f32); })(i32s({0, 2, -1, 3, 1}, {5}));
  EXPECT_EQ(y.shape(), (Shape{5, 3}));
  EXPECT_EQ(y.dtype(), drx::f32);
  // Labels outside [0, 3) give all-zero rows (as JAX), no wrap-around for -1.
  EXPECT_TRUE(ArrayNear(y, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0}, 0, 0));

  Array z = drx::jit([](Value l) { return drx::one_hot(l, 2, drx::i32); })(
      Array::from_vector<int64_t>({1, 0, 5, 1}, {2, 2}));
  EXPECT_EQ(z.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(z.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 0, 0, 0, 0, 1}));

  Array s =
      drx::jit([](Value l) { return drx::one_hot(l, 4, drx::f64); })(Array::scalar<int32_t>(2));
  EXPECT_TRUE(ArrayNear(s, {0, 0, 1, 0}, 0, 0));
}

TEST(IndexingOneHot, Errors) {
  auto f = [](Value l) { return drx::one_hot(l, 3, drx::f32); };
  expect_error([&] { drx::trace(f, {drx::Type(drx::f32, {2})}); }, {"one_hot", "f32[2]"});
  auto g = [](Value l) { return drx::one_hot(l, -1, drx::f32); };
  expect_error([&] { drx::trace(g, {drx::Type(drx::i32, {2})}); }, {"one_hot"});
}

}  // namespace
