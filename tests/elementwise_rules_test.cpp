// The jvp, vjp and vmap rules of the elementwise primitives, called directly
// through the Primitive interface, against central finite differences of
// float64 std:: references and against plain loops.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "drx/core/primitive.h"
#include "drx/drx.h"
#include "tests/test_util.h"

namespace {

using drx::Array;
using drx::DType;
using drx::MaybeValue;
using drx::MaybeValues;
using drx::Params;
using drx::Primitive;
using drx::Shape;
using drx::Type;
using drx::Value;
using drx::Values;
using drx::testing::ArrayNear;
using drx::testing::f64_array;
using drx::testing::random_array;
using drx::testing::to_doubles;

using MaybeArray = std::optional<Array>;

// A rule's result: `zero` when the rule returned a symbolic zero.
struct RuleOut {
  bool zero = false;
  Array value;
};

Type type_of(const Array& a) { return Type(a.dtype(), a.shape()); }

// Traces `body` on `primals` followed by the present entries of `extra`,
// with the extra inputs handed to body as MaybeValues, and runs it.
template <class Body>
std::vector<RuleOut> run_rule(const std::vector<Array>& primals,
                              const std::vector<MaybeArray>& extra, Body body) {
  std::vector<Type> types;
  std::vector<Array> args;
  for (const Array& a : primals) {
    types.push_back(type_of(a));
    args.push_back(a);
  }
  for (const MaybeArray& e : extra)
    if (e) {
      types.push_back(type_of(*e));
      args.push_back(*e);
    }
  std::vector<bool> zero;
  drx::TreeFn f = [&](const std::vector<drx::Tree>& args) -> drx::Tree {
    Values in;
    for (const drx::Tree& a : args) in.push_back(a.value());
    Values xs(in.begin(), in.begin() + static_cast<long>(primals.size()));
    MaybeValues es;
    size_t k = primals.size();
    for (const MaybeArray& e : extra) es.push_back(e ? MaybeValue(in[k++]) : std::nullopt);
    MaybeValues r = body(xs, es);
    std::vector<Value> outs;
    for (const MaybeValue& v : r) {
      zero.push_back(!v.has_value());
      outs.push_back(v ? *v : xs[0]);
    }
    return drx::Tree(outs);
  };
  std::vector<Array> vals = drx::run(drx::trace(f, types), args);
  std::vector<RuleOut> out;
  for (size_t i = 0; i < vals.size(); ++i) out.push_back({static_cast<bool>(zero[i]), vals[i]});
  return out;
}

RuleOut jvp_of(const std::string& name, const std::vector<Array>& primals,
               const std::vector<MaybeArray>& tangents, const Params& params = {}) {
  const Primitive& p = drx::primitive(name);
  std::vector<RuleOut> r =
      run_rule(primals, tangents, [&](const Values& xs, const MaybeValues& ts) {
        Value y = drx::emit1(p, xs, params);
        MaybeValues t = p.jvp(xs, ts, {y}, params);
        EXPECT_EQ(t.size(), 1u) << name;
        if (t[0]) {
          EXPECT_EQ(t[0]->type(), y.type()) << name << " tangent type";
        }
        return t;
      });
  return r.at(0);
}

std::vector<RuleOut> vjp_of(const std::string& name, const std::vector<Array>& primals,
                            const MaybeArray& cotangent, const Params& params = {}) {
  const Primitive& p = drx::primitive(name);
  return run_rule(primals, {cotangent}, [&](const Values& xs, const MaybeValues& cts) {
    Value y = drx::emit1(p, xs, params);
    MaybeValues g = p.vjp(xs, {y}, cts, params);
    EXPECT_EQ(g.size(), xs.size()) << name;
    for (size_t i = 0; i < g.size(); ++i)
      if (g[i]) {
        EXPECT_EQ(g[i]->type(), xs[i].type()) << name << " cotangent type " << i;
      }
    return g;
  });
}

std::vector<double> times(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size(); ++i) r.push_back(a[i] * b[i]);
  return r;
}

