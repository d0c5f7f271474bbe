// The transformer of drx/nn against an independent float64 model written here with plain loops
// over host arrays (no drx ops): logits, loss, and drx's gradients against central differences
// of that reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <vector>

#include "drx/drx.h"
#include "test_util.h"

namespace {

using drx::Array;
using drx::Tree;
using drx::Value;
using drx::nn::TransformerConfig;

TransformerConfig tiny() {
  TransformerConfig c;
  c.vocab = 11;
  c.context = 6;
  c.layers = 2;
  c.width = 8;
  c.heads = 2;
  c.mlp = 12;
  return c;
}

// ---- the reference: plain loops in double ------------------------------------------------

struct Mat {  // row-major [rows, cols]
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
  Mat(int64_t r, int64_t c) : rows(r), cols(c), v(static_cast<size_t>(r * c), 0.0) {}
  double& at(int64_t i, int64_t j) { return v[static_cast<size_t>(i * cols + j)]; }
  double at(int64_t i, int64_t j) const { return v[static_cast<size_t>(i * cols + j)]; }
};

// Leaf `key` of params (layer l of a stacked block leaf when l >= 0) as a matrix; vectors are
// one row.
Mat leaf(const Tree& params, const std::string& key, int64_t l = -1) {
  const Array& a = l >= 0 ? params["blocks"][key].array() : params[key].array();
  const drx::Shape& s = a.shape();
  const int64_t rank = static_cast<int64_t>(s.size()) - (l >= 0 ? 1 : 0);
  const int64_t rows = rank == 2 ? s[s.size() - 2] : 1, cols = s.back();
  Mat m(rows, cols);
  const int64_t offset = l >= 0 ? l * rows * cols : 0;
  for (int64_t i = 0; i < rows * cols; ++i)
    m.v[static_cast<size_t>(i)] = a.element_as_double(offset + i);
  return m;
}

Mat affine(const Mat& x, const Mat& w, const Mat& b) {  // x w + b
  Mat y(x.rows, w.cols);
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t j = 0; j < w.cols; ++j) {
      double s = b.at(0, j);
      for (int64_t k = 0; k < x.cols; ++k) s += x.at(i, k) * w.at(k, j);
      y.at(i, j) = s;
    }
  return y;
}

Mat norm(const Mat& x, const Mat& g, const Mat& b) {
  Mat y(x.rows, x.cols);
  for (int64_t i = 0; i < x.rows; ++i) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < x.cols; ++j) mu += x.at(i, j) / static_cast<double>(x.cols);
    for (int64_t j = 0; j < x.cols; ++j)
      var += (x.at(i, j) - mu) * (x.at(i, j) - mu) / static_cast<double>(x.cols);
    for (int64_t j = 0; j < x.cols; ++j)
      y.at(i, j) = (x.at(i, j) - mu) / std::sqrt(var + 1e-5) * g.at(0, j) + b.at(0, j);
  }
  return y;
}

// Logits [t, vocab] of one sequence.
Mat reference_logits(const TransformerConfig& c, const Tree& p, const std::vector<int>& ids) {
  const int64_t t = static_cast<int64_t>(ids.size()), d = c.width, dh = d / c.heads;
  const Mat wte = leaf(p, "wte"), wpe = leaf(p, "wpe");
  Mat x(t, d);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < d; ++j)
      x.at(i, j) = wte.at(ids[static_cast<size_t>(i)], j) + wpe.at(i, j);
  for (int64_t l = 0; l < c.layers; ++l) {
    const Mat qkv = affine(norm(x, leaf(p, "ln1_g", l), leaf(p, "ln1_b", l)), leaf(p, "qkv_w", l),
                           leaf(p, "qkv_b", l));
    Mat heads(t, d);
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < t; ++i) {
        std::vector<double> s(static_cast<size_t>(i + 1));
        double top = -1e300;
        for (int64_t j = 0; j <= i; ++j) {  // keys after the query are masked
          double dot = 0;
          for (int64_t e = 0; e < dh; ++e) dot += qkv.at(i, h * dh + e) * qkv.at(j, d + h * dh + e);
          s[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(dh));
          top = std::max(top, s[static_cast<size_t>(j)]);
        }
        double z = 0;
        for (double& v : s) z += (v = std::exp(v - top));
        for (int64_t e = 0; e < dh; ++e) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j)
            o += s[static_cast<size_t>(j)] / z * qkv.at(j, 2 * d + h * dh + e);
          heads.at(i, h * dh + e) = o;
        }
      }
    const Mat attn = affine(heads, leaf(p, "attn_w", l), leaf(p, "attn_b", l));
    for (size_t k = 0; k < x.v.size(); ++k) x.v[k] += attn.v[k];
    Mat hidden = affine(norm(x, leaf(p, "ln2_g", l), leaf(p, "ln2_b", l)), leaf(p, "fc_w", l),
                        leaf(p, "fc_b", l));
    for (double& v : hidden.v) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    const Mat mlp = affine(hidden, leaf(p, "out_w", l), leaf(p, "out_b", l));
    for (size_t k = 0; k < x.v.size(); ++k) x.v[k] += mlp.v[k];
  }
  const Mat h = norm(x, leaf(p, "lnf_g"), leaf(p, "lnf_b"));
  Mat logits(t, c.vocab);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t v = 0; v < c.vocab; ++v) {
      double s = 0;
      for (int64_t j = 0; j < d; ++j) s += h.at(i, j) * wte.at(v, j);
      logits.at(i, v) = s;
    }
  return logits;
}

