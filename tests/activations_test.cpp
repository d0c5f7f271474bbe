// Rounding, remainder, the activations (sigmoid, softplus, log_sigmoid, gelu),
// clip, sigmoid cross-entropy, layer_norm, embedding and softmax over a
// placement: values against float64 formulas evaluated here, gradients
// against central differences, vjp against jvp, vmap against a loop.
#include <cmath>

#include "drx/exec/executable.h"
#include "drx/ops/primitives.h"
#include "tests/test_util.h"
#include "tests/transform_checks.h"

namespace drx::testing {
namespace {

// f applied to every element of xs in double, for the references.
std::vector<double> each(const std::vector<double>& xs, double (*f)(double)) {
  std::vector<double> out;
  for (double x : xs) out.push_back(f(x));
  return out;
}

Array run1(const std::function<Value(Value)>& f, const Array& x) {
  Program p = trace([&](Value v) { return f(v); }, {Type(x.dtype(), x.shape())});
  std::vector<Array> compiled = compile(p).run({x});
  EXPECT_TRUE(BitwiseEqual(compiled, interpret(p, {x})));
  return compiled[0];
}

TEST(Rounding, FloorCeilRoundHalfToEvenAndRemainder) {
  const std::vector<double> xs = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -2.6, 0.0, 7.0};
  Array x = f64_array(xs, {10});
  EXPECT_TRUE(ArrayNear(run1([](Value v) { return floor(v); }, x), each(xs, std::floor), 0));
  EXPECT_TRUE(ArrayNear(run1([](Value v) { return ceil(v); }, x), each(xs, std::ceil), 0));
  // Ties go to the even neighbour, as jnp.round: -2.5 -> -2, 1.5 -> 2, 2.5 -> 2.
  EXPECT_TRUE(ArrayNear(run1([](Value v) { return round(v); }, x),
                        {-2, -2, -0.0, 0, 2, 2, 2, -3, 0, 7}, 0));
  // remainder keeps the dividend's sign (fmod), unlike Python's %.
  Array r = run1([](Value v) { return remainder(v, scalar_like(v, -0.75)); }, x);
  std::vector<double> want;
  for (double v : xs) want.push_back(std::fmod(v, -0.75));
  EXPECT_TRUE(ArrayNear(r, want, 1e-15));
  Array ints =
      Array::from_vector<int32_t>({-7, 7, -7, 7, std::numeric_limits<int32_t>::min()}, {5});
  Array d = Array::from_vector<int32_t>({2, 2, -2, -2, -1}, {5});
  Array ri = jit([](Value a, Value b) { return remainder(a, b); })(ints, d);
  EXPECT_EQ(ri.to_vector<int32_t>(), (std::vector<int32_t>{-1, 1, -1, 1, 0}));
  expect_error([] { trace([](Value v) { return floor(v); }, {Type(DType::i32, {2})}); },
               {"floor", "i32[2]", "floating-point"});
  expect_error(
      [] {
        jit([](Value a) { return remainder(a, zeros_like(a)); })(
            Array::from_vector<int32_t>({3}, {1}));
      },
      {"remainder", "by zero"});
}

double softplus_ref(double x) { return std::log1p(std::exp(-std::abs(x))) + std::max(x, 0.0); }
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

TEST(Activations, ValuesMatchTheFormulasIncludingLargeArguments) {
  const std::vector<double> xs = {-800, -30, -2, -0.3, 0, 0.3, 2, 30, 800};
  Array x = f64_array(xs, {9});
  EXPECT_TRUE(
      ArrayNear(run1([](Value v) { return softplus(v); }, x), each(xs, softplus_ref), 1e-15));
  EXPECT_TRUE(ArrayNear(run1([](Value v) { return sigmoid(v); }, x), each(xs, sigmoid_ref), 1e-15));
  std::vector<double> ls;
  for (double v : xs) ls.push_back(-softplus_ref(-v));
  EXPECT_TRUE(ArrayNear(run1([](Value v) { return log_sigmoid(v); }, x), ls, 1e-15));
  EXPECT_EQ(run1([](Value v) { return log_sigmoid(v); }, x).element_as_double(0), -800.0);
  EXPECT_TRUE(ArrayNear(run1([](Value v) { return gelu(v); }, x), each(xs, gelu_ref), 1e-15));
  EXPECT_TRUE(
      ArrayNear(run1([](Value v) { return gelu(v, true); }, x), each(xs, gelu_tanh_ref), 1e-15));
  std::vector<double> clipped;
  for (double v : xs) clipped.push_back(std::min(std::max(v, -2.0), 0.3));
  EXPECT_TRUE(ArrayNear(run1([](Value v) { return clip(v, -2.0, 0.3); }, x), clipped, 0));
  expect_error([] { trace([](Value v) { return clip(v, 1.0, -1.0); }, {Type(DType::f64, {2})}); },
               {"clip", "exceeds"});
}

// gelu is one primitive, computing its composition 0.5 x (1 + erf(x / sqrt 2)) op for op:
// in f32 the same bits, compiled and interpreted, and its derivative is the float64 formula's.
TEST(Activations, GeluIsItsCompositionBitwiseAndItsDerivativeTheFormula) {
  Array x = random_array({1000}, DType::f32, 7, -6, 6);
  auto composed = [](Value v) { return 0.5 * v * (1.0 + erf(v * M_SQRT1_2)); };
  const Array want = run1(composed, x);
  EXPECT_TRUE(run1([](Value v) { return gelu(v); }, x).bitwise_equal(want));  // and compiled
  std::vector<double> slope;
  for (int64_t i = 0; i < x.size(); ++i) {
    const double v = x.data<float>()[i];
    slope.push_back(0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
                    v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI));
  }
  EXPECT_TRUE(ArrayNear(jit(grad([](Value v) { return sum(gelu(v)); }))(x), slope, 1e-6, 1e-6));
}

