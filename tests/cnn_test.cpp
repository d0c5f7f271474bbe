// drx::nn's CNN (McMahan et al.'s, nn::cnn_init / nn::cnn_apply) against plain-loop float64
// references, its gradient against central differences, its error messages, and the model
// hook of the federated round and evaluation (nn::Model, RoundSpec::model).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "drx/nn/nn.h"
#include "drx/optim/optim.h"
#include "test_util.h"

namespace {

using drx::Array;
using drx::Shape;
using drx::Tree;
using drx::Value;
using drx::testing::ArrayNear;
using drx::testing::random_array;
using drx::testing::to_doubles;

// ---- the float64 plain-loop reference ------------------------------------------------------

// NHWC activations of one example batch.
struct Maps {
  int64_t n, h, w, c;
  std::vector<double> v;
  double& at(int64_t b, int64_t y, int64_t x, int64_t k) {
    return v[((b * h + y) * w + x) * c + k];
  }
  double at(int64_t b, int64_t y, int64_t x, int64_t k) const {
    return v[((b * h + y) * w + x) * c + k];
  }
};

// A 5x5 (any odd kernel) SAME convolution, stride 1, plus bias; w [kh, kw, c, o].
Maps ref_conv_same(const Maps& x, const Array& w_arr, const Array& b_arr) {
  const std::vector<double> w = to_doubles(w_arr), b = to_doubles(b_arr);
  const int64_t kh = w_arr.shape()[0], kw = w_arr.shape()[1], o = w_arr.shape()[3];
  Maps y{x.n, x.h, x.w, o, std::vector<double>(static_cast<size_t>(x.n * x.h * x.w * o))};
  for (int64_t n = 0; n < x.n; ++n)
    for (int64_t i = 0; i < x.h; ++i)
      for (int64_t j = 0; j < x.w; ++j)
        for (int64_t k = 0; k < o; ++k) {
          double s = b[static_cast<size_t>(k)];
          for (int64_t di = 0; di < kh; ++di)
            for (int64_t dj = 0; dj < kw; ++dj) {
              const int64_t yi = i + di - (kh - 1) / 2, xj = j + dj - (kw - 1) / 2;
              if (yi < 0 || yi >= x.h || xj < 0 || xj >= x.w) continue;
              for (int64_t c = 0; c < x.c; ++c)
                s +=
                    x.at(n, yi, xj, c) * w[static_cast<size_t>(((di * kw + dj) * x.c + c) * o + k)];
            }
          y.at(n, i, j, k) = s;
        }
  return y;
}

Maps ref_relu(Maps x) {
  for (double& v : x.v) v = std::max(v, 0.0);
  return x;
}

// 2x2 max pooling, stride 2, VALID (an odd last row or column is dropped).
Maps ref_pool(const Maps& x) {
  Maps y{x.n, x.h / 2, x.w / 2, x.c, {}};
  y.v.resize(static_cast<size_t>(y.n * y.h * y.w * y.c));
  for (int64_t n = 0; n < y.n; ++n)
    for (int64_t i = 0; i < y.h; ++i)
      for (int64_t j = 0; j < y.w; ++j)
        for (int64_t k = 0; k < y.c; ++k)
          y.at(n, i, j, k) =
              std::max({x.at(n, 2 * i, 2 * j, k), x.at(n, 2 * i + 1, 2 * j, k),
                        x.at(n, 2 * i, 2 * j + 1, k), x.at(n, 2 * i + 1, 2 * j + 1, k)});
  return y;
}

// rows [n, in] @ w [in, out] + b.
std::vector<double> ref_dense(const std::vector<double>& x, int64_t n, const Array& w_arr,
                              const Array& b_arr) {
  const std::vector<double> w = to_doubles(w_arr), b = to_doubles(b_arr);
  const int64_t in = w_arr.shape()[0], out = w_arr.shape()[1];
  std::vector<double> y(static_cast<size_t>(n * out));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < out; ++j) {
      double s = b[static_cast<size_t>(j)];
      for (int64_t i = 0; i < in; ++i)
        s += x[static_cast<size_t>(r * in + i)] * w[static_cast<size_t>(i * out + j)];
      y[static_cast<size_t>(r * out + j)] = s;
    }
  return y;
}