// ---- unary ------------------------------------------------------------------

struct UnaryDeriv {
  const char* name;
  double (*f)(double);
  double lo, hi;
};

const std::vector<UnaryDeriv> kUnary = {
    {"neg", [](double x) { return -x; }, -2, 2},
    {"exp", [](double x) { return std::exp(x); }, -2, 2},
    {"log", [](double x) { return std::log(x); }, 0.2, 3},
    {"log1p", [](double x) { return std::log1p(x); }, -0.5, 3},
    {"tanh", [](double x) { return std::tanh(x); }, -2, 2},
    {"logistic", [](double x) { return 1 / (1 + std::exp(-x)); }, -4, 4},
    {"sqrt", [](double x) { return std::sqrt(x); }, 0.2, 3},
    {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, 0.2, 3},
    {"abs", [](double x) { return std::fabs(x); }, -2, 2},  // random points avoid 0
    {"sin", [](double x) { return std::sin(x); }, -3, 3},
    {"cos", [](double x) { return std::cos(x); }, -3, 3},
    {"erf", [](double x) { return std::erf(x); }, -2, 2},
};

std::vector<double> central_difference(double (*f)(double), const std::vector<double>& x) {
  const double h = 1e-5;
  std::vector<double> d;
  for (double v : x) d.push_back((f(v + h) - f(v - h)) / (2 * h));
  return d;
}

TEST(ElementwiseRules, UnaryJvpAndVjpMatchFiniteDifferences) {
  uint64_t seed = 7;
  for (const UnaryDeriv& c : kUnary) {
    Array x = random_array({2, 3}, DType::f64, seed++, c.lo, c.hi);
    Array t = random_array({2, 3}, DType::f64, seed++);
    std::vector<double> want = times(central_difference(c.f, to_doubles(x)), to_doubles(t));
    RuleOut j = jvp_of(c.name, {x}, {t});
    ASSERT_FALSE(j.zero) << c.name;
    EXPECT_TRUE(ArrayNear(j.value, want, 1e-7, 1e-8)) << c.name << " jvp";
    std::vector<RuleOut> g = vjp_of(c.name, {x}, t);
    ASSERT_FALSE(g[0].zero) << c.name;
    EXPECT_TRUE(ArrayNear(g[0].value, want, 1e-7, 1e-8)) << c.name << " vjp";
    // f32 in, f32 tangent out.
    Array x32 = drx::convert_array(x, DType::f32), t32 = drx::convert_array(t, DType::f32);
    RuleOut j32 = jvp_of(c.name, {x32}, {t32});
    EXPECT_EQ(j32.value.dtype(), DType::f32);
    EXPECT_TRUE(ArrayNear(j32.value, want, 1e-4, 1e-5)) << c.name << " f32 jvp";
  }
}

TEST(ElementwiseRules, UnaryZeroDerivatives) {
  Array x = f64_array({-1.5, 2}, {2});
  Array t = f64_array({1, 1}, {2});
  EXPECT_TRUE(jvp_of("sign", {x}, {t}).zero);
  EXPECT_TRUE(vjp_of("sign", {x}, t)[0].zero);
  EXPECT_TRUE(jvp_of("stop_gradient", {x}, {t}).zero);
  EXPECT_TRUE(vjp_of("stop_gradient", {x}, t)[0].zero);
  EXPECT_TRUE(jvp_of("exp", {x}, {std::nullopt}).zero);  // zero in, zero out
  EXPECT_TRUE(vjp_of("tanh", {x}, std::nullopt)[0].zero);
  // Integer values carry no derivative.
  Array i = Array::from_vector<int32_t>({1, -2}, {2});
  EXPECT_TRUE(jvp_of("neg", {i}, {i}).zero);
  EXPECT_TRUE(vjp_of("abs", {i}, i)[0].zero);
}

// ---- binary -----------------------------------------------------------------

struct BinaryDeriv {
  const char* name;
  double (*f)(double, double);
  double lo_a, hi_a, lo_b, hi_b;
};

