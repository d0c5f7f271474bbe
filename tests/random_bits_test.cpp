// threefry2x32 against the Random123 known-answer vectors (20 rounds, as
// JAX uses it), interpreted and compiled, under vmap; bitcast_convert.
#include <cstdint>

#include "drx/exec/executable.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

Array u32s(const std::vector<uint32_t>& v) {
  return Array::from_vector<uint32_t>(v, {static_cast<int64_t>(v.size())});
}

// Random123's kat_vectors, threefry2x32 with 20 rounds: counter, key, result.
struct Kat {
  uint32_t x0, x1, k0, k1, y0, y1;
};
const Kat kKats[] = {
    {0x00000000u, 0x00000000u, 0x00000000u, 0x00000000u, 0x6b200159u, 0x99ba4efeu},
    {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0x1cb996fcu, 0xbb002be7u},
    {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xc4923a9cu, 0x483df7a0u},
};

TEST(Threefry, MatchesTheRandom123KnownAnswers) {
  std::vector<uint32_t> k0, k1, x0, x1;
  for (const Kat& k : kKats) {
    k0.push_back(k.k0), k1.push_back(k.k1), x0.push_back(k.x0), x1.push_back(k.x1);
  }
  auto f = [](Value a, Value b, Value c, Value d) {
    auto [y0, y1] = threefry2x32(a, b, c, d);
    return std::vector<Value>{y0, y1};
  };
  Program p = trace(f, {Type(DType::u32, {3}), Type(DType::u32, {3}), Type(DType::u32, {3}),
                        Type(DType::u32, {3})});
  std::vector<Array> args = {u32s(k0), u32s(k1), u32s(x0), u32s(x1)};
  std::vector<Array> got = compile(p).run(args);
  EXPECT_TRUE(BitwiseEqual(got, interpret(p, args)));
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(got[0].to_vector<uint32_t>()[i], kKats[i].y0) << i;
    EXPECT_EQ(got[1].to_vector<uint32_t>()[i], kKats[i].y1) << i;
  }
  // vmap over the counters with one key.
  auto one_key = [](Value x0v, Value x1v) {
    Value k = scalar_like(x0v, 0.0);
    auto [y0, y1] = threefry2x32(k, k, x0v, x1v);
    return y0 + y1;
  };
  Array batched = jit(vmap(one_key))(u32s({0u, 0u}), u32s({0u, 0u}));
  EXPECT_EQ(batched.to_vector<uint32_t>()[1], 0x6b200159u + 0x99ba4efeu);
  expect_error(
      [&] {
        trace(f, {Type(DType::i32, {1}), Type(DType::u32, {1}), Type(DType::u32, {1}),
                  Type(DType::u32, {1})});
      },
      {"threefry2x32", "four u32 operands"});
}

TEST(Bitcast, ReinterpretsBits) {
  Array one = jit([](Value v) { return bitcast_convert(v, DType::u32); })(
      Array::from_vector<float>({1.0f, -2.0f}, {2}));
  EXPECT_EQ(one.to_vector<uint32_t>(), (std::vector<uint32_t>{0x3f800000u, 0xc0000000u}));
  Array back = jit([](Value v) { return bitcast_convert(v, DType::f32); })(one);
  EXPECT_TRUE(ArrayNear(back, {1.0, -2.0}, 0));
  expect_error(
      [] {
        trace([](Value v) { return bitcast_convert(v, DType::f64); }, {Type(DType::u32, {1})});
      },
      {"bitcast_convert", "u32[1]", "f64"});
}

}  // namespace
}  // namespace drx::testing
