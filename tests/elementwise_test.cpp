// Values of the elementwise ops against float64 std:: references and
// hand-computed results; broadcasting; integer semantics; errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "drx/core/primitive.h"
#include "drx/drx.h"
#include "tests/test_util.h"

namespace {

using drx::Array;
using drx::DType;
using drx::Shape;
using drx::Type;
using drx::Value;
using drx::testing::ArrayNear;
using drx::testing::random_array;
using drx::testing::to_doubles;

using UnaryOp = std::function<Value(const Value&)>;
using BinaryOp = std::function<Value(const Value&, const Value&)>;

Array run1(const UnaryOp& op, const Array& x) {
  return drx::jit([op](Value v) { return op(v); })(x);
}
Array run2(const BinaryOp& op, const Array& a, const Array& b) {
  return drx::jit([op](Value x, Value y) { return op(x, y); })(a, b);
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const drx::Error& e) {
    return e.what();
  }
  return "<no drx::Error thrown>";
}

::testing::AssertionResult Contains(const std::string& text, const std::vector<std::string>& subs) {
  for (const std::string& s : subs)
    if (text.find(s) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << text << "' does not mention '" << s << "'";
  return ::testing::AssertionSuccess();
}

const std::vector<Shape> kShapes = {{}, {0}, {2, 0}, {7}, {2, 3}};

double tol_for(DType d) { return d == DType::f32 ? 2e-6 : 1e-13; }

// ---- unary ------------------------------------------------------------------

struct UnaryCase {
  const char* name;
  UnaryOp op;
  double (*ref)(double);
  double lo, hi;  // input range where the op is defined
};

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Value& x) { return drx::neg(x); }, [](double x) { return -x; }, -3, 3},
      {"exp", [](const Value& x) { return drx::exp(x); }, [](double x) { return std::exp(x); }, -3,
       3},
      {"log", [](const Value& x) { return drx::log(x); }, [](double x) { return std::log(x); },
       0.01, 5},
      {"log1p", [](const Value& x) { return drx::log1p(x); },
       [](double x) { return std::log1p(x); }, -0.9, 3},
      {"tanh", [](const Value& x) { return drx::tanh(x); }, [](double x) { return std::tanh(x); },
       -3, 3},
      {"logistic", [](const Value& x) { return drx::logistic(x); },
       [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, -6, 6},
      {"sqrt", [](const Value& x) { return drx::sqrt(x); }, [](double x) { return std::sqrt(x); },
       0, 5},
      {"rsqrt", [](const Value& x) { return drx::rsqrt(x); },
       [](double x) { return 1.0 / std::sqrt(x); }, 0.05, 5},
      {"abs", [](const Value& x) { return drx::abs(x); }, [](double x) { return std::fabs(x); }, -3,
       3},
      {"sign", [](const Value& x) { return drx::sign(x); },
       [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }, -3, 3},
      {"sin", [](const Value& x) { return drx::sin(x); }, [](double x) { return std::sin(x); }, -4,
       4},
      {"cos", [](const Value& x) { return drx::cos(x); }, [](double x) { return std::cos(x); }, -4,
       4},
      {"erf", [](const Value& x) { return drx::erf(x); }, [](double x) { return std::erf(x); }, -3,
       3},
      {"square", [](const Value& x) { return drx::square(x); }, [](double x) { return x * x; }, -3,
       3},
      {"relu", [](const Value& x) { return drx::relu(x); },
       [](double x) { return x > 0 ? x : 0.0; }, -3, 3},
      {"unary minus", [](const Value& x) { return -x; }, [](double x) { return -x; }, -3, 3},
      {"stop_gradient", [](const Value& x) { return drx::stop_gradient(x); },
       [](double x) { return x; }, -3, 3},
  };
}

