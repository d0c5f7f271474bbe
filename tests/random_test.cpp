// drx::random: keys, split and fold_in against JAX's own test values; the
// draws against plain-C++ evaluations of JAX's formulas on the threefry2x32
// block (itself pinned to the Random123 vectors in random_bits_test.cpp);
// statistics on 10^6 draws; determinism under jit, vmap, the mesh and the
// interpreter; per-client streams from client_index().
#include <algorithm>
#include <bit>
#include <cmath>
#include <map>

#include "drx/core/primitive.h"
#include "drx/core/program_text.h"
#include "drx/exec/executable.h"
#include "drx/ops/primitives.h"
#include "tests/test_util.h"
#include "tests/transform_checks.h"

namespace drx::testing {
namespace {

namespace rnd = drx::random;

std::vector<uint32_t> words(const Array& a) { return a.to_vector<uint32_t>(); }

// One threefry2x32 block through the primitive's reference semantics.
std::pair<uint32_t, uint32_t> block(uint32_t k0, uint32_t k1, uint32_t x0, uint32_t x1) {
  std::vector<Array> r = prims::threefry2x32().eval(
      {Array::scalar(k0), Array::scalar(k1), Array::scalar(x0), Array::scalar(x1)}, {});
  return {r[0].item<uint32_t>(), r[1].item<uint32_t>()};
}

// Runs a traced function of one key on `key`, compiled.
template <class F>
Array draw(F f, const Array& key) {
  return jit([f](Value k) { return f(k); })(key);
}

// ---- keys ------------------------------------------------------------------

// jax tests/random_test.py, test_prng_seeds_and_keys (jax_enable_x64=True).
TEST(Random, KeysFromSeedsMatchJax) {
  const std::vector<std::pair<int64_t, std::vector<uint32_t>>> cases = {
      {0, {0, 0}},
      {1, {0, 1}},
      {3, {0, 3}},
      {-1, {4294967295u, 4294967295u}},
      {-3, {4294967295u, 4294967293u}},
      {int64_t{2147483647} + 100, {0, 2147483747u}},
      {int64_t{-2147483648} - 100, {4294967295u, 2147483548u}},
  };
  for (const auto& [seed, want] : cases) {
    EXPECT_EQ(words(rnd::key(seed)), want) << seed;
    Array traced = jit([](Value s) { return rnd::key(s); })(Array::scalar(seed));
    EXPECT_EQ(words(traced), want) << "traced " << seed;
  }
}

// jax tests/random_test.py, testPRNGValues: fold_in(key(0), 4). fold_in is
// the same function with and without jax_threefry_partitionable.
TEST(Random, FoldInMatchesJax) {
  const std::vector<uint32_t> want = {2285895361u, 433833334u};
  EXPECT_EQ(words(rnd::fold_in(rnd::key(0), 4)), want);
  EXPECT_EQ(words(draw([](Value k) { return rnd::fold_in(k, 4); }, rnd::key(0))), want);
  Array by_value = jit([](Value k, Value i) { return rnd::fold_in(k, i); })(
      rnd::key(0), Array::scalar(int32_t{4}));
  EXPECT_EQ(words(by_value), want);
}

// jax test_threefry_split_fold_in_symmetry (partitionable): split(key, n)[i]
// is fold_in(key, i).
TEST(Random, SplitIsFoldInOfTheIndexAsJaxPartitionable) {
  const Array k = rnd::key(72);
  std::vector<Array> host = rnd::split(k, 3);
  Program p = drx::trace(
      [](Value key) {
        std::vector<Value> s = rnd::split(key, 3);
        return Tree::list({Tree(s[0]), Tree(s[1]), Tree(s[2])});
      },
      k);
  std::vector<Array> traced = compile(p).run({k});
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(words(host[static_cast<size_t>(i)]), words(rnd::fold_in(k, i)));
    EXPECT_EQ(words(traced[static_cast<size_t>(i)]), words(rnd::fold_in(k, i)));
  }
}

// JAX's values from before jax_threefry_partitionable (testRngRandomBits,
// testPRNGValues) pin the same block function under the original counter
// layout: the counters 0..2n-1 split into halves x0 | x1, outputs y0 | y1.
TEST(Random, BlockFunctionReproducesJaxOriginalLayoutValues) {
  auto original = [](const std::vector<uint32_t>& key, uint32_t count) {
    const uint32_t half = (count + 1) / 2;
    std::vector<uint32_t> y0, y1;
    for (uint32_t i = 0; i < half; ++i) {
      uint32_t x1 = i + half < count ? i + half : 0;
      auto [a, b] = block(key[0], key[1], i, x1);
      y0.push_back(a);
      y1.push_back(b);
    }
    y0.insert(y0.end(), y1.begin(), y1.end());
    y0.resize(count);
    return y0;
  };
  EXPECT_EQ(original(words(rnd::key(1701)), 3),
            (std::vector<uint32_t>{56197195u, 4200222568u, 961309823u}));
  EXPECT_EQ(original(words(rnd::key(0)), 8),
            (std::vector<uint32_t>{2285895361u, 1501764800u, 1518642379u, 4090693311u, 433833334u,
                                   4221794875u, 839183663u, 3740430601u}));
  std::vector<uint32_t> w = original(words(rnd::key(1701)), 6);
  std::vector<uint64_t> bits64;
  for (size_t i = 0; i < 3; ++i) bits64.push_back(uint64_t{w[i]} << 32 | w[i + 3]);
  EXPECT_EQ(bits64, (std::vector<uint64_t>{3982329540505020460ull, 16822122385914693683ull,
                                           7882654074788531506ull}));
}

// ---- draws against JAX's formulas ------------------------------------------

// bits (partitionable): block at (0, flat index), words xor-ed.
uint32_t ref_bits(const Array& key, uint32_t i) {
  std::vector<uint32_t> k = words(key);
  auto [a, b] = block(k[0], k[1], 0, i);
  return a ^ b;
}

TEST(Random, BitsAndUniformAreJaxsFormulasBitForBit) {
  const Array k = rnd::key(1701);
  const Shape shape{3, 5};
  Array b = draw([&](Value key) { return rnd::bits(key, shape); }, k);
  Array b8 = draw([&](Value key) { return rnd::bits(key, shape, u8); }, k);
  Array u = draw([&](Value key) { return rnd::uniform(key, shape); }, k);
  Array s = draw([&](Value key) { return rnd::uniform(key, shape, f32, -2.0, 3.0); }, k);
  Array d = draw([&](Value key) { return rnd::uniform(key, shape, f64); }, k);
  std::vector<uint32_t> kw = words(k);
  for (uint32_t i = 0; i < 15; ++i) {
    const uint32_t bits = ref_bits(k, i);
    EXPECT_EQ(b.data<uint32_t>()[i], bits);
    EXPECT_EQ(static_cast<uint32_t>(b8.data<uint8_t>()[i]), bits & 255u);
    const float f = std::bit_cast<float>((bits >> 9) | 0x3F800000u) - 1.0f;
    EXPECT_EQ(u.data<float>()[i], f);
    EXPECT_EQ(s.data<float>()[i], std::max(-2.0f, f * 5.0f + -2.0f));
    auto [hi, lo] = block(kw[0], kw[1], 0, i);
    const uint64_t b64 = (uint64_t{hi} << 32) | lo;
    const double g = std::bit_cast<double>((b64 >> 12) | 0x3FF0000000000000ull) - 1.0;
    EXPECT_EQ(d.data<double>()[i], g);
  }
}

// Inverse of erf by bisection in long double: the independent reference.
long double erfinv_reference(long double y) {
  long double lo = -10, hi = 10;
  for (int i = 0; i < 200; ++i) {
    long double mid = (lo + hi) / 2;
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

TEST(Random, ErfInvMatchesBisectionAndHasTheInverseDerivative) {
  std::vector<double> xs = {-0.999999, -0.99, -0.9, -0.5, -1e-3, 0.0, 1e-6, 0.3, 0.7, 0.95, 0.9999};
  Array a64 = f64_array(xs, {static_cast<int64_t>(xs.size())});
  Array r64 = jit([](Value x) { return erf_inv(x); })(a64);
  Array r32 = jit([](Value x) { return erf_inv(x); })(convert_array(a64, f32));
  for (size_t i = 0; i < xs.size(); ++i) {
    const double want = static_cast<double>(erfinv_reference(xs[i]));
    EXPECT_NEAR(r64.data<double>()[i], want, 1e-14 * std::max(1.0, std::abs(want))) << xs[i];
    // f32 evaluates 1 - x^2 in float, as XLA does: exact forward values away
    // from +-1, and everywhere the exact erfinv of an argument within a few
    // float rounding errors of x (backward error).
    const float x32 = static_cast<float>(xs[i]);
    const double got32 = r32.data<float>()[i];
    if (std::abs(x32) <= 0.95f) {
      const double want32 = static_cast<double>(erfinv_reference(x32));
      EXPECT_NEAR(got32, want32, 4e-7 * std::max(1.0, std::abs(want32))) << xs[i];
    }
    EXPECT_NEAR(std::erf(got32), x32, 3e-7) << xs[i];
  }
  Array edges = jit([](Value x) { return erf_inv(x); })(f64_array({-1.0, 1.0}, {2}));
  EXPECT_EQ(edges.data<double>()[0], -INFINITY);
  EXPECT_EQ(edges.data<double>()[1], INFINITY);
  OpCase c{
      "erf_inv", [](const std::vector<Value>& v) { return sum(erf_inv(v[0])); }, {{6}}, -0.9, 0.9};
  EXPECT_TRUE(GradMatchesFiniteDifferences(c, 3));
  EXPECT_TRUE(VjpMatchesJvp(c, 4));
}

TEST(Random, NormalIsSqrt2ErfInvOfJaxsUniform) {
  const Array k = rnd::key(3);
  Array z = draw([](Value key) { return rnd::normal(key, {64}); }, k);
  Array z64 = draw([](Value key) { return rnd::normal(key, {64}, f64); }, k);
  std::vector<uint32_t> kw = words(k);
  const float lo = std::nextafter(-1.0f, 0.0f);
  for (uint32_t i = 0; i < 64; ++i) {
    const float f = std::bit_cast<float>((ref_bits(k, i) >> 9) | 0x3F800000u) - 1.0f;
    const float u = std::max(lo, f * (1.0f - lo) + lo);
    const double want = std::sqrt(2.0L) * erfinv_reference(u);
    EXPECT_NEAR(z.data<float>()[i], want, 1e-6 * std::max(1.0, std::abs(want))) << i;
    auto [hi, lo64] = block(kw[0], kw[1], 0, i);
    const double g =
        std::bit_cast<double>(((uint64_t{hi} << 32 | lo64) >> 12) | 0x3FF0000000000000ull) - 1.0;
    const double lo_d = std::nextafter(-1.0, 0.0);
    const double ud = std::max(lo_d, g * (1.0 - lo_d) + lo_d);
    const double want64 = static_cast<double>(std::sqrt(2.0L) * erfinv_reference(ud));
    EXPECT_NEAR(z64.data<double>()[i], want64, 1e-13 * std::max(1.0, std::abs(want64))) << i;
  }
}

// ---- statistics on 10^6 draws ----------------------------------------------

constexpr int64_t kDraws = 1000000;

std::vector<double> sorted_doubles(const Array& a) {
  std::vector<double> v = to_doubles(a);
  std::sort(v.begin(), v.end());
  return v;
}

// Kolmogorov-Smirnov statistic of sorted samples against a CDF.
double ks_statistic(const std::vector<double>& s, double (*cdf)(double)) {
  double d = 0;
  const double n = static_cast<double>(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const double c = cdf(s[i]);
    d = std::max({d, std::abs(c - static_cast<double>(i) / n),
                  std::abs(static_cast<double>(i + 1) / n - c)});
  }
  return d;
}

// The 0.1% critical value of the KS statistic: 1.95 / sqrt(n).
const double kKsCritical = 1.95 / std::sqrt(static_cast<double>(kDraws));

void expect_moments(const std::vector<double>& s, double mean, double var) {
  double m = 0, v = 0;
  for (double x : s) m += x;
  m /= static_cast<double>(s.size());
  for (double x : s) v += (x - m) * (x - m);
  v /= static_cast<double>(s.size() - 1);
  // 5 standard errors of the mean and of the variance (4th moment ~ 3 var^2).
  const double n = static_cast<double>(s.size());
  EXPECT_NEAR(m, mean, 5 * std::sqrt(var / n));
  EXPECT_NEAR(v, var, 5 * var * std::sqrt(2.0 / n));
}

TEST(Random, UniformAndNormalPassMomentAndKolmogorovSmirnovTests) {
  for (DType dt : {f32, f64}) {
    std::vector<double> u =
        sorted_doubles(draw([dt](Value k) { return rnd::uniform(k, {kDraws}, dt); }, rnd::key(11)));
    EXPECT_GE(u.front(), 0.0);
    EXPECT_LT(u.back(), 1.0);
    expect_moments(u, 0.5, 1.0 / 12);
    EXPECT_LT(ks_statistic(u, [](double x) { return x; }), kKsCritical) << dtype_name(dt);
    std::vector<double> z =
        sorted_doubles(draw([dt](Value k) { return rnd::normal(k, {kDraws}, dt); }, rnd::key(12)));
    expect_moments(z, 0.0, 1.0);
    EXPECT_LT(ks_statistic(z, [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }),
              kKsCritical)
        << dtype_name(dt);
  }
}

TEST(Random, BernoulliRandintAndPermutationHaveTheirDistributions) {
  std::vector<double> b = to_doubles(
      draw([](Value k) { return astype(rnd::bernoulli(k, 0.3, {kDraws}), f64); }, rnd::key(5)));
  double ones = 0;
  for (double x : b) ones += x;
  EXPECT_NEAR(ones / kDraws, 0.3, 5 * std::sqrt(0.3 * 0.7 / kDraws));

  // Chi-square over the 10 values of randint(-3, 7): 9 degrees of freedom,
  // 0.1% critical value 27.88.
  std::vector<double> r =
      to_doubles(draw([](Value k) { return rnd::randint(k, {kDraws}, -3, 7); }, rnd::key(6)));
  std::vector<double> counts(10, 0);
  for (double x : r) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 7);
    counts[static_cast<size_t>(x + 3)] += 1;
  }
  double chi2 = 0;
  for (double c : counts) chi2 += (c - kDraws / 10.0) * (c - kDraws / 10.0) / (kDraws / 10.0);
  EXPECT_LT(chi2, 27.88);
  Array wide =
      draw([](Value k) { return rnd::randint(k, {1000}, -2000000000, 2000000000); }, rnd::key(7));
  double lo = 0, hi = 0;
  for (double x : to_doubles(wide)) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_LT(lo, -1.9e9);
  EXPECT_GT(hi, 1.9e9);

  // Every permutation of 3 about equally often over 6000 keys (5 d.o.f.,
  // 0.1% critical value 20.5); each draw a permutation of 0..n-1.
  auto perms = jit(vmap([](Value k) { return rnd::permutation(k, 3); }));
  Array keys(u32, {6000, 2});
  for (int64_t i = 0; i < 6000; ++i) {
    std::vector<uint32_t> w = words(rnd::fold_in(rnd::key(8), i));
    keys.data<uint32_t>()[2 * i] = w[0];
    keys.data<uint32_t>()[2 * i + 1] = w[1];
  }
  Array p = perms(keys);
  std::map<std::vector<int32_t>, double> seen;
  for (int64_t i = 0; i < 6000; ++i)
    seen[{p.data<int32_t>()[3 * i], p.data<int32_t>()[3 * i + 1], p.data<int32_t>()[3 * i + 2]}] +=
        1;
  ASSERT_EQ(seen.size(), 6u);
  double chi2p = 0;
  for (const auto& [perm, c] : seen) {
    std::vector<int32_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int32_t>{0, 1, 2}));
    chi2p += (c - 1000) * (c - 1000) / 1000;
  }
  EXPECT_LT(chi2p, 20.5);
  std::vector<double> big = sorted_doubles(
      draw([](Value k) { return astype(rnd::permutation(k, 5000), f64); }, rnd::key(9)));
  for (int64_t i = 0; i < 5000; ++i) ASSERT_EQ(big[static_cast<size_t>(i)], i);
}

