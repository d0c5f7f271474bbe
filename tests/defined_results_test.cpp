// Issue 27, "no silent failures" in the library's numerics: the federated means when no
// client contributes (every client dropped out), differential privacy's clip and noise, and
// shapes or allocations too large for the machine. Each case has a defined, documented result
// or a drx::Error; none gives NaN or std::bad_alloc. Results are checked in the reference
// interpreter (drx::run of the traced program) and in the compiled executor (drx::jit).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace drx::testing {
namespace {

namespace dp = drx::privacy;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// f's results from the interpreter, checked to equal the compiled executor's bitwise.
template <class F>
std::vector<Array> interpreted_and_compiled(F f, const std::vector<Array>& args) {
  std::vector<Type> types;
  for (const Array& a : args) types.emplace_back(a.dtype(), a.shape());
  const Program p = trace(f, types);
  std::vector<Array> interpreted = run(p, args);
  // As drx::jit compiles it: simplified first.
  const std::vector<Array> compiled = compile(simplify(p)).run(args);
  EXPECT_EQ(interpreted.size(), compiled.size());
  for (size_t i = 0; i < interpreted.size() && i < compiled.size(); ++i)
    EXPECT_TRUE(interpreted[i].bitwise_equal(compiled[i]))
        << "result " << i << ": interpreted " << interpreted[i].str() << ", compiled "
        << compiled[i].str();
  return interpreted;
}

// ---- reduce_weighted_mean and reduce_mean with nobody contributing -------------------

auto weighted_mean_program() {
  return program({{"clients", 3}}, [](Value x, Value w) { return reduce_weighted_mean(x, w); });
}

// The sum of the weighted mean, differentiated in both x and w.
auto weighted_mean_grads() {
  return grad([](Value x, Value w) { return sum(weighted_mean_program()(x, w)); },
              std::vector<int>{0, 1});
}

TEST(DefinedResults, WeightedMeanWithAllWeightsZeroIsZero) {
  const Array x = f64_array({1, -1, 0, 3, 2, 0.5}, {3, 2});
  const Array w = f64_array({0, 0, 0}, {3});
  std::vector<Array> r = interpreted_and_compiled(weighted_mean_program(), {x, w});
  EXPECT_TRUE(ArrayNear(r[0], {0, 0}, 0, 0)) << r[0].str();
  // The gradient is defined too: nothing moves a mean that nobody contributes to.
  std::vector<Array> g = interpreted_and_compiled(weighted_mean_grads(), {x, w});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(ArrayNear(g[0], {0, 0, 0, 0, 0, 0}, 0, 0)) << g[0].str();
  EXPECT_TRUE(ArrayNear(g[1], {0, 0, 0}, 0, 0)) << g[1].str();
}

TEST(DefinedResults, WeightedMeanWithNonzeroWeightsKeepsItsBits) {
  // sum_i w_i x_i / sum_i w_i, computed here as the library always computed it.
  auto by_hand = program({{"clients", 3}}, [](Value x, Value w) {
    return reduce_sum(map_fn([](Value xi, Value wi) { return xi * wi; }, x, w)) / reduce_sum(w);
  });
  const Array x = random_array({3, 5}, f64, 11), w = f64_array({0.3, 0, 1.7}, {3});
  std::vector<Array> got = interpreted_and_compiled(weighted_mean_program(), {x, w});
  std::vector<Array> want = interpreted_and_compiled(by_hand, {x, w});
  EXPECT_TRUE(got[0].bitwise_equal(want[0])) << got[0].str() << " vs " << want[0].str();
  // The gradient of a mean with some weight: d/dx_i = w_i / W, d/dw_i = sum(x_i - mean) / W.
  std::vector<Array> g = interpreted_and_compiled(weighted_mean_grads(), {x, w});
  const double total = 2.0;
  std::vector<double> dx, dw;
  for (int i = 0; i < 3; ++i) {
    double s = 0;
    for (int j = 0; j < 5; ++j) {
      dx.push_back(w.data<double>()[i] / total);
      s += x.data<double>()[i * 5 + j] - want[0].data<double>()[j];
    }
    dw.push_back(s / total);
  }
  EXPECT_TRUE(ArrayNear(g[0], dx, 1e-14, 1e-15));
  EXPECT_TRUE(ArrayNear(g[1], dw, 1e-13, 1e-14));
}

// A cohort in which every client dropped out: placements of size 0.
TEST(DefinedResults, MeansOverZeroClientsAreZero) {
  auto f = program({{"clients", 0}}, [](Value x, Value w) -> std::vector<Value> {
    Value scaled = map_fn([](Value xi) { return xi * 2.0; }, x);
    return {reduce_mean(scaled), reduce_weighted_mean(x, w), reduce_sum(x)};
  });
  const Array x(f64, {0, 2}), w(f64, {0});
  std::vector<Array> r = interpreted_and_compiled(f, {x, w});
  ASSERT_EQ(r.size(), 3u);
  for (const Array& a : r) EXPECT_TRUE(ArrayNear(a, {0, 0}, 0, 0)) << a.str();
  auto loss = grad([f](Value x, Value w) {
    std::vector<Value> v = f(x, w);
    return sum(v[0]) + sum(v[1]);
  });
  std::vector<Array> g = interpreted_and_compiled(loss, {x, w});
  EXPECT_EQ(g[0].shape(), (Shape{0, 2}));
}

// ---- differential privacy: clip and noise ------------------------------------------

Tree clip_tree(const Tree& update, const Value& clip) {
  dp::Clipped c = dp::clip_by_l2_norm(update, clip);
  return Tree::list({c.update, Tree(c.norm)});
}

TEST(DefinedResults, ClipKnownWhenTracingMustBeANonNegativeNumber) {
  for (double bad : {-1.0, kNaN}) {
    auto f = [bad](Value x) {
      return clip_tree(Tree(x), constant(Array::scalar<double>(bad)))[0].value();
    };
    expect_error([&] { trace(f, {Type(f64, {3})}); },
                 {"clip_by_l2_norm", "clip", std::isnan(bad) ? "nan" : "-1", ">= 0"});
  }
  // +inf keeps its meaning: no clipping.
  auto unclipped = jit(
      [](Value x) { return clip_tree(Tree(x), constant(Array::scalar<double>(kInf)))[0].value(); });
  const Array x = f64_array({3, -4, 12}, {3});
  EXPECT_TRUE(unclipped(x).bitwise_equal(x));
}

TEST(DefinedResults, TracedNegativeOrNaNClipIsTreatedAsZero) {
  auto f = [](Value x, Value clip) { return clip_tree(Tree(x), clip)[0].value(); };
  for (const std::vector<double>& update : {std::vector<double>{3, -4, 12}, {0, 0, 0}})
    for (double clip : {-2.0, kNaN, 0.0}) {
      std::vector<Array> r =
          interpreted_and_compiled(f, {f64_array(update, {3}), Array::scalar<double>(clip)});
      EXPECT_TRUE(ArrayNear(r[0], {0, 0, 0}, 0, 0)) << "clip " << clip << ": " << r[0].str();
    }
  // A positive clip is as before: [3, -4, 12] has norm 13; clipped to 6.5 it halves.
  std::vector<Array> r =
      interpreted_and_compiled(f, {f64_array({3, -4, 12}, {3}), Array::scalar<double>(6.5)});
  EXPECT_TRUE(ArrayNear(r[0], {1.5, -2, 6}, 0, 0)) << r[0].str();
}

TEST(DefinedResults, NoisyMeanRefusesAnInfiniteNoiseStd) {
  auto f = [](Value sum, Value key) {
    return dp::noisy_mean(Tree(sum), key, 1.0, constant(Array::scalar<double>(kInf)), 4.0).value();
  };
  expect_error(
      [&] {
        trace(f, {Type(f64, {3}), Type(u32, {2})});
      },
      {"noisy_mean", "inf", "noise_multiplier", "1"});
  // z = 0 with an infinite clip is the plain mean.
  auto plain = jit([](Value sum, Value key) {
    return dp::noisy_mean(Tree(sum), key, 0.0, constant(Array::scalar<double>(kInf)), 4.0).value();
  });
  EXPECT_TRUE(ArrayNear(plain(f64_array({4, 8, -2}, {3}), random::key(1)), {1, 2, -0.5}, 0, 0));
}

TEST(DefinedResults, DpRoundStateRefusesWhatTheRoundCannotUse) {
  optim::DpSpec noisy;
  noisy.noise_multiplier = 1.0;
  const Array key = random::key(0);
  auto state = [&](double clip, const optim::DpSpec& d) {
    return optim::dp_round_state(Tree(), clip, key, f64, d);
  };
  // Noise of std z * inf on every element: the round would return NaN.
  expect_error([&] { state(kInf, noisy); }, {"dp_round_state", "inf", "noise"});
  for (double clip : {kNaN, -1.0}) expect_error([&] { state(clip, noisy); }, {"clip"});
  for (double z : {kNaN, kInf}) {
    optim::DpSpec bad = noisy;
    bad.noise_multiplier = z;
    expect_error([&] { state(1.0, bad); }, {"noise multiplier"});
    optim::RoundSpec spec;
    spec.dp = bad;
    expect_error([&] { optim::fedavg_round(spec); }, {"noise multiplier"});
  }
  // +inf with z = 0 keeps its meaning: no clipping, no noise.
  optim::DpSpec none;
  Tree s = state(kInf, none);
  EXPECT_TRUE(std::isinf(s["dp"]["clip"].array().item<double>()));
  EXPECT_NO_THROW(state(2.5, noisy));
}

// ---- shapes and allocations too large ----------------------------------------------

TEST(DefinedResults, ElementCountOverflowIsAnErrorNamingTheShape) {
  const Shape huge = {int64_t{1} << 40, int64_t{1} << 40};
  expect_error([&] { num_elements(huge); }, {"[1099511627776,1099511627776]", "int64"});
  expect_error([&] { zeros(huge, f32); }, {"[1099511627776,1099511627776]"});
}

TEST(DefinedResults, AllocationFailureIsAnErrorNamingTheBytes) {
  // 2^50 floats: 4 PiB, beyond any x86-64 address space, so the allocation fails everywhere.
  expect_error([] { full({int64_t{1} << 50}, 0, f32); },
               {"4503599627370496 bytes", "f32[1125899906842624]"});
  // 2^62 doubles: the byte count itself overflows.
  expect_error([] { Array(f64, {int64_t{1} << 62}); }, {"f64[4611686018427387904]", "bytes"});
}

}  // namespace
}  // namespace drx::testing