TEST(ElementwiseUnary, FloatOpsMatchStdMath) {
  uint64_t seed = 1;
  for (const UnaryCase& c : unary_cases()) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (const Shape& shape : kShapes) {
        Array x = random_array(shape, dt, seed++, c.lo, c.hi);
        Array y = run1(c.op, x);
        EXPECT_EQ(y.dtype(), dt) << c.name;
        EXPECT_EQ(y.shape(), shape) << c.name;
        std::vector<double> want;
        for (double v : to_doubles(x)) want.push_back(c.ref(v));
        EXPECT_TRUE(ArrayNear(y, want, tol_for(dt), tol_for(dt)))
            << c.name << " " << drx::dtype_name(dt) << drx::shape_str(shape);
      }
    }
  }
}

TEST(ElementwiseUnary, HandComputedValues) {
  Array x = drx::testing::f64_array({4, 0.25, 1}, {3});
  EXPECT_TRUE(ArrayNear(run1([](const Value& v) { return drx::rsqrt(v); }, x), {0.5, 2, 1}));
  EXPECT_TRUE(ArrayNear(run1([](const Value& v) { return drx::sqrt(v); }, x), {2, 0.5, 1}));
  Array z = drx::testing::f32_array({0}, {});
  EXPECT_TRUE(ArrayNear(run1([](const Value& v) { return drx::logistic(v); }, z), {0.5}));
  EXPECT_TRUE(ArrayNear(run1([](const Value& v) { return drx::exp(v); }, z), {1}));
}

TEST(ElementwiseUnary, LogisticSaturatesWithoutNaN) {
  for (DType dt : {DType::f32, DType::f64}) {
    Array x = drx::convert_array(drx::testing::f64_array({-1000, -100, 100, 1000}, {4}), dt);
    Array y = run1([](const Value& v) { return drx::logistic(v); }, x);
    EXPECT_TRUE(ArrayNear(y, {0, 0, 1, 1}, 0, 1e-30)) << y.str();
  }
}

TEST(ElementwiseUnary, SignAndAbsOfSpecialFloats) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Array x = drx::testing::f64_array({0.0, -0.0, nan, -2.5, 3}, {5});
  Array s = run1([](const Value& v) { return drx::sign(v); }, x);
  EXPECT_TRUE(ArrayNear(s, {0, 0, nan, -1, 1}));
  EXPECT_TRUE(std::signbit(s.to_vector<double>()[1]));  // sign(-0) = -0, as jnp.sign
  Array a = run1([](const Value& v) { return drx::abs(v); }, x);
  EXPECT_TRUE(ArrayNear(a, {0, 0, nan, 2.5, 3}));
  EXPECT_FALSE(std::signbit(a.to_vector<double>()[1]));
}

