// The unsigned dtypes (u32, u8) and the bitwise primitives: wrapping
// arithmetic, conversions, and/or/xor/not and the shifts, against exact
// references computed here with the C++ unsigned types; interpreted and
// compiled; printed and parsed.
#include <cstdint>
#include <limits>

#include "drx/core/trace.h"
#include "drx/exec/executable.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

template <class T>
Array array_of(const std::vector<T>& v) {
  return Array::from_vector<T>(v, {static_cast<int64_t>(v.size())});
}

// Runs f traced on the arguments' types, interpreted and compiled, and checks
// the two agree bitwise before returning the compiled results.
std::vector<Array> run_both(const std::function<std::vector<Value>(const std::vector<Value>&)>& f,
                            const std::vector<Array>& args) {
  std::vector<Type> types;
  for (const Array& a : args) types.emplace_back(a.dtype(), a.shape());
  Program p = trace_function(f, types, "f").program;
  std::vector<Array> compiled = compile(p).run(args);
  EXPECT_TRUE(BitwiseEqual(compiled, interpret(p, args)));
  return compiled;
}

TEST(UnsignedDTypes, NamesSizesAndArrays) {
  EXPECT_EQ(dtype_name(DType::u32), "u32");
  EXPECT_EQ(dtype_name(DType::u8), "u8");
  EXPECT_EQ(dtype_from_name("u32"), DType::u32);
  EXPECT_EQ(dtype_from_name("u8"), DType::u8);
  EXPECT_EQ(dtype_size(DType::u32), 4u);
  EXPECT_EQ(dtype_size(DType::u8), 1u);
  EXPECT_TRUE(is_integer(DType::u32) && is_unsigned(DType::u8) && !is_unsigned(DType::i32));
  Array a = array_of<uint32_t>({0u, 7u, 0xFFFFFFFFu});
  EXPECT_EQ(a.dtype(), DType::u32);
  EXPECT_EQ(a.element_as_double(2), 4294967295.0);
  Array b = array_of<uint8_t>({0, 200, 255});
  EXPECT_EQ(b.dtype(), DType::u8);
  EXPECT_EQ(b.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 200, 255}));
  EXPECT_EQ(b.str(), "u8[3]{0, 200, 255}");
}

TEST(UnsignedDTypes, ArithmeticWrapsAround) {
  const std::vector<uint32_t> x = {0u, 1u, 0xFFFFFFFFu, 0x80000000u, 12345u};
  const std::vector<uint32_t> y = {1u, 0xFFFFFFFFu, 2u, 0x80000000u, 678u};
  auto f = [](const std::vector<Value>& v) -> std::vector<Value> {
    return {v[0] + v[1],           v[0] - v[1], v[0] * v[1],         div(v[0], v[1]),
            remainder(v[0], v[1]), -v[0],       maximum(v[0], v[1]), less(v[0], v[1])};
  };
  std::vector<Array> r = run_both(f, {array_of(x), array_of(y)});
  for (size_t i = 0; i < x.size(); ++i) {
    const auto e = static_cast<int64_t>(i);
    EXPECT_EQ(r[0].to_vector<uint32_t>()[i], static_cast<uint32_t>(x[i] + y[i])) << e;
    EXPECT_EQ(r[1].to_vector<uint32_t>()[i], static_cast<uint32_t>(x[i] - y[i])) << e;
    EXPECT_EQ(r[2].to_vector<uint32_t>()[i], static_cast<uint32_t>(x[i] * y[i])) << e;
    EXPECT_EQ(r[3].to_vector<uint32_t>()[i], x[i] / y[i]) << e;
    EXPECT_EQ(r[4].to_vector<uint32_t>()[i], x[i] % y[i]) << e;
    EXPECT_EQ(r[5].to_vector<uint32_t>()[i], static_cast<uint32_t>(0u - x[i])) << e;
    EXPECT_EQ(r[6].to_vector<uint32_t>()[i], std::max(x[i], y[i])) << e;
    EXPECT_EQ(r[7].to_vector<bool>()[i], x[i] < y[i]) << e;
  }
  // u8, mod 256: 200 + 100 = 44, 16 - 17 = 255, 200 * 100 = 32.
  std::vector<Array> s =
      run_both(f, {array_of<uint8_t>({200, 16, 3}), array_of<uint8_t>({100, 17, 5})});
  EXPECT_EQ(s[0].to_vector<uint8_t>(), (std::vector<uint8_t>{44, 33, 8}));
  EXPECT_EQ(s[1].to_vector<uint8_t>(), (std::vector<uint8_t>{100, 255, 254}));
  EXPECT_EQ(s[2].to_vector<uint8_t>(), (std::vector<uint8_t>{32, 16, 15}));
  // A plain number takes the dtype only when it fits.
  expect_error([] { trace([](Value v) { return v + 256.0; }, {Type(DType::u8, {2})}); },
               {"add", "256", "not representable", "u8[2]"});
  expect_error([] { trace([](Value v) { return v * -1.0; }, {Type(DType::u32, {2})}); },
               {"mul", "-1", "not representable"});
  expect_error(
      [&] {
        run_both(f, {array_of<uint32_t>({1u}), array_of<uint32_t>({0u})});
      },
      {"div", "division by zero"});
}

