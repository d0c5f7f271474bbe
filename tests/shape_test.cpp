// Shape primitives: values against plain-loop references, errors, and the
// transformation rules (gradients against finite differences, vmap against a loop).
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "test_util.h"

namespace {

using drx::Array;
using drx::Shape;
using drx::Value;
using drx::testing::ArrayNear;
using drx::testing::expect_error;
using drx::testing::random_array;
using drx::testing::to_doubles;
using UnaryOp = std::function<Value(const Value&)>;

std::vector<double> iota_values(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return v;
}
Array iota_f64(const Shape& s) {
  return drx::testing::f64_array(iota_values(drx::num_elements(s)), s);
}

Array run1(const UnaryOp& op, const Array& x) {
  return drx::jit([op](Value v) { return op(v); })(x);
}

Array copy_of(const Array& a) {
  return Array::from_vector<double>(a.to_vector<double>(), a.shape());
}

// Central differences of a scalar function of an f64 array.
std::vector<double> numeric_grad(const std::function<double(const Array&)>& f, const Array& x) {
  std::vector<double> g;
  const double h = 1e-5;
  for (int64_t i = 0; i < x.size(); ++i) {
    Array p = copy_of(x), m = copy_of(x);
    p.data<double>()[i] += h;
    m.data<double>()[i] -= h;
    g.push_back((f(p) - f(m)) / (2 * h));
  }
  return g;
}

// Gradient of sum(op(x) * w) for a fixed random w, against central differences.
void check_grad(const UnaryOp& op, const Array& x, uint64_t seed) {
  Array y = run1(op, x);
  Array w = random_array(y.shape(), drx::f64, seed);
  auto loss = [op, w](Value v) { return drx::sum(op(v) * drx::constant(w)); };
  auto jl = drx::jit(loss);
  Array g = drx::jit(drx::grad(loss))(x);
  EXPECT_EQ(g.shape(), x.shape());
  EXPECT_TRUE(ArrayNear(g, numeric_grad([&](const Array& a) { return jl(a).item<double>(); }, x),
                        1e-6, 1e-7));
}

// Forward mode: the output tangent of op at x along v against central differences.
void check_jvp(const UnaryOp& op, const Array& x, uint64_t seed) {
  Array v = random_array(x.shape(), drx::f64, seed);
  auto f = [op](Value a, Value t) {
    auto [y, ty] = drx::jvp([op](Value b) { return op(b); }, {a}, {t});
    (void)y;
    return ty;
  };
  Array got = drx::jit(f)(x, v);
  const double h = 1e-5;
  std::vector<double> xp = x.to_vector<double>(), xm = xp, dv = v.to_vector<double>();
  for (size_t i = 0; i < xp.size(); ++i) xp[i] += h * dv[i], xm[i] -= h * dv[i];
  std::vector<double> yp = to_doubles(run1(op, drx::testing::f64_array(xp, x.shape())));
  std::vector<double> ym = to_doubles(run1(op, drx::testing::f64_array(xm, x.shape())));
  std::vector<double> want;
  for (size_t i = 0; i < yp.size(); ++i) want.push_back((yp[i] - ym[i]) / (2 * h));
  EXPECT_TRUE(ArrayNear(got, want, 1e-6, 1e-7));
}

// Row b of a leading batch axis.
Array row(const Array& a, int64_t b) {
  Shape s(a.shape().begin() + 1, a.shape().end());
  Array r(a.dtype(), s);
  std::memcpy(r.raw(), static_cast<const std::byte*>(a.raw()) + b * r.nbytes(), r.nbytes());
  return r;
}

// vmap(op) over a [B, ...] batch against op applied to each row.
void check_vmap(const UnaryOp& op, const Array& xs) {
  Array got = drx::jit(drx::vmap([op](Value v) { return op(v); }))(xs);
  ASSERT_EQ(got.shape()[0], xs.shape()[0]);
  for (int64_t b = 0; b < xs.shape()[0]; ++b) {
    Array want = run1(op, row(xs, b));
    EXPECT_EQ(row(got, b).shape(), want.shape());
    EXPECT_TRUE(ArrayNear(row(got, b), to_doubles(want), 0, 0)) << "batch row " << b;
  }
}

void check_rules(const UnaryOp& op, const Shape& in_shape, uint64_t seed) {
  Array x = random_array(in_shape, drx::f64, seed);
  check_grad(op, x, seed + 1);
  check_jvp(op, x, seed + 2);
  Shape bs = in_shape;
  bs.insert(bs.begin(), 3);
  check_vmap(op, random_array(bs, drx::f64, seed + 3));
}

int64_t count_eqns(const UnaryOp& op, const drx::Type& t) {
  return static_cast<int64_t>(drx::trace([op](Value v) { return op(v); }, {t}).eqns.size());
}

// ---- reshape ------------------------------------------------------------------

TEST(ShapeReshape, InfersMinusOne) {
  Array x = iota_f64({2, 3, 4});
  Array y = run1([](const Value& v) { return drx::reshape(v, {4, -1}); }, x);
  EXPECT_EQ(y.shape(), (Shape{4, 6}));
  EXPECT_TRUE(ArrayNear(y, iota_values(24), 0, 0));
  EXPECT_EQ(run1([](const Value& v) { return drx::reshape(v, {-1}); }, x).shape(), (Shape{24}));
  EXPECT_EQ(run1(
                [](const Value& v) {
                  return drx::reshape(v, {2, -1, 3});
                },
                x)
                .shape(),
            (Shape{2, 4, 3}));
  Array z = run1([](const Value& v) { return drx::reshape(v, {-1, 3}); }, iota_f64({0, 3}));
  EXPECT_EQ(z.shape(), (Shape{0, 3}));
  Array s = run1([](const Value& v) { return drx::reshape(v, {}); }, iota_f64({1, 1}));
  EXPECT_EQ(s.shape(), Shape{});
}

TEST(ShapeReshape, Errors) {
  drx::Type t(drx::f32, {2, 3, 4});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::reshape(v, {5, 5}); }, t);
      },
      {"reshape", "[5,5]", "24"});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::reshape(v, {-1, 5}); }, t);
      },
      {"reshape", "[-1,5]"});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::reshape(v, {-1, -1}); }, t);
      },
      {"reshape"});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::reshape(v, {-2, -12}); }, t);
      },
      {"reshape"});
}