TEST(ElementwiseUnary, IntegerNegAbsSign) {
  const int32_t mn = std::numeric_limits<int32_t>::min();
  Array x = Array::from_vector<int32_t>({-3, 0, 5, mn}, {4});
  // Integer negation wraps (two's complement): -min == min.
  EXPECT_EQ(run1([](const Value& v) { return -v; }, x).to_vector<int32_t>(),
            (std::vector<int32_t>{3, 0, -5, mn}));
  EXPECT_EQ(run1([](const Value& v) { return drx::abs(v); }, x).to_vector<int32_t>(),
            (std::vector<int32_t>{3, 0, 5, mn}));
  EXPECT_EQ(run1([](const Value& v) { return drx::sign(v); }, x).to_vector<int32_t>(),
            (std::vector<int32_t>{-1, 0, 1, -1}));
  Array y = Array::from_vector<int64_t>({-7, 8}, {2});
  EXPECT_EQ(run1([](const Value& v) { return drx::abs(v); }, y).to_vector<int64_t>(),
            (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(run1([](const Value& v) { return drx::relu(v); }, y).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(run1([](const Value& v) { return drx::square(v); }, y).to_vector<int64_t>(),
            (std::vector<int64_t>{49, 64}));
}

TEST(ElementwiseUnary, ReluKeepsNaNAndZero) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Array x = drx::testing::f64_array({nan, 0.0, -0.0, -1, 2}, {5});
  EXPECT_TRUE(ArrayNear(run1([](const Value& v) { return drx::relu(v); }, x), {nan, 0, 0, 0, 2}));
}

TEST(ElementwiseUnary, RejectsWrongDtypes) {
  std::string msg =
      error_of([] { drx::trace([](Value x) { return drx::exp(x); }, {Type(DType::i32, {3})}); });
  EXPECT_TRUE(Contains(msg, {"exp", "i32[3]", "floating", "astype"}));
  EXPECT_THROW(drx::trace([](Value x) { return drx::exp(x); }, {Type(DType::bool_, {})}),
               drx::TypeError);
  for (const char* name : {"neg", "abs", "sign"}) {
    const drx::Primitive& p = drx::primitive(name);
    msg = error_of([&] { p.infer({Type(DType::bool_, {2})}, {}); });
    EXPECT_TRUE(Contains(msg, {name, "bool[2]", "numeric"}));
  }
  msg = error_of([] { drx::primitive("tanh").infer({}, {}); });
  EXPECT_TRUE(Contains(msg, {"tanh", "1 operand", "got 0"}));
}

// ---- binary -----------------------------------------------------------------

struct BinaryCase {
  const char* name;
  BinaryOp op;
  double (*ref)(double, double);
  double lo_a, hi_a, lo_b, hi_b;
};

std::vector<BinaryCase> binary_cases() {
  return {
      {"add", [](const Value& a, const Value& b) { return a + b; },
       [](double a, double b) { return a + b; }, -3, 3, -3, 3},
      {"sub", [](const Value& a, const Value& b) { return a - b; },
       [](double a, double b) { return a - b; }, -3, 3, -3, 3},
      {"mul", [](const Value& a, const Value& b) { return a * b; },
       [](double a, double b) { return a * b; }, -3, 3, -3, 3},
      {"div", [](const Value& a, const Value& b) { return a / b; },
       [](double a, double b) { return a / b; }, -3, 3, 0.5, 3},
      {"pow", [](const Value& a, const Value& b) { return drx::pow(a, b); },
       [](double a, double b) { return std::pow(a, b); }, 0.1, 3, -2, 2},
      {"maximum", [](const Value& a, const Value& b) { return drx::maximum(a, b); },
       [](double a, double b) { return a > b ? a : b; }, -3, 3, -3, 3},
      {"minimum", [](const Value& a, const Value& b) { return drx::minimum(a, b); },
       [](double a, double b) { return a < b ? a : b; }, -3, 3, -3, 3},
  };
}

TEST(ElementwiseBinary, FloatOpsMatchReference) {
  uint64_t seed = 100;
  for (const BinaryCase& c : binary_cases()) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (const Shape& shape : kShapes) {
        Array a = random_array(shape, dt, seed++, c.lo_a, c.hi_a);
        Array b = random_array(shape, dt, seed++, c.lo_b, c.hi_b);
        Array y = run2(c.op, a, b);
        EXPECT_EQ(y.dtype(), dt);
        EXPECT_EQ(y.shape(), shape);
        std::vector<double> want, va = to_doubles(a), vb = to_doubles(b);
        for (size_t i = 0; i < va.size(); ++i) want.push_back(c.ref(va[i], vb[i]));
        EXPECT_TRUE(ArrayNear(y, want, tol_for(dt), tol_for(dt)))
            << c.name << " " << drx::dtype_name(dt) << drx::shape_str(shape);
      }
    }
  }
}

TEST(ElementwiseBinary, MaxMinPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Array a = drx::testing::f64_array({nan, 1, 2}, {3});
  Array b = drx::testing::f64_array({0, nan, 1}, {3});
  EXPECT_TRUE(
      ArrayNear(run2([](auto& x, auto& y) { return drx::maximum(x, y); }, a, b), {nan, nan, 2}));
  EXPECT_TRUE(
      ArrayNear(run2([](auto& x, auto& y) { return drx::minimum(x, y); }, a, b), {nan, nan, 1}));
}