double reference_loss(const TransformerConfig& c, const Tree& p,
                      const std::vector<std::vector<int>>& windows) {
  double total = 0;
  int64_t count = 0;
  for (const std::vector<int>& w : windows) {
    const std::vector<int> in(w.begin(), w.end() - 1);
    const Mat logits = reference_logits(c, p, in);
    for (int64_t i = 0; i < logits.rows; ++i) {
      double top = -1e300, z = 0;
      for (int64_t v = 0; v < c.vocab; ++v) top = std::max(top, logits.at(i, v));
      for (int64_t v = 0; v < c.vocab; ++v) z += std::exp(logits.at(i, v) - top);
      total += top + std::log(z) - logits.at(i, w[static_cast<size_t>(i + 1)]);
      ++count;
    }
  }
  return total / static_cast<double>(count);
}

// ---- helpers -----------------------------------------------------------------------------

// transformer_init's params with every leaf perturbed (biases and gains too), so that no
// derivative is trivially zero.
Tree perturbed_params(const TransformerConfig& c, uint64_t seed) {
  Tree p = drx::nn::transformer_init(c, seed, drx::f64);
  uint64_t k = 100;
  return drx::tree_map(
      [&](const Array& a) {
        Array noise = drx::nn::normal_array(a.shape(), 0.3, seed + k++, drx::f64);
        Array out = drx::convert_array(a, drx::f64);
        for (int64_t i = 0; i < out.size(); ++i) out.data<double>()[i] += noise.data<double>()[i];
        return out;
      },
      p);
}

std::vector<std::vector<int>> make_windows(int64_t batch, int64_t len, int64_t vocab, int seed) {
  std::vector<std::vector<int>> w(static_cast<size_t>(batch));
  unsigned state = static_cast<unsigned>(seed) * 2654435761u + 7;
  for (auto& row : w)
    for (int64_t i = 0; i < len; ++i) {
      state = state * 1664525u + 1013904223u;
      row.push_back(static_cast<int>((state >> 8) % static_cast<unsigned>(vocab)));
    }
  return w;
}

Array windows_array(const std::vector<std::vector<int>>& w) {
  const int64_t b = static_cast<int64_t>(w.size()), len = static_cast<int64_t>(w[0].size());
  Array a(drx::i32, {b, len});
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < len; ++j)
      a.data<int32_t>()[i * len + j] = w[static_cast<size_t>(i)][static_cast<size_t>(j)];
  return a;
}

// ---- tests -------------------------------------------------------------------------------

TEST(Transformer, LogitsMatchThePlainLoopReferenceInFloat64) {
  for (bool scan_layers : {true, false}) {
    TransformerConfig c = tiny();
    c.scan_layers = scan_layers;
    const Tree p = perturbed_params(c, 3);
    const auto w = make_windows(3, c.context, c.vocab, 5);
    auto f = drx::jit([c](Tree p, Value ids) { return drx::nn::transformer_logits(c, p, ids); });
    const Array got = f(p, windows_array(w));
    ASSERT_EQ(got.shape(), (drx::Shape{3, c.context, c.vocab}));
    for (int64_t b = 0; b < 3; ++b) {
      const Mat want = reference_logits(c, p, w[static_cast<size_t>(b)]);
      for (int64_t i = 0; i < want.rows; ++i)
        for (int64_t v = 0; v < c.vocab; ++v)
          ASSERT_NEAR(got.element_as_double((b * c.context + i) * c.vocab + v), want.at(i, v),
                      1e-11)
              << "scan_layers " << scan_layers << " batch " << b << " position " << i;
    }
  }
}