TEST(ShapeReshape, NoOpsEmitNothing) {
  drx::Type t(drx::f32, {2, 3});
  EXPECT_EQ(count_eqns([](const Value& v) { return drx::reshape(v, {2, 3}); }, t), 0);
  EXPECT_EQ(count_eqns([](const Value& v) { return drx::reshape(v, {2, -1}); }, t), 0);
  EXPECT_EQ(count_eqns([](const Value& v) { return drx::transpose(v, {0, 1}); }, t), 0);
  EXPECT_EQ(count_eqns([](const Value& v) { return drx::broadcast_to(v, {2, 3}); }, t), 0);
  EXPECT_EQ(count_eqns([](const Value& v) { return drx::slice(v, {0, 0}, {2, 3}); }, t), 0);
  EXPECT_EQ(count_eqns([](const Value& v) { return drx::reshape(v, {3, 2}); }, t), 1);
}

TEST(ShapeReshape, Rules) {
  check_rules([](const Value& v) { return drx::reshape(v, {3, -1}); }, {2, 3, 2}, 10);
}

// ---- transpose ----------------------------------------------------------------

TEST(ShapeTranspose, AllPermsOf3D) {
  const Shape s{2, 3, 4};
  Array x = random_array(s, drx::f64, 1);
  std::vector<double> xv = x.to_vector<double>();
  std::vector<int64_t> perm{0, 1, 2};
  int count = 0;
  do {
    std::vector<int64_t> p = perm;
    Array y = run1([p](const Value& v) { return drx::transpose(v, p); }, x);
    Shape os{s[p[0]], s[p[1]], s[p[2]]};
    ASSERT_EQ(y.shape(), os);
    std::vector<double> want;
    int64_t o[3];
    for (o[0] = 0; o[0] < os[0]; ++o[0])
      for (o[1] = 0; o[1] < os[1]; ++o[1])
        for (o[2] = 0; o[2] < os[2]; ++o[2]) {
          int64_t in[3];
          for (int k = 0; k < 3; ++k) in[p[k]] = o[k];
          want.push_back(xv[static_cast<size_t>((in[0] * 3 + in[1]) * 4 + in[2])]);
        }
    EXPECT_TRUE(ArrayNear(y, want, 0, 0)) << "perm " << p[0] << p[1] << p[2];
    ++count;
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_EQ(count, 6);
}

TEST(ShapeTranspose, NegativeEntriesAndIntegers) {
  Array x = Array::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array y = drx::jit([](Value v) { return drx::transpose(v, {-1, 0}); })(x);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.to_vector<int32_t>(), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
}

TEST(ShapeTranspose, ChainedTransposesOfNonContiguousData) {
  // A transposed result fed into another transpose and a slice must still read
  // the logical (not the storage) order.
  Array x = iota_f64({2, 3, 4});
  Array y = run1(
      [](const Value& v) {
        return drx::slice(drx::transpose(drx::transpose(v, {2, 0, 1}), {0, 2, 1}), {1, 0, 0},
                          {3, 3, 2});
      },
      x);
  // transpose(transpose(x,{2,0,1}),{0,2,1})[k][j][i] = x[i][j][k]
  std::vector<double> want;
  for (int k = 1; k < 3; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) want.push_back((i * 3 + j) * 4 + k);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  EXPECT_TRUE(ArrayNear(y, want, 0, 0));
}

TEST(ShapeTranspose, BadPermThrows) {
  drx::Type t(drx::f32, {2, 3, 4});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::transpose(v, {0, 0, 1}); }, t);
      },
      {"transpose", "[0,0,1]"});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::transpose(v, {1, 0}); }, t);
      },
      {"transpose", "f32[2,3,4]"});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::transpose(v, {0, 1, 3}); }, t);
      },
      {"transpose"});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::transpose(v, {0, 1, -4}); }, t);
      },
      {"transpose"});
}