TEST(Activations, GradientsMatchFiniteDifferencesAndVmapMatchesALoop) {
  const std::vector<OpCase> cases = {
      {"softplus", [](const std::vector<Value>& v) { return softplus(v[0]); }, {{5}}, -3, 3},
      {"log_sigmoid", [](const std::vector<Value>& v) { return log_sigmoid(v[0]); }, {{5}}, -3, 3},
      {"gelu", [](const std::vector<Value>& v) { return gelu(v[0]); }, {{5}}, -3, 3},
      {"gelu_tanh", [](const std::vector<Value>& v) { return gelu(v[0], true); }, {{5}}, -3, 3},
      // gelu's derivative is a primitive of its own, differentiated in turn (second order).
      {"gelu_grad",
       [](const std::vector<Value>& v) { return emit1(prims::gelu_grad(), {v[0]}); },
       {{5}},
       -3,
       3},
      {"clip",
       [](const std::vector<Value>& v) { return clip(v[0], v[1] - 2.0, v[1] + 2.0); },
       {{5}, {5}},
       -3,
       3},
      {"remainder",
       [](const std::vector<Value>& v) { return remainder(v[0], v[1] + 2.0); },
       {{5}, {5}},
       0.1,
       0.9},
      {"rounding",
       [](const std::vector<Value>& v) { return v[0] * 2.0 + floor(v[0] * 3.0) + round(v[0]); },
       {{4}},
       0.1,
       0.4},
      {"sigmoid_bce",
       [](const std::vector<Value>& v) {
         return nn::sigmoid_binary_cross_entropy(v[0], logistic(v[1]));
       },
       {{2, 3}, {2, 3}},
       -3,
       3},
      {"layer_norm",
       [](const std::vector<Value>& v) { return nn::layer_norm(v[0], v[1], v[2]); },
       {{2, 4}, {4}, {4}},
       -2,
       2},
  };
  for (const OpCase& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(GradMatchesFiniteDifferences(c, 3));
    EXPECT_TRUE(VjpMatchesJvp(c, 4));
    EXPECT_TRUE(VmapMatchesLoop(c, 5, 0));
  }
  // At the kink x = 0, softplus' = sigmoid(0) = 1/2 (maximum's tie rule).
  EXPECT_TRUE(ArrayNear(jit(grad([](Value v) { return sum(softplus(v)); }))(f64_array({0}, {1})),
                        {0.5}, 1e-15));
}