TEST(Transformer, Float32LossMatchesTheReferenceAndStartsNearLogVocabulary) {
  TransformerConfig c = tiny();
  c.vocab = 256;
  c.width = 16;
  const Tree p64 = drx::nn::transformer_init(c, 7, drx::f64);
  const Tree p32 = drx::nn::transformer_init(c, 7, drx::f32);
  const auto w = make_windows(4, c.context + 1, c.vocab, 9);
  auto loss = drx::jit([c](Tree p, Value w) { return drx::nn::transformer_loss(c, p, w); });
  const double want = reference_loss(c, p64, w);
  EXPECT_NEAR(loss(p32, windows_array(w)).item<float>(), want, 2e-5 * want);
  // GPT-2's small init: the logits start near 0, so the loss near ln(vocab).
  EXPECT_NEAR(want, std::log(256.0), 0.05);
}

TEST(Transformer, GradientsMatchCentralDifferencesOfTheReference) {
  const TransformerConfig c = tiny();
  const Tree p = perturbed_params(c, 11);
  const auto w = make_windows(2, c.context + 1, c.vocab, 13);
  const Array wa = windows_array(w);
  const Tree g = drx::jit(
      drx::grad([c](Tree p, Value w) { return drx::nn::transformer_loss(c, p, w); }))(p, wa);
  const std::vector<Tree> pl = drx::tree_leaves(p), gl = drx::tree_leaves(g);
  const std::vector<std::string> paths = drx::tree_leaf_paths(p);
  ASSERT_EQ(pl.size(), 16u);
  const double h = 1e-5;
  for (size_t k = 0; k < pl.size(); ++k) {
    const Array& base = pl[k].array();
    // Every element of small leaves, a spread of elements of the others.
    const int64_t stride = std::max<int64_t>(1, base.size() / 23);
    for (int64_t i = 0; i < base.size(); i += stride) {
      auto at = [&](double delta) {
        std::vector<Tree> leaves = pl;
        Array moved = drx::convert_array(base, drx::f64);
        moved.data<double>()[i] += delta;
        leaves[k] = Tree(moved);
        return reference_loss(c, drx::tree_unflatten(p, leaves), w);
      };
      const double fd = (at(h) - at(-h)) / (2 * h);
      EXPECT_NEAR(gl[k].array().element_as_double(i), fd, 1e-8 + 1e-6 * std::abs(fd))
          << paths[k] << " element " << i;
    }
  }
}

TEST(Transformer, AttentionIsCausal) {
  const TransformerConfig c = tiny();
  const Tree p = perturbed_params(c, 17);
  auto w = make_windows(1, c.context, c.vocab, 19);
  auto f = drx::jit([c](Tree p, Value ids) { return drx::nn::transformer_logits(c, p, ids); });
  const Array before = f(p, windows_array(w));
  w[0][4] = (w[0][4] + 1) % static_cast<int>(c.vocab);  // a later token changes
  const Array after = f(p, windows_array(w));
  for (int64_t i = 0; i < c.context * c.vocab; ++i) {
    if (i / c.vocab < 4) {
      EXPECT_EQ(before.element_as_double(i), after.element_as_double(i)) << i;
    }
  }
  EXPECT_NE(before.element_as_double(4 * c.vocab), after.element_as_double(4 * c.vocab));
}

