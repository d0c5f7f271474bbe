// Random numbers through StableHLO: a program drawing from a key (bits,
// uniform, normal, split and fold_in) exports, reads back with drx's importer
// and draws bitwise what drx::run draws (f64 normals within the ulps that
// erf_inv's f64 lowering allows).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "drx/export/stablehlo.h"
#include "drx/random/random.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

namespace rnd = drx::random;

Program draws() {
  return trace(
      [](Value key) {
        auto [a, b] = rnd::split2(key);
        return Tree::list({Tree(rnd::bits(a, {257})), Tree(rnd::bits(b, {3, 5}, DType::u8)),
                           Tree(rnd::uniform(key, {64, 3})),
                           Tree(rnd::uniform(rnd::fold_in(key, 7), {100}, DType::f32, -2, 3)),
                           Tree(rnd::uniform(a, {33}, DType::f64)), Tree(rnd::normal(b, {1000})),
                           Tree(rnd::normal(key, {200}, DType::f64))});
      },
      {Type(DType::u32, {2})});
}

TEST(StablehloExportRandom, DrawsFromAKeyRoundTripBitwise) {
  const Program p = draws();
  for (bool generic : {false, true}) {
    StableHloOptions o;
    o.generic = generic;
    const std::string text = to_stablehlo(p, Mesh(), o);
    EXPECT_EQ(text.find("custom_call"), std::string::npos);
    const Program back = from_stablehlo(text);
    for (int64_t seed : {0, 42, -1, 123456789}) {
      const Array key = rnd::key(seed);
      const std::vector<Array> want = run(p, {key}), got = run(back, {key});
      ASSERT_EQ(got.size(), want.size());
      SCOPED_TRACE("seed " + std::to_string(seed) + (generic ? " generic" : ""));
      // bits, uniform and the f32 normals are bitwise drx's.
      EXPECT_TRUE(BitwiseEqual(std::vector<Array>(got.begin(), got.end() - 1),
                               std::vector<Array>(want.begin(), want.end() - 1)));
      // f64 normals: erf_inv within 3 ulp, then the product with sqrt(2): a
      // relative difference of at most 5 * 2^-52.
      const Array &g = got.back(), &w = want.back();
      ASSERT_EQ(g.shape(), w.shape());
      for (int64_t i = 0; i < w.size(); ++i) {
        const double gv = g.data<double>()[i], wv = w.data<double>()[i];
        EXPECT_LE(std::fabs(gv - wv), 5 * std::ldexp(std::fabs(wv), -52)) << i;
      }
    }
  }
}

}  // namespace
}  // namespace drx::testing