TEST(NnLayers, SigmoidCrossEntropyLayerNormAndEmbedding) {
  Array logits = f64_array({-50, -1, 0, 2, 60}, {5}), labels = f64_array({0, 1, 0.5, 0, 1}, {5});
  Array bce =
      jit([](Value a, Value b) { return nn::sigmoid_binary_cross_entropy(a, b); })(logits, labels);
  for (int64_t i = 0; i < 5; ++i) {
    const double x = logits.element_as_double(i), y = labels.element_as_double(i);
    // -y log s(x) - (1 - y) log(1 - s(x)), with log s(x) = -softplus(-x).
    EXPECT_NEAR(bce.element_as_double(i), y * softplus_ref(-x) + (1 - y) * softplus_ref(x), 1e-13);
  }
  Array x = f64_array({1, 2, 3, 4, 10, 10, 10, 14}, {2, 4});
  Array scale = f64_array({1, 2, 1, 1}, {4}), bias = f64_array({0, 0, 1, 0}, {4});
  Array ln =
      jit([](Value a, Value s, Value b) { return nn::layer_norm(a, s, b, 0.0); })(x, scale, bias);
  // Row 0: mean 2.5, variance 1.25; row 1: mean 11, variance 3.
  const double r0 = 1 / std::sqrt(1.25), r1 = 1 / std::sqrt(3.0);
  EXPECT_TRUE(ArrayNear(
      ln, {-1.5 * r0, -0.5 * r0 * 2, 0.5 * r0 + 1, 1.5 * r0, -r1, -r1 * 2, -r1 + 1, 3 * r1},
      1e-13));
  Array table = f64_array({0, 1, 10, 11, 20, 21}, {3, 2});
  Array ids = Array::from_vector<int32_t>({2, 0, 2, 1}, {2, 2});
  Array e = jit([](Value t, Value i) { return nn::embedding(t, i); })(table, ids);
  EXPECT_EQ(e.shape(), (Shape{2, 2, 2}));
  EXPECT_TRUE(ArrayNear(e, {20, 21, 0, 1, 20, 21, 10, 11}, 0));
  // Its gradient counts how often each row is used.
  Array g = jit(grad([](Value t, Value i) { return sum(nn::embedding(t, i)); }))(table, ids);
  EXPECT_TRUE(ArrayNear(g, {1, 1, 1, 1, 2, 2}, 0));
  expect_error(
      [&] {
        jit([](Value a, Value s, Value b) { return nn::layer_norm(a, s, b); })(x, bias,
                                                                               f64_array({0}, {1}));
      },
      {"layer_norm", "scale [d] and bias [d]"});
  expect_error([&] { jit([](Value t, Value i) { return nn::embedding(t, i); })(table, table); },
               {"embedding", "integer ids"});
}

TEST(PlacementSoftmax, LearnedAggregationWeightsOverClients) {
  // The server learns one logit per client; the aggregate is the softmax-weighted
  // sum of the clients' values. Its value and gradient against a plain computation.
  auto aggregate =
      program({{"clients", 4}},
              [](Value logits, Value xs) {
                Value w = placement_softmax(logits);
                return sum(reduce_sum(map_fn([](Value wi, Value xi) { return wi * xi; }, w, xs)));
              },
              {"clients", "clients"});
  Array logits = f64_array({0.5, -1, 2, 800}, {4}),
        xs = f64_array({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  auto plain = [](const std::vector<double>& l, const Array& x) {
    double m = *std::max_element(l.begin(), l.end()), z = 0, s = 0;
    for (double v : l) z += std::exp(v - m);
    for (size_t i = 0; i < l.size(); ++i)
      s += std::exp(l[i] - m) / z *
           (x.element_as_double(static_cast<int64_t>(2 * i)) +
            x.element_as_double(static_cast<int64_t>(2 * i + 1)));
    return s;
  };
  std::vector<double> l = to_doubles(logits);
  EXPECT_NEAR(jit(aggregate)(logits, xs).item<double>(), plain(l, xs), 1e-12);
  Array g = jit(grad(aggregate))(logits, xs);
  for (size_t i = 0; i < 4; ++i) {
    std::vector<double> up = l, down = l;
    up[i] += 1e-6;
    down[i] -= 1e-6;
    EXPECT_NEAR(g.element_as_double(static_cast<int64_t>(i)),
                (plain(up, xs) - plain(down, xs)) / 2e-6, 1e-6);
  }
  auto normalized = program({{"clients", 3}},
                            [](Value w) { return place(placement_normalize(w), ""); }, {"clients"});
  EXPECT_TRUE(ArrayNear(jit(normalized)(f64_array({1, 3, 4}, {3})), {0.125, 0.375, 0.5}, 1e-15));
  expect_error([] { jit([](Value v) { return placement_softmax(v); })(f64_array({1}, {1})); },
               {"placement_softmax", "outside a drx::program"});
}

}  // namespace
}  // namespace drx::testing