const std::vector<BinaryDeriv> kBinary = {
    {"add", [](double a, double b) { return a + b; }, -2, 2, -2, 2},
    {"sub", [](double a, double b) { return a - b; }, -2, 2, -2, 2},
    {"mul", [](double a, double b) { return a * b; }, -2, 2, -2, 2},
    {"div", [](double a, double b) { return a / b; }, -2, 2, 0.5, 2},
    {"pow", [](double a, double b) { return std::pow(a, b); }, 0.3, 2, -2, 2},
    {"maximum", [](double a, double b) { return a > b ? a : b; }, -2, 2, -2, 2},
    {"minimum", [](double a, double b) { return a < b ? a : b; }, -2, 2, -2, 2},
};

TEST(ElementwiseRules, BinaryJvpAndVjpMatchFiniteDifferences) {
  const double h = 1e-5;
  uint64_t seed = 50;
  for (const BinaryDeriv& c : kBinary) {
    Array a = random_array({5}, DType::f64, seed++, c.lo_a, c.hi_a);
    Array b = random_array({5}, DType::f64, seed++, c.lo_b, c.hi_b);
    Array ta = random_array({5}, DType::f64, seed++);
    Array tb = random_array({5}, DType::f64, seed++);
    std::vector<double> va = to_doubles(a), vb = to_doubles(b), da, db;
    for (size_t i = 0; i < va.size(); ++i) {
      da.push_back((c.f(va[i] + h, vb[i]) - c.f(va[i] - h, vb[i])) / (2 * h));
      db.push_back((c.f(va[i], vb[i] + h) - c.f(va[i], vb[i] - h)) / (2 * h));
    }
    std::vector<double> ja = times(da, to_doubles(ta)), jb = times(db, to_doubles(tb)), both;
    for (size_t i = 0; i < ja.size(); ++i) both.push_back(ja[i] + jb[i]);

    EXPECT_TRUE(ArrayNear(jvp_of(c.name, {a, b}, {ta, tb}).value, both, 1e-7, 1e-8)) << c.name;
    EXPECT_TRUE(ArrayNear(jvp_of(c.name, {a, b}, {ta, std::nullopt}).value, ja, 1e-7, 1e-8))
        << c.name;
    EXPECT_TRUE(ArrayNear(jvp_of(c.name, {a, b}, {std::nullopt, tb}).value, jb, 1e-7, 1e-8))
        << c.name;
    EXPECT_TRUE(jvp_of(c.name, {a, b}, {std::nullopt, std::nullopt}).zero) << c.name;

    std::vector<RuleOut> g = vjp_of(c.name, {a, b}, ta);
    EXPECT_TRUE(ArrayNear(g[0].value, times(da, to_doubles(ta)), 1e-7, 1e-8)) << c.name;
    EXPECT_TRUE(ArrayNear(g[1].value, times(db, to_doubles(ta)), 1e-7, 1e-8)) << c.name;
  }
}

TEST(ElementwiseRules, MaxMinSplitTiesEvenly) {
  Array a = f64_array({1, 2, 3}, {3});
  Array b = f64_array({1, 5, 0}, {3});
  Array ta = f64_array({10, 10, 10}, {3});
  Array tb = f64_array({2, 2, 2}, {3});
  EXPECT_TRUE(ArrayNear(jvp_of("maximum", {a, b}, {ta, tb}).value, {6, 2, 10}));
  EXPECT_TRUE(ArrayNear(jvp_of("minimum", {a, b}, {ta, tb}).value, {6, 10, 2}));
  std::vector<RuleOut> g = vjp_of("maximum", {a, b}, ta);
  EXPECT_TRUE(ArrayNear(g[0].value, {5, 0, 10}));
  EXPECT_TRUE(ArrayNear(g[1].value, {5, 10, 0}));
}

