// Reductions (sum/max/min/mean) and the softmax family, against float64 loop
// references written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "drx/core/primitive.h"
#include "drx/core/trace.h"
#include "drx/drx.h"
#include "test_util.h"

namespace {

using drx::Array;
using drx::Shape;
using drx::Value;
using drx::testing::ArrayNear;
using drx::testing::random_array;
using drx::testing::to_doubles;

using Fn = std::function<std::vector<Value>(const std::vector<Value>&)>;

// Traces fn on the arrays' types and runs it on the reference interpreter.
std::vector<Array> run_fn(const Fn& fn, const std::vector<Array>& args) {
  std::vector<drx::Type> types;
  for (const Array& a : args) types.emplace_back(a.dtype(), a.shape());
  return drx::run(drx::trace_function(fn, types).program, args);
}

enum class Red { sum, max, min };

// Reference reduction over normalised `axes` of x (row-major `shape`), in double.
std::vector<double> ref_reduce(Red kind, const std::vector<double>& x, const Shape& shape,
                               const std::vector<int64_t>& axes, Shape* out_shape) {
  const size_t nd = shape.size();
  std::vector<bool> reduced(nd, false);
  for (int64_t a : axes) reduced[static_cast<size_t>(a)] = true;
  Shape os;
  for (size_t d = 0; d < nd; ++d)
    if (!reduced[d]) os.push_back(shape[d]);
  int64_t n_out = 1;
  for (int64_t s : os) n_out *= s;
  double init = kind == Red::sum   ? 0.0
                : kind == Red::max ? -std::numeric_limits<double>::infinity()
                                   : std::numeric_limits<double>::infinity();
  std::vector<double> out(static_cast<size_t>(n_out), init);
  for (size_t i = 0; i < x.size(); ++i) {
    // Decompose i into a multi-index, then recompose the kept part.
    int64_t rem = static_cast<int64_t>(i), o = 0, mult = 1;
    for (size_t d = nd; d-- > 0;) {
      int64_t id = rem % shape[d];
      rem /= shape[d];
      if (!reduced[d]) {
        o += id * mult;
        mult *= shape[d];
      }
    }
    double& acc = out[static_cast<size_t>(o)];
    if (kind == Red::sum) acc += x[i];
    if (kind == Red::max) acc = std::max(acc, x[i]);
    if (kind == Red::min) acc = std::min(acc, x[i]);
  }
  if (out_shape) *out_shape = os;
  return out;
}

Value call_reduce(Red kind, const Value& x, const std::vector<int64_t>& axes, bool keepdims) {
  switch (kind) {
    case Red::sum:
      return drx::sum(x, axes, keepdims);
    case Red::max:
      return drx::max(x, axes, keepdims);
    case Red::min:
      return drx::min(x, axes, keepdims);
  }
  return x;
}

// Every subset of axes of every shape, with some axes spelled negatively, with
// and without keepdims, checked against the reference.
void check_all_subsets(Red kind, drx::DType dtype) {
  const std::vector<Shape> shapes = {{}, {5}, {2, 3}, {2, 3, 4}, {0, 3}, {2, 0, 4}, {1, 4, 1}};
  uint64_t seed = 1;
  for (const Shape& shape : shapes) {
    const int64_t nd = static_cast<int64_t>(shape.size());
    Array x = random_array(shape, dtype, seed++, -5.0, 5.0);
    std::vector<double> xd = to_doubles(x);
    for (int64_t mask = 1; mask < (int64_t{1} << nd); ++mask) {
      std::vector<int64_t> norm, spelled;
      for (int64_t d = 0; d < nd; ++d)
        if (mask & (int64_t{1} << d)) {
          norm.push_back(d);
          spelled.push_back(d % 2 ? d - nd : d);  // odd axes given as negatives
        }
      std::reverse(spelled.begin(), spelled.end());  // order must not matter
      bool empty_axis = false;
      for (int64_t a : norm) empty_axis = empty_axis || shape[static_cast<size_t>(a)] == 0;
      for (bool keepdims : {false, true}) {
        SCOPED_TRACE("shape " + drx::shape_str(shape) + " axes " + drx::shape_str(spelled) +
                     (keepdims ? " keepdims" : ""));
        Fn f = [&](const std::vector<Value>& in) -> std::vector<Value> {
          return {call_reduce(kind, in[0], spelled, keepdims)};
        };
        if (kind != Red::sum && empty_axis) {
          EXPECT_THROW(run_fn(f, {x}), drx::Error);
          continue;
        }
        Shape want_shape;
        std::vector<double> want = ref_reduce(kind, xd, shape, norm, &want_shape);
        if (keepdims) {
          want_shape = shape;
          for (int64_t a : norm) want_shape[static_cast<size_t>(a)] = 1;
        }
        Array got = run_fn(f, {x})[0];
        EXPECT_EQ(got.dtype(), dtype);
        EXPECT_EQ(got.shape(), want_shape);
        EXPECT_TRUE(ArrayNear(got, want, dtype == drx::f32 ? 1e-5 : 1e-12, 1e-5));
      }
    }
  }
}

TEST(ReductionsValues, SumEverySubsetOfAxes) {
  check_all_subsets(Red::sum, drx::f64);
  check_all_subsets(Red::sum, drx::f32);
  check_all_subsets(Red::sum, drx::i32);
  check_all_subsets(Red::sum, drx::i64);
}

TEST(ReductionsValues, MaxEverySubsetOfAxes) {
  check_all_subsets(Red::max, drx::f64);
  check_all_subsets(Red::max, drx::f32);
  check_all_subsets(Red::max, drx::i32);
}

TEST(ReductionsValues, MinEverySubsetOfAxes) {
  check_all_subsets(Red::min, drx::f64);
  check_all_subsets(Red::min, drx::i64);
}

TEST(ReductionsValues, NoAxesOverloadReducesEverything) {
  Array x = drx::testing::f64_array({1, -2, 3, 4, 5, -6}, {2, 3});
  auto out = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::sum(in[0]), drx::max(in[0]), drx::min(in[0]), drx::mean(in[0]),
                drx::sum(in[0], {}, true)};
      },
      {x});
  EXPECT_TRUE(ArrayNear(out[0], {5}));
  EXPECT_EQ(out[0].shape(), Shape{});
  EXPECT_TRUE(ArrayNear(out[1], {5}));
  EXPECT_TRUE(ArrayNear(out[2], {-6}));
  EXPECT_TRUE(ArrayNear(out[3], {5.0 / 6.0}));
  EXPECT_EQ(out[4].shape(), (Shape{1, 1}));
  EXPECT_TRUE(ArrayNear(out[4], {5}));
}