// The CNN's logits [n, classes] for NHWC images x.
std::vector<double> ref_cnn(const Tree& p, const Maps& x) {
  Maps h = ref_pool(ref_relu(ref_conv_same(x, p["conv0"]["w"].array(), p["conv0"]["b"].array())));
  h = ref_pool(ref_relu(ref_conv_same(h, p["conv1"]["w"].array(), p["conv1"]["b"].array())));
  // The NHWC buffer of each example is its (h, w, c)-ordered flattening.
  std::vector<double> d = ref_dense(h.v, h.n, p["dense0"]["w"].array(), p["dense0"]["b"].array());
  for (double& v : d) v = std::max(v, 0.0);
  return ref_dense(d, h.n, p["dense1"]["w"].array(), p["dense1"]["b"].array());
}

// cnn_init's parameters with random biases (so that they are exercised).
Tree random_biases(Tree p, uint64_t seed) {
  return drx::tree_map(
      [&](const Array& a) {
        return a.ndim() == 1 ? random_array(a.shape(), a.dtype(), seed++, -0.2, 0.2) : a;
      },
      p);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const drx::Error& e) {
    return e.what();
  }
  return "no error";
}

// ---- init -----------------------------------------------------------------------------------

TEST(Cnn, InitLayoutShapesAndStreams) {
  const Tree p = drx::nn::cnn_init(28, 28, 1, 10, 3);
  EXPECT_EQ(p.structure(), "{conv0:{b:*,w:*},conv1:{b:*,w:*},dense0:{b:*,w:*},dense1:{b:*,w:*}}");
  const std::vector<Shape> w_shapes = {{5, 5, 1, 32}, {5, 5, 32, 64}, {3136, 512}, {512, 10}};
  const std::vector<int64_t> fan_in = {25, 800, 3136, 512};
  int64_t total = 0;
  for (size_t l = 0; l < 4; ++l) {
    const Tree& layer = p.children()[l];
    const Array& w = layer["w"].array();
    const Array& b = layer["b"].array();
    EXPECT_EQ(w.shape(), w_shapes[l]) << p.keys()[l];
    EXPECT_EQ(w.dtype(), drx::f32);
    EXPECT_EQ(b.shape(), (Shape{w_shapes[l].back()}));
    EXPECT_TRUE(ArrayNear(b, std::vector<double>(static_cast<size_t>(b.size()), 0.0), 0, 0));
    // He-normal from the layer's own stream, as mlp_init's layers.
    const Array want =
        drx::nn::init_array(drx::nn::Init::he_normal, w_shapes[l], fan_in[l],
                            w_shapes[l].size() == 4 ? 25 * w_shapes[l][3] : w_shapes[l][1],
                            drx::nn::derive_init_seed(3, l));
    EXPECT_TRUE(w.bitwise_equal(want)) << p.keys()[l];
    std::vector<double> v = to_doubles(w);
    double sq = 0;
    for (double x : v) sq += x * x;
    const double want_std = std::sqrt(2.0 / static_cast<double>(fan_in[l]));
    EXPECT_NEAR(std::sqrt(sq / static_cast<double>(v.size())), want_std, 0.15 * want_std);
    total += w.size() + b.size();
  }
  EXPECT_EQ(total, 1663370);  // McMahan et al.'s 1,663,370 parameters
  // Seeded, with a dtype; other image sizes flatten to (H/4) (W/4) 64 features.
  EXPECT_TRUE(drx::nn::cnn_init(28, 28, 1, 10, 3)["conv1"]["w"].array().bitwise_equal(
      p["conv1"]["w"].array()));
  EXPECT_FALSE(drx::nn::cnn_init(28, 28, 1, 10, 4)["conv1"]["w"].array().bitwise_equal(
      p["conv1"]["w"].array()));
  const Tree q = drx::nn::cnn_init(9, 14, 3, 5, 0, drx::f64);
  EXPECT_EQ(q["conv0"]["w"].array().shape(), (Shape{5, 5, 3, 32}));
  EXPECT_EQ(q["dense0"]["w"].array().shape(), (Shape{2 * 3 * 64, 512}));
  EXPECT_EQ(q["dense1"]["b"].array().shape(), (Shape{5}));
  EXPECT_EQ(q["dense1"]["w"].array().dtype(), drx::f64);
  EXPECT_THROW(drx::nn::cnn_init(3, 28, 1, 10, 0), drx::Error);
  EXPECT_THROW(drx::nn::cnn_init(28, 28, 0, 10, 0), drx::Error);
  EXPECT_THROW(drx::nn::cnn_init(28, 28, 1, 0, 0), drx::Error);
  EXPECT_THROW(drx::nn::cnn_init(28, 28, 1, 10, 0, drx::i32), drx::Error);
}

