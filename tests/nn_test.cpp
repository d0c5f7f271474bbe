// drx::nn against plain-loop float64 references.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "test_util.h"

namespace {

using drx::Array;
using drx::Tree;
using drx::Value;
using drx::nn::Init;
using drx::testing::ArrayNear;
using drx::testing::random_array;
using drx::testing::to_doubles;

struct Moments {
  double mean = 0, std = 0, max_abs = 0;
};
Moments moments(const Array& a) {
  Moments m;
  std::vector<double> v = to_doubles(a);
  for (double x : v) m.mean += x, m.max_abs = std::max(m.max_abs, std::abs(x));
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.std += (x - m.mean) * (x - m.mean);
  m.std = std::sqrt(m.std / static_cast<double>(v.size()));
  return m;
}

TEST(NnInit, ShapesDtypesAndSeeds) {
  for (Init init : {Init::glorot_uniform, Init::he_normal, Init::lecun_normal}) {
    for (drx::DType dt : {drx::f32, drx::f64}) {
      Array a = drx::nn::init_array(init, {7, 5}, 7, 5, 42, dt);
      EXPECT_EQ(a.shape(), (drx::Shape{7, 5}));
      EXPECT_EQ(a.dtype(), dt);
      EXPECT_TRUE(a.bitwise_equal(drx::nn::init_array(init, {7, 5}, 7, 5, 42, dt)));
      EXPECT_FALSE(a.bitwise_equal(drx::nn::init_array(init, {7, 5}, 7, 5, 43, dt)));
      // An odd element count uses half of the last Box-Muller pair.
      Array odd = drx::nn::init_array(init, {3, 3}, 3, 3, 1, dt);
      for (double x : to_doubles(odd)) EXPECT_TRUE(std::isfinite(x) && x != 0.0);
    }
  }
  Array z = drx::nn::init_array(Init::zeros, {4, 2}, 4, 2, 9, drx::f64);
  EXPECT_TRUE(ArrayNear(z, std::vector<double>(8, 0.0), 0, 0));
  EXPECT_EQ(drx::nn::init_array(Init::he_normal, {0, 3}, 1, 3, 1).size(), 0);
}

TEST(NnInit, StatisticsMatchTheory) {
  const int64_t fan_in = 300, fan_out = 200, n = fan_in * fan_out;
  // Mean within 5 standard errors, std within 2%.
  auto check_normal = [&](Init init, double want_std) {
    Moments m = moments(drx::nn::init_array(init, {fan_in, fan_out}, fan_in, fan_out, 7));
    EXPECT_NEAR(m.mean, 0.0, 5 * want_std / std::sqrt(static_cast<double>(n)));
    EXPECT_NEAR(m.std, want_std, 0.02 * want_std);
    // 60000 normals: the largest is ~4.4 sigma, essentially never beyond 6.
    EXPECT_GT(m.max_abs, 3.0 * want_std);
    EXPECT_LT(m.max_abs, 6.0 * want_std);
  };
  check_normal(Init::he_normal, std::sqrt(2.0 / fan_in));
  check_normal(Init::lecun_normal, std::sqrt(1.0 / fan_in));
  const double limit = std::sqrt(6.0 / (fan_in + fan_out));
  Moments g = moments(
      drx::nn::init_array(Init::glorot_uniform, {fan_in, fan_out}, fan_in, fan_out, 7, drx::f64));
  EXPECT_LE(g.max_abs, limit);
  EXPECT_GT(g.max_abs, 0.999 * limit);
  EXPECT_NEAR(g.mean, 0.0, 5 * limit / std::sqrt(3.0 * n));
  EXPECT_NEAR(g.std, limit / std::sqrt(3.0), 0.02 * limit / std::sqrt(3.0));
}

TEST(NnInit, Errors) {
  EXPECT_THROW(drx::nn::init_array(Init::he_normal, {2, 2}, 2, 2, 0, drx::i32), drx::Error);
  EXPECT_THROW(drx::nn::init_array(Init::he_normal, {2, 2}, 0, 2, 0), drx::Error);
  EXPECT_THROW(drx::nn::init_array(Init::glorot_uniform, {2, 2}, 2, 0, 0), drx::Error);
  EXPECT_THROW(drx::nn::init_array(Init::lecun_normal, {-1, 2}, 2, 2, 0), drx::Error);
  EXPECT_THROW(drx::nn::mlp_init({5}, 0), drx::Error);
  EXPECT_THROW(drx::nn::mlp_init({5, 0, 2}, 0), drx::Error);
}

TEST(NnInit, MlpInitLayout) {
  Tree p = drx::nn::mlp_init({784, 200, 200, 10}, 3);
  ASSERT_EQ(p.keys(), (std::vector<std::string>{"layer0", "layer1", "layer2"}));
  const int64_t dims[] = {784, 200, 200, 10};
  for (int l = 0; l < 3; ++l) {
    const Tree& layer = p.children()[l];
    EXPECT_EQ(layer["w"].array().shape(), (drx::Shape{dims[l], dims[l + 1]}));
    EXPECT_EQ(layer["w"].array().dtype(), drx::f32);
    EXPECT_EQ(layer["b"].array().shape(), (drx::Shape{dims[l + 1]}));
    EXPECT_TRUE(ArrayNear(layer["b"].array(), std::vector<double>(dims[l + 1], 0.0), 0, 0));
    EXPECT_NEAR(moments(layer["w"].array()).std, std::sqrt(2.0 / dims[l]),
                0.1 * std::sqrt(2.0 / dims[l]));
  }
  // Layers get different streams.
  Tree q = drx::nn::mlp_init({50, 50, 50}, 3, Init::lecun_normal, drx::f64);
  EXPECT_FALSE(q["layer0"]["w"].array().bitwise_equal(q["layer1"]["w"].array()));
  EXPECT_TRUE(q["layer1"]["w"].array().bitwise_equal(
      drx::nn::mlp_init({50, 50, 50}, 3, Init::lecun_normal, drx::f64)["layer1"]["w"].array()));
  // More than 10 layers: zero-padded keys keep layer order.
  std::vector<int64_t> sizes(12, 2);
  Tree deep = drx::nn::mlp_init(sizes, 0);
  ASSERT_EQ(deep.size(), 11u);
  EXPECT_EQ(deep.keys().front(), "layer00");
  EXPECT_EQ(deep.keys()[9], "layer09");
  EXPECT_EQ(deep.keys().back(), "layer10");
}

// ---- float64 plain-loop references --------------------------------------------

struct RefLayer {
  std::vector<double> w, b;  // w row-major [in, out]
  int64_t in, out;
};
std::vector<RefLayer> ref_layers(const Tree& params) {
  std::vector<RefLayer> ls;
  for (const Tree& l : params.children()) {
    const Array& w = l["w"].array();
    ls.push_back({to_doubles(w), to_doubles(l["b"].array()), w.shape()[0], w.shape()[1]});
  }
  return ls;
}
// logits [n, classes] for rows x [n, in].
std::vector<double> ref_mlp(const std::vector<RefLayer>& ls, std::vector<double> h, int64_t n) {
  for (size_t l = 0; l < ls.size(); ++l) {
    const RefLayer& L = ls[l];
    std::vector<double> o(static_cast<size_t>(n * L.out));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < L.out; ++j) {
        double s = L.b[j];
        for (int64_t i = 0; i < L.in; ++i) {
          double v = h[r * L.in + i];
          if (l > 0) v = std::max(v, 0.0);
          s += v * L.w[i * L.out + j];
        }
        o[r * L.out + j] = s;
      }
    h = std::move(o);
  }
  return h;
}
std::vector<double> ref_ce(const std::vector<double>& logits, const std::vector<int64_t>& y,
                           int64_t c) {
  std::vector<double> ce;
  for (size_t r = 0; r < y.size(); ++r) {
    double mx = -1e300;
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, logits[r * c + j]);
    double s = 0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(logits[r * c + j] - mx);
    ce.push_back(mx + std::log(s) - logits[r * c + y[r]]);
  }
  return ce;
}

