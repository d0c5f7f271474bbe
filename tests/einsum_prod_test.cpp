// einsum, prod, var and std against float64 loops written here, their derivatives against
// closed forms (prod's at zeros) and central differences, and their errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "drx/drx.h"
#include "test_util.h"

namespace drx::testing {
namespace {

std::vector<double> values(const Array& a) { return to_doubles(a); }

// x [2,3,4] in f64, a fixed pattern with no zeros.
Array cube() { return random_array({2, 3, 4}, f64, 7, 0.5, 1.5); }

TEST(Prod, MatchesLoopsOverEveryAxisSetWithKeepdims) {
  const Array x = cube();
  const std::vector<double> v = values(x);
  auto at = [&](int64_t i, int64_t j, int64_t k) {
    return v[static_cast<size_t>((i * 3 + j) * 4 + k)];
  };
  std::vector<double> all = {1.0}, over1(8, 1.0), over02(3, 1.0);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) {
        all[0] *= at(i, j, k);
        over1[static_cast<size_t>(i * 4 + k)] *= at(i, j, k);
        over02[static_cast<size_t>(j)] *= at(i, j, k);
      }
  EXPECT_TRUE(ArrayNear(jit([](Value a) { return prod(a); })(x), all, 1e-14, 0));
  Array o1 = jit([](Value a) { return prod(a, {1}); })(x);
  EXPECT_EQ(o1.shape(), (Shape{2, 4}));
  EXPECT_TRUE(ArrayNear(o1, over1, 1e-14, 0));
  Array o02 = jit([](Value a) { return prod(a, {-1, 0}, true); })(x);
  EXPECT_EQ(o02.shape(), (Shape{1, 3, 1}));
  EXPECT_TRUE(ArrayNear(o02, over02, 1e-14, 0));
  // Odd and prime lengths (the tree pads with ones), one element, none.
  for (int64_t n : {1, 3, 5, 7, 13}) {
    Array r = random_array({n}, f64, 9, 0.5, 1.5);
    double want = 1;
    for (double e : values(r)) want *= e;
    EXPECT_TRUE(ArrayNear(jit([](Value a) { return prod(a); })(r), {want}, 1e-14, 0)) << n;
  }
  Array empty = jit([](Value a) { return prod(a, {1}); })(Array(f32, {3, 0}));
  EXPECT_EQ(empty.shape(), (Shape{3}));
  EXPECT_EQ(empty.to_vector<float>(), (std::vector<float>{1, 1, 1}));
  // Integers multiply exactly.
  Array ints = Array::from_vector<int32_t>({2, -3, 5, 7}, {4});
  EXPECT_EQ(jit([](Value a) { return prod(a); })(ints).item<int32_t>(), -210);
}

TEST(Prod, DerivativesAreExactAtZerosToSecondOrder) {
  auto f = [](Value a) { return prod(a); };
  // One zero: only its own derivative survives (the product of the others).
  Array x = f64_array({2, 0, 3, 4}, {4});
  EXPECT_TRUE(ArrayNear(jit(grad(f))(x), {0, 24, 0, 0}, 0, 0));
  // Two zeros: every first derivative is 0, but d2/dx1 dx3 is the product of the rest.
  Array y = f64_array({2, 0, 3, 0}, {4});
  EXPECT_TRUE(ArrayNear(jit(grad(f))(y), {0, 0, 0, 0}, 0, 0));
  Array e1 = f64_array({0, 1, 0, 0}, {4});
  auto hvp = [f](Value a, Value v) { return jvp(grad(f), {Tree(a)}, {Tree(v)}).second; };
  EXPECT_TRUE(ArrayNear(jit(hvp)(y, e1), {0, 0, 0, 6}, 0, 0));  // d/dx3 of dprod/dx1 = 2 * 3
  // Away from zeros: against central differences.
  Array z = random_array({5}, f64, 3, 0.5, 1.5);
  std::vector<double> g = values(jit(grad(f))(z)), zv = values(z);
  for (size_t i = 0; i < zv.size(); ++i) {
    auto p = [&](double d) {
      double r = 1;
      for (size_t j = 0; j < zv.size(); ++j) r *= zv[j] + (i == j ? d : 0.0);
      return r;
    };
    EXPECT_NEAR(g[i], (p(1e-6) - p(-1e-6)) / 2e-6, 1e-8) << i;
  }
}

TEST(VarStd, MatchFloat64LoopsWithDdofAndKeepdims) {
  const Array x = cube();
  const std::vector<double> v = values(x);
  // Over axis 2 (4 elements per row), ddof 0 and 1.
  std::vector<double> var0, var1;
  for (size_t r = 0; r < 6; ++r) {
    double m = 0, s = 0;
    for (size_t k = 0; k < 4; ++k) m += v[r * 4 + k] / 4;
    for (size_t k = 0; k < 4; ++k) s += (v[r * 4 + k] - m) * (v[r * 4 + k] - m);
    var0.push_back(s / 4);
    var1.push_back(s / 3);
  }
  EXPECT_TRUE(ArrayNear(jit([](Value a) { return var(a, {2}); })(x), var0, 1e-14, 1e-16));
  Array k1 = jit([](Value a) { return var(a, {-1}, true, 1); })(x);
  EXPECT_EQ(k1.shape(), (Shape{2, 3, 1}));
  EXPECT_TRUE(ArrayNear(k1, var1, 1e-14, 1e-16));
  std::vector<double> sd;
  for (double e : var0) sd.push_back(std::sqrt(e));
  EXPECT_TRUE(ArrayNear(jit([](Value a) { return drx::std(a, {2}); })(x), sd, 1e-14, 1e-16));
  // All axes; the gradient of var is 2 (x - mean) / (n - ddof).
  double m = 0;
  for (double e : v) m += e / 24;
  std::vector<double> g;
  for (double e : v) g.push_back(2 * (e - m) / 23);
  EXPECT_TRUE(
      ArrayNear(jit(grad([](Value a) { return var(a, {}, false, 1); }))(x), g, 1e-12, 1e-15));
}

TEST(Einsum, MatchesLoopsForTheCommonForms) {
  Array a = random_array({2, 3}, f64, 1), b = random_array({3, 4}, f64, 2),
        c = random_array({4, 5}, f64, 3), batch_a = random_array({6, 2, 3}, f64, 4),
        batch_b = random_array({6, 3, 4}, f64, 5);
  auto av = values(a), bv = values(b), cv = values(c), bav = values(batch_a), bbv = values(batch_b);
  std::vector<double> ab(8, 0.0), abc(10, 0.0), bmm(48, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j) ab[i * 4 + k] += av[i * 3 + j] * bv[j * 4 + k];
  for (int i = 0; i < 2; ++i)
    for (int l = 0; l < 5; ++l)
      for (int k = 0; k < 4; ++k) abc[i * 5 + l] += ab[i * 4 + k] * cv[k * 5 + l];
  for (int n = 0; n < 6; ++n)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k)
        for (int j = 0; j < 3; ++j)
          bmm[(n * 2 + i) * 4 + k] += bav[(n * 2 + i) * 3 + j] * bbv[(n * 3 + j) * 4 + k];
  auto e2 = [](std::string s) { return jit([s](Value x, Value y) { return einsum(s, {x, y}); }); };
  EXPECT_TRUE(ArrayNear(e2("ij,jk->ik")(a, b), ab, 1e-14, 1e-15));
  EXPECT_TRUE(ArrayNear(e2("ij,jk")(a, b), ab, 1e-14, 1e-15));  // implicit: i, k
  std::vector<double> abt(8);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) abt[k * 2 + i] = ab[i * 4 + k];
  EXPECT_TRUE(ArrayNear(e2("ij,jk->ki")(a, b), abt, 1e-14, 1e-15));
  EXPECT_TRUE(ArrayNear(e2("nij,njk->nik")(batch_a, batch_b), bmm, 1e-14, 1e-15));
  EXPECT_TRUE(ArrayNear(e2("...ij,...jk->...ik")(batch_a, batch_b), bmm, 1e-14, 1e-15));
  auto e3 = jit([](Value x, Value y, Value z) { return einsum("ij,jk,kl->il", {x, y, z}); });
  EXPECT_TRUE(ArrayNear(e3(a, b, c), abc, 1e-13, 1e-15));
  // One operand: transpose, sums.
  auto e1 = [](std::string s) { return jit([s](Value x) { return einsum(s, {x}); }); };
  std::vector<double> at(6), rows(2, 0.0), total(1, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      at[j * 2 + i] = av[i * 3 + j];
      rows[i] += av[i * 3 + j];
      total[0] += av[i * 3 + j];
    }
  EXPECT_TRUE(ArrayNear(e1("ij->ji")(a), at, 0, 0));
  EXPECT_TRUE(ArrayNear(e1("ij->i")(a), rows, 1e-15, 1e-15));
  EXPECT_TRUE(ArrayNear(e1("ij->")(a), total, 1e-15, 1e-15));
  // An outer product, and a label summed inside one operand of two.
  std::vector<double> outer, sum_then(4, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) outer.push_back(av[i] * bv[j]);
  Array u = f64_array({av[0], av[1]}, {2}), w = f64_array({bv[0], bv[1], bv[2]}, {3});
  EXPECT_TRUE(ArrayNear(e2("i,j->ij")(u, w), outer, 0, 0));
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) sum_then[k] += av[i * 3 + j] * bv[j * 4 + k];
  EXPECT_TRUE(ArrayNear(e2("ij,jk->k")(a, b), sum_then, 1e-14, 1e-15));
}