TEST(Random, SplitStreamsAreUncorrelated) {
  Program p = drx::trace(
      [](Value k) {
        auto [a, b] = rnd::split2(k);
        return Tree::list({Tree(rnd::normal(a, {kDraws}, f64)), Tree(rnd::normal(b, {kDraws}, f64)),
                           Tree(rnd::normal(k, {kDraws}, f64))});
      },
      rnd::key(21));
  std::vector<Array> z = compile(p).run({rnd::key(21)});
  for (auto [i, j] : {std::pair{0, 1}, {0, 2}, {1, 2}}) {
    double c = 0;
    for (int64_t e = 0; e < kDraws; ++e) c += z[i].data<double>()[e] * z[j].data<double>()[e];
    // Correlation of independent standard normals: about N(0, 1/n).
    EXPECT_LT(std::abs(c / kDraws), 5 / std::sqrt(static_cast<double>(kDraws))) << i << j;
  }
}

// ---- determinism and placement ---------------------------------------------

TEST(Random, JitInterpreterAndVmapAgreeBitwise) {
  auto f = [](Value k) {
    auto [a, b] = rnd::split2(k);
    return Tree::list({Tree(rnd::uniform(a, {4, 3})), Tree(rnd::normal(b, {5}, f64)),
                       Tree(rnd::randint(k, {6}, 0, 100)), Tree(rnd::permutation(k, 7))});
  };
  const Array k = rnd::key(99);
  Program p = drx::trace(f, k);
  std::vector<Array> compiled = compile(p).run({k});
  EXPECT_TRUE(BitwiseEqual(compiled, interpret(p, {k})));
  // A batch of keys gives each key its own stream, those of the unbatched draws.
  Array keys(u32, {3, 2});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t w = 0; w < 2; ++w)
      keys.data<uint32_t>()[2 * i + w] = words(rnd::fold_in(k, i))[static_cast<size_t>(w)];
  auto batched = jit(vmap([](Value key) { return rnd::normal(key, {5}, f64); }));
  Array all = batched(keys);
  for (int64_t i = 0; i < 3; ++i) {
    Array one = draw([](Value key) { return rnd::normal(key, {5}, f64); }, rnd::fold_in(k, i));
    EXPECT_TRUE(BitwiseEqual({batch_row(all, i)}, {one})) << i;
  }
}