std::vector<int64_t> labels_of(const Array& y) {
  std::vector<int64_t> v;
  for (double d : to_doubles(y)) v.push_back(static_cast<int64_t>(d));
  return v;
}

TEST(NnLayers, DenseAndMlpApplyMatchReference) {
  Array x = random_array({5, 6}, drx::f64, 1);
  Array w = random_array({6, 4}, drx::f64, 2), b = random_array({4}, drx::f64, 3);
  Array got = drx::jit([](Value x, Value w, Value b) { return drx::nn::dense(x, w, b); })(x, w, b);
  std::vector<double> want;
  auto xv = to_doubles(x), wv = to_doubles(w), bv = to_doubles(b);
  for (int r = 0; r < 5; ++r)
    for (int j = 0; j < 4; ++j) {
      double s = bv[j];
      for (int i = 0; i < 6; ++i) s += xv[r * 6 + i] * wv[i * 4 + j];
      want.push_back(s);
    }
  EXPECT_TRUE(ArrayNear(got, want, 1e-13, 1e-13));

  Tree p = drx::nn::mlp_init({6, 8, 7, 3}, 11, Init::glorot_uniform, drx::f64);
  // Non-zero biases so that they are exercised.
  p = drx::tree_map(
      [](const Array& a) { return a.ndim() == 1 ? random_array(a.shape(), a.dtype(), 5) : a; }, p);
  Array logits = drx::jit([](Tree p, Value x) { return drx::nn::mlp_apply(p, x); })(p, x);
  EXPECT_EQ(logits.shape(), (drx::Shape{5, 3}));
  EXPECT_TRUE(ArrayNear(logits, ref_mlp(ref_layers(p), xv, 5), 1e-12, 1e-12));
}