TEST(Einsum, GradientMatchesCentralDifferences) {
  Array a = random_array({2, 3}, f64, 11), b = random_array({3, 4}, f64, 12);
  auto loss = [](Value x, Value y) { return sum(square(einsum("ij,jk->ik", {x, y}))); };
  std::vector<double> g = values(jit(grad(loss))(a, b)), av = values(a), bv = values(b);
  auto f = [&](const std::vector<double>& x) {
    double s = 0;
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 4; ++k) {
        double e = 0;
        for (int j = 0; j < 3; ++j)
          e += x[static_cast<size_t>(i * 3 + j)] * bv[static_cast<size_t>(j * 4 + k)];
        s += e * e;
      }
    return s;
  };
  for (size_t i = 0; i < av.size(); ++i) {
    std::vector<double> p = av, m = av;
    p[i] += 1e-6;
    m[i] -= 1e-6;
    EXPECT_NEAR(g[i], (f(p) - f(m)) / 2e-6, 1e-7) << i;
  }
}

TEST(Einsum, BadSubscriptsAreErrorsNamingThem) {
  Array a = random_array({2, 3}, f32, 1), b = random_array({4, 5}, f32, 2);
  auto run = [](std::string s, std::vector<Array> xs) {
    if (xs.size() == 1)
      jit([s](Value x) { return einsum(s, {x}); })(xs[0]);
    else
      jit([s](Value x, Value y) { return einsum(s, {x, y}); })(xs[0], xs[1]);
  };
  expect_error([&] { run("ij,jk->ik", {a}); }, {"einsum: 'ij,jk->ik'", "2 operand terms for 1"});
  expect_error([&] { run("ij,jk->ik", {a, b}); }, {"'j' has size 3", "and 4"});
  expect_error([&] { run("ii->i", {random_array({3, 3}, f32, 3)}); }, {"repeats 'i'", "diagonal"});
  expect_error([&] { run("ij->iz", {a}); }, {"the result names 'z'", "no operand"});
  expect_error([&] { run("ijk->i", {a}); }, {"names 3 axes, but the operand has 2"});
  expect_error([&] { run("i1->i", {a}); }, {"has '1'", "letters"});
  expect_error([&] { run("ij->ii", {a}); }, {"the result repeats 'i'"});
  expect_error(
      [&] {
        run("...i,...i->...", {a, random_array({2, 2, 3}, f32, 4)});
      },
      {"'...' stands for 2 axes", "broadcasting"});
}

TEST(ProdVarStd, BadOperandsAreErrors) {
  expect_error([] { jit([](Value x) { return prod(x); })(Array(bool_, {2})); }, {"prod", "bool"});
  expect_error([] { jit([](Value x) { return var(x); })(Array(i32, {2})); },
               {"var", "not floating point"});
  expect_error([] { jit([](Value x) { return prod(x, {2}); })(Array(f32, {2})); },
               {"prod: axis 2 is out of range"});
}

}  // namespace
}  // namespace drx::testing