TEST(ReductionsValues, ScalarReducesToItself) {
  Array x = Array::scalar<double>(-2.5);
  auto out = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::sum(in[0]), drx::max(in[0]), drx::mean(in[0])};
      },
      {x});
  for (const Array& a : out) {
    EXPECT_EQ(a.shape(), Shape{});
    EXPECT_TRUE(ArrayNear(a, {-2.5}));
  }
}

TEST(ReductionsValues, SumOfEmptyIsZeroAndMeanIsNaN) {
  Array x(drx::f32, {0, 3});
  auto out = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::sum(in[0], {0}), drx::mean(in[0], {0}), drx::sum(in[0], {1})};
      },
      {x});
  EXPECT_TRUE(ArrayNear(out[0], {0, 0, 0}));
  EXPECT_TRUE(std::isnan(out[1].element_as_double(0)));
  EXPECT_EQ(out[2].shape(), Shape{0});
}

TEST(ReductionsValues, MeanOverAxesWithKeepdims) {
  Array x = drx::testing::f64_array({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
  auto out = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::mean(in[0], {-1, 0}, true), drx::mean(in[0], {1})};
      },
      {x});
  EXPECT_EQ(out[0].shape(), (Shape{1, 3, 1}));
  // Axis 1 index j: mean of {x[0,j,0], x[0,j,1], x[1,j,0], x[1,j,1]}.
  EXPECT_TRUE(
      ArrayNear(out[0], {(1 + 2 + 7 + 8) / 4.0, (3 + 4 + 9 + 10) / 4.0, (5 + 6 + 11 + 12) / 4.0}));
  EXPECT_EQ(out[1].shape(), (Shape{2, 2}));
  EXPECT_TRUE(ArrayNear(out[1], {3, 4, 9, 10}));
}