TEST(Transformer, InitIsGpt2sAndSeeded) {
  TransformerConfig c;
  c.layers = 3;
  c.width = 64;
  const Tree p = drx::nn::transformer_init(c, 0);
  int64_t total = 0;
  for (const Tree& leaf : drx::tree_leaves(p)) total += leaf.array().size();
  EXPECT_EQ(total, c.parameters());
  EXPECT_EQ(c.parameters(),
            256 * 64 + 64 * 64 +
                3 * (4 * 64 + 64 * 192 + 192 + 64 * 64 + 64 + 64 * 256 + 256 + 256 * 64 + 64) +
                2 * 64);
  auto stddev = [](const Array& a) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < a.size(); ++i) {
      s += a.element_as_double(i);
      s2 += a.element_as_double(i) * a.element_as_double(i);
    }
    const double n = static_cast<double>(a.size());
    return std::sqrt(s2 / n - (s / n) * (s / n));
  };
  EXPECT_NEAR(stddev(p["wte"].array()), 0.02, 0.001);
  EXPECT_NEAR(stddev(p["blocks"]["fc_w"].array()), 0.02, 0.001);
  EXPECT_NEAR(stddev(p["blocks"]["out_w"].array()), 0.02 / std::sqrt(6.0), 0.0005);
  EXPECT_NEAR(stddev(p["blocks"]["attn_w"].array()), 0.02 / std::sqrt(6.0), 0.0005);
  for (const char* zero : {"qkv_b", "attn_b", "fc_b", "out_b", "ln1_b", "ln2_b"})
    EXPECT_EQ(stddev(p["blocks"][zero].array()) + p["blocks"][zero].array().element_as_double(0),
              0.0)
        << zero;
  EXPECT_EQ(p["blocks"]["ln1_g"].array().element_as_double(17), 1.0);
  EXPECT_TRUE(drx::nn::transformer_init(c, 0)["wte"].array().bitwise_equal(p["wte"].array()));
  EXPECT_FALSE(drx::nn::transformer_init(c, 1)["wte"].array().bitwise_equal(p["wte"].array()));
  EXPECT_FALSE(p["wte"].array().bitwise_equal(p["wpe"].array()));
}

// ---- mixed precision (nn::Policy::bf16()) ---------------------------------------------------

Tree as_f32(const Tree& p) {
  return drx::tree_map([](const Array& a) { return drx::convert_array(a, drx::f32); }, p);
}

// |a - b| / |b| over all leaves as one vector.
double relative_error(const Tree& a, const Tree& b) {
  double diff = 0, norm = 0;
  const std::vector<Tree> al = drx::tree_leaves(a), bl = drx::tree_leaves(b);
  for (size_t k = 0; k < al.size(); ++k)
    for (int64_t i = 0; i < bl[k].array().size(); ++i) {
      const double x = al[k].array().element_as_double(i), y = bl[k].array().element_as_double(i);
      diff += (x - y) * (x - y);
      norm += y * y;
    }
  return std::sqrt(diff / norm);
}

TEST(Transformer, Bf16PolicyCastsEachWeightOnceAndRunsEveryProductOnBf16) {
  TransformerConfig c = tiny();
  c.policy = drx::nn::Policy::bf16();
  const Tree p = drx::nn::transformer_init(c, 5);
  const drx::Program prog =
      drx::simplify(drx::trace([c](Tree p, Value w) { return drx::nn::transformer_loss(c, p, w); },
                               p, Array(drx::i32, {2, c.context + 1})));
  // The stacked qkv, attention, MLP weights and the embedding: each cast once, straight from
  // the program's inputs.
  int casts_of_inputs = 0, products = 0;
  for (const drx::Eqn& e : prog.eqns) {
    if (e.prim->name() == "convert" &&
        std::find(prog.inputs.begin(), prog.inputs.end(), e.ins[0]) != prog.inputs.end())
      ++casts_of_inputs;
  }
  EXPECT_EQ(casts_of_inputs, 5);
  std::function<void(const drx::Program&)> count = [&](const drx::Program& q) {
    for (const drx::Eqn& e : q.eqns) {
      if (e.prim->name() == "dot_general") {
        ++products;
        EXPECT_EQ(q.type_of(e.ins[0]).dtype, drx::bf16) << drx::to_string(q);
        EXPECT_EQ(q.type_of(e.outs[0]).dtype, drx::f32);
      }
      for (const auto& [key, attr] : e.params.items())
        if (const auto* sub = std::get_if<std::shared_ptr<const drx::Program>>(&attr)) count(**sub);
    }
  };
  count(prog);
  // qkv, scores, weights x v, attention output, fc and out in the scan's body, and the tied
  // output projection.
  EXPECT_EQ(products, 7);
}