TEST(NnLoss, CrossEntropyMaskedMeanAndAccuracyMatchReference) {
  const int64_t n = 9, c = 4;
  Array logits = random_array({n, c}, drx::f64, 21, -3, 3);
  // Large logits: a naive exp would overflow.
  logits.data<double>()[0] = 800.0;
  Array y32 = random_array({n}, drx::i32, 22, 0, c);
  Array y64 = drx::convert_array(y32, drx::i64);
  std::vector<double> mask = {1, 0, 1, 1, 0, 1, 1, 0, 1};
  Array m = drx::testing::f64_array(mask, {n});
  std::vector<int64_t> y = labels_of(y32);
  std::vector<double> ce = ref_ce(to_doubles(logits), y, c);

  for (const Array& labels : {y32, y64}) {
    auto f = drx::jit([](Value l, Value y) { return drx::nn::softmax_cross_entropy(l, y); });
    EXPECT_TRUE(ArrayNear(f(logits, labels), ce, 1e-12, 1e-12));
  }
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) num += mask[i] * ce[i], den += mask[i];
  auto mml = drx::jit([](Value l, Value y, Value m) { return drx::nn::masked_mean_loss(l, y, m); });
  EXPECT_TRUE(ArrayNear(mml(logits, y32, m), {num / den}, 1e-12, 1e-12));
  // An f32 mask with f64 logits is converted.
  EXPECT_TRUE(ArrayNear(mml(logits, y32, drx::convert_array(m, drx::f32)), {num / den}, 1e-12));

  // A fully masked batch: loss 0, gradient exactly 0.
  Array none = drx::zeros({n}, drx::f64);
  EXPECT_TRUE(ArrayNear(mml(logits, y32, none), {0.0}, 0, 0));
  auto g = drx::jit(
      drx::grad([](Value l, Value y, Value m) { return drx::nn::masked_mean_loss(l, y, m); }));
  EXPECT_TRUE(ArrayNear(g(logits, y32, none), std::vector<double>(n * c, 0.0), 0, 0));

  // Accuracy: first-index argmax, with a tie in row 1 (classes 2 and 3 both maximal).
  double* lp = logits.data<double>();
  lp[1 * c + 2] = lp[1 * c + 3] = 10.0;
  Array ties = y32;
  ties = drx::convert_array(ties, drx::i32);
  ties.data<int32_t>()[1] = 2;
  std::vector<int64_t> yt = labels_of(ties);
  std::vector<double> want_correct;
  double hits = 0;
  for (int64_t r = 0; r < n; ++r) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (lp[r * c + j] > lp[r * c + best]) best = j;
    want_correct.push_back(best == yt[r] ? 1.0 : 0.0);
    hits += want_correct.back();
  }
  auto corr = drx::jit([](Value l, Value y) { return drx::nn::correct(l, y); });
  Array got = corr(logits, ties);
  EXPECT_EQ(got.dtype(), drx::f64);
  EXPECT_TRUE(ArrayNear(got, want_correct, 0, 0));
  EXPECT_EQ(got.element_as_double(1), 1.0);  // the tie goes to the first index
  ties.data<int32_t>()[1] = 3;
  EXPECT_EQ(corr(logits, ties).element_as_double(1), 0.0);
  ties.data<int32_t>()[1] = 2;
  auto acc = drx::jit([](Value l, Value y) { return drx::nn::accuracy(l, y); });
  EXPECT_TRUE(ArrayNear(acc(logits, ties), {hits / n}, 1e-15, 0));
  EXPECT_TRUE(ArrayNear(acc(drx::convert_array(logits, drx::f32), ties), {hits / n}, 1e-6, 0));
}