TEST(ReductionsValues, MaxPropagatesNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Array x = drx::testing::f64_array({1, nan, 3, 4, 5, 6}, {2, 3});
  auto out = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::max(in[0], {1}), drx::min(in[0], {1})};
      },
      {x});
  EXPECT_TRUE(ArrayNear(out[0], {nan, 6}));
  EXPECT_TRUE(ArrayNear(out[1], {nan, 4}));
}

TEST(ReductionsValues, MaxMinOfBoolAreAnyAll) {
  Array x = Array::from_vector<bool>({false, true, false, false, true, true}, {3, 2});
  auto out = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::max(in[0], {1}), drx::min(in[0], {1})};
      },
      {x});
  EXPECT_EQ(out[0].to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(out[1].to_vector<bool>(), (std::vector<bool>{false, false, true}));
}

TEST(ReductionsValues, IntegerSumIsExact) {
  Array x = Array::from_vector<int64_t>({int64_t{1} << 40, 3, -(int64_t{1} << 40), 4}, {4});
  auto out = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> { return {drx::sum(in[0])}; }, {x});
  EXPECT_EQ(out[0].item<int64_t>(), 7);
}

// ---- errors ----------------------------------------------------------------

// Runs fn on x and returns the message of the drx::Error it must throw.
template <class E = drx::Error>
std::string error_of(const Fn& fn, const std::vector<Array>& args) {
  try {
    run_fn(fn, args);
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

TEST(ReductionsErrors, AxisOutOfRangeNamesOpAndType) {
  Array x(drx::f32, {2, 3});
  std::string m = error_of<drx::TypeError>(
      [](const std::vector<Value>& in) -> std::vector<Value> { return {drx::sum(in[0], {2})}; },
      {x});
  EXPECT_NE(m.find("sum"), std::string::npos) << m;
  EXPECT_NE(m.find("f32[2,3]"), std::string::npos) << m;
  m = error_of<drx::TypeError>(
      [](const std::vector<Value>& in) -> std::vector<Value> { return {drx::max(in[0], {-3})}; },
      {x});
  EXPECT_NE(m.find("max"), std::string::npos) << m;
}

TEST(ReductionsErrors, DuplicateAxes) {
  Array x(drx::f32, {2, 3});
  std::string m = error_of<drx::TypeError>(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::min(in[0], {1, -1})};
      },
      {x});
  EXPECT_NE(m.find("min"), std::string::npos) << m;
  EXPECT_NE(m.find("twice"), std::string::npos) << m;
}

TEST(ReductionsErrors, PrimitiveRejectsUnsortedOrNegativeAxes) {
  const drx::Primitive& p = drx::primitive("sum");
  drx::Type t(drx::f32, {2, 3, 4});
  EXPECT_THROW(p.infer({t}, drx::Params{{"axes", std::vector<int64_t>{2, 0}}}), drx::TypeError);
  EXPECT_THROW(p.infer({t}, drx::Params{{"axes", std::vector<int64_t>{1, 1}}}), drx::TypeError);
  EXPECT_THROW(p.infer({t}, drx::Params{{"axes", std::vector<int64_t>{-1}}}), drx::TypeError);
  EXPECT_THROW(p.infer({t}, drx::Params{}), drx::Error);
  EXPECT_THROW(p.infer({t, t}, drx::Params{{"axes", std::vector<int64_t>{}}}), drx::TypeError);
  auto ok = p.infer({t}, drx::Params{{"axes", std::vector<int64_t>{0, 2}}});
  EXPECT_EQ(ok[0].shape, Shape{3});
}