TEST(Transformer, Bf16PolicyLossAndGradientsFollowTheFloat64Model) {
  // The f64 gradients are the ones checked against central differences above; the bf16
  // policy's must be close to them (bf16 operands: a relative error of a few 2^-8), reach the
  // f32 parameters as f32, and be the same compiled as interpreted up to the products' f32
  // accumulation order.
  TransformerConfig c = tiny();
  const Tree p64 = perturbed_params(c, 21);
  const auto w = make_windows(3, c.context + 1, c.vocab, 23);
  const Array wa = windows_array(w);
  TransformerConfig mixed = c;
  mixed.policy = drx::nn::Policy::bf16();
  auto value_and_grad = [](const TransformerConfig& cfg) {
    return [cfg](Tree p, Value w) {
      return drx::value_and_grad(
          [cfg](Tree p, Value w) { return drx::nn::transformer_loss(cfg, p, w); })(p, w);
    };
  };
  const Tree p32 = as_f32(p64);
  const auto [loss64, g64] = drx::jit(value_and_grad(c))(p64, wa);
  const auto [loss16, g16] = drx::jit(value_and_grad(mixed))(p32, wa);
  const double want = reference_loss(c, p64, w);
  EXPECT_NEAR(loss64.item<double>(), want, 1e-10 * want);
  EXPECT_NEAR(loss16.item<float>(), want, 1e-2 * want);
  for (const Tree& leaf : drx::tree_leaves(g16)) EXPECT_EQ(leaf.array().dtype(), drx::f32);
  EXPECT_LT(relative_error(g16, g64), 0.03);
  // The same gradient program, interpreted (products accumulated in double).
  const drx::Program prog = drx::simplify(drx::trace(value_and_grad(mixed), p32, wa));
  std::vector<Array> args;
  for (const Tree& leaf : drx::tree_leaves(p32)) args.push_back(leaf.array());
  args.push_back(wa);
  const std::vector<Array> interpreted = drx::interpret(prog, args);
  const std::vector<Array> compiled = drx::compile(prog).run(args);
  ASSERT_EQ(interpreted.size(), compiled.size());
  std::vector<Tree> il, cl;
  for (size_t k = 1; k < compiled.size(); ++k) {
    il.emplace_back(interpreted[k]);
    cl.emplace_back(compiled[k]);
  }
  EXPECT_LT(relative_error(Tree::list(cl), Tree::list(il)), 0.02);
  EXPECT_NEAR(compiled[0].item<float>(), interpreted[0].item<float>(), 1e-3 * want);
}

TEST(Transformer, PolicyIsNamedAndChecked) {
  EXPECT_EQ(drx::nn::Policy::named("bf16"), drx::nn::Policy::bf16());
  EXPECT_EQ(drx::nn::Policy::named("f32").name(), "f32");
  EXPECT_EQ(drx::nn::Policy::bf16().name(), "bf16");
  // A tree cast to the compute dtype: floating leaves only.
  const Tree cast = drx::jit([](Tree t) { return drx::nn::Policy::bf16().to_compute(t); })(
      Tree::dict({{"w", Tree(Array(drx::f32, {2, 3}))}, {"ids", Tree(Array(drx::i32, {4}))}}));
  EXPECT_EQ(cast["w"].array().dtype(), drx::bf16);
  EXPECT_EQ(cast["ids"].array().dtype(), drx::i32);
  drx::testing::expect_error([] { drx::nn::Policy::named("fp8"); },
                             {"precision policy 'fp8'", "f32, f64, or bf16"});
  TransformerConfig c = tiny();
  c.policy = drx::nn::Policy::bf16();
  const Tree p64 = drx::nn::transformer_init(c, 0, drx::f64);
  drx::testing::expect_error(
      [&] {
        drx::trace([c](Tree p, Value w) { return drx::nn::transformer_loss(c, p, w); }, p64,
                   Array(drx::i32, {1, c.context + 1}));
      },
      {"policy bf16 keeps parameters in f32", "f64"});
}

TEST(Transformer, BadConfigurationsAndInputsThrowNamingTheProblem) {
  TransformerConfig c = tiny();
  c.heads = 3;
  drx::testing::expect_error([&] { drx::nn::transformer_init(c, 0); }, {"not a multiple of heads"});
  c = tiny();
  c.layers = 0;
  drx::testing::expect_error([&] { drx::nn::transformer_init(c, 0); }, {"layers must be positive"});
  c = tiny();
  const Tree p = drx::nn::transformer_init(c, 0);
  drx::testing::expect_error(
      [&] {
        drx::trace([c](Tree p, Value ids) { return drx::nn::transformer_logits(c, p, ids); }, p,
                   Array(drx::i32, {1, c.context + 1}));
      },
      {"0 < t <= context"});
  TransformerConfig wider = c;
  wider.width = 16;
  wider.heads = 4;
  drx::testing::expect_error(
      [&] {
        drx::trace(
            [wider](Tree p, Value ids) { return drx::nn::transformer_logits(wider, p, ids); }, p,
            Array(drx::i32, {1, 2}));
      },
      {"params.wte is f32[11,8], expected f32[11,16]"});
}

}  // namespace
