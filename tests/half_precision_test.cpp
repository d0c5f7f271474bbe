// bf16 and f16: the conversions against exhaustive and hand-computed
// references, and ops computed as XLA's CPU backend computes them (in f32,
// each result rounded back), in the interpreter, under jit, through AD, and in
// the IR text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "drx/drx.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

constexpr DType kHalves[] = {DType::bf16, DType::f16};

Array half_array(DType d, const std::vector<double>& values) {
  Array a(d, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) a.data<uint16_t>()[i] = half_from_double(d, values[i]);
  return a;
}

std::vector<uint16_t> bits_of(const Array& a) {
  const auto* p = a.data<uint16_t>();
  return std::vector<uint16_t>(p, p + a.size());
}

bool is_nan_bits(DType d, uint16_t b) { return std::isnan(half_to_double(d, b)); }

TEST(HalfPrecision, DtypesAreNamedSizedAndFloating) {
  EXPECT_EQ(dtype_from_name("bf16"), DType::bf16);
  EXPECT_EQ(dtype_from_name("f16"), DType::f16);
  for (DType d : kHalves) {
    EXPECT_EQ(dtype_size(d), 2u);
    EXPECT_TRUE(is_floating(d));
    EXPECT_FALSE(is_integer(d));
  }
}

TEST(HalfPrecision, HandComputedEncodings) {
  // bf16 is the top half of an f32: 1 = 0x3f80; 0.1f = 0x3dcccccd rounds up to 0x3dcd.
  EXPECT_EQ(half_from_double(DType::bf16, 1.0), 0x3f80);
  EXPECT_EQ(half_from_double(DType::bf16, -2.0), 0xc000);
  EXPECT_EQ(half_from_double(DType::bf16, 0.1), 0x3dcd);
  EXPECT_EQ(half_from_double(DType::bf16, 3.0e38), 0x7f62);
  EXPECT_EQ(half_from_double(DType::bf16, 1e39), 0x7f80);  // beyond the largest: inf
  // f16: 1 = 0x3c00, 0.1 = 0x2e66, largest 65504 = 0x7bff; 65520 is the tie
  // between 65504 and 65536 (= inf) and goes to the even one, inf.
  EXPECT_EQ(half_from_double(DType::f16, 1.0), 0x3c00);
  EXPECT_EQ(half_from_double(DType::f16, 0.1), 0x2e66);
  EXPECT_EQ(half_from_double(DType::f16, 65504.0), 0x7bff);
  EXPECT_EQ(half_from_double(DType::f16, 65519.0), 0x7bff);
  EXPECT_EQ(half_from_double(DType::f16, 65520.0), 0x7c00);
  EXPECT_EQ(half_from_double(DType::f16, std::ldexp(1.0, -24)), 0x0001);  // least subnormal
  EXPECT_EQ(half_from_double(DType::f16, std::ldexp(1.0, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(half_from_double(DType::f16, std::ldexp(1.5, -25)), 0x0001);
  EXPECT_EQ(half_from_double(DType::f16, -0.0), 0x8000);
  EXPECT_TRUE(is_nan_bits(DType::f16, half_from_double(DType::f16, NAN)));
  EXPECT_TRUE(is_nan_bits(DType::bf16, half_from_double(DType::bf16, -NAN)));
  EXPECT_EQ(half_to_double(DType::f16, 0x7bff), 65504.0);
  EXPECT_EQ(half_to_double(DType::f16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(half_to_double(DType::bf16, 0xff80), -INFINITY);
}

TEST(HalfPrecision, EveryBitPatternRoundTripsThroughDouble) {
  for (DType d : kHalves)
    for (uint32_t b = 0; b < 0x10000; ++b) {
      const auto bits = static_cast<uint16_t>(b);
      const double v = half_to_double(d, bits);
      if (std::isnan(v)) {
        EXPECT_TRUE(is_nan_bits(d, half_from_double(d, v))) << b;
        continue;
      }
      ASSERT_EQ(half_from_double(d, v), bits) << dtype_name(d) << " " << b;
    }
}

// The encoding of v is its nearest value, ties to the even pattern: checked
// against the neighbouring patterns, not against another rounding routine.
TEST(HalfPrecision, RoundsToNearestEvenFromDoubles) {
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<uint32_t> pattern(0, 0x7bff);
  std::uniform_real_distribution<double> between(0.0, 1.0);
  for (DType d : kHalves)
    for (int i = 0; i < 20000; ++i) {
      const auto lo = static_cast<uint16_t>(pattern(rng));
      const double a = half_to_double(d, lo), b = half_to_double(d, lo + 1);
      if (std::isinf(b) || std::isnan(b)) continue;
      const double t = i % 7 == 0 ? 0.5 : between(rng);  // every 7th: the tie
      const double v = a + t * (b - a);
      const uint16_t got = half_from_double(d, v);
      const uint16_t want = t < 0.5 ? lo : t > 0.5 ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
      ASSERT_EQ(got, want) << dtype_name(d) << " v=" << v;
      ASSERT_EQ(half_from_double(d, -v), want | 0x8000);
    }
}

TEST(HalfPrecision, ConvertFromF64RoundsOnceNotThroughF32) {
  // 1 + 2^-8 + 2^-30: just above the bf16 tie between 1 and 1 + 2^-7. Through
  // f32 it would lose the 2^-30, land on the tie and round to 1.
  const double v = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  Array x = Array::from_vector<double>({v}, {1});
  Array y = jit([](Value a) { return astype(a, DType::bf16); })(x);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(bits_of(y), std::vector<uint16_t>{0x3f81});
  // The other way is exact, and to integers it saturates like f32 does.
  Array h = half_array(DType::f16, {-3.5, 1e4, 0.0});
  Array w = jit([](Value a) { return astype(a, DType::f64); })(h);
  EXPECT_EQ(w.to_vector<double>(), (std::vector<double>{-3.5, 10000.0, 0.0}));
  Array i8 = jit([](Value a) { return astype(a, DType::i8); })(h);
  EXPECT_EQ(i8.to_vector<int8_t>(), (std::vector<int8_t>{-3, 127, 0}));
}

using BinaryFn = std::function<Value(Value, Value)>;

Array widened(const Array& a) { return convert_array(a, DType::f32); }

// The op on the widened operands in f32 (the reference interpreter), rounded
// once into d.
Array reference(const BinaryFn& f, const Array& a, const Array& b, DType d) {
  Program p = trace([&](Value x, Value y) { return f(x, y); },
                    {Type(DType::f32, a.shape()), Type(DType::f32, b.shape())});
  return convert_array(run(p, {widened(a), widened(b)}).at(0), d);
}

// Each op is its f32 counterpart on the widened operands, rounded once, in
// the interpreter and under jit alike.
TEST(HalfPrecision, EachOpComputesInF32AndRoundsOnce) {
  const std::vector<std::pair<const char*, BinaryFn>> ops = {
      {"add", [](Value x, Value y) { return x + y; }},
      {"mul", [](Value x, Value y) { return x * y; }},
      {"div", [](Value x, Value y) { return x / y; }},
      {"exp", [](Value x, Value) { return exp(x); }},
      {"tanh", [](Value x, Value) { return tanh(x); }},
      {"sqrt", [](Value x, Value) { return sqrt(abs(x)); }},
      {"sum", [](Value x, Value) { return sum(x, {1}); }},
      {"max", [](Value x, Value) { return max(x, {0}); }},
      {"matmul",
       [](Value x, Value y) {
         return matmul(x, transpose(y, {1, 0}));
       }},
      {"where", [](Value x, Value y) { return where(less(x, y), x, y); }},
  };
  for (DType d : kHalves)
    for (const auto& [name, f] : ops) {
      const Array a = random_array({3, 40}, d, 1, -3.0, 3.0);
      const Array b = random_array({3, 40}, d, 2, 0.5, 3.0);
      const Array want = reference(f, a, b, d);
      const Array jitted = jit(f)(a, b);
      const Program p = trace([&](Value x, Value y) { return f(x, y); },
                              {Type(d, a.shape()), Type(d, b.shape())});
      const Array interpreted = run(p, {a, b}).at(0);
      EXPECT_EQ(jitted.dtype(), d) << name;
      EXPECT_TRUE(interpreted.bitwise_equal(want)) << dtype_name(d) << " " << name;
      EXPECT_TRUE(jitted.bitwise_equal(want)) << dtype_name(d) << " " << name << " under jit";
    }
}

// A chain rounds after every op: exp(x) * x is round(round(exp x) * x), which
// differs from rounding the f32 chain once somewhere in 4096 inputs.
TEST(HalfPrecision, ChainsRoundAfterEveryOp) {
  for (DType d : kHalves) {
    const Array x = random_array({4096}, d, 3, -4.0, 4.0);
    const Array got = jit([](Value v) { return exp(v) * v; })(x);
    const Array e = reference([](Value v, Value) { return exp(v); }, x, x, d);
    const Array want = reference([](Value u, Value v) { return u * v; }, e, x, d);
    const Array once = reference([](Value v, Value) { return exp(v) * v; }, x, x, d);
    EXPECT_TRUE(got.bitwise_equal(want)) << dtype_name(d);
    EXPECT_FALSE(got.bitwise_equal(once)) << dtype_name(d) << ": no double rounding seen";
  }
}

TEST(HalfPrecision, GradientsAndBatchingKeepTheDtype) {
  for (DType d : kHalves) {
    const Array x = half_array(d, {0.5, -1.25, 2.0});
    // d/dx sum(x^3) = 3 x^2: exact in both formats for these x.
    const Array g = jit(grad([](Value v) { return sum(v * v * v); }))(x);
    EXPECT_EQ(g.dtype(), d);
    EXPECT_EQ(to_doubles(g), (std::vector<double>{0.75, 4.6875, 12.0}));
    const Array rows = convert_array(f64_array({1, 2, 3, 4, 5, 6}, {2, 3}), d);
    const Array v = jit(vmap([](Value r) { return sum(r * r); }, {0}, {0}))(rows);
    EXPECT_EQ(to_doubles(v), (std::vector<double>{14, 77}));
  }
}

TEST(HalfPrecision, ConstantsIotaAndFillsAreRounded) {
  for (DType d : kHalves) {
    const Array i = jit([d](Value) { return iota({4}, 0, d) * 0.1; })(full({}, 0.0, DType::f32));
    EXPECT_EQ(i.dtype(), d);
    // 0.1 becomes a d constant first (a number takes the Value's dtype).
    std::vector<double> want;
    const double tenth = half_to_double(d, half_from_double(d, 0.1));
    for (int k = 0; k < 4; ++k) want.push_back(half_to_double(d, half_from_double(d, k * tenth)));
    EXPECT_EQ(to_doubles(i), want);
    EXPECT_EQ(to_doubles(full({2}, 1.0 / 3.0, d)),
              std::vector<double>(2, half_to_double(d, half_from_double(d, 1.0 / 3.0))));
  }
}

TEST(HalfPrecision, ProgramTextRoundTripsHalfConstantsBitwise) {
  for (DType d : kHalves) {
    Array c(d, {65536});
    for (uint32_t b = 0; b < 0x10000; ++b) c.data<uint16_t>()[b] = static_cast<uint16_t>(b);
    Program p = trace([&](Value x) { return x + constant(c); }, {Type(d, {65536})});
    Program q = parse_program(to_string(p));
    EXPECT_EQ(to_string(q), to_string(p));
    const Array zero = full({65536}, 0.0, d);
    const Array got = run(q, {zero}).at(0), want = run(p, {zero}).at(0);
    EXPECT_TRUE(got.bitwise_equal(want)) << dtype_name(d);
  }
}

}  // namespace
}  // namespace drx::testing