TEST(ReductionsErrors, MaxOverZeroSizeAxisNamesOpAndShape) {
  Array x(drx::f32, {2, 0});
  std::string m = error_of(
      [](const std::vector<Value>& in) -> std::vector<Value> { return {drx::max(in[0], {1})}; },
      {x});
  EXPECT_NE(m.find("max"), std::string::npos) << m;
  EXPECT_NE(m.find("f32[2,0]"), std::string::npos) << m;
  // Reducing a non-empty axis of an empty array is fine: the result is empty.
  auto out = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> { return {drx::max(in[0], {0})}; },
      {x});
  EXPECT_EQ(out[0].shape(), Shape{0});
}

TEST(ReductionsErrors, SumOfBoolSuggestsAstype) {
  Array x(drx::bool_, {3});
  std::string m = error_of<drx::TypeError>(
      [](const std::vector<Value>& in) -> std::vector<Value> { return {drx::sum(in[0])}; }, {x});
  EXPECT_NE(m.find("sum"), std::string::npos) << m;
  EXPECT_NE(m.find("astype"), std::string::npos) << m;
}

TEST(ReductionsErrors, MeanOfIntegersRejected) {
  Array x(drx::i32, {3});
  std::string m = error_of<drx::TypeError>(
      [](const std::vector<Value>& in) -> std::vector<Value> { return {drx::mean(in[0])}; }, {x});
  EXPECT_NE(m.find("mean"), std::string::npos) << m;
  EXPECT_NE(m.find("i32[3]"), std::string::npos) << m;
}

// ---- rules, called directly on the primitive --------------------------------

drx::Params axes_params(std::vector<int64_t> axes) { return drx::Params{{"axes", axes}}; }

TEST(ReductionsRules, SumJvpAndVjp) {
  const drx::Primitive& p = drx::primitive("sum");
  Array x = random_array({2, 3, 4}, drx::f64, 7);
  Array t = random_array({2, 3, 4}, drx::f64, 8);
  Array ct = random_array({3}, drx::f64, 9);
  auto out = run_fn(
      [&](const std::vector<Value>& in) -> std::vector<Value> {
        drx::Params params = axes_params({0, 2});
        Value y = drx::emit1(p, {in[0]}, params);
        auto tan = p.jvp({in[0]}, {in[1]}, {y}, params);
        auto cot = p.vjp({in[0]}, {y}, {in[2]}, params);
        return {*tan[0], *cot[0]};
      },
      {x, t, ct});
  EXPECT_TRUE(ArrayNear(out[0], ref_reduce(Red::sum, to_doubles(t), {2, 3, 4}, {0, 2}, nullptr)));
  EXPECT_EQ(out[1].shape(), (Shape{2, 3, 4}));
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) want.push_back(ct.element_as_double(j));
  EXPECT_TRUE(ArrayNear(out[1], want));
}

TEST(ReductionsRules, ZeroTangentsAndIntegersStaySymbolic) {
  const drx::Primitive& p = drx::primitive("max");
  run_fn(
      [&](const std::vector<Value>& in) -> std::vector<Value> {
        drx::Params params = axes_params({0});
        Value y = drx::emit1(p, {in[0]}, params);
        EXPECT_FALSE(p.jvp({in[0]}, {std::nullopt}, {y}, params)[0].has_value());
        EXPECT_FALSE(p.vjp({in[0]}, {y}, {std::nullopt}, params)[0].has_value());
        Value xi = drx::astype(in[0], drx::i32);
        Value yi = drx::emit1(p, {xi}, params);
        EXPECT_FALSE(p.vjp({xi}, {yi}, {yi}, params)[0].has_value());
        return {y};
      },
      {random_array({3}, drx::f32, 1)});
}