TEST(ElementwiseBinary, IntegerArithmetic) {
  Array a = Array::from_vector<int32_t>({7, -7, 7, -7, 0, 9}, {6});
  Array b = Array::from_vector<int32_t>({2, 2, -2, -2, 5, 3}, {6});
  auto ints = [](const Array& x) { return x.to_vector<int32_t>(); };
  // Division truncates toward zero, as C++.
  EXPECT_EQ(ints(run2([](auto& x, auto& y) { return x / y; }, a, b)),
            (std::vector<int32_t>{3, -3, -3, 3, 0, 3}));
  EXPECT_EQ(ints(run2([](auto& x, auto& y) { return x + y; }, a, b)),
            (std::vector<int32_t>{9, -5, 5, -9, 5, 12}));
  EXPECT_EQ(ints(run2([](auto& x, auto& y) { return x - y; }, a, b)),
            (std::vector<int32_t>{5, -9, 9, -5, -5, 6}));
  EXPECT_EQ(ints(run2([](auto& x, auto& y) { return x * y; }, a, b)),
            (std::vector<int32_t>{14, -14, -14, 14, 0, 27}));
  EXPECT_EQ(ints(run2([](auto& x, auto& y) { return drx::maximum(x, y); }, a, b)),
            (std::vector<int32_t>{7, 2, 7, -2, 5, 9}));
  EXPECT_EQ(ints(run2([](auto& x, auto& y) { return drx::minimum(x, y); }, a, b)),
            (std::vector<int32_t>{2, -7, -2, -7, 0, 3}));
  // Integer pow: exact; negative exponents truncate (1/7^2 -> 0, (-1)^-3 = -1).
  Array pa = Array::from_vector<int64_t>({3, -2, 7, -1, 1, 0, 2}, {7});
  Array pb = Array::from_vector<int64_t>({4, 3, -2, -3, -5, 0, 40}, {7});
  EXPECT_EQ(run2([](auto& x, auto& y) { return drx::pow(x, y); }, pa, pb).to_vector<int64_t>(),
            (std::vector<int64_t>{81, -8, 0, -1, 1, 1, 1099511627776LL}));
}

TEST(ElementwiseBinary, IntegerOverflowWraps) {
  const int32_t mx = std::numeric_limits<int32_t>::max();
  const int32_t mn = std::numeric_limits<int32_t>::min();
  Array a = Array::from_vector<int32_t>({mx, mn, mn}, {3});
  Array b = Array::from_vector<int32_t>({1, -1, 2}, {3});
  EXPECT_EQ(run2([](auto& x, auto& y) { return x + y; }, a, b).to_vector<int32_t>(),
            (std::vector<int32_t>{mn, mx, mn + 2}));
  EXPECT_EQ(run2([](auto& x, auto& y) { return x / y; }, a, b).to_vector<int32_t>(),
            (std::vector<int32_t>{mx, mn, mn / 2}));
  EXPECT_EQ(run2([](auto& x, auto& y) { return x * y; }, a, b).to_vector<int32_t>(),
            (std::vector<int32_t>{mx, mn, 0}));
}

TEST(ElementwiseBinary, IntegerDivisionByZeroThrows) {
  for (DType dt : {DType::i32, DType::i64}) {
    Array a = drx::convert_array(drx::testing::f64_array({4, 5}, {2}), dt);
    Array b = drx::convert_array(drx::testing::f64_array({2, 0}, {2}), dt);
    std::string msg = error_of([&] { run2([](auto& x, auto& y) { return x / y; }, a, b); });
    EXPECT_TRUE(Contains(msg, {"div", "division by zero"}));
    msg = error_of([&] {
      run2([](auto& x, auto& y) { return drx::pow(x, y); }, b,
           drx::convert_array(drx::testing::f64_array({1, -1}, {2}), dt));
    });
    EXPECT_TRUE(Contains(msg, {"pow", "division by zero"}));
  }
  // Float division by zero is IEEE, not an error.
  Array y = run2([](auto& x, auto& z) { return x / z; }, drx::testing::f64_array({1, -1}, {2}),
                 drx::testing::f64_array({0, 0}, {2}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{INFINITY, -INFINITY}));
}