// Each client folds its global index into the key: the streams are those of
// fold_in(key, i) however the clients are split across devices.
TEST(Random, PerClientStreamsFromClientIndexDoNotDependOnTheMesh) {
  const int64_t n = 7;
  auto f = [](Value key, Value x) {
    Value noisy =
        map_fn([](Value k,
                  Value xi) { return xi + rnd::normal(rnd::fold_in(k, client_index()), {3}, f64); },
               broadcast(key), x);
    return Tree::list({Tree(noisy), Tree(reduce_sum(noisy))});
  };
  const Array k = rnd::key(2024), x = random_array({n, 3}, f64, 1);
  Program p = drx::trace(program({{"clients", n}}, f, {"", "clients"}), k, x);
  std::vector<Array> one = compile(p, Mesh({{"clients", 1}})).run({k, x});
  for (int64_t i = 0; i < n; ++i) {
    Array z = draw([](Value key) { return rnd::normal(key, {3}, f64); }, rnd::fold_in(k, i));
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(one[0].data<double>()[i * 3 + j],
                x.data<double>()[i * 3 + j] + z.data<double>()[j]);
  }
  EXPECT_TRUE(BitwiseEqual(interpret(p, {k, x}), one));
  for (int64_t devices = 2; devices <= 4; ++devices)
    EXPECT_TRUE(BitwiseEqual(compile(p, Mesh({{"clients", devices}})).run({k, x}), one))
        << devices << " devices";
  // The program text shows the index as one more operand of the map_fn.
  EXPECT_NE(to_string(p).find("iota"), std::string::npos);
}