// max with ties: the derivative is split evenly among the tied positions.
TEST(ReductionsRules, MaxSplitsTiesEvenly) {
  const drx::Primitive& p = drx::primitive("max");
  Array x = drx::testing::f64_array({1, 3, 3, 2, 5, 0, 5, 5}, {2, 4});
  Array t = drx::testing::f64_array({10, 20, 30, 40, 50, 60, 70, 80}, {2, 4});
  Array ct = drx::testing::f64_array({1, 6}, {2});
  auto out = run_fn(
      [&](const std::vector<Value>& in) -> std::vector<Value> {
        drx::Params params = axes_params({1});
        Value y = drx::emit1(p, {in[0]}, params);
        return {*p.jvp({in[0]}, {in[1]}, {y}, params)[0], *p.vjp({in[0]}, {y}, {in[2]}, params)[0]};
      },
      {x, t, ct});
  EXPECT_TRUE(ArrayNear(out[0], {25, (50 + 70 + 80) / 3.0}));
  EXPECT_TRUE(ArrayNear(out[1], {0, 0.5, 0.5, 0, 2, 0, 2, 2}));
}

TEST(ReductionsRules, MinJvpMatchesFiniteDifferences) {
  const drx::Primitive& p = drx::primitive("min");
  Shape shape{3, 4, 2};
  Array x = random_array(shape, drx::f64, 21);
  Array t = random_array(shape, drx::f64, 22);
  std::vector<int64_t> axes{0, 2};
  Array tan = run_fn(
      [&](const std::vector<Value>& in) -> std::vector<Value> {
        Value y = drx::emit1(p, {in[0]}, axes_params(axes));
        return {*p.jvp({in[0]}, {in[1]}, {y}, axes_params(axes))[0]};
      },
      {x, t})[0];
  const double h = 1e-6;
  std::vector<double> xp = to_doubles(x), xm = xp, td = to_doubles(t);
  for (size_t i = 0; i < xp.size(); ++i) {
    xp[i] += h * td[i];
    xm[i] -= h * td[i];
  }
  auto fp = ref_reduce(Red::min, xp, shape, axes, nullptr);
  auto fm = ref_reduce(Red::min, xm, shape, axes, nullptr);
  std::vector<double> fd;
  for (size_t i = 0; i < fp.size(); ++i) fd.push_back((fp[i] - fm[i]) / (2 * h));
  EXPECT_TRUE(ArrayNear(tan, fd, 1e-6, 1e-6));
}

// <u, J v> = <J^T u, v> for the jvp and vjp of every reduction.
TEST(ReductionsRules, VjpIsTransposeOfJvp) {
  Shape shape{2, 3, 4};
  for (const char* name : {"sum", "max", "min"}) {
    const drx::Primitive& p = drx::primitive(name);
    for (std::vector<int64_t> axes : {std::vector<int64_t>{1}, {0, 2}, {0, 1, 2}, {}}) {
      SCOPED_TRACE(std::string(name) + " axes " + drx::shape_str(axes));
      Shape ys;
      ref_reduce(Red::sum, std::vector<double>(24), shape, axes, &ys);
      Array x = random_array(shape, drx::f64, 31), v = random_array(shape, drx::f64, 32);
      Array u = random_array(ys, drx::f64, 33);
      auto out = run_fn(
          [&](const std::vector<Value>& in) -> std::vector<Value> {
            Value y = drx::emit1(p, {in[0]}, axes_params(axes));
            return {*p.jvp({in[0]}, {in[1]}, {y}, axes_params(axes))[0],
                    *p.vjp({in[0]}, {y}, {in[2]}, axes_params(axes))[0]};
          },
          {x, v, u});
      double lhs = 0, rhs = 0;
      for (int64_t i = 0; i < u.size(); ++i)
        lhs += u.element_as_double(i) * out[0].element_as_double(i);
      for (int64_t i = 0; i < v.size(); ++i)
        rhs += out[1].element_as_double(i) * v.element_as_double(i);
      EXPECT_NEAR(lhs, rhs, 1e-12);
    }
  }
}