TEST(ShapeTranspose, Rules) {
  check_rules([](const Value& v) { return drx::transpose(v, {2, 0, 1}); }, {2, 3, 4}, 20);
}

// ---- broadcast ----------------------------------------------------------------

TEST(ShapeBroadcast, InDimExpandsSizeOneAxes) {
  Array x = drx::testing::f64_array({1, 2, 3}, {3, 1});
  Array y = run1([](const Value& v) { return drx::broadcast_in_dim(v, {2, 3, 4}, {1, 2}); }, x);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want.push_back(j + 1);
  EXPECT_TRUE(ArrayNear(y, want, 0, 0));
  // Operand axis 0 (size 2) maps to output axis 2; axes 0 and 1 are new.
  Array z = run1(
      [](const Value& v) {
        return drx::broadcast_in_dim(v, {2, 1, 2}, {2});
      },
      drx::testing::f64_array({5, 7}, {2}));
  EXPECT_TRUE(ArrayNear(z, {5, 7, 5, 7}, 0, 0));
  Array b = drx::jit([](Value v) {
    return drx::broadcast_in_dim(v, {2, 2}, {});
  })(Array::scalar<bool>(true));
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, true, true, true}));
}

TEST(ShapeBroadcast, ToFollowsNumpyRules) {
  Array y = run1(
      [](const Value& v) {
        return drx::broadcast_to(v, {2, 3});
      },
      drx::testing::f64_array({1, 2, 3}, {3}));
  EXPECT_TRUE(ArrayNear(y, {1, 2, 3, 1, 2, 3}, 0, 0));
  Array z = run1(
      [](const Value& v) {
        return drx::broadcast_to(v, {2, 3});
      },
      drx::testing::f64_array({1, 2}, {2, 1}));
  EXPECT_TRUE(ArrayNear(z, {1, 1, 1, 2, 2, 2}, 0, 0));
  Array s = run1(
      [](const Value& v) {
        return drx::broadcast_to(v, {2, 0, 2});
      },
      drx::testing::f64_array({4}, {}));
  EXPECT_EQ(s.shape(), (Shape{2, 0, 2}));
}