TEST(ElementwiseBinary, RejectsBoolAndMismatchedOperands) {
  std::string msg = error_of([] {
    drx::trace([](Value a, Value b) { return a + b; },
               {Type(DType::bool_, {2}), Type(DType::bool_, {2})});
  });
  EXPECT_TRUE(Contains(msg, {"add", "bool[2]", "numeric"}));
  const drx::Primitive& mul = drx::primitive("mul");
  msg = error_of([&] { mul.infer({Type(DType::f32, {2}), Type(DType::f32, {3})}, {}); });
  EXPECT_TRUE(Contains(msg, {"mul", "f32[2]", "f32[3]", "same dtype and shape"}));
  msg = error_of([&] { mul.infer({Type(DType::f32, {2})}, {}); });
  EXPECT_TRUE(Contains(msg, {"mul", "2 operand"}));
}

// ---- broadcasting and numbers -----------------------------------------------

TEST(ElementwiseBroadcast, NumpyStyleShapes) {
  Array m = drx::testing::f64_array({1, 2, 3, 4, 5, 6}, {2, 3});
  Array r = drx::testing::f64_array({10, 20, 30}, {3});
  Array y = run2([](auto& a, auto& b) { return a + b; }, m, r);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_TRUE(ArrayNear(y, {11, 22, 33, 14, 25, 36}));
  y = run2([](auto& a, auto& b) { return b - a; }, m, r);  // [3] - [2,3]
  EXPECT_TRUE(ArrayNear(y, {9, 18, 27, 6, 15, 24}));

  Array col = drx::testing::f32_array({1, 2}, {2, 1});
  Array row = drx::testing::f32_array({1, 10, 100}, {1, 3});
  y = run2([](auto& a, auto& b) { return a * b; }, col, row);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_TRUE(ArrayNear(y, {1, 10, 100, 2, 20, 200}));

  Array s = drx::testing::f64_array({2}, {});
  y = run2([](auto& a, auto& b) { return drx::pow(b, a); }, s, m);  // scalar exponent
  EXPECT_TRUE(ArrayNear(y, {1, 4, 9, 16, 25, 36}));

  // Zero-size dims broadcast too: [2,0] + [1] -> [2,0].
  y = run2([](auto& a, auto& b) { return a + b; }, drx::zeros({2, 0}, DType::f32),
           drx::testing::f32_array({1}, {1}));
  EXPECT_EQ(y.shape(), (Shape{2, 0}));
}

TEST(ElementwiseBroadcast, PlainNumbersTakeTheValueDtype) {
  Array x = drx::testing::f32_array({1, 2, 4}, {3});
  auto check = [&](const UnaryOp& op, std::vector<double> want) {
    Array y = run1(op, x);
    EXPECT_EQ(y.dtype(), DType::f32);
    EXPECT_TRUE(ArrayNear(y, want));
  };
  check([](const Value& v) { return 2.0 * v; }, {2, 4, 8});
  check([](const Value& v) { return v * 2.0; }, {2, 4, 8});
  check([](const Value& v) { return v + 1.0; }, {2, 3, 5});
  check([](const Value& v) { return 1.0 + v; }, {2, 3, 5});
  check([](const Value& v) { return v - 1.0; }, {0, 1, 3});
  check([](const Value& v) { return 1.0 - v; }, {0, -1, -3});
  check([](const Value& v) { return v / 2.0; }, {0.5, 1, 2});
  check([](const Value& v) { return 2.0 / v; }, {2, 1, 0.5});
  check([](const Value& v) { return drx::pow(v, 2.0); }, {1, 4, 16});
  check([](const Value& v) { return drx::maximum(v, 1.5); }, {1.5, 2, 4});
  check([](const Value& v) { return drx::minimum(v, 1.5); }, {1, 1.5, 1.5});

  Array i = Array::from_vector<int32_t>({7, -7}, {2});
  EXPECT_EQ(run1([](const Value& v) { return v / 2.0; }, i).to_vector<int32_t>(),
            (std::vector<int32_t>{3, -3}));
  EXPECT_EQ(run1([](const Value& v) { return 10.0 - v; }, i).to_vector<int32_t>(),
            (std::vector<int32_t>{3, 17}));
}