// vmap against a loop over the batch, with eval on each slice as the oracle.
TEST(ReductionsRules, VmapShiftsAxes) {
  const int64_t B = 3;
  Shape shape{B, 2, 4};
  Array x = random_array(shape, drx::f64, 41);
  for (const char* name : {"sum", "max", "min"}) {
    const drx::Primitive& p = drx::primitive(name);
    for (std::vector<int64_t> axes : {std::vector<int64_t>{0}, {1}, {0, 1}}) {
      SCOPED_TRACE(std::string(name) + " axes " + drx::shape_str(axes));
      auto out = run_fn(
          [&](const std::vector<Value>& in) -> std::vector<Value> {
            auto r = p.vmap({{in[0], true}}, B, axes_params(axes));
            EXPECT_TRUE(r[0].batched);
            return {r[0].value};
          },
          {x});
      std::vector<double> want;
      std::vector<double> xd = to_doubles(x);
      const size_t per = xd.size() / B;
      Red kind = std::string(name) == "sum"   ? Red::sum
                 : std::string(name) == "max" ? Red::max
                                              : Red::min;
      for (int64_t b = 0; b < B; ++b) {
        std::vector<double> slice(xd.begin() + static_cast<long>(b * per),
                                  xd.begin() + static_cast<long>((b + 1) * per));
        auto r = ref_reduce(kind, slice, {2, 4}, axes, nullptr);
        want.insert(want.end(), r.begin(), r.end());
      }
      EXPECT_TRUE(ArrayNear(out[0], want));
      EXPECT_EQ(out[0].shape()[0], B);
    }
  }
}

TEST(ReductionsRules, VmapOfUnbatchedStaysUnbatched) {
  const drx::Primitive& p = drx::primitive("sum");
  auto out = run_fn(
      [&](const std::vector<Value>& in) -> std::vector<Value> {
        auto r = p.vmap({{in[0], false}}, 5, axes_params({0}));
        EXPECT_FALSE(r[0].batched);
        return {r[0].value};
      },
      {drx::testing::f64_array({1, 2, 3}, {3})});
  EXPECT_TRUE(ArrayNear(out[0], {6}));
}

// ---- softmax family ---------------------------------------------------------

// Stable float64 reference logsumexp of each row of a [rows, cols] matrix.
std::vector<double> ref_row_lse(const std::vector<double>& x, int64_t rows, int64_t cols) {
  std::vector<double> out;
  for (int64_t r = 0; r < rows; ++r) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, x[static_cast<size_t>(r * cols + c)]);
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(x[static_cast<size_t>(r * cols + c)] - m);
    out.push_back(m + std::log(s));
  }
  return out;
}

TEST(ReductionsSoftmax, RowsSumToOneAndMatchExpMinusLogsumexp) {
  Array x = random_array({4, 5}, drx::f64, 51, -10, 10);
  auto out = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::softmax(in[0], -1), drx::log_softmax(in[0], 1),
                drx::logsumexp(in[0], {-1}, false), drx::logsumexp(in[0], {1}, true)};
      },
      {x});
  std::vector<double> xd = to_doubles(x);
  std::vector<double> lse = ref_row_lse(xd, 4, 5), sm, lsm;
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 5; ++c) {
      lsm.push_back(xd[static_cast<size_t>(r * 5 + c)] - lse[static_cast<size_t>(r)]);
      sm.push_back(std::exp(lsm.back()));
    }
  EXPECT_TRUE(ArrayNear(out[0], sm, 1e-12, 1e-14));
  EXPECT_TRUE(ArrayNear(out[1], lsm, 1e-12, 1e-12));
  EXPECT_EQ(out[2].shape(), Shape{4});
  EXPECT_TRUE(ArrayNear(out[2], lse, 1e-12, 1e-12));
  EXPECT_EQ(out[3].shape(), (Shape{4, 1}));
  EXPECT_TRUE(ArrayNear(out[3], lse, 1e-12, 1e-12));
  for (int64_t r = 0; r < 4; ++r) {
    double s = 0;
    for (int64_t c = 0; c < 5; ++c) s += out[0].element_as_double(r * 5 + c);
    EXPECT_NEAR(s, 1.0, 1e-12);
  }
}