TEST(ShapeBroadcast, Errors) {
  drx::Type t(drx::f32, {3});
  expect_error([&] { count_eqns([](const Value& v) { return drx::broadcast_to(v, {4}); }, t); },
               {"broadcast_to", "[3]", "[4]"});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::broadcast_to(v, {3}); },
                   drx::Type(drx::f32, {2, 3}));
      },
      {"broadcast_to", "[2,3]", "[3]"});
  expect_error(
      [&] {
        count_eqns(
            [](const Value& v) {
              return drx::broadcast_in_dim(v, {3, 3}, {1, 0});
            },
            drx::Type(drx::f32, {3, 1}));
      },
      {"broadcast_in_dim", "increasing"});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::broadcast_in_dim(v, {2, 4}, {1}); }, t);
      },
      {"broadcast_in_dim", "f32[3]", "[2,4]"});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::broadcast_in_dim(v, {2, 3}, {}); }, t);
      },
      {"broadcast_in_dim"});
  expect_error(
      [&] { count_eqns([](const Value& v) { return drx::broadcast_in_dim(v, {3}, {1}); }, t); },
      {"broadcast_in_dim", "out of range"});
}

TEST(ShapeBroadcast, Rules) {
  // The gradient sums both the new axes (0) and the expanded size-1 axis (2).
  check_rules(
      [](const Value& v) {
        return drx::broadcast_in_dim(v, {2, 3, 4}, {1, 2});
      },
      {3, 1}, 30);
  check_rules([](const Value& v) { return drx::broadcast_to(v, {2, 3}); }, {3}, 35);
}