TEST(ElementwiseBroadcast, Errors) {
  std::string msg = error_of([] {
    drx::trace([](Value a, Value b) { return a * b; },
               {Type(DType::f32, {2, 3}), Type(DType::f32, {2})});
  });
  EXPECT_TRUE(Contains(msg, {"mul", "[2,3]", "[2]", "broadcast"}));
  msg = error_of([] {
    drx::trace([](Value a, Value b) { return drx::less(a, b); },
               {Type(DType::f32, {4}), Type(DType::f32, {3, 1, 5})});
  });
  EXPECT_TRUE(Contains(msg, {"less", "[4]", "[3,1,5]"}));

  msg = error_of([] {
    drx::trace([](Value a, Value b) { return a + b; },
               {Type(DType::f32, {2}), Type(DType::f64, {2})});
  });
  EXPECT_TRUE(Contains(msg, {"add", "f32[2]", "f64[2]", "astype"}));
  EXPECT_THROW(drx::trace([](Value a, Value b) { return drx::pow(a, b); },
                          {Type(DType::i32, {}), Type(DType::f32, {})}),
               drx::TypeError);

  // A number the integer dtype cannot hold is an error, not a truncation.
  msg = error_of([] { drx::trace([](Value a) { return a * 0.5; }, {Type(DType::i32, {2})}); });
  EXPECT_TRUE(Contains(msg, {"mul", "0.5", "i32[2]", "astype"}));
  msg = error_of([] { drx::trace([](Value a) { return a + 1e10; }, {Type(DType::i32, {})}); });
  EXPECT_TRUE(Contains(msg, {"add", "10000000000"}));
  EXPECT_NO_THROW(drx::trace([](Value a) { return a + 1e10; }, {Type(DType::i64, {})}));
  msg = error_of([] { drx::trace([](Value a) { return 2.0 * a; }, {Type(DType::bool_, {})}); });
  EXPECT_TRUE(Contains(msg, {"mul", "bool", "astype"}));
}

// ---- comparisons ------------------------------------------------------------

TEST(ElementwiseCompare, AllSixOnFloatsAndInts) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    BinaryOp op;
    std::vector<bool> want;  // for a = {1, 2, 3, nan}, b = {2, 2, 2, 1}
  };
  std::vector<Case> cases = {
      {[](auto& a, auto& b) { return drx::less(a, b); }, {true, false, false, false}},
      {[](auto& a, auto& b) { return drx::less_equal(a, b); }, {true, true, false, false}},
      {[](auto& a, auto& b) { return drx::greater(a, b); }, {false, false, true, false}},
      {[](auto& a, auto& b) { return drx::greater_equal(a, b); }, {false, true, true, false}},
      {[](auto& a, auto& b) { return drx::equal(a, b); }, {false, true, false, false}},
      {[](auto& a, auto& b) { return drx::not_equal(a, b); }, {true, false, true, true}},
  };
  for (DType dt : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    bool is_int = drx::is_integer(dt);
    Array a = drx::convert_array(drx::testing::f64_array({1, 2, 3, is_int ? 0 : nan}, {4}), dt);
    Array b = drx::convert_array(drx::testing::f64_array({2, 2, 2, 1}, {4}), dt);
    for (const Case& c : cases) {
      Array y = run2(c.op, a, b);
      ASSERT_EQ(y.dtype(), DType::bool_);
      std::vector<bool> got = y.to_vector<bool>();
      for (size_t i = 0; i < 3; ++i) EXPECT_EQ(got[i], c.want[i]) << i;
      // Last element: NaN compares unordered; for integers 0 vs 1.
      bool want_last = is_int ? (c.want[0]) : c.want[3];
      EXPECT_EQ(got[3], want_last) << drx::dtype_name(dt);
    }
  }
}