TEST(ReductionsSoftmax, SoftmaxAlongFirstAxisFloat32) {
  Array x = random_array({3, 2}, drx::f32, 52, -3, 3);
  Array got = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> { return {drx::softmax(in[0], 0)}; },
      {x})[0];
  EXPECT_EQ(got.dtype(), drx::f32);
  std::vector<double> xd = to_doubles(x), want(6);
  for (int c = 0; c < 2; ++c) {
    double s = 0;
    for (int r = 0; r < 3; ++r) s += std::exp(xd[static_cast<size_t>(r * 2 + c)]);
    for (int r = 0; r < 3; ++r)
      want[static_cast<size_t>(r * 2 + c)] = std::exp(xd[static_cast<size_t>(r * 2 + c)]) / s;
  }
  EXPECT_TRUE(ArrayNear(got, want, 1e-5, 1e-6));
}

TEST(ReductionsSoftmax, LargeValuesStayFinite) {
  Array x = drx::testing::f32_array({1000, 1000, 0, -1000, 1000, 999}, {2, 3});
  auto out = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::log_softmax(in[0], -1), drx::softmax(in[0], -1),
                drx::logsumexp(in[0], {1}, false)};
      },
      {x});
  const double l2 = std::log(2.0);
  const double l1e = std::log1p(std::exp(-1.0));  // log(1 + e^-1)
  EXPECT_TRUE(ArrayNear(out[0], {-l2, -l2, -1000 - l2, -2000 - l1e, -l1e, -1 - l1e}, 1e-5, 1e-5));
  EXPECT_TRUE(ArrayNear(out[1], {0.5, 0.5, 0, 0, std::exp(-l1e), std::exp(-1 - l1e)}, 1e-5, 1e-6));
  EXPECT_TRUE(ArrayNear(out[2], {1000 + l2, 1000 + l1e}, 1e-6, 1e-4));
}

TEST(ReductionsSoftmax, LogsumexpOfAllMinusInfinityIsMinusInfinity) {
  const double inf = std::numeric_limits<double>::infinity();
  Array x = drx::testing::f64_array({-inf, -inf, 0, 1}, {2, 2});
  Array got = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::logsumexp(in[0], {1}, false)};
      },
      {x})[0];
  EXPECT_EQ(got.element_as_double(0), -inf);
  EXPECT_NEAR(got.element_as_double(1), std::log(1 + std::exp(1.0)), 1e-12);
}

TEST(ReductionsSoftmax, LogsumexpOverAllAxes) {
  Array x = random_array({2, 3}, drx::f64, 53);
  Array got = run_fn(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::logsumexp(in[0], {0, -1}, false)};
      },
      {x})[0];
  EXPECT_EQ(got.shape(), Shape{});
  EXPECT_TRUE(ArrayNear(got, ref_row_lse(to_doubles(x), 1, 6), 1e-12, 1e-12));
}

TEST(ReductionsSoftmax, ErrorsNameTheOp) {
  std::string m = error_of<drx::TypeError>(
      [](const std::vector<Value>& in) -> std::vector<Value> { return {drx::softmax(in[0], 2)}; },
      {Array(drx::f32, {2, 3})});
  EXPECT_NE(m.find("softmax"), std::string::npos) << m;
  m = error_of<drx::TypeError>(
      [](const std::vector<Value>& in) -> std::vector<Value> {
        return {drx::log_softmax(in[0], 0)};
      },
      {Array(drx::i32, {2, 3})});
  EXPECT_NE(m.find("log_softmax"), std::string::npos) << m;
  EXPECT_NE(m.find("i32[2,3]"), std::string::npos) << m;
}

// ---- end to end through the public transformations ---------------------------

