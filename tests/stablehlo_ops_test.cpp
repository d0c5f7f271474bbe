// The primitives StableHLO needs beyond drx's core set — pad, reverse,
// dynamic_slice, dynamic_update_slice, cbrt, expm1, round_away, atan2,
// is_finite — against hand-computed values and std::, with their derivatives
// against central differences and their vmap rules against loops.
#include <cmath>

#include "tests/test_util.h"
#include "tests/transform_checks.h"

namespace drx::testing {
namespace {

Array run1(const std::function<Value(Value)>& f, const Array& x) {
  return jit([f](Value v) { return f(v); })(x);
}

TEST(StablehloOps, PadWithNegativeEdgesAndInteriorMatchesHandComputed) {
  Array x = f64_array({1, 2, 3, 4, 5, 6}, {2, 3});
  // Axis 0: interior 1 then low 1, high 0 -> [p, r0, p, r1]; axis 1: low -1 (crop the
  // first column), high 2, interior 0 -> [x1, x2, p, p].
  Array got = jit([](Value v) {
    return pad(v, constant(Array::scalar(9.0)), {1, -1}, {0, 2}, {1, 0});
  })(x);
  EXPECT_EQ(got.shape(), (Shape{4, 4}));
  EXPECT_TRUE(ArrayNear(got, {9, 9, 9, 9, 2, 3, 9, 9, 9, 9, 9, 9, 5, 6, 9, 9}, 0, 0));
  expect_error([&] { jit([](Value v) {
                       return pad(v, 0.0, {-5, 0}, {0, 0});
                     })(x); },
               {"pad", "padded size"});
  expect_error(
      [&] {
        jit([](Value v) {
          return pad(v, constant(Array::scalar(1.0f)), {0, 0}, {0, 0}, {0, 0});
        })(x);
      },
      {"pad", "scalar of the operand's dtype"});
}

TEST(StablehloOps, PadAndReverseDerivativesAndVmap) {
  std::vector<OpCase> cases = {
      {"pad",
       [](const std::vector<Value>& v) {
         return sum(sin(pad(v[0], reshape(slice(v[1], {0}, {1}), {}), {2, -1}, {-1, 1}, {1, 2})));
       },
       {{3, 4}, {2}}},
      {"reverse",
       [](const std::vector<Value>& v) { return sum(v[0] * reverse(v[0], {1})); },
       {{3, 4}}},
  };
  for (const OpCase& c : cases) {
    EXPECT_TRUE(GradMatchesFiniteDifferences(c, 1, 1e-6));
    EXPECT_TRUE(VjpMatchesJvp(c, 2));
  }
  OpCase batched_value{"pad_vmap",
                       [](const std::vector<Value>& v) {
                         return pad(v[0], reshape(v[1], {}), {1, 0}, {-1, 2}, {0, 1});
                       },
                       {{2, 3}, {1}}};
  for (int64_t axis : {0, -1}) EXPECT_TRUE(VmapMatchesLoop(batched_value, 3, axis));
  OpCase rev{"reverse_vmap",
             [](const std::vector<Value>& v) {
               return reverse(v[0], {0, -1});
             },
             {{2, 3}}};
  EXPECT_TRUE(VmapMatchesLoop(rev, 4, 0));
  Array r = run1([](Value v) { return reverse(v, {1}); }, f64_array({1, 2, 3, 4, 5, 6}, {2, 3}));
  EXPECT_TRUE(ArrayNear(r, {3, 2, 1, 6, 5, 4}, 0, 0));
}

TEST(StablehloOps, DynamicSliceAndUpdateClampTheirStarts) {
  Array x = f64_array({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  auto slice_at = [&](int32_t i, int32_t j) {
    return jit([](Value v, Value a, Value b) {
      return dynamic_slice(v, {a, b}, {2, 2});
    })(x, Array::scalar(i), Array::scalar(j));
  };
  EXPECT_TRUE(ArrayNear(slice_at(1, 1), {5, 6, 9, 10}, 0, 0));
  EXPECT_TRUE(ArrayNear(slice_at(5, -3), {4, 5, 8, 9}, 0, 0));  // clamped to (1, 0)
  Array u = f64_array({-1, -2}, {1, 2});
  Array put = jit([](Value v, Value w, Value a, Value b) {
    return dynamic_update_slice(v, w, {a, b});
  })(x, u, Array::scalar(int64_t{7}), Array::scalar(int64_t{3}));  // clamped to (2, 2)
  EXPECT_TRUE(ArrayNear(put, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2}, 0, 0));
  expect_error(
      [&] {
        jit([](Value v, Value a) { return dynamic_slice(v, {a}, {2, 2}); })(x, Array::scalar(0));
      },
      {"dynamic_slice", "2 start indices"});
  expect_error(
      [&] {
        jit([](Value v, Value a) { return dynamic_slice(v, {a, a}, {4, 2}); })(x, Array::scalar(0));
      },
      {"dynamic_slice", "size 4"});
}

TEST(StablehloOps, DynamicSlicingDerivativesAndVmapWithBatchedStarts) {
  auto starts = [](const Value& v) {
    // Integer starts from an input (piecewise constant in it).
    return std::vector<Value>{astype(floor(reshape(slice(v, {0}, {1}), {}) * 3.0), DType::i32),
                              astype(floor(reshape(slice(v, {1}, {2}), {}) * 3.0), DType::i32)};
  };
  OpCase ds{"dynamic_slice",
            [starts](const std::vector<Value>& v) {
              return dynamic_slice(v[0], starts(v[1]), {2, 2}) * 1.0;
            },
            {{4, 5}, {2}},
            0.0,
            0.99};
  OpCase dus{"dynamic_update_slice",
             [starts](const std::vector<Value>& v) {
               return dynamic_update_slice(v[0], v[2], starts(v[1]));
             },
             {{4, 5}, {2}, {2, 3}},
             0.0,
             0.99};
  for (const OpCase& c : {ds, dus})
    for (int64_t axis : {0, -1}) EXPECT_TRUE(VmapMatchesLoop(c, 5, axis)) << c.name << axis;
  // Derivatives at fixed starts (the index input is held constant).
  std::vector<OpCase> grads = {
      {"ds_grad",
       [](const std::vector<Value>& v) {
         return sum(square(
             dynamic_slice(v[0], {fill({}, 1, DType::i32), fill({}, 3, DType::i32)}, {2, 3})));
       },
       {{4, 5}}},
      {"dus_grad",
       [](const std::vector<Value>& v) {
         return sum(sin(dynamic_update_slice(v[0], v[1] * v[1],
                                             {fill({}, 2, DType::i64), fill({}, 1, DType::i64)})));
       },
       {{4, 5}, {2, 3}}},
  };
  for (const OpCase& c : grads) {
    EXPECT_TRUE(GradMatchesFiniteDifferences(c, 6, 1e-6));
    EXPECT_TRUE(VjpMatchesJvp(c, 7));
  }
}

TEST(StablehloOps, MoveAxisTakesNegativeAxesAndRejectsOthers) {
  Array x = f64_array({0, 1, 2, 3, 4, 5}, {1, 2, 3});
  Array m = run1([](Value v) { return move_axis(v, 1, -1); }, x);
  EXPECT_EQ(m.shape(), (Shape{1, 3, 2}));
  EXPECT_TRUE(ArrayNear(m, {0, 3, 1, 4, 2, 5}, 0, 0));
  expect_error([&] { run1([](Value v) { return move_axis(v, 0, 3); }, x); }, {"move_axis", "3"});
  expect_error([&] { run1([](Value v) { return move_axis(v, -4, 0); }, x); }, {"move_axis", "-4"});
}

TEST(StablehloOps, ElementwiseAdditionsMatchStd) {
  std::vector<double> xs = {-2.5, -1.5, -0.5, 0.0, 0.3, 0.5, 1.5, 2.5, 8.0};
  Array x = f64_array(xs, {9});
  Array c = run1([](Value v) { return cbrt(v); }, x);
  Array e = run1([](Value v) { return expm1(v); }, x);
  Array r = run1([](Value v) { return round_away(v); }, x);
  Array a = run1([](Value v) { return atan2(v, v - 1.0); }, x);
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_DOUBLE_EQ(c.data<double>()[i], std::cbrt(xs[i]));
    EXPECT_DOUBLE_EQ(e.data<double>()[i], std::expm1(xs[i]));
    EXPECT_EQ(r.data<double>()[i], std::round(xs[i]));
    EXPECT_DOUBLE_EQ(a.data<double>()[i], std::atan2(xs[i], xs[i] - 1.0));
  }
  EXPECT_EQ(r.data<double>()[2], -1.0);  // halves away from zero, not to even
  EXPECT_EQ(r.data<double>()[7], 3.0);
  Array f = run1([](Value v) { return astype(is_finite(v), DType::i32); },
                 f64_array({1.0, INFINITY, -INFINITY, NAN, -0.0}, {5}));
  EXPECT_TRUE(ArrayNear(f, {1, 0, 0, 0, 1}, 0, 0));
  std::vector<OpCase> cases = {
      {"cbrt", [](const std::vector<Value>& v) { return sum(cbrt(v[0])); }, {{5}}, 0.5, 2.0},
      {"expm1", [](const std::vector<Value>& v) { return sum(expm1(v[0])); }, {{5}}},
      {"atan2", [](const std::vector<Value>& v) { return sum(atan2(v[0], v[1])); }, {{5}, {5}}},
  };
  for (const OpCase& oc : cases) {
    EXPECT_TRUE(GradMatchesFiniteDifferences(oc, 8, 1e-6));
    EXPECT_TRUE(VjpMatchesJvp(oc, 9));
    EXPECT_TRUE(VmapMatchesLoop(oc, 10, 0));
  }
}

}  // namespace
}  // namespace drx::testing