TEST(ShapeBroadcast, GradientSumsExpandedAxesByHand) {
  // d/dx sum(broadcast_in_dim(x)[i,j,k] * w[i,j,k]) = sum_{i,k} w[i,j,k].
  Array w = random_array({2, 3, 4}, drx::f64, 7);
  auto loss = [w](Value v) {
    return drx::sum(drx::broadcast_in_dim(v, {2, 3, 4}, {1, 2}) * drx::constant(w));
  };
  Array g = drx::jit(drx::grad(loss))(drx::testing::f64_array({1, 2, 3}, {3, 1}));
  std::vector<double> wv = w.to_vector<double>(), want(3, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want[j] += wv[static_cast<size_t>((i * 3 + j) * 4 + k)];
  EXPECT_EQ(g.shape(), (Shape{3, 1}));
  EXPECT_TRUE(ArrayNear(g, want, 1e-12, 1e-12));
}

// ---- expand_dims / squeeze ----------------------------------------------------

TEST(ShapeExpandSqueeze, NegativeAxesCountFromOutputEnd) {
  drx::Type t(drx::f32, {2, 3});
  auto shape_of = [&](const UnaryOp& op, const drx::Type& ty) {
    drx::Program p = drx::trace([op](Value v) { return op(v); }, {ty});
    return p.type_of(p.outputs[0]).shape;
  };
  // numpy.expand_dims(zeros((2, 3)), axis).shape
  EXPECT_EQ(shape_of([](const Value& v) { return drx::expand_dims(v, 0); }, t), (Shape{1, 2, 3}));
  EXPECT_EQ(shape_of([](const Value& v) { return drx::expand_dims(v, 2); }, t), (Shape{2, 3, 1}));
  EXPECT_EQ(shape_of([](const Value& v) { return drx::expand_dims(v, -1); }, t), (Shape{2, 3, 1}));
  EXPECT_EQ(shape_of([](const Value& v) { return drx::expand_dims(v, -2); }, t), (Shape{2, 1, 3}));
  EXPECT_EQ(shape_of([](const Value& v) { return drx::expand_dims(v, -3); }, t), (Shape{1, 2, 3}));
  drx::Type u(drx::f32, {2, 1, 3, 1});
  EXPECT_EQ(shape_of([](const Value& v) { return drx::squeeze(v, -1); }, u), (Shape{2, 1, 3}));
  EXPECT_EQ(shape_of([](const Value& v) { return drx::squeeze(v, 1); }, u), (Shape{2, 3, 1}));
  EXPECT_EQ(shape_of([](const Value& v) { return drx::squeeze(v, -3); }, u), (Shape{2, 3, 1}));
  Array y = run1([](const Value& v) { return drx::squeeze(drx::expand_dims(v, 1), -2); },
                 iota_f64({2, 3}));
  EXPECT_TRUE(ArrayNear(y, iota_values(6), 0, 0));
}

TEST(ShapeExpandSqueeze, Errors) {
  drx::Type t(drx::f32, {2, 3});
  expect_error([&] { count_eqns([](const Value& v) { return drx::expand_dims(v, 3); }, t); },
               {"expand_dims"});
  expect_error([&] { count_eqns([](const Value& v) { return drx::expand_dims(v, -4); }, t); },
               {"expand_dims"});
  expect_error([&] { count_eqns([](const Value& v) { return drx::squeeze(v, 0); }, t); },
               {"squeeze", "f32[2,3]", "size 2"});
  expect_error([&] { count_eqns([](const Value& v) { return drx::squeeze(v, 2); }, t); },
               {"squeeze"});
}

// ---- concatenate --------------------------------------------------------------

TEST(ShapeConcatenate, ThreeArraysWithZeroSizePieces) {
  Array a = drx::testing::f64_array({1, 2, 3, 4}, {2, 2});
  Array b = drx::testing::f64_array({}, {2, 0});
  Array c = drx::testing::f64_array({5, 6, 7, 8, 9, 10}, {2, 3});
  auto f = [](Value x, Value y, Value z) { return drx::concatenate({x, y, z}, -1); };
  Array r = drx::jit(f)(a, b, c);
  EXPECT_EQ(r.shape(), (Shape{2, 5}));
  EXPECT_TRUE(ArrayNear(r, {1, 2, 5, 6, 7, 3, 4, 8, 9, 10}, 0, 0));

  Array p = drx::testing::f64_array({1, 2, 3}, {1, 3});
  Array q = drx::testing::f64_array({}, {0, 3});
  Array s = drx::testing::f64_array({4, 5, 6, 7, 8, 9}, {2, 3});
  auto f0 = [](Value x, Value y, Value z) { return drx::concatenate({x, y, z}, 0); };
  Array r0 = drx::jit(f0)(p, q, s);
  EXPECT_EQ(r0.shape(), (Shape{3, 3}));
  EXPECT_TRUE(ArrayNear(r0, {1, 2, 3, 4, 5, 6, 7, 8, 9}, 0, 0));

  Array e = drx::jit(f0)(q, q, q);
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
}

TEST(ShapeConcatenate, Errors) {
  auto two = [](Value x, Value y) { return drx::concatenate({x, y}, 0); };
  expect_error(
      [&] {
        drx::trace(two, {drx::Type(drx::f32, {2}), drx::Type(drx::f64, {2})});
      },
      {"concatenate", "f64[2]", "f32[2]"});
  expect_error(
      [&] {
        drx::trace(two, {drx::Type(drx::f32, {2, 3}), drx::Type(drx::f32, {2, 4})});
      },
      {"concatenate", "f32[2,4]"});
  expect_error(
      [&] {
        drx::trace(two, {drx::Type(drx::f32, {}), drx::Type(drx::f32, {})});
      },
      {"concatenate"});
  auto bad_axis = [](Value x, Value y) { return drx::concatenate({x, y}, 2); };
  expect_error(
      [&] {
        drx::trace(bad_axis, {drx::Type(drx::f32, {2, 3}), drx::Type(drx::f32, {2, 3})});
      },
      {"concatenate"});
}

TEST(ShapeConcatenate, Rules) {
  Array k = random_array({2, 1}, drx::f64, 99);
  // x appears twice, so its gradient adds the two slices' cotangents.
  check_rules(
      [k](const Value& v) {
        return drx::concatenate({v, drx::constant(k), drx::slice(v, {0, 1}, {2, 3})}, 1);
      },
      {2, 3}, 40);
}

TEST(ShapeConcatenate, VmapWithUnbatchedOperand) {
  Array xs = random_array({3, 2}, drx::f64, 5);
  Array y = drx::testing::f64_array({7, 8, 9}, {3});
  auto f = [](Value a, Value b) { return drx::concatenate({a, b}, 0); };
  Array got = drx::jit(drx::vmap(f, {0, std::nullopt}))(xs, y);
  ASSERT_EQ(got.shape(), (Shape{3, 5}));
  std::vector<double> xv = xs.to_vector<double>(), want;
  for (int b = 0; b < 3; ++b) {
    want.push_back(xv[static_cast<size_t>(2 * b)]);
    want.push_back(xv[static_cast<size_t>(2 * b + 1)]);
    for (double v : {7.0, 8.0, 9.0}) want.push_back(v);
  }
  EXPECT_TRUE(ArrayNear(got, want, 0, 0));
}

// ---- slice --------------------------------------------------------------------

TEST(ShapeSlice, ValuesAndEmptySlices) {
  Array x = iota_f64({3, 4});
  Array y = run1([](const Value& v) { return drx::slice(v, {1, 1}, {3, 3}); }, x);
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_TRUE(ArrayNear(y, {5, 6, 9, 10}, 0, 0));
  Array e = run1([](const Value& v) { return drx::slice(v, {1, 2}, {1, 4}); }, x);
  EXPECT_EQ(e.shape(), (Shape{0, 2}));
  Array e2 = run1([](const Value& v) { return drx::slice(v, {0, 4}, {3, 4}); }, x);
  EXPECT_EQ(e2.shape(), (Shape{3, 0}));
  Array i = drx::jit([](Value v) { return drx::slice(v, {2}, {5}); })(
      Array::from_vector<int64_t>({0, 10, 20, 30, 40, 50}, {6}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{20, 30, 40}));
}

TEST(ShapeSlice, BadBoundsThrow) {
  drx::Type t(drx::f32, {3, 4});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::slice(v, {2, 0}, {1, 4}); }, t);
      },
      {"slice", "f32[3,4]"});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::slice(v, {0, 0}, {3, 5}); }, t);
      },
      {"slice", "4"});
  expect_error(
      [&] {
        count_eqns([](const Value& v) { return drx::slice(v, {-1, 0}, {3, 4}); }, t);
      },
      {"slice"});
  expect_error([&] { count_eqns([](const Value& v) { return drx::slice(v, {0}, {3}); }, t); },
               {"slice"});
}