TEST(UnsignedDTypes, ConversionsSaturateFromFloatsAndWrapBetweenIntegers) {
  auto to = [](DType d) {
    return [d](const std::vector<Value>& v) -> std::vector<Value> { return {astype(v[0], d)}; };
  };
  Array f = f64_array({-3.5, 0.9, 255.9, 300, 5e9, std::numeric_limits<double>::quiet_NaN()}, {6});
  EXPECT_EQ(run_both(to(DType::u8), {f})[0].to_vector<uint8_t>(),
            (std::vector<uint8_t>{0, 0, 255, 255, 255, 0}));
  EXPECT_EQ(run_both(to(DType::u32), {f})[0].to_vector<uint32_t>(),
            (std::vector<uint32_t>{0u, 0u, 255u, 300u, 0xFFFFFFFFu, 0u}));
  Array i = Array::from_vector<int32_t>({-1, 256, 257, 70000}, {4});
  EXPECT_EQ(run_both(to(DType::u8), {i})[0].to_vector<uint8_t>(),
            (std::vector<uint8_t>{255, 0, 1, 112}));
  EXPECT_EQ(run_both(to(DType::u32), {i})[0].to_vector<uint32_t>(),
            (std::vector<uint32_t>{0xFFFFFFFFu, 256u, 257u, 70000u}));
  Array u = array_of<uint32_t>({0xFFFFFFFFu, 3u});
  EXPECT_EQ(run_both(to(DType::i32), {u})[0].to_vector<int32_t>(), (std::vector<int32_t>{-1, 3}));
  EXPECT_TRUE(ArrayNear(run_both(to(DType::f64), {u})[0], {4294967295.0, 3.0}));
}

template <class T>
void check_bitwise(const std::vector<T>& x, const std::vector<T>& y) {
  auto f = [](const std::vector<Value>& v) -> std::vector<Value> {
    return {bitwise_and(v[0], v[1]),
            bitwise_or(v[0], v[1]),
            bitwise_xor(v[0], v[1]),
            bitwise_not(v[0]),
            shift_left(v[0], v[1]),
            shift_right_logical(v[0], v[1]),
            shift_right_arithmetic(v[0], v[1])};
  };
  std::vector<Array> r = run_both(f, {array_of(x), array_of(y)});
  using U = std::make_unsigned_t<T>;
  using S = std::make_signed_t<T>;
  constexpr U bits = 8 * sizeof(T);
  for (size_t i = 0; i < x.size(); ++i) {
    const U a = static_cast<U>(x[i]), s = static_cast<U>(y[i]);
    const auto sa = static_cast<S>(a);
    const S sign_fill = sa < 0 ? S{-1} : S{0};
    EXPECT_EQ(r[0].to_vector<T>()[i], static_cast<T>(a & static_cast<U>(y[i])));
    EXPECT_EQ(r[1].to_vector<T>()[i], static_cast<T>(a | static_cast<U>(y[i])));
    EXPECT_EQ(r[2].to_vector<T>()[i], static_cast<T>(a ^ static_cast<U>(y[i])));
    EXPECT_EQ(r[3].to_vector<T>()[i], static_cast<T>(static_cast<U>(~a)));
    EXPECT_EQ(r[4].to_vector<T>()[i], s >= bits ? T{0} : static_cast<T>(static_cast<U>(a << s)))
        << x[i] << " << " << y[i];
    EXPECT_EQ(r[5].to_vector<T>()[i], s >= bits ? T{0} : static_cast<T>(static_cast<U>(a >> s)));
    EXPECT_EQ(r[6].to_vector<T>()[i],
              static_cast<T>(s >= bits ? sign_fill : static_cast<S>(sa >> s)));
  }
}