namespace grad_e2e {

std::vector<double> row_softmax(const std::vector<double>& x, int64_t rows, int64_t cols) {
  std::vector<double> lse = ref_row_lse(x, rows, cols), p;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      p.push_back(std::exp(x[static_cast<size_t>(r * cols + c)] - lse[static_cast<size_t>(r)]));
  return p;
}

TEST(ReductionsGrad, CrossEntropyGradient) {
  Array x = random_array({3, 4}, drx::f64, 61, -3, 3), w = random_array({3, 4}, drx::f64, 62);
  auto f = [](Value x, Value w) { return drx::sum(drx::log_softmax(x, -1) * w); };
  Array g = drx::jit(drx::grad(f))(x, w);
  // d/dx_ij sum_k w_ik log p_ik = w_ij - p_ij sum_k w_ik
  std::vector<double> p = row_softmax(to_doubles(x), 3, 4), wd = to_doubles(w), want;
  for (int r = 0; r < 3; ++r) {
    double ws = 0;
    for (int c = 0; c < 4; ++c) ws += wd[static_cast<size_t>(r * 4 + c)];
    for (int c = 0; c < 4; ++c)
      want.push_back(wd[static_cast<size_t>(r * 4 + c)] - p[static_cast<size_t>(r * 4 + c)] * ws);
  }
  EXPECT_TRUE(ArrayNear(g, want, 1e-12, 1e-12));
}

// The Hessian of logsumexp is diag(p) - p p^T: grad of grad in a direction v.
TEST(ReductionsGrad, LogsumexpSecondDerivative) {
  Array x = random_array({5}, drx::f64, 63, -2, 2), v = random_array({5}, drx::f64, 64);
  auto lse = [](Value x) { return drx::logsumexp(x, {0}, false); };
  auto dir = [lse](Value x, Value v) { return drx::sum(drx::grad(lse)(x) * v); };
  Array g = drx::jit(drx::grad(lse))(x);
  Array hv = drx::jit(drx::grad(dir))(x, v);
  std::vector<double> p = row_softmax(to_doubles(x), 1, 5), vd = to_doubles(v), want;
  double pv = 0;
  for (size_t i = 0; i < 5; ++i) pv += p[i] * vd[i];
  for (size_t i = 0; i < 5; ++i) want.push_back(p[i] * vd[i] - p[i] * pv);
  EXPECT_TRUE(ArrayNear(g, p, 1e-12, 1e-12));
  EXPECT_TRUE(ArrayNear(hv, want, 1e-10, 1e-12));
}

TEST(ReductionsGrad, MeanAndMaxGradients) {
  Array x = drx::testing::f64_array({1, 3, 3, 2, 0, -1}, {2, 3});
  auto f = [](Value x) { return drx::sum(drx::max(x, {-1}, true)) + drx::mean(x) * 6.0; };
  Array g = drx::jit(drx::grad(f))(x);
  EXPECT_TRUE(ArrayNear(g, {1, 1.5, 1.5, 2, 1, 1}, 1e-12));
}

TEST(ReductionsGrad, VmapOfSumMatchesPerRow) {
  Array x = random_array({4, 2, 3}, drx::f64, 65);
  auto f = [](Value x) { return drx::sum(x, {-1}) + drx::max(x); };
  Array got = drx::jit(drx::vmap(f))(x);
  ASSERT_EQ(got.shape(), (Shape{4, 2}));
  std::vector<double> xd = to_doubles(x), want;
  for (int b = 0; b < 4; ++b) {
    double m = -std::numeric_limits<double>::infinity();
    for (int i = 0; i < 6; ++i) m = std::max(m, xd[static_cast<size_t>(b * 6 + i)]);
    for (int r = 0; r < 2; ++r) {
      double s = 0;
      for (int c = 0; c < 3; ++c) s += xd[static_cast<size_t>(b * 6 + r * 3 + c)];
      want.push_back(s + m);
    }
  }
  EXPECT_TRUE(ArrayNear(got, want, 1e-12));
}

}  // namespace grad_e2e

}  // namespace