TEST(ElementwiseRules, PowAtZeroIsFinite) {
  // d/db of 0^b is 0 (not log(0) * 0 = NaN); d/da of a^0 is 0 (also at a = 0).
  Array a = f64_array({0, 0, 2}, {3});
  Array b = f64_array({2, 0, 0}, {3});
  Array one = f64_array({1, 1, 1}, {3});
  EXPECT_TRUE(ArrayNear(jvp_of("pow", {a, b}, {std::nullopt, one}).value, {0, 0, std::log(2.0)}));
  EXPECT_TRUE(ArrayNear(jvp_of("pow", {a, b}, {one, std::nullopt}).value, {0, 0, 0}));
  // 0^1 has derivative 1 in a.
  EXPECT_TRUE(ArrayNear(
      jvp_of("pow", {f64_array({0}, {}), f64_array({1}, {})}, {f64_array({1}, {}), std::nullopt})
          .value,
      {1}));
}

TEST(ElementwiseRules, IntegerBinaryHasNoDerivative) {
  Array i = Array::from_vector<int32_t>({3, 4}, {2});
  EXPECT_TRUE(jvp_of("mul", {i, i}, {i, i}).zero);
  std::vector<RuleOut> g = vjp_of("add", {i, i}, i);
  EXPECT_TRUE(g[0].zero && g[1].zero);
}

// ---- comparisons, select, convert -------------------------------------------

TEST(ElementwiseRules, ComparisonsHaveNoDerivative) {
  Array a = f64_array({1, 2}, {2});
  for (const char* name :
       {"less", "less_equal", "greater", "greater_equal", "equal", "not_equal"}) {
    EXPECT_TRUE(jvp_of(name, {a, a}, {a, a}).zero) << name;
    std::vector<RuleOut> g = vjp_of(name, {a, a}, std::nullopt);
    ASSERT_EQ(g.size(), 2u);
    EXPECT_TRUE(g[0].zero && g[1].zero) << name;
  }
}

TEST(ElementwiseRules, SelectRoutesTangentsByPredicate) {
  Array pred = Array::from_vector<bool>({true, false, true}, {3});
  Array x = f64_array({1, 2, 3}, {3}), y = f64_array({4, 5, 6}, {3});
  Array tx = f64_array({10, 20, 30}, {3}), ty = f64_array({40, 50, 60}, {3});
  EXPECT_TRUE(
      ArrayNear(jvp_of("select", {pred, x, y}, {std::nullopt, tx, ty}).value, {10, 50, 30}));
  EXPECT_TRUE(ArrayNear(jvp_of("select", {pred, x, y}, {std::nullopt, std::nullopt, ty}).value,
                        {0, 50, 0}));
  EXPECT_TRUE(ArrayNear(jvp_of("select", {pred, x, y}, {std::nullopt, tx, std::nullopt}).value,
                        {10, 0, 30}));
  EXPECT_TRUE(jvp_of("select", {pred, x, y}, {std::nullopt, std::nullopt, std::nullopt}).zero);
  std::vector<RuleOut> g = vjp_of("select", {pred, x, y}, tx);
  EXPECT_TRUE(g[0].zero);
  EXPECT_TRUE(ArrayNear(g[1].value, {10, 0, 30}));
  EXPECT_TRUE(ArrayNear(g[2].value, {0, 20, 0}));
}

TEST(ElementwiseRules, ConvertCarriesFloatTangentsOnly) {
  Array x = f64_array({1.5, -2.25}, {2});
  Params to32{{"dtype", DType::f32}};
  RuleOut j = jvp_of("convert", {x}, {x}, to32);
  ASSERT_FALSE(j.zero);
  EXPECT_EQ(j.value.dtype(), DType::f32);
  EXPECT_TRUE(ArrayNear(j.value, {1.5, -2.25}));
  std::vector<RuleOut> g = vjp_of("convert", {x}, drx::convert_array(x, DType::f32), to32);
  EXPECT_EQ(g[0].value.dtype(), DType::f64);
  EXPECT_TRUE(ArrayNear(g[0].value, {1.5, -2.25}));
  Params to_int{{"dtype", DType::i32}};
  EXPECT_TRUE(jvp_of("convert", {x}, {x}, to_int).zero);
  EXPECT_TRUE(vjp_of("convert", {x}, Array::from_vector<int32_t>({1, 1}, {2}), to_int)[0].zero);
  Array i = Array::from_vector<int32_t>({1, 2}, {2});
  EXPECT_TRUE(jvp_of("convert", {i}, {i}, Params{{"dtype", DType::f32}}).zero);
}

