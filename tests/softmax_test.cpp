// The softmax primitive (drx/ops/softmax.cpp): bitwise the composite it
// replaced (max shift, exp, sum, divide), interpreted and compiled, along every
// axis and through -inf, all -inf rows and NaN; its first and second
// derivatives against central differences; jvp against vjp; vmap against a
// loop; its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "drx/core/program_text.h"
#include "drx/core/trace.h"
#include "drx/drx.h"
#include "drx/ops/primitives.h"
#include "test_util.h"
#include "transform_checks.h"

namespace drx::testing {
namespace {

std::vector<Array> traced_run(Value (*f)(const Value&, int64_t), const Array& x, int64_t axis) {
  const Traced t = trace_function(
      [f, axis](const std::vector<Value>& v) -> std::vector<Value> { return {f(v[0], axis)}; },
      {Type(x.dtype(), x.shape())});
  return run(t.program, {x});
}

// [3, 4, 5] with -inf entries, one row of -inf along the last axis, and a NaN.
Array awkward_input(DType dtype) {
  Array x = random_array({3, 4, 5}, dtype, 17, -30, 30);
  const double inf = std::numeric_limits<double>::infinity();
  auto set = [&](int64_t i, double v) {
    dtype == DType::f32 ? void(x.data<float>()[i] = static_cast<float>(v))
                        : void(x.data<double>()[i] = v);
  };
  for (int64_t i : {1, 7, 8, 33, 50}) set(i, -inf);
  for (int64_t i = 0; i < 5; ++i) set(10 + i, -inf);  // x[0, 2, :]
  set(44, std::nan(""));
  return x;
}

Value softmax_value(const Value& x, int64_t axis) { return softmax(x, axis); }

TEST(Softmax, IsOnePrimitiveBitwiseTheCompositeAlongEveryAxis) {
  for (DType dtype : {DType::f32, DType::f64}) {
    const Array x = awkward_input(dtype);
    for (int64_t axis : {0, 1, 2}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " axis " + std::to_string(axis));
      const Program p =
          trace([axis](Value v) { return softmax(v, axis); }, {Type(dtype, x.shape())});
      ASSERT_EQ(p.eqns.size(), 1u);
      EXPECT_EQ(p.eqns[0].prim, &prims::softmax());
      const std::vector<Array> want = traced_run(detail::softmax_composite, x, axis);
      EXPECT_TRUE(BitwiseEqual(traced_run(softmax_value, x, axis), want));
      EXPECT_TRUE(BitwiseEqual({jit([axis](Value v) { return softmax(v, axis); })(x)}, want));
    }
  }
  // The all -inf row is 0 / 0 = NaN, as the composite gives; a row without -inf sums to 1.
  const Array y = traced_run(softmax_value, awkward_input(DType::f64), 2)[0];
  EXPECT_TRUE(std::isnan(y.data<double>()[10]));
  double total = 0;
  for (int64_t j = 0; j < 5; ++j) total += y.data<double>()[55 + j];
  EXPECT_NEAR(total, 1.0, 1e-15);
}

TEST(Softmax, DerivativesToSecondOrderMatchFiniteDifferences) {
  auto second = [](int64_t axis) {
    // The gradient of sum(softmax(x)^2 * c): its own derivatives are softmax's second ones.
    return [axis](const std::vector<Value>& v) {
      auto inner = [axis](Value x) {
        Value s = softmax(x, axis);
        return sum(s * s * (x * 0.0 + 1.5));
      };
      return grad(inner)(v[0]);
    };
  };
  const std::vector<OpCase> cases = {
      {"last", [](const std::vector<Value>& v) { return softmax(v[0], -1); }, {{3, 5}}, -3, 3},
      {"first", [](const std::vector<Value>& v) { return softmax(v[0], 0); }, {{4, 2}}, -3, 3},
      {"middle", [](const std::vector<Value>& v) { return softmax(v[0], 1); }, {{2, 3, 4}}, -3, 3},
      {"second_last", second(-1), {{2, 4}}, -2, 2},
      {"second_first", second(0), {{3, 2}}, -2, 2},
  };
  ExpectRulesMatchReferences(cases);
}

TEST(Softmax, ErrorsNameSoftmaxAndTheOperand) {
  expect_error(
      [] {
        jit([](Value v) { return softmax(v, 0); })(Array::from_vector<int32_t>({1, 2}, {2}));
      },
      {"softmax", "i32[2]", "not floating point"});
  expect_error(
      [] {
        jit([](Value v) { return softmax(v, 2); })(f64_array({1, 2}, {2}));
      },
      {"softmax", "axis 2", "f64[2]"});
  // Programs read from text are checked by the same rule.
  expect_error(
      [] {
        parse_program(
            "program @main (%0: f32[2,3]) -> (f32[2,3]) {\n"
            "  %1 = softmax[axis=5] %0 : f32[2,3]\n"
            "  return %1\n}\n");
      },
      {"softmax", "axis 5", "f32[2,3]"});
}

}  // namespace
}  // namespace drx::testing