// ---- apply ----------------------------------------------------------------------------------

TEST(Cnn, LogitsMatchThePlainLoopReference) {
  // Odd sizes: SAME keeps 9x10, the VALID pools give 4x5 then 2x2.
  const int64_t n = 3, h = 9, w = 10, c = 2, classes = 4;
  const Tree p = random_biases(drx::nn::cnn_init(h, w, c, classes, 5, drx::f64), 40);
  const Array x = random_array({n, h, w, c}, drx::f64, 6, 0, 1);
  const Array logits = drx::jit([](Tree p, Value x) { return drx::nn::cnn_apply(p, x); })(p, x);
  EXPECT_EQ(logits.shape(), (Shape{n, classes}));
  EXPECT_EQ(logits.dtype(), drx::f64);
  const std::vector<double> want = ref_cnn(p, Maps{n, h, w, c, to_doubles(x)});
  EXPECT_TRUE(ArrayNear(logits, want, 1e-11, 1e-11));
  // Under the f64 policy: the same.
  const Array full = drx::jit([](Tree p, Value x) {
    return drx::nn::cnn_apply(p, x, drx::nn::Policy::full(drx::f64));
  })(p, x);
  EXPECT_TRUE(ArrayNear(full, want, 1e-11, 1e-11));
}

TEST(Cnn, SquareRowsAreImages) {
  // Rows of 784 pixels are 28x28 one-channel images, as drx fedavg feeds them.
  const int64_t n = 2;
  const Tree p = random_biases(drx::nn::cnn_init(28, 28, 1, 10, 7, drx::f64), 50);
  const Array rows = random_array({n, 784}, drx::f64, 8, 0, 1);
  auto apply = drx::jit([](Tree p, Value x) { return drx::nn::cnn_apply(p, x); });
  const Array logits = apply(p, rows);
  EXPECT_EQ(logits.shape(), (Shape{n, 10}));
  EXPECT_TRUE(ArrayNear(logits, ref_cnn(p, Maps{n, 28, 28, 1, to_doubles(rows)}), 1e-11, 1e-11));
  Array images = rows;
  images = drx::jit([](Value r) { return drx::reshape(r, {2, 28, 28, 1}); })(rows);
  EXPECT_TRUE(apply(p, images).bitwise_equal(logits));
}

TEST(Cnn, Bf16PolicyIsCloseToF32) {
  const Tree p = random_biases(drx::nn::cnn_init(12, 12, 1, 10, 9), 60);
  const Array x = random_array({4, 144}, drx::f32, 10, 0, 1);
  const Array f32 = drx::jit([](Tree p, Value x) { return drx::nn::cnn_apply(p, x); })(p, x);
  const Array bf16 = drx::jit(
      [](Tree p, Value x) { return drx::nn::cnn_apply(p, x, drx::nn::Policy::bf16()); })(p, x);
  EXPECT_EQ(bf16.dtype(), drx::f32);
  const std::vector<double> a = to_doubles(f32), b = to_doubles(bf16);
  double scale = 0, err = 0;
  for (size_t i = 0; i < a.size(); ++i)
    scale = std::max(scale, std::abs(a[i])), err = std::max(err, std::abs(a[i] - b[i]));
  EXPECT_GT(scale, 0.1);
  EXPECT_LT(err, 0.05 * scale);  // bf16 operands: ~3 significant digits per product
  EXPECT_GT(err, 0.0);           // the products did run on bf16
}