// ---- vmap -------------------------------------------------------------------

// Runs primitive `name`'s vmap rule; `batched[i]` says whether ins[i] has the
// batch (of size `batch`) at axis 0.
std::pair<Array, bool> vmap_of(const std::string& name, const std::vector<Array>& ins,
                               const std::vector<bool>& batched, int64_t batch,
                               const Params& params = {}) {
  const Primitive& p = drx::primitive(name);
  bool out_batched = false;
  std::vector<Type> types;
  for (const Array& a : ins) types.push_back(type_of(a));
  drx::TreeFn f = [&](const std::vector<drx::Tree>& args) -> drx::Tree {
    std::vector<drx::Batched> bs;
    for (size_t i = 0; i < args.size(); ++i) bs.push_back({args[i].value(), batched[i]});
    std::vector<drx::Batched> r = p.vmap(bs, batch, params);
    EXPECT_EQ(r.size(), 1u);
    out_batched = r[0].batched;
    return drx::Tree(r[0].value);
  };
  Array out = drx::run(drx::trace(f, types), ins)[0];
  return {out, out_batched};
}

TEST(ElementwiseRules, VmapUnaryKeepsBatchAxis) {
  Array x = random_array({3, 2}, DType::f64, 3, 0.1, 2);
  auto [y, b] = vmap_of("log", {x}, {true}, 3);
  EXPECT_TRUE(b);
  std::vector<double> want;
  for (double v : to_doubles(x)) want.push_back(std::log(v));
  EXPECT_TRUE(ArrayNear(y, want, 1e-14));
  auto [c, cb] = vmap_of("convert", {x}, {true}, 3, Params{{"dtype", DType::f32}});
  EXPECT_TRUE(cb);
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(c.shape(), (Shape{3, 2}));
  auto [s, sb] = vmap_of("stop_gradient", {x}, {true}, 3);
  EXPECT_TRUE(sb && s.bitwise_equal(x));
}

TEST(ElementwiseRules, VmapBinaryBroadcastsTheUnbatchedOperand) {
  Array xs = f64_array({1, 2, 3, 4, 5, 6}, {3, 2});  // batch of 3 rows
  Array y = f64_array({10, 100}, {2});
  auto [s, sb] = vmap_of("sub", {xs, y}, {true, false}, 3);
  EXPECT_TRUE(sb);
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_TRUE(ArrayNear(s, {-9, -98, -7, -96, -5, -94}));
  auto [r, rb] = vmap_of("div", {y, xs}, {false, true}, 3);  // unbatched first
  EXPECT_TRUE(rb);
  EXPECT_TRUE(ArrayNear(r, {10, 50, 10.0 / 3, 25, 2, 100.0 / 6}));
  auto [c, cb] = vmap_of("greater", {xs, f64_array({2, 5}, {2})}, {true, false}, 3);
  EXPECT_TRUE(cb);
  EXPECT_EQ(c.to_vector<bool>(), (std::vector<bool>{false, false, true, false, true, true}));
  auto [u, ub] = vmap_of("mul", {y, y}, {false, false}, 3);
  EXPECT_FALSE(ub);
  EXPECT_TRUE(ArrayNear(u, {100, 10000}));
}

TEST(ElementwiseRules, VmapSelectWithUnbatchedPredicate) {
  Array pred = Array::from_vector<bool>({true, false}, {2});
  Array xs = f64_array({1, 2, 3, 4}, {2, 2});
  Array y = f64_array({-1, -2}, {2});
  auto [r, rb] = vmap_of("select", {pred, xs, y}, {false, true, false}, 2);
  EXPECT_TRUE(rb);
  EXPECT_TRUE(ArrayNear(r, {1, -2, 3, -2}));
}