TEST(Random, ClientIndexInNestedMapsIsTheIndexAtEachLevel) {
  auto f = [](Value x) {
    return map_fn(
        [](Value xg) {
          Value g = astype(client_index(), f64);
          return map_fn(
              [](Value xc, Value gc) { return xc + 10.0 * gc + astype(client_index(), f64); }, xg,
              broadcast(g));
        },
        x);
  };
  Array x = zeros({2, 3}, f64);
  Array got = jit(program({{"groups", 2}, {"clients", 3}}, f, {"groups.clients"}))(x);
  EXPECT_TRUE(ArrayNear(got, {0, 1, 2, 10, 11, 12}));
}

TEST(Random, RandomOutputsCarryNoTangent) {
  // The draw depends on x only through the key: its tangent is zero.
  auto f = [](Value x, Value key) {
    Value k = rnd::fold_in(key, astype(floor(x), DType::i32));
    return rnd::uniform(k, {}, f64) + 0.0 * x;
  };
  auto g = jit(grad([f](Value x, Value key) { return f(x, key); }, 0));
  EXPECT_EQ(g(Array::scalar(2.5), rnd::key(1)).item<double>(), 0.0);
  // The reparameterised sample is differentiable in its scale.
  auto h = jit(grad([](Value s, Value key) { return sum(s * rnd::normal(key, {4}, f64)); }, 0));
  Array z = draw([](Value key) { return rnd::normal(key, {4}, f64); }, rnd::key(1));
  EXPECT_DOUBLE_EQ(
      h(Array::scalar(2.0), rnd::key(1)).item<double>(),
      z.data<double>()[0] + z.data<double>()[1] + z.data<double>()[2] + z.data<double>()[3]);
}

