// The layer_norm_normalize primitive (drx/ops/layer_norm.cpp): bitwise the composite
// nn::layer_norm was written as (mean, centre, mean of squares, rsqrt, scale), interpreted
// and compiled, on blocks of 16 rows and the rows after them, through NaN, infinities and
// constant rows; its first and second derivatives (both outputs) against central
// differences; jvp against vjp; vmap against a loop; nn::layer_norm on it; its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "drx/core/trace.h"
#include "drx/drx.h"
#include "drx/ops/primitives.h"
#include "test_util.h"
#include "transform_checks.h"

namespace drx::testing {
namespace {

std::vector<Value> composite(const Value& x, double eps) {
  const Value c = x - mean(x, {-1}, true);
  const Value r = rsqrt(mean(square(c), {-1}, true) + eps);
  return {c * r, r};
}

// [37, n]: two blocks of 16 rows and 5 more, with a NaN row, an infinite entry, a constant
// row (zero variance) and rows of very different scales.
Array awkward_input(DType dtype, int64_t n) {
  Array x = random_array({37, n}, dtype, 23, -3, 3);
  auto set = [&](int64_t i, double v) {
    dtype == DType::f32 ? void(x.data<float>()[i] = static_cast<float>(v))
                        : void(x.data<double>()[i] = v);
  };
  auto get = [&](int64_t i) {
    return dtype == DType::f32 ? double(x.data<float>()[i]) : x.data<double>()[i];
  };
  set(1 * n + 2, std::nan(""));
  set(2 * n + 0, std::numeric_limits<double>::infinity());
  for (int64_t j = 0; j < n; ++j) set(3 * n + j, 0.25);
  for (int64_t j = 0; j < n; ++j) set(20 * n + j, get(20 * n + j) * 1e6);
  for (int64_t j = 0; j < n; ++j) set(36 * n + j, get(36 * n + j) * 1e-6 + 7.0);
  return x;
}

TEST(LayerNorm, IsOnePrimitiveBitwiseTheComposite) {
  for (DType dtype : {DType::f32, DType::f64})
    for (int64_t n : {1, 5, 16, 128})
      for (double eps : {1e-5, 0.0}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " n " + std::to_string(n) + " eps " +
                     std::to_string(eps));
        const Array x = awkward_input(dtype, n);
        const Type t(dtype, x.shape());
        const Program prim = trace_function(
                                 [eps](const std::vector<Value>& v) {
                                   return detail::layer_norm_normalize(v[0], eps);
                                 },
                                 {t})
                                 .program;
        ASSERT_EQ(prim.eqns.size(), 1u);
        EXPECT_EQ(prim.eqns[0].prim, &prims::layer_norm_normalize());
        const Program comp =
            trace_function([eps](const std::vector<Value>& v) { return composite(v[0], eps); }, {t})
                .program;
        const std::vector<Array> want = run(comp, {x});
        EXPECT_TRUE(BitwiseEqual(run(prim, {x}), want));
        EXPECT_TRUE(BitwiseEqual(compile(prim).run({x}), want));
      }
}

TEST(LayerNorm, NnLayerNormUsesItForF32AndF64AndTheCompositeForBf16) {
  auto ln = [](const std::vector<Value>& v) -> std::vector<Value> {
    return {nn::layer_norm(v[0], v[1], v[2], 1e-5)};
  };
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    const Program p =
        trace_function(ln, {Type(dtype, {4, 8}), Type(dtype, {8}), Type(dtype, {8})}).program;
    bool uses = false;
    for (const Eqn& e : p.eqns) uses = uses || e.prim == &prims::layer_norm_normalize();
    EXPECT_EQ(uses, dtype != DType::bf16) << dtype_name(dtype);
  }
  // Scaled and shifted as before: y * scale + bias, bitwise.
  const Array x = awkward_input(DType::f32, 16), g = random_array({16}, DType::f32, 3),
              b = random_array({16}, DType::f32, 4);
  const std::vector<Array> got =
      run(trace_function(
              ln, {Type(DType::f32, {37, 16}), Type(DType::f32, {16}), Type(DType::f32, {16})})
              .program,
          {x, g, b});
  const std::vector<Array> want =
      run(trace_function(
              [](const std::vector<Value>& v) -> std::vector<Value> {
                return {composite(v[0], 1e-5)[0] * v[1] + v[2]};
              },
              {Type(DType::f32, {37, 16}), Type(DType::f32, {16}), Type(DType::f32, {16})})
              .program,
          {x, g, b});
  EXPECT_TRUE(BitwiseEqual(got, want));
}

TEST(LayerNorm, DerivativesToSecondOrderMatchFiniteDifferences) {
  auto y = [](const std::vector<Value>& v) { return detail::layer_norm_normalize(v[0], 1e-3)[0]; };
  auto r = [](const std::vector<Value>& v) { return detail::layer_norm_normalize(v[0], 1e-3)[1]; };
  // The gradient of sum(y^2 * c + y * x) + sum(r): its derivatives are the second ones.
  auto second = [](const std::vector<Value>& v) {
    auto inner = [](Value x) {
      const Values yr = detail::layer_norm_normalize(x, 1e-3);
      return sum(yr[0] * yr[0] * (x * 0.0 + 1.5) + yr[0] * x) + sum(yr[1]);
    };
    return grad(inner)(v[0]);
  };
  const std::vector<OpCase> cases = {
      {"y", y, {{3, 5}}, -2, 2},          {"r", r, {{3, 5}}, -2, 2},
      {"one_row", y, {{7}}, -2, 2},       {"batch_y", y, {{2, 3, 4}}, -2, 2},
      {"batch_r", r, {{2, 3, 4}}, -2, 2}, {"second", second, {{2, 4}}, -2, 2},
  };
  ExpectRulesMatchReferences(cases);
}

TEST(LayerNorm, ErrorsNameThePrimitiveAndTheOperand) {
  expect_error(
      [] {
        trace_function(
            [](const std::vector<Value>& v) { return detail::layer_norm_normalize(v[0], 1e-5); },
            {Type(DType::i32, {2, 3})});
      },
      {"layer_norm_normalize", "i32[2,3]", "f32 or f64"});
  expect_error(
      [] {
        trace_function(
            [](const std::vector<Value>& v) { return detail::layer_norm_normalize(v[0], -1.0); },
            {Type(DType::f32, {2, 3})});
      },
      {"layer_norm_normalize", "eps", "negative"});
  expect_error(
      [] {
        trace_function(
            [](const std::vector<Value>& v) { return detail::layer_norm_normalize(v[0], 1e-5); },
            {Type(DType::f32, {2, 0})});
      },
      {"layer_norm_normalize", "f32[2,0]", "at least one"});
}

}  // namespace
}  // namespace drx::testing