TEST(NnLoss, GradientMatchesFiniteDifferences) {
  const int64_t n = 6;
  Tree p = drx::nn::mlp_init({4, 5, 3}, 8, Init::glorot_uniform, drx::f64);
  p = drx::tree_map(
      [](const Array& a) {
        return a.ndim() == 1 ? random_array(a.shape(), a.dtype(), 9, -0.3, 0.3) : a;
      },
      p);
  Array x = random_array({n, 4}, drx::f64, 31), y = random_array({n}, drx::i32, 32, 0, 3);
  Array m = drx::testing::f64_array({1, 1, 0, 1, 0, 1}, {n});
  auto loss = [](Tree p, Value x, Value y, Value m) {
    return drx::nn::masked_mean_loss(drx::nn::mlp_apply(p, x), y, m);
  };
  Tree g = drx::jit(drx::grad(loss))(p, x, y, m);
  auto f = drx::jit(loss);
  std::vector<Tree> pl = drx::tree_leaves(p), gl = drx::tree_leaves(g);
  const double h = 1e-6;
  int checked = 0;
  for (size_t k = 0; k < pl.size(); ++k) {
    const Array& base = pl[k].array();
    for (int64_t i = 0; i < base.size(); ++i) {
      auto eval_at = [&](double delta) {
        std::vector<Tree> leaves = pl;
        Array moved = drx::convert_array(base, drx::f64);  // a fresh copy
        moved.data<double>()[i] += delta;
        leaves[k] = Tree(moved);
        return f(drx::tree_unflatten(p, leaves), x, y, m).item<double>();
      };
      double fd = (eval_at(h) - eval_at(-h)) / (2 * h);
      EXPECT_NEAR(gl[k].array().element_as_double(i), fd, 1e-7 + 1e-6 * std::abs(fd))
          << "leaf " << k << " element " << i;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * 5 + 5 + 5 * 3 + 3);
}

TEST(NnLoss, ShapeErrors) {
  auto ce = [](const drx::Type& l, const drx::Type& y) {
    drx::trace([](Value l, Value y) { return drx::nn::softmax_cross_entropy(l, y); }, {l, y});
  };
  EXPECT_THROW(ce(drx::Type(drx::f32, {3, 2}), drx::Type(drx::f32, {3})), drx::TypeError);
  EXPECT_THROW(ce(drx::Type(drx::f32, {3, 2}), drx::Type(drx::i32, {4})), drx::TypeError);
  EXPECT_THROW(ce(drx::Type(drx::i32, {3, 2}), drx::Type(drx::i32, {3})), drx::TypeError);
  EXPECT_THROW(ce(drx::Type(drx::f32, {3}), drx::Type(drx::i32, {3})), drx::TypeError);
  EXPECT_THROW(drx::trace([](Value x, Value w, Value b) { return drx::nn::dense(x, w, b); },
                          {drx::Type(drx::f32, {2, 3}), drx::Type(drx::f32, {4, 5}),
                           drx::Type(drx::f32, {5})}),
               drx::TypeError);
  EXPECT_THROW(drx::trace([](Value x) { return drx::nn::mlp_apply(Tree(), x); },
                          {drx::Type(drx::f32, {2, 3})}),
               drx::Error);
}

}  // namespace