TEST(ShapeSlice, Rules) {
  check_rules([](const Value& v) { return drx::slice(v, {1, 0, 2}, {3, 2, 3}); }, {3, 2, 4}, 50);
  check_rules([](const Value& v) { return drx::slice(v, {1, 1}, {1, 3}); }, {2, 3}, 55);
}

TEST(ShapeSlice, GradientPadsWithZerosByHand) {
  auto loss = [](Value v) { return drx::sum(drx::slice(v, {1, 1}, {2, 3}) * 2.0); };
  Array g = drx::jit(drx::grad(loss))(iota_f64({3, 4}));
  EXPECT_TRUE(ArrayNear(g, {0, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 0}, 0, 0));
}

TEST(ShapeRules, SecondOrderThroughShapeOps) {
  // f(x) = sum(reshape(transpose(x))^3 * w): the Hessian-vector product
  // d/dx <grad f(x), v> = 6 x * perm(w) * v elementwise, checked by hand.
  Array w = random_array({6}, drx::f64, 3);
  Array v = random_array({2, 3}, drx::f64, 4);
  Array x = random_array({2, 3}, drx::f64, 5);
  auto f = [w](Value a) {
    Value t = drx::reshape(drx::transpose(a, {1, 0}), {6});
    return drx::sum(t * t * t * drx::constant(w));
  };
  auto gv = [f, v](Value a) { return drx::sum(drx::grad(f)(a) * drx::constant(v)); };
  Array h = drx::jit(drx::grad(gv))(x);
  std::vector<double> xv = x.to_vector<double>(), vv = v.to_vector<double>(),
                      wv = w.to_vector<double>(), want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      size_t k = static_cast<size_t>(i * 3 + j), kt = static_cast<size_t>(j * 2 + i);
      want.push_back(6 * xv[k] * wv[kt] * vv[k]);
    }
  EXPECT_TRUE(ArrayNear(h, want, 1e-10, 1e-12));
}

}  // namespace