TEST(Bitwise, IntegerOperationsAndShiftsMatchTheUnsignedReference) {
  check_bitwise<uint32_t>({0xDEADBEEFu, 1u, 0x80000000u, 5u, 7u, 0xFFFFFFFFu},
                          {0x0F0F0F0Fu, 31u, 1u, 32u, 0xFFFFFFFFu, 4u});
  check_bitwise<int32_t>({-8, 1, std::numeric_limits<int32_t>::min(), 5, -1, 12345},
                         {3, 31, 1, 32, -1, 40});
  check_bitwise<int64_t>({-8, 1, std::numeric_limits<int64_t>::min(), 5}, {3, 63, 1, 64});
  check_bitwise<uint8_t>({0xF0, 1, 0x80, 5}, {4, 7, 1, 8});
  check_bitwise<int8_t>({-8, 1, -128, 5, 127}, {3, 7, 1, 8, 2});
  check_bitwise<int16_t>({-8, 1, -32768, 5, 32767}, {3, 15, 1, 16, 2});
  check_bitwise<uint16_t>({0xBEEF, 1, 0x8000, 5}, {4, 15, 1, 16});
  check_bitwise<uint64_t>({0xDEADBEEFCAFEF00Dull, 1, 0x8000000000000000ull, 5}, {4, 63, 1, 64});
}