TEST(Cnn, BadTreesNameTheLayerAndShapes) {
  const Tree p = drx::nn::cnn_init(8, 8, 1, 3, 0);
  auto apply_error = [](const Tree& params, const drx::Type& x) {
    return error_of(
        [&] { drx::trace([&params](Value x) { return drx::nn::cnn_apply(params, x); }, {x}); });
  };
  const drx::Type rows(drx::f32, {2, 64});
  auto with = [&](const std::string& layer, const std::string& key, const Array& a) {
    std::vector<std::pair<std::string, Tree>> layers;
    for (size_t l = 0; l < p.size(); ++l) {
      Tree child = p.children()[l];
      if (p.keys()[l] == layer) {
        std::vector<std::pair<std::string, Tree>> leaves;
        for (size_t k = 0; k < child.size(); ++k)
          leaves.emplace_back(child.keys()[k],
                              child.keys()[k] == key ? Tree(a) : child.children()[k]);
        child = Tree::dict(std::move(leaves));
      }
      layers.emplace_back(p.keys()[l], child);
    }
    return Tree::dict(std::move(layers));
  };
  // The MLP's tree.
  std::string m = apply_error(drx::nn::mlp_init({64, 3}, 0), rows);
  EXPECT_NE(m.find("cnn_apply: params must be a dict {conv0, conv1, dense0, dense1}"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("{layer0:{b:*,w:*}}"), std::string::npos) << m;
  // A layer without its bias.
  std::vector<std::pair<std::string, Tree>> layers;
  for (size_t l = 0; l < p.size(); ++l)
    layers.emplace_back(p.keys()[l],
                        l == 1 ? Tree::dict({{"w", p["conv1"]["w"]}}) : p.children()[l]);
  m = apply_error(Tree::dict(layers), rows);
  EXPECT_NE(m.find("layer 'conv1' must be a dict {b, w}, got {w:*}"), std::string::npos) << m;
  // A dense kernel for a convolution.
  m = apply_error(with("conv0", "w", drx::zeros({25, 32}, drx::f32)), rows);
  EXPECT_NE(m.find("layer 'conv0' expects floating w [kh, kw, in, out] and b [out]"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("got w f32[25,32], b f32[32]"), std::string::npos) << m;
  // conv1 that does not read conv0's 32 channels.
  m = apply_error(with("conv1", "w", drx::zeros({5, 5, 16, 64}, drx::f32)), rows);
  EXPECT_NE(m.find("layer 'conv1' expects the 32 outputs of layer 'conv0' as its input"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("w f32[5,5,16,64]"), std::string::npos) << m;
  // A bias of the wrong size.
  m = apply_error(with("dense1", "b", drx::zeros({4}, drx::f32)), rows);
  EXPECT_NE(m.find("layer 'dense1' expects floating w [in, out] and b [out]"), std::string::npos)
      << m;
  EXPECT_NE(m.find("w f32[512,3], b f32[4]"), std::string::npos) << m;
  // Images of another size than the parameters were made for.
  m = apply_error(p, drx::Type(drx::f32, {2, 144}));
  EXPECT_NE(m.find("layer 'dense0' expects the 576 features of x f32[2,144]"), std::string::npos)
      << m;
  EXPECT_NE(m.find("got w f32[256,512]"), std::string::npos) << m;
  // Rows that are no square image, and images of other channels.
  m = apply_error(p, drx::Type(drx::f32, {2, 63}));
  EXPECT_NE(
      m.find("rows x f32[2,63] are not square images of 1 channel(s), the input of layer 'conv0'"),
      std::string::npos)
      << m;
  m = apply_error(p, drx::Type(drx::f32, {2, 8, 8, 3}));
  EXPECT_NE(m.find("x f32[2,8,8,3] has 3 channels, but layer 'conv0'"), std::string::npos) << m;
  m = apply_error(p, drx::Type(drx::f32, {64}));
  EXPECT_NE(m.find("x must be images [B, H, W, C] or rows [B, H * W * C]"), std::string::npos) << m;
}

// ---- the gradient ---------------------------------------------------------------------------

TEST(Cnn, LossGradientMatchesCentralDifferences) {
  const int64_t n = 4;
  const Tree p = random_biases(drx::nn::cnn_init(8, 8, 1, 3, 11, drx::f64), 70);
  const Array x = random_array({n, 64}, drx::f64, 12, 0, 1);
  const Array y = random_array({n}, drx::i32, 13, 0, 3);
  const Array m = drx::testing::f64_array({1, 1, 0, 1}, {n});
  auto loss = [](Tree p, Value x, Value y, Value m) {
    return drx::nn::masked_mean_loss(drx::nn::cnn_apply(p, x), y, m);
  };
  const Tree g = drx::jit(drx::grad(loss))(p, x, y, m);
  auto f = drx::jit(loss);
  const std::vector<Tree> pl = drx::tree_leaves(p), gl = drx::tree_leaves(g);
  ASSERT_EQ(pl.size(), 8u);
  const double h = 1e-6;
  int checked = 0;
  for (size_t k = 0; k < pl.size(); ++k) {
    const Array& base = pl[k].array();
    // The first and last elements and a few between.
    for (int64_t i : {int64_t{0}, base.size() / 3, base.size() / 2 + 1, base.size() - 1}) {
      auto eval_at = [&](double delta) {
        std::vector<Tree> leaves = pl;
        Array moved = drx::convert_array(base, drx::f64);  // a fresh copy
        moved.data<double>()[i] += delta;
        leaves[k] = Tree(moved);
        return f(drx::tree_unflatten(p, leaves), x, y, m).item<double>();
      };
      const double fd = (eval_at(h) - eval_at(-h)) / (2 * h);
      EXPECT_NEAR(gl[k].array().element_as_double(i), fd, 1e-7 + 1e-5 * std::abs(fd))
          << "leaf " << k << " element " << i;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 32);
}

// ---- the model hook of the round and the evaluation ------------------------------------------

TEST(CnnModel, NamedModels) {
  EXPECT_EQ(drx::nn::Model::mlp().name, "mlp");
  EXPECT_EQ(drx::nn::Model::cnn().name, "cnn");
  EXPECT_EQ(drx::nn::Model::named("cnn").name, "cnn");
  EXPECT_EQ(drx::optim::RoundSpec().model.name, "mlp");  // every existing caller's model
  const std::string m = error_of([] { drx::nn::Model::named("resnet"); });
  EXPECT_NE(m.find("model 'resnet' is not known (expected mlp or cnn)"), std::string::npos) << m;
  drx::optim::RoundSpec spec;
  spec.model = drx::nn::Model{"none", nullptr};
  EXPECT_THROW(drx::optim::fedavg_round(spec), drx::Error);
  EXPECT_THROW(drx::optim::evaluate_fn(2, spec.model), drx::Error);
}

TEST(CnnModel, RoundTrainsTheCnnAsFedAvgSays) {
  // Two clients, one local SGD step each: the server's new model is the example-weighted mean
  // of p - lr * grad_k.
  const int64_t cohort = 2, batch = 3, n = 8;
  const double lr = 0.1;
  const Tree p = random_biases(drx::nn::cnn_init(8, 8, 1, 3, 21, drx::f64), 80);
  const Array x_all = random_array({n, 64}, drx::f64, 22, 0, 1);
  const Array y_all = random_array({n}, drx::i32, 23, 0, 3);
  const Array idx = Array::from_vector<int32_t>({0, 1, 2, 5, 6, 7}, {cohort, 1, batch});
  const Array mask = drx::testing::f64_array({1, 1, 1, 1, 1, 0}, {cohort, 1, batch});
  const Array weights = drx::testing::f64_array({3, 2}, {cohort});
  drx::optim::RoundSpec spec;
  spec.client.lr = lr;
  spec.cohort = cohort;
  spec.steps = 1;
  spec.batch = batch;
  spec.model = drx::nn::Model::cnn();
  const drx::optim::ServerOptimizer server;
  const Tree out =
      drx::jit(drx::optim::fedavg_round(spec))(p, server.init(p), x_all, y_all, idx, mask, weights);

  auto loss = [](Tree p, Value x, Value y, Value m) {
    return drx::nn::masked_mean_loss(drx::nn::cnn_apply(p, x), y, m);
  };
  auto grad = drx::jit(drx::grad(loss));
  auto rows = [&](std::vector<int64_t> ids) {
    std::vector<double> xs;
    std::vector<int32_t> ys;
    const std::vector<double> xv = to_doubles(x_all);
    for (int64_t i : ids) {
      xs.insert(xs.end(), xv.begin() + i * 64, xv.begin() + (i + 1) * 64);
      ys.push_back(y_all.data<int32_t>()[i]);
    }
    return std::pair{drx::testing::f64_array(xs, {batch, 64}),
                     Array::from_vector<int32_t>(ys, {batch})};
  };
  const auto [x0, y0] = rows({0, 1, 2});
  const auto [x1, y1] = rows({5, 6, 7});
  const Tree g0 = grad(p, x0, y0, drx::testing::f64_array({1, 1, 1}, {batch}));
  const Tree g1 = grad(p, x1, y1, drx::testing::f64_array({1, 1, 0}, {batch}));
  const std::vector<Tree> pl = drx::tree_leaves(p), l0 = drx::tree_leaves(g0),
                          l1 = drx::tree_leaves(g1), got = drx::tree_leaves(out["params"]);
  for (size_t k = 0; k < pl.size(); ++k) {
    const std::vector<double> pv = to_doubles(pl[k].array()), a = to_doubles(l0[k].array()),
                              b = to_doubles(l1[k].array());
    std::vector<double> want;
    for (size_t i = 0; i < pv.size(); ++i)
      want.push_back((3 * (pv[i] - lr * a[i]) + 2 * (pv[i] - lr * b[i])) / 5);
    EXPECT_TRUE(ArrayNear(got[k].array(), want, 1e-12, 1e-12)) << "leaf " << k;
  }
  // Evaluation of the CNN: its loss and accuracy over the real examples of the shards.
  const Tree e =
      drx::jit(drx::optim::evaluate_fn(cohort, drx::nn::Model::cnn()))(p, x_all, y_all, idx, mask);
  const Array logits = drx::jit([](Tree p, Value x) { return drx::nn::cnn_apply(p, x); })(p, x_all);
  const Array ce = drx::jit([](Value l, Value y) { return drx::nn::softmax_cross_entropy(l, y); })(
      logits, y_all);
  const Array hit =
      drx::jit([](Value l, Value y) { return drx::nn::correct(l, y); })(logits, y_all);
  double ce_sum = 0, hits = 0;
  for (int64_t i : {0, 1, 2, 5, 6})
    ce_sum += ce.element_as_double(i), hits += hit.element_as_double(i);
  EXPECT_TRUE(ArrayNear(e["loss"].array(), {ce_sum / 5}, 1e-12, 1e-12));
  EXPECT_TRUE(ArrayNear(e["accuracy"].array(), {hits / 5}, 1e-15, 0));
  // The round under the bf16 policy (f32 params) runs and stays close.
  spec.policy = drx::nn::Policy::bf16();
  const Tree p32 = drx::tree_map([](const Array& a) { return drx::convert_array(a, drx::f32); }, p);
  const Tree bf = drx::jit(drx::optim::fedavg_round(spec))(p32, server.init(p32), x_all, y_all, idx,
                                                           mask, weights);
  EXPECT_NEAR(bf["loss"].array().element_as_double(0), out["loss"].array().element_as_double(0),
              0.05 * std::abs(out["loss"].array().element_as_double(0)));
}

// An f32 CNN round (its convolutions on oneDNN where present) has the same bits on 1 to 3
// devices of the clients axis and on 1 or 2 threads.
TEST(CnnModel, RoundIsBitwiseTheSameOnOneToThreeDevicesAndAnyThreadCount) {
  const int64_t cohort = 5, batch = 4, n = 24;
  const Tree p = drx::tree_map([](const Array& a) { return drx::convert_array(a, drx::f32); },
                               random_biases(drx::nn::cnn_init(12, 12, 1, 4, 31, drx::f64), 90));
  const Array x_all = random_array({n, 144}, drx::f32, 32, 0, 1);
  const Array y_all = random_array({n}, drx::i32, 33, 0, 4);
  const Array idx = random_array({cohort, 2, batch}, drx::i32, 34, 0, n);
  const Array mask =
      drx::convert_array(random_array({cohort, 2, batch}, drx::i32, 35, 0, 2), drx::f32);
  const Array weights = random_array({cohort}, drx::f32, 36, 1, 3);
  drx::optim::RoundSpec spec;
  spec.client.lr = 0.1;
  spec.cohort = cohort;
  spec.steps = 2;
  spec.batch = batch;
  spec.model = drx::nn::Model::cnn();
  const drx::optim::ServerOptimizer server;
  auto round = drx::jit(drx::optim::fedavg_round(spec));
  auto run = [&] {
    return drx::tree_leaves(round(p, server.init(p), x_all, y_all, idx, mask, weights));
  };
  const int before = drx::num_threads();
  drx::set_num_threads(1);
  const std::vector<Tree> one = run();
  drx::set_num_threads(2);
  auto same = [&](const std::vector<Tree>& got, const std::string& what) {
    ASSERT_EQ(got.size(), one.size());
    for (size_t k = 0; k < one.size(); ++k)
      EXPECT_TRUE(got[k].array().bitwise_equal(one[k].array())) << what << ", leaf " << k;
  };
  same(run(), "2 threads");
  for (int devices : {2, 3}) {
    const drx::MeshScope scope(drx::Mesh({{"clients", devices}}));
    same(run(), std::to_string(devices) + " devices");
  }
  drx::set_num_threads(before);
}

}  // namespace