TEST(ElementwiseCompare, BroadcastsAndEqualityOnBool) {
  Array m = drx::testing::f32_array({1, 5, 3, 0}, {2, 2});
  Array y = run2([](auto& a, auto& b) { return drx::greater(a, b); }, m,
                 drx::testing::f32_array({2}, {}));
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(y.to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  Array p = Array::from_vector<bool>({true, false, true}, {3});
  Array q = Array::from_vector<bool>({true, true, false}, {3});
  EXPECT_EQ(run2([](auto& a, auto& b) { return drx::equal(a, b); }, p, q).to_vector<bool>(),
            (std::vector<bool>{true, false, false}));
  EXPECT_EQ(run2([](auto& a, auto& b) { return drx::not_equal(a, b); }, p, q).to_vector<bool>(),
            (std::vector<bool>{false, true, true}));
  std::string msg = error_of([] {
    drx::trace([](Value a, Value b) { return drx::less(a, b); },
               {Type(DType::bool_, {3}), Type(DType::bool_, {3})});
  });
  EXPECT_TRUE(Contains(msg, {"less", "bool[3]"}));
  Array e =
      run2([](auto& a, auto& b) { return drx::less(a, b); }, drx::zeros({0}), drx::zeros({0}));
  EXPECT_EQ(e.dtype(), DType::bool_);
  EXPECT_EQ(e.shape(), (Shape{0}));
}

// ---- where, astype, stop_gradient --------------------------------------------

TEST(ElementwiseWhere, BroadcastsAllThree) {
  Array cond = Array::from_vector<bool>({true, false}, {2, 1});
  Array a = drx::testing::f64_array({1, 2, 3}, {3});
  Array b = drx::testing::f64_array({-1}, {});
  auto f = [](Value c, Value x, Value y) { return drx::where(c, x, y); };
  Array out = drx::jit(f)(cond, a, b);
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_TRUE(ArrayNear(out, {1, 2, 3, -1, -1, -1}));
  Array ci = Array::from_vector<bool>({false, true, true}, {3});
  Array xi = Array::from_vector<int32_t>({1, 2, 3}, {3});
  Array yi = Array::from_vector<int32_t>({7, 8, 9}, {3});
  EXPECT_EQ(drx::jit(f)(ci, xi, yi).to_vector<int32_t>(), (std::vector<int32_t>{7, 2, 3}));
  Array bt = Array::from_vector<bool>({true, true, false}, {3});
  EXPECT_EQ(drx::jit(f)(ci, bt, ci).to_vector<bool>(), (std::vector<bool>{false, true, false}));
}

TEST(ElementwiseWhere, Errors) {
  std::string msg = error_of([] {
    drx::trace([](Value c, Value x, Value y) { return drx::where(c, x, y); },
               {Type(DType::f32, {2}), Type(DType::f32, {2}), Type(DType::f32, {2})});
  });
  EXPECT_TRUE(Contains(msg, {"where", "bool", "f32[2]"}));
  msg = error_of([] {
    drx::trace([](Value c, Value x, Value y) { return drx::where(c, x, y); },
               {Type(DType::bool_, {2}), Type(DType::f32, {2}), Type(DType::i32, {2})});
  });
  EXPECT_TRUE(Contains(msg, {"where", "f32[2]", "i32[2]", "astype"}));
  msg = error_of([] {
    drx::trace([](Value c, Value x, Value y) { return drx::where(c, x, y); },
               {Type(DType::bool_, {2}), Type(DType::f32, {3}), Type(DType::f32, {})});
  });
  EXPECT_TRUE(Contains(msg, {"where", "[2]", "[3]"}));
}

TEST(ElementwiseAstype, ConversionsAndRoundTrips) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto conv = [](DType to) { return [to](const Value& v) { return drx::astype(v, to); }; };
  Array x = drx::testing::f64_array({1.75, -1.75, 0.0, 3e9, -3e9, nan, 2.5}, {7});
  // float -> int truncates toward zero, saturates out of range, maps NaN to 0.
  EXPECT_EQ(run1(conv(DType::i32), x).to_vector<int32_t>(),
            (std::vector<int32_t>{1, -1, 0, std::numeric_limits<int32_t>::max(),
                                  std::numeric_limits<int32_t>::min(), 0, 2}));
  EXPECT_EQ(run1(conv(DType::i64), x).to_vector<int64_t>(),
            (std::vector<int64_t>{1, -1, 0, 3000000000LL, -3000000000LL, 0, 2}));
  EXPECT_EQ(run1(conv(DType::bool_), x).to_vector<bool>(),
            (std::vector<bool>{true, true, false, true, true, true, true}));
  // f64 -> f32 -> f64 keeps values that f32 holds exactly.
  Array exact = drx::testing::f64_array({0.5, -2, 1024.25}, {3});
  Array back = run1(
      [](const Value& v) { return drx::astype(drx::astype(v, DType::f32), DType::f64); }, exact);
  EXPECT_EQ(back.dtype(), DType::f64);
  EXPECT_TRUE(back.bitwise_equal(exact));
  // i32 -> f64 -> i32 is exact.
  Array i = Array::from_vector<int32_t>({-5, 0, 123456789}, {3});
  Array ib =
      run1([](const Value& v) { return drx::astype(drx::astype(v, DType::f64), DType::i32); }, i);
  EXPECT_TRUE(ib.bitwise_equal(i));
  // bool -> numbers is 0/1; i64 -> i32 wraps modulo 2^32.
  Array b = Array::from_vector<bool>({true, false}, {2});
  EXPECT_TRUE(ArrayNear(run1(conv(DType::f32), b), {1, 0}));
  Array big = Array::from_vector<int64_t>({(1LL << 32) + 5, -1}, {2});
  EXPECT_EQ(run1(conv(DType::i32), big).to_vector<int32_t>(), (std::vector<int32_t>{5, -1}));
  // Zero-size and scalar shapes.
  EXPECT_EQ(run1(conv(DType::i64), drx::zeros({2, 0})).shape(), (Shape{2, 0}));
  EXPECT_EQ(run1(conv(DType::f64), drx::testing::f32_array({1.5f}, {})).item<double>(), 1.5);
}