// i8, i16, u16 and u64 wrap, compare, reduce and convert in their own range
// (u64 above 2^63 and 2^53 too, where an int64 or double detour would fail).
TEST(IntegerDTypes, EightSixteenAndSixtyFourBitsWrapReduceAndConvert) {
  auto f = [](const std::vector<Value>& v) -> std::vector<Value> {
    return {v[0] + v[1],    v[0] * v[1],    less(v[0], v[1]),
            min(v[0], {0}), max(v[0], {0}), sum(v[0], {0})};
  };
  std::vector<Array> a =
      run_both(f, {array_of<int8_t>({127, -128, 5}), array_of<int8_t>({1, -1, 30})});
  EXPECT_EQ(a[0].to_vector<int8_t>(), (std::vector<int8_t>{-128, 127, 35}));
  EXPECT_EQ(a[1].to_vector<int8_t>(), (std::vector<int8_t>{127, -128, -106}));  // 150 - 256
  EXPECT_EQ(a[2].to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(a[3].to_vector<int8_t>(), std::vector<int8_t>{-128});
  EXPECT_EQ(a[5].to_vector<int8_t>(), std::vector<int8_t>{4});  // 127 - 128 + 5
  const uint64_t big = 0xFFFFFFFFFFFFFFF0ull, odd = (uint64_t{1} << 53) + 1;
  std::vector<Array> u =
      run_both(f, {array_of<uint64_t>({big, odd, 2}), array_of<uint64_t>({0x20, 1, 3})});
  EXPECT_EQ(u[0].to_vector<uint64_t>(), (std::vector<uint64_t>{0x10, odd + 1, 5}));
  EXPECT_EQ(u[2].to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(u[3].to_vector<uint64_t>(), std::vector<uint64_t>{2});
  EXPECT_EQ(u[4].to_vector<uint64_t>(), std::vector<uint64_t>{big});
  EXPECT_EQ(u[5].to_vector<uint64_t>(), std::vector<uint64_t>{big + odd + 2});
  std::vector<Array> h =
      run_both(f, {array_of<uint16_t>({65535, 7, 300}), array_of<uint16_t>({1, 2, 300})});
  EXPECT_EQ(h[0].to_vector<uint16_t>(), (std::vector<uint16_t>{0, 9, 600}));
  EXPECT_EQ(h[1].to_vector<uint16_t>(),
            (std::vector<uint16_t>{65535, 14, 24464}));  // 90000 mod 2^16
  // Products past int's range (u16 operands promote to int in C++) and
  // 64-bit sums and dot products past their range wrap too.
  EXPECT_EQ(run_both(f, {array_of<uint16_t>({65533}), array_of<uint16_t>({65534})})[1]
                .to_vector<uint16_t>(),
            std::vector<uint16_t>{6});  // (-3) * (-2) mod 2^16
  const int64_t i64_max = std::numeric_limits<int64_t>::max();
  std::vector<Array> w = run_both(f, {array_of<int64_t>({i64_max, 1}), array_of<int64_t>({2, 0})});
  EXPECT_EQ(w[1].to_vector<int64_t>(), (std::vector<int64_t>{-2, 0}));  // 2^64 - 2
  EXPECT_EQ(w[5].to_vector<int64_t>(), std::vector<int64_t>{std::numeric_limits<int64_t>::min()});
  auto dot = [](const std::vector<Value>& v) -> std::vector<Value> {
    return {dot_general(v[0], v[1], DotDims{{0}, {0}, {}, {}})};
  };
  EXPECT_EQ(run_both(dot, {array_of<int64_t>({i64_max, i64_max}), array_of<int64_t>({2, 1})})[0]
                .to_vector<int64_t>(),
            std::vector<int64_t>{i64_max - 2});  // 3 * max = max - 2 mod 2^64
  auto to = [](DType d) {
    return [d](const std::vector<Value>& v) -> std::vector<Value> { return {astype(v[0], d)}; };
  };
  Array x = f64_array({-300.5, -1.5, 2.9, 1e6, std::numeric_limits<double>::quiet_NaN()}, {5});
  EXPECT_EQ(run_both(to(DType::i8), {x})[0].to_vector<int8_t>(),
            (std::vector<int8_t>{-128, -1, 2, 127, 0}));
  EXPECT_EQ(run_both(to(DType::i16), {x})[0].to_vector<int16_t>(),
            (std::vector<int16_t>{-300, -1, 2, 32767, 0}));
  EXPECT_EQ(run_both(to(DType::u16), {x})[0].to_vector<uint16_t>(),
            (std::vector<uint16_t>{0, 0, 2, 65535, 0}));
}

TEST(Bitwise, LogicalOnBoolAndTypeErrors) {
  auto f = [](const std::vector<Value>& v) -> std::vector<Value> {
    return {bitwise_and(v[0], v[1]), bitwise_or(v[0], v[1]), bitwise_xor(v[0], v[1]),
            bitwise_not(v[0])};
  };
  Array a = Array::from_vector<bool>({true, true, false, false}, {4});
  Array b = Array::from_vector<bool>({true, false, true, false}, {4});
  std::vector<Array> r = run_both(f, {a, b});
  EXPECT_EQ(r[0].to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(r[1].to_vector<bool>(), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(r[2].to_vector<bool>(), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(r[3].to_vector<bool>(), (std::vector<bool>{false, false, true, true}));
  expect_error([] { trace([](Value v) { return bitwise_and(v, v); }, {Type(DType::f32, {2})}); },
               {"and", "f32[2]", "integer or bool"});
  expect_error([] { trace([](Value v) { return shift_left(v, v); }, {Type(DType::bool_, {2})}); },
               {"shift_left", "bool[2]", "integer operands"});
  expect_error(
      [] {
        trace([](Value a, Value b) { return bitwise_xor(a, b); },
              {Type(DType::u32, {2}), Type(DType::i32, {2})});
      },
      {"xor", "dtypes differ", "astype"});
}

TEST(Bitwise, VmapAndNoDerivative) {
  // Batched and unbatched operands mix; a float computation through an integer
  // one has no derivative from it.
  auto f = [](Value a, Value b) { return shift_left(a, b); };
  Array xs = Array::from_vector<uint32_t>({1u, 2u, 3u, 4u, 5u, 6u}, {2, 3});
  Array s = array_of<uint32_t>({1u, 4u, 31u});
  Array got = jit(vmap(f, {0, std::nullopt}))(xs, s);
  EXPECT_EQ(got.to_vector<uint32_t>(), (std::vector<uint32_t>{2u, 32u, 0x80000000u, 8u, 80u, 0u}));
  auto g = [](Value x) {
    Value bits = astype(bitwise_and(astype(x, DType::i32), full_like(astype(x, DType::i32), 6.0)),
                        DType::f64);
    return sum(x * x + bits);
  };
  EXPECT_TRUE(ArrayNear(jit(grad(g))(f64_array({1, 2, 3}, {3})), {2, 4, 6}));
}

TEST(UnsignedDTypes, TextRoundTripOfArraysAndPrograms) {
  auto f = [](Value a, Value b) {
    return std::vector<Value>{bitwise_xor(a, scalar_like(a, 7.0)),
                              shift_right_logical(b, scalar_like(b, 1.0))};
  };
  Program p = trace(f, {Type(DType::u32, {3}), Type(DType::u8, {2})});
  std::string text = to_string(p);
  EXPECT_NE(text.find("xor"), std::string::npos);
  EXPECT_NE(text.find("u32[]{7}"), std::string::npos) << text;
  EXPECT_EQ(to_string(parse_program(text)), text);
  std::vector<Array> args = {array_of<uint32_t>({0xFFFFFFFFu, 0u, 8u}),
                             array_of<uint8_t>({255, 2})};
  std::vector<Array> r = interpret(parse_program(text), args);
  EXPECT_EQ(r[0].to_vector<uint32_t>(), (std::vector<uint32_t>{0xFFFFFFF8u, 7u, 15u}));
  EXPECT_EQ(r[1].to_vector<uint8_t>(), (std::vector<uint8_t>{127, 1}));
  // u8 literals outside [0, 255] and negative u32 literals do not parse.
  expect_error(
      [] {
        parse_program(
            "program @p () -> (u8[1]) {\n  %0 = constant[value=u8[1]{256}] : u8[1]\n  return "
            "%0\n}\n");
      },
      {"256"});
  expect_error(
      [] {
        parse_program(
            "program @p () -> (u32[1]) {\n  %0 = constant[value=u32[1]{-1}] : u32[1]\n  return "
            "%0\n}\n");
      },
      {"-1"});
}

}  // namespace
}  // namespace drx::testing