TEST(Random, BadInputsAreErrors) {
  auto run_on = [](const Array& key, auto f) { jit([f](Value k) { return f(k); })(key); };
  expect_error([&] { run_on(zeros({3}, u32), [](Value k) { return rnd::uniform(k, {2}); }); },
               {"random.uniform", "u32[2]", "u32[3]"});
  expect_error([&] { run_on(zeros({2}, f32), [](Value k) { return rnd::normal(k, {2}); }); },
               {"random.normal", "f32[2]"});
  expect_error(
      [&] { run_on(zeros({2}, f32), [](Value k) { return rnd::bernoulli(k, 0.5, {2}); }); },
      {"random.bernoulli", "f32[2]"});
  expect_error([&] { rnd::fold_in(zeros({3}, u32), 1); }, {"random.fold_in", "u32[3]"});
  // f16 and bf16 are refused rather than drawn in f64 (JAX draws them from 16-bit words).
  for (DType d : {f16, bf16}) {
    expect_error([&] { run_on(rnd::key(0), [d](Value k) { return rnd::uniform(k, {2}, d); }); },
                 {"random.uniform", "expected f32 or f64"});
    expect_error([&] { run_on(rnd::key(0), [d](Value k) { return rnd::normal(k, {2}, d); }); },
                 {"random.normal", "expected f32 or f64"});
    expect_error(
        [&] {
          run_on(rnd::key(0), [d](Value k) { return rnd::bernoulli(k, fill({}, 0.5, d), {2}); });
        },
        {"random.bernoulli", "f32 or f64 probability"});
  }
  expect_error([&] { run_on(rnd::key(0), [](Value k) { return rnd::uniform(k, {2}, i32); }); },
               {"random.uniform", "i32", "randint"});
  expect_error([&] { run_on(rnd::key(0), [](Value k) { return rnd::bits(k, {-1}); }); },
               {"random.bits", "negative"});
  expect_error([&] { run_on(rnd::key(0), [](Value k) { return rnd::bernoulli(k, 1.5, {2}); }); },
               {"random.bernoulli", "1.5"});
  expect_error(
      [&] {
        run_on(rnd::key(0), [](Value k) { return rnd::randint(k, {2}, 0, int64_t{1} << 40); });
      },
      {"random.randint", "2^32"});
  expect_error([&] { run_on(rnd::key(0), [](Value k) { return rnd::fold_in(k, k); }); },
               {"random.fold_in", "u32[2]"});
  expect_error([&] { rnd::split(zeros({2}, f32), 2); }, {"random.split", "f32[2]"});
  expect_error([&] { run_on(rnd::key(0), [](Value) { return client_index(); }); },
               {"client_index", "map_fn"});
}

}  // namespace
}  // namespace drx::testing