TEST(ElementwiseAstype, SameDtypeEmitsNothing) {
  drx::Program p =
      drx::trace([](Value v) { return drx::astype(v, DType::f32); }, {Type(DType::f32, {2})});
  EXPECT_TRUE(p.eqns.empty());
  p = drx::trace([](Value v) { return drx::astype(v, DType::f64); }, {Type(DType::f32, {2})});
  ASSERT_EQ(p.eqns.size(), 1u);
  EXPECT_EQ(p.eqns[0].prim->name(), "convert");
  EXPECT_EQ(p.type_of(p.outputs[0]), Type(DType::f64, {2}));
}

TEST(ElementwisePrimitives, AllRegisteredWithExpectedTypes) {
  for (const char* name : {"neg", "exp", "log", "log1p", "tanh", "logistic", "sqrt", "rsqrt", "abs",
                           "sign", "sin", "cos", "erf", "stop_gradient"}) {
    const drx::Primitive& p = drx::primitive(name);
    EXPECT_EQ(p.infer({Type(DType::f64, {2, 0})}, {}),
              (std::vector<Type>{Type(DType::f64, {2, 0})}));
  }
  for (const char* name : {"add", "sub", "mul", "div", "pow", "maximum", "minimum"}) {
    const drx::Primitive& p = drx::primitive(name);
    Type t(DType::i64, {3});
    EXPECT_EQ(p.infer({t, t}, {}), (std::vector<Type>{t}));
  }
  for (const char* name :
       {"less", "less_equal", "greater", "greater_equal", "equal", "not_equal"}) {
    const drx::Primitive& p = drx::primitive(name);
    Type t(DType::f32, {});
    EXPECT_EQ(p.infer({t, t}, {}), (std::vector<Type>{Type(DType::bool_, {})}));
  }
  const drx::Primitive& sel = drx::primitive("select");
  EXPECT_EQ(sel.infer({Type(DType::bool_, {2}), Type(DType::i32, {2}), Type(DType::i32, {2})}, {}),
            (std::vector<Type>{Type(DType::i32, {2})}));
  EXPECT_THROW(
      sel.infer({Type(DType::bool_, {2}), Type(DType::i32, {2}), Type(DType::i32, {3})}, {}),
      drx::TypeError);
  const drx::Primitive& conv = drx::primitive("convert");
  std::string msg = error_of([&] { conv.infer({Type(DType::f32, {})}, {}); });
  EXPECT_TRUE(Contains(msg, {"convert", "dtype"}));
}

}  // namespace