// ---- through the function-level transformations ------------------------------

TEST(ElementwiseRules, GradOfCompositesMatchesHandDerivatives) {
  // f(x) = tanh(x) * x + relu(x) / (1 + x^2); f'(x) by hand.
  auto f = [](Value x) { return drx::tanh(x) * x + drx::relu(x) / (1.0 + drx::square(x)); };
  auto df = [](double x) {
    double t = std::tanh(x), q = 1 + x * x;
    double relu_part = x > 0 ? (q - 2 * x * x) / (q * q) : 0.0;
    return (1 - t * t) * x + t + relu_part;
  };
  auto g = drx::jit(drx::grad(f));
  for (double x : {-1.3, 0.4, 2.0}) {
    Array gx = g(f64_array({x}, {}));
    EXPECT_NEAR(gx.item<double>(), df(x), 1e-12) << x;
  }
  // relu'(0) = 0, as in JAX and PyTorch.
  EXPECT_EQ(
      drx::jit(drx::grad([](Value x) { return drx::relu(x); }))(f64_array({0}, {})).item<double>(),
      0.0);
}

TEST(ElementwiseRules, SecondDerivativesThroughTheRules) {
  // d^2/dx^2 of logistic(x) = s (1 - s) (1 - 2 s); of sqrt: -1/4 x^(-3/2); of pow(x, 3): 6x.
  struct Case {
    std::function<Value(const Value&)> f;
    double (*d2)(double);
    double x;
  };
  std::vector<Case> cases = {
      {[](const Value& v) { return drx::logistic(v); },
       [](double x) {
         double s = 1 / (1 + std::exp(-x));
         return s * (1 - s) * (1 - 2 * s);
       },
       0.7},
      {[](const Value& v) { return drx::sqrt(v); },
       [](double x) { return -0.25 * std::pow(x, -1.5); }, 1.7},
      {[](const Value& v) { return drx::pow(v, 3.0); }, [](double x) { return 6 * x; }, -1.2},
      {[](const Value& v) { return drx::rsqrt(v); },
       [](double x) { return 0.75 * std::pow(x, -2.5); }, 0.9},
      {[](const Value& v) { return drx::log1p(v) * drx::sin(v); },
       [](double x) {
         return -1 / ((1 + x) * (1 + x)) * std::sin(x) + 2 * std::cos(x) / (1 + x) -
                std::log1p(x) * std::sin(x);
       },
       0.3},
  };
  for (const Case& c : cases) {
    auto fn = c.f;
    auto d1 = drx::grad([fn](Value x) { return fn(x); });
    auto d2 = drx::jit(drx::grad([d1](Value x) { return d1(x); }));
    EXPECT_NEAR(d2(f64_array({c.x}, {})).item<double>(), c.d2(c.x), 1e-10) << c.x;
  }
}

TEST(ElementwiseRules, VmapOfBroadcastingOpsMatchesLoop) {
  // vmap over rows of x with y shared: f(x_i, y) = maximum(x_i * y, 0.5) - where(x_i > y, x_i, y).
  auto f = [](Value x, Value y) {
    return drx::maximum(x * y, 0.5) - drx::where(drx::greater(x, y), x, y);
  };
  Array x = random_array({4, 3}, DType::f64, 11);
  Array y = random_array({3}, DType::f64, 12);
  Array out = drx::jit(drx::vmap(f, {0, std::nullopt}))(x, y);
  ASSERT_EQ(out.shape(), (Shape{4, 3}));
  std::vector<double> vx = to_doubles(x), vy = to_doubles(y), want;
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 3; ++j) {
      double a = vx[i * 3 + j], b = vy[j];
      want.push_back(std::max(a * b, 0.5) - (a > b ? a : b));
    }
  EXPECT_TRUE(ArrayNear(out, want, 1e-14));
}

}  // namespace
