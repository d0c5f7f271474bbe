// drx::optim's gradient transformations: every optimizer against its published update
// equations written out as plain double loops, over several steps of varying gradients, run
// step by step under jit, as a scan carry, and inside a map_fn body; the PyTorch-compatible
// configurations against torch.optim (tests/fixtures/torch_optim_fixture.h); chain, clipping
// and schedules against hand-computed values; the server optimizers (Reddi et al. 2021) and
// the error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "fixtures/torch_optim_fixture.h"
#include "test_util.h"

namespace drx::testing {
namespace {

namespace opt = drx::optim;
using opt::GradientTransformation;

// ---- the problem: a tree of 8 parameters and a sequence of gradients -------------------

constexpr int kSteps = 7;

// {"b": f64[2], "w": f64[2,3]}; flat order b then w (the canonical leaf order).
Tree tree_of(const std::vector<double>& flat) {
  return Tree::dict(
      {{"b", Tree(f64_array({flat[0], flat[1]}, {2}))},
       {"w", Tree(f64_array(std::vector<double>(flat.begin() + 2, flat.end()), {2, 3}))}});
}
std::vector<double> flat_of(const Tree& t) {
  std::vector<double> v;
  for (const Tree& l : tree_leaves(t))
    for (double d : to_doubles(l.array())) v.push_back(d);
  return v;
}
const std::vector<double> kInitial = {0.5, -0.3, 1.2, -0.7, 0.05, 2.0, -1.5, 0.8};

// Smooth, sign-changing gradients of varying size (client k gets its own sequence).
std::vector<double> gradient(int step, int client = 0) {
  std::vector<double> g(kInitial.size());
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = std::sin(1.1 * step + 0.37 * static_cast<double>(i) + 0.9 * client) *
               (1.0 + 0.2 * static_cast<double>(i)) +
           0.1 * std::cos(step * (client + 1.0));
  return g;
}

// The gradients of steps 0..kSteps-1 stacked on a leading axis, as a tree like the params.
Tree stacked_gradients(int client = 0) {
  std::vector<double> b, w;
  for (int t = 0; t < kSteps; ++t) {
    std::vector<double> g = gradient(t, client);
    b.insert(b.end(), g.begin(), g.begin() + 2);
    w.insert(w.end(), g.begin() + 2, g.end());
  }
  return Tree::dict(
      {{"b", Tree(f64_array(b, {kSteps, 2}))}, {"w", Tree(f64_array(w, {kSteps, 2, 3}))}});
}

// ---- plain-loop references of the published equations ---------------------------------

// One step of an optimizer on the flat parameters; t is the step number (1 at the first).
using RefStep = std::function<void(std::vector<double>& p, const std::vector<double>& g, int t)>;

double sgn(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }

// A stateful reference: `init` sizes the state, `step` updates p in place.
struct Moments {
  std::vector<double> m, v, b;  // first moment, second moment, momentum buffer
};

RefStep ref_sgd(std::function<double(int)> lr, double mu, bool nesterov) {
  auto s = std::make_shared<Moments>();
  return [=](std::vector<double>& p, const std::vector<double>& g, int t) {
    s->b.resize(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      s->b[i] = mu * s->b[i] + g[i];
      const double d = mu == 0 ? g[i] : nesterov ? g[i] + mu * s->b[i] : s->b[i];
      p[i] -= lr(t - 1) * d;
    }
  };
}

RefStep ref_adam(std::function<double(int)> lr, double b1, double b2, double eps, double wd) {
  auto s = std::make_shared<Moments>();
  return [=](std::vector<double>& p, const std::vector<double>& g, int t) {
    s->m.resize(p.size(), 0.0);
    s->v.resize(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      s->m[i] = b1 * s->m[i] + (1 - b1) * g[i];
      s->v[i] = b2 * s->v[i] + (1 - b2) * g[i] * g[i];
      const double m_hat = s->m[i] / (1 - std::pow(b1, t));
      const double v_hat = s->v[i] / (1 - std::pow(b2, t));
      p[i] -= lr(t - 1) * (m_hat / (std::sqrt(v_hat) + eps) + wd * p[i]);
    }
  };
}

RefStep ref_adagrad(double lr, double initial, double eps) {
  auto s = std::make_shared<Moments>();
  return [=](std::vector<double>& p, const std::vector<double>& g, int) {
    s->v.resize(p.size(), initial);
    for (size_t i = 0; i < p.size(); ++i) {
      s->v[i] += g[i] * g[i];
      p[i] -= lr * g[i] / std::sqrt(s->v[i] + eps);
    }
  };
}

struct RmsConfig {
  double lr, decay, eps, initial_scale = 0;
  bool eps_in_sqrt = true, centered = false;
  double momentum = 0;
  bool nesterov = false;
};
RefStep ref_rmsprop(RmsConfig c) {
  auto s = std::make_shared<Moments>();
  return [=](std::vector<double>& p, const std::vector<double>& g, int) {
    s->v.resize(p.size(), c.initial_scale);
    s->m.resize(p.size(), 0.0);
    s->b.resize(p.size(), 0.0);
    for (size_t i = 0; i < p.size(); ++i) {
      s->v[i] = c.decay * s->v[i] + (1 - c.decay) * g[i] * g[i];
      s->m[i] = c.decay * s->m[i] + (1 - c.decay) * g[i];
      const double var = c.centered ? s->v[i] - s->m[i] * s->m[i] : s->v[i];
      const double scaled =
          c.eps_in_sqrt ? g[i] / std::sqrt(var + c.eps) : g[i] / (std::sqrt(var) + c.eps);
      const double u = -c.lr * scaled;  // momentum accumulates the lr-scaled step
      if (c.momentum == 0) {
        p[i] += u;
        continue;
      }
      s->b[i] = u + c.momentum * s->b[i];
      p[i] += c.nesterov ? u + c.momentum * s->b[i] : s->b[i];
    }
  };
}

RefStep ref_yogi(double lr, double b1, double b2, double eps, double initial) {
  auto s = std::make_shared<Moments>();
  return [=](std::vector<double>& p, const std::vector<double>& g, int t) {
    s->m.resize(p.size(), initial);
    s->v.resize(p.size(), initial);
    for (size_t i = 0; i < p.size(); ++i) {
      const double g2 = g[i] * g[i];
      s->m[i] = b1 * s->m[i] + (1 - b1) * g[i];
      s->v[i] = s->v[i] - (1 - b2) * sgn(s->v[i] - g2) * g2;
      const double m_hat = s->m[i] / (1 - std::pow(b1, t));
      const double v_hat = s->v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  };
}

// Reddi et al. 2021, Algorithm 2, on the pseudo-gradient g (delta = -g).
enum class Reddi { adagrad, yogi, adam };
RefStep ref_reddi(Reddi kind, double lr, double b1, double b2, double tau, double v0) {
  auto s = std::make_shared<Moments>();
  return [=](std::vector<double>& p, const std::vector<double>& g, int) {
    s->m.resize(p.size(), 0.0);
    s->v.resize(p.size(), v0);
    for (size_t i = 0; i < p.size(); ++i) {
      const double delta = -g[i], d2 = delta * delta;
      s->m[i] = b1 * s->m[i] + (1 - b1) * delta;
      if (kind == Reddi::adagrad) s->v[i] = s->v[i] + d2;
      if (kind == Reddi::yogi) s->v[i] = s->v[i] - (1 - b2) * d2 * sgn(s->v[i] - d2);
      if (kind == Reddi::adam) s->v[i] = b2 * s->v[i] + (1 - b2) * d2;
      p[i] += lr * s->m[i] / (std::sqrt(s->v[i]) + tau);
    }
  };
}

std::function<double(int)> constant_lr(double lr) {
  return [lr](int) { return lr; };
}
// optax's cosine_decay_schedule written out.
std::function<double(int)> cosine_lr(double init, int decay_steps, double alpha) {
  return [=](int count) {
    const double t = std::min(count, decay_steps);
    return init * ((1 - alpha) * 0.5 * (1 + std::cos(std::numbers::pi * t / decay_steps)) + alpha);
  };
}

struct Case {
  std::string name;
  GradientTransformation tx;
  std::function<RefStep()> ref;  // a fresh reference (its own state) per run
};

std::vector<Case> cases() {
  return {
      {"sgd", opt::sgd(0.1), [] { return ref_sgd(constant_lr(0.1), 0, false); }},
      {"sgd momentum", opt::sgd(0.1, 0.9), [] { return ref_sgd(constant_lr(0.1), 0.9, false); }},
      {"sgd nesterov", opt::sgd(0.05, 0.8, true),
       [] { return ref_sgd(constant_lr(0.05), 0.8, true); }},
      {"sgd cosine schedule", opt::sgd(opt::cosine_decay_schedule(0.2, 5, 0.1), 0.5),
       [] { return ref_sgd(cosine_lr(0.2, 5, 0.1), 0.5, false); }},
      {"adam", opt::adam(0.05), [] { return ref_adam(constant_lr(0.05), 0.9, 0.999, 1e-8, 0); }},
      {"adam b2 0.9 eps 0.1", opt::adam(0.05, 0.8, 0.9, 0.1),
       [] { return ref_adam(constant_lr(0.05), 0.8, 0.9, 0.1, 0); }},
      {"adam cosine schedule", opt::adam(opt::cosine_decay_schedule(0.1, 4), 0.9, 0.99),
       [] { return ref_adam(cosine_lr(0.1, 4, 0.0), 0.9, 0.99, 1e-8, 0); }},
      {"adamw", opt::adamw(0.05, 0.9, 0.999, 1e-8, 0.2),
       [] { return ref_adam(constant_lr(0.05), 0.9, 0.999, 1e-8, 0.2); }},
      {"adagrad", opt::adagrad(0.3), [] { return ref_adagrad(0.3, 0.1, 1e-7); }},
      {"adagrad eps 0.5", opt::adagrad(0.3, 0.0, 0.5), [] { return ref_adagrad(0.3, 0.0, 0.5); }},
      {"rmsprop", opt::rmsprop(0.01),
       [] {
         return ref_rmsprop({0.01, 0.9, 1e-8});
       }},
      {"rmsprop eps outside, initial scale",
       opt::rmsprop(0.02, 0.8, 0.1, {.initial_scale = 1.0, .eps_in_sqrt = false}),
       [] {
         return ref_rmsprop({0.02, 0.8, 0.1, 1.0, false});
       }},
      {"rmsprop centered nesterov",
       opt::rmsprop(0.01, 0.9, 1e-3, {.centered = true, .momentum = 0.7, .nesterov = true}),
       [] {
         return ref_rmsprop({0.01, 0.9, 1e-3, 0.0, true, true, 0.7, true});
       }},
      {"yogi", opt::yogi(0.05), [] { return ref_yogi(0.05, 0.9, 0.999, 1e-3, 1e-6); }},
      {"fedadam", opt::fedadam(0.1, 0.9, 0.99, 1e-3),
       [] { return ref_reddi(Reddi::adam, 0.1, 0.9, 0.99, 1e-3, 0); }},
      {"fedyogi", opt::fedyogi(0.1, 0.85, 0.95, 1e-2),
       [] { return ref_reddi(Reddi::yogi, 0.1, 0.85, 0.95, 1e-2, 0); }},
      {"fedyogi v0 tau^2", opt::fedyogi(0.1, 0.9, 0.99, 0.1, 0.01),
       [] { return ref_reddi(Reddi::yogi, 0.1, 0.9, 0.99, 0.1, 0.01); }},
      {"fedadagrad", opt::fedadagrad(0.2, 0.5, 1e-2),
       [] { return ref_reddi(Reddi::adagrad, 0.2, 0.5, 0, 1e-2, 0); }},
  };
}

// The reference's parameters after each step.
std::vector<std::vector<double>> reference_run(const Case& c, int client = 0) {
  RefStep step = c.ref();
  std::vector<double> p = kInitial;
  std::vector<std::vector<double>> out;
  for (int t = 0; t < kSteps; ++t) {
    step(p, gradient(t, client), t + 1);
    out.push_back(p);
  }
  return out;
}

::testing::AssertionResult Close(const std::vector<double>& got, const std::vector<double>& want,
                                 double tol = 1e-13) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << got.size() << " values, want " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i]))))
      return ::testing::AssertionFailure() << "value " << i << ": " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

// One update and apply_updates, as a jitted step: the state crosses the host between steps.
Tree step_program(const GradientTransformation& tx, const Tree& p, const Tree& g, const Tree& s) {
  auto [u, next] = tx.update(g, s, p);
  return Tree::list({opt::apply_updates(p, u), next});
}

// kSteps updates as one scan over the stacked gradients: the state is a carry.
Tree scan_program(const GradientTransformation& tx, const Tree& p0, const Tree& gs) {
  auto [carry, ys] = scan(
      [&](const Tree& c, const Tree& g) -> std::pair<Tree, Tree> {
        Tree next = step_program(tx, c[0], g, c[1]);
        return {next, next[0]};
      },
      Tree::list({p0, tx.init(p0)}), gs);
  return Tree::list({carry[0], ys});
}

// ---- every optimizer against its equations ---------------------------------------------

TEST(OptimTransforms, EachOptimizerMatchesItsEquationsStepByStepUnderJit) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    auto want = reference_run(c);
    auto step = jit([tx = c.tx](Tree p, Tree g, Tree s) { return step_program(tx, p, g, s); });
    Tree p = tree_of(kInitial);
    Tree s = c.tx.init(p);  // init on host Arrays
    for (int t = 0; t < kSteps; ++t) {
      Tree out = step(p, tree_of(gradient(t)), s);
      p = out[0], s = out[1];
      EXPECT_TRUE(Close(flat_of(p), want[t])) << "step " << t;
    }
    EXPECT_EQ(step.trace_count(), 1);  // the state keeps its structure and types
    EXPECT_GT(std::abs(flat_of(p)[0] - kInitial[0]), 1e-3);
  }
}

TEST(OptimTransforms, EachOptimizerMatchesItsEquationsAsAScanCarry) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    auto want = reference_run(c);
    Tree out = jit([tx = c.tx](Tree p0, Tree gs) { return scan_program(tx, p0, gs); })(
        tree_of(kInitial), stacked_gradients());
    EXPECT_TRUE(Close(flat_of(out[0]), want.back()));
    // ys: the params after every step, stacked.
    const std::vector<double> b = to_doubles(out[1]["b"].array()),
                              w = to_doubles(out[1]["w"].array());
    for (int t = 0; t < kSteps; ++t) {
      std::vector<double> at = {b[2 * t], b[2 * t + 1]};
      at.insert(at.end(), w.begin() + 6 * t, w.begin() + 6 * (t + 1));
      EXPECT_TRUE(Close(at, want[t])) << "step " << t;
    }
  }
}

TEST(OptimTransforms, EachOptimizerMatchesItsEquationsInsideAMapFnBody) {
  // Two clients start from the server's params and run the optimizer on their own gradients.
  Tree gs = tree_map(
      [](const Array& a, const Array& b) {
        Shape s = a.shape();
        s.insert(s.begin(), 2);
        Array both(f64, s);
        std::copy(a.data<double>(), a.data<double>() + a.size(), both.data<double>());
        std::copy(b.data<double>(), b.data<double>() + b.size(), both.data<double>() + a.size());
        return both;
      },
      stacked_gradients(0), stacked_gradients(1));
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    auto round = program({{"clients", 2}},
                         [tx = c.tx](Tree p0, Tree client_gs) {
                           return map_fn([tx](Tree p, Tree g) { return scan_program(tx, p, g)[0]; },
                                         broadcast(p0), client_gs);
                         },
                         {"", "clients"});
    Tree out = jit(round)(tree_of(kInitial), gs);
    for (int k = 0; k < 2; ++k) {
      std::vector<double> b = to_doubles(out["b"].array()), w = to_doubles(out["w"].array());
      std::vector<double> got = {b[2 * k], b[2 * k + 1]};
      got.insert(got.end(), w.begin() + 6 * k, w.begin() + 6 * (k + 1));
      EXPECT_TRUE(Close(got, reference_run(c, k).back())) << "client " << k;
    }
  }
}

TEST(OptimTransforms, F32StateStaysF32AndCountIsI32) {
  Tree p = tree_map([](const Array& a) { return convert_array(a, f32); }, tree_of(kInitial));
  GradientTransformation tx = opt::adam(opt::cosine_decay_schedule(0.1, 10));
  Tree s = tx.init(p);
  EXPECT_EQ(s.structure(), "[{count:*,mu:{b:*,w:*},nu:{b:*,w:*}},{count:*}]");
  EXPECT_EQ(s[0]["count"].array().dtype(), i32);
  EXPECT_EQ(s[0]["mu"]["w"].array().dtype(), f32);
  auto step = jit([tx](Tree p, Tree g, Tree s) { return step_program(tx, p, g, s); });
  Tree g = tree_map([](const Array& a) { return convert_array(a, f32); }, tree_of(gradient(0)));
  Tree out = step(p, g, s);
  out = step(out[0], g, out[1]);
  EXPECT_EQ(out[0]["w"].array().dtype(), f32);
  EXPECT_EQ(out[1][0]["count"].array().item<int32_t>(), 2);
  EXPECT_EQ(out[1][1]["count"].array().item<int32_t>(), 2);
  // Against the f64 reference, to f32 rounding.
  RefStep ref = ref_adam(cosine_lr(0.1, 10, 0), 0.9, 0.999, 1e-8, 0);
  std::vector<double> x = kInitial;
  ref(x, gradient(0), 1);
  ref(x, gradient(0), 2);
  EXPECT_TRUE(Close(flat_of(out[0]), x, 1e-6));
}

// ---- PyTorch --------------------------------------------------------------------------

TEST(OptimTransforms, MatchTorchOptimWhereTheConventionsAgree) {
  namespace tf = torch_fixture;
  struct TorchCase {
    const char* name;
    GradientTransformation tx;
    const double (*want)[tf::kParams];
  };
  const std::vector<TorchCase> torch_cases = {
      {"SGD", opt::sgd(0.1), tf::kSgd},
      {"SGD momentum", opt::sgd(0.1, 0.9), tf::kSgdMomentum},
      {"SGD nesterov", opt::sgd(0.1, 0.9, true), tf::kSgdNesterov},
      {"Adam", opt::adam(0.05), tf::kAdam},
      {"AdamW", opt::adamw(0.05, 0.9, 0.999, 1e-8, 0.1), tf::kAdamW},
      // torch: accumulator from 0.1, eps 0 (its eps is outside the root, optax's inside).
      {"Adagrad", opt::adagrad(0.1, 0.1, 0.0), tf::kAdagrad},
      // torch: alpha 0.99 and eps outside the square root.
      {"RMSprop", opt::rmsprop(0.01, 0.99, 1e-8, {.eps_in_sqrt = false}), tf::kRmsprop},
      {"RMSprop centered momentum",
       opt::rmsprop(0.01, 0.9, 1e-8, {.eps_in_sqrt = false, .centered = true, .momentum = 0.5}),
       tf::kRmspropCenteredMomentum},
  };
  std::vector<double> grads;
  for (const auto& row : tf::kGrads) grads.insert(grads.end(), row, row + tf::kParams);
  Array p0 = f64_array(std::vector<double>(tf::kInitialParams, tf::kInitialParams + tf::kParams),
                       {tf::kParams});
  Array gs = f64_array(grads, {tf::kSteps, tf::kParams});
  for (const TorchCase& c : torch_cases) {
    SCOPED_TRACE(c.name);
    Tree out =
        jit([tx = c.tx](Tree p, Tree g) { return scan_program(tx, p, g); })(Tree(p0), Tree(gs));
    std::vector<double> ys = to_doubles(out[1].array());
    for (int t = 0; t < tf::kSteps; ++t) {
      std::vector<double> got(ys.begin() + t * tf::kParams, ys.begin() + (t + 1) * tf::kParams);
      EXPECT_TRUE(Close(got, std::vector<double>(c.want[t], c.want[t] + tf::kParams), 1e-12))
          << "step " << t;
    }
  }
  // The conventions matter: optax's rmsprop (eps inside, decay 0.9) is not torch's.
  Tree optax_style = jit([](Tree p, Tree g) { return scan_program(opt::rmsprop(0.01), p, g); })(
      Tree(p0), Tree(gs));
  std::vector<double> last = to_doubles(optax_style[0].array());
  EXPECT_FALSE(Close(
      last,
      std::vector<double>(tf::kRmsprop[tf::kSteps - 1], tf::kRmsprop[tf::kSteps - 1] + tf::kParams),
      1e-6));
}

// ---- building blocks -------------------------------------------------------------------

Tree run_update(const GradientTransformation& tx, const Tree& grads, const Tree& params) {
  return jit([tx](Tree g, Tree p) {
    auto [u, s] = tx.update(g, tx.init(p), p);
    return Tree::list({u, s});
  })(grads, params);
}

TEST(OptimTransforms, ClipByGlobalNormChainAndApplyUpdates) {
  // Global norm of {a: [3, 4], b: [12]} is 13.
  Tree g = Tree::dict({{"a", Tree(f64_array({3, 4}, {2}))}, {"b", Tree(f64_array({12}, {1}))}});
  Tree p = tree_zeros_like(g);
  Tree clipped = run_update(opt::clip_by_global_norm(6.5), g, p);
  EXPECT_TRUE(ArrayNear(clipped[0]["a"].array(), {1.5, 2}, 1e-15, 0));
  EXPECT_TRUE(ArrayNear(clipped[0]["b"].array(), {6}, 1e-15, 0));
  EXPECT_EQ(clipped[1].structure(), "[]");
  // Below (and at exactly) the threshold: unchanged below, scaled by 1 at it.
  Tree kept = run_update(opt::clip_by_global_norm(13.5), g, p);
  EXPECT_TRUE(ArrayNear(kept[0]["a"].array(), {3, 4}, 0, 0));
  Tree at = run_update(opt::clip_by_global_norm(13), g, p);
  EXPECT_TRUE(ArrayNear(at[0]["b"].array(), {12}, 1e-15, 0));

  // chain(clip to 1, sgd with momentum 0.5, lr 2): the momentum sees the clipped gradient.
  GradientTransformation tx = opt::chain(opt::clip_by_global_norm(1.0), opt::sgd(2.0, 0.5));
  EXPECT_EQ(tx.name, "chain(clip_by_global_norm, sgd)");
  Tree s0 = tx.init(p);
  EXPECT_EQ(s0.structure(), "[[],[{trace:{a:*,b:*}},[]]]");
  auto step = jit([tx](Tree g, Tree s, Tree p) {
    auto [u, next] = tx.update(g, s, p);
    return Tree::list({u, next, opt::apply_updates(p, u)});
  });
  Tree r1 = step(g, s0, p);
  // clipped = g / 13; trace = clipped; update = -2 * clipped.
  EXPECT_TRUE(ArrayNear(r1[0]["a"].array(), {-6.0 / 13, -8.0 / 13}, 1e-15, 0));
  EXPECT_TRUE(ArrayNear(r1[2]["b"].array(), {-24.0 / 13}, 1e-15, 0));
  Tree r2 = step(g, r1[1], r1[2]);
  // trace = clipped + 0.5 * clipped = 1.5 clipped; update = -3 clipped.
  EXPECT_TRUE(ArrayNear(r2[0]["a"].array(), {-9.0 / 13, -12.0 / 13}, 1e-15, 0));
  EXPECT_TRUE(ArrayNear(r2[1][1][0]["trace"]["b"].array(), {1.5 * 12 / 13}, 1e-15, 0));
  // The vector form and identity.
  GradientTransformation same = opt::chain({opt::identity(), opt::scale(-0.5)});
  Tree half = run_update(same, g, p);
  EXPECT_TRUE(ArrayNear(half[0]["b"].array(), {-6}, 0, 0));
  // apply_updates on host Arrays.
  Tree moved = opt::apply_updates(g, g);
  EXPECT_TRUE(ArrayNear(moved["a"].array(), {6, 8}, 0, 0));
}

TEST(OptimTransforms, AddDecayedWeightsAndTraceNesterovByHand) {
  Tree g = Tree(f64_array({1, -2}, {2})), p = Tree(f64_array({10, 20}, {2}));
  Tree wd = run_update(opt::add_decayed_weights(0.1), g, p);
  EXPECT_TRUE(ArrayNear(wd[0].array(), {2, 0}, 1e-15, 0));
  // Nesterov: t = g; update = g + 0.5 t = 1.5 g.
  Tree nest = run_update(opt::trace(0.5, true), g, p);
  EXPECT_TRUE(ArrayNear(nest[0].array(), {1.5, -3}, 1e-15, 0));
  EXPECT_TRUE(ArrayNear(nest[1]["trace"].array(), {1, -2}, 0, 0));
  // scale_by_learning_rate flips the sign; a schedule counts from 0.
  Tree lr = run_update(opt::scale_by_learning_rate(opt::linear_schedule(1.0, 0.0, 4)), g, p);
  EXPECT_TRUE(ArrayNear(lr[0].array(), {-1, 2}, 0, 0));
  EXPECT_EQ(lr[1]["count"].array().item<int32_t>(), 1);
}

// ---- schedules ---------------------------------------------------------------------------

TEST(OptimSchedules, ValuesMatchHandComputedOnes) {
  using opt::schedule_value;
  EXPECT_EQ(schedule_value(opt::constant_schedule(0.3), 0), 0.3);
  EXPECT_EQ(schedule_value(opt::constant_schedule(0.3), 1000), 0.3);

  // Linear from 1 to 0.2 over 4 steps starting at step 2.
  opt::Schedule lin = opt::linear_schedule(1.0, 0.2, 4, 2);
  for (auto [t, v] : std::vector<std::pair<int, double>>{
           {0, 1.0}, {2, 1.0}, {3, 0.8}, {4, 0.6}, {6, 0.2}, {100, 0.2}})
    EXPECT_NEAR(schedule_value(lin, t), v, 1e-15) << "t " << t;
  EXPECT_EQ(schedule_value(opt::linear_schedule(0.7, 0.0, 0), 5), 0.7);

  // Cosine from 2 with alpha 0.25 over 8 steps: 2 * (0.75 * 0.5 * (1 + cos(pi t / 8)) + 0.25).
  opt::Schedule cosine = opt::cosine_decay_schedule(2.0, 8, 0.25);
  EXPECT_NEAR(schedule_value(cosine, 0), 2.0, 1e-15);
  EXPECT_NEAR(schedule_value(cosine, 4), 2.0 * (0.75 * 0.5 + 0.25), 1e-15);
  EXPECT_NEAR(schedule_value(cosine, 2), 2.0 * (0.375 * (1 + std::sqrt(0.5)) + 0.25), 1e-15);
  EXPECT_NEAR(schedule_value(cosine, 8), 0.5, 1e-15);
  EXPECT_NEAR(schedule_value(cosine, 50), 0.5, 1e-15);
  // An exponent shapes the cosine term.
  EXPECT_NEAR(schedule_value(opt::cosine_decay_schedule(1.0, 8, 0.0, 2.0), 4), 0.25, 1e-15);

  // Warmup 0 -> 1 over 4 steps, then cosine to 0.1 over the remaining 6.
  opt::Schedule wc = opt::warmup_cosine_decay_schedule(0.0, 1.0, 4, 10, 0.1);
  EXPECT_NEAR(schedule_value(wc, 0), 0.0, 1e-15);
  EXPECT_NEAR(schedule_value(wc, 1), 0.25, 1e-15);
  EXPECT_NEAR(schedule_value(wc, 4), 1.0, 1e-15);
  EXPECT_NEAR(schedule_value(wc, 7), 0.9 * 0.5 + 0.1, 1e-15);
  EXPECT_NEAR(schedule_value(wc, 10), 0.1, 1e-15);
  EXPECT_NEAR(schedule_value(wc, 11), 0.1, 1e-15);

  // join: each piece counts from its own start.
  opt::Schedule joined = opt::join_schedules(
      {opt::constant_schedule(5.0), opt::linear_schedule(1.0, 0.0, 10), opt::constant_schedule(-1)},
      {3, 8});
  EXPECT_EQ(schedule_value(joined, 2), 5.0);
  EXPECT_NEAR(schedule_value(joined, 3), 1.0, 1e-15);
  EXPECT_NEAR(schedule_value(joined, 5), 0.8, 1e-15);
  EXPECT_EQ(schedule_value(joined, 8), -1.0);
}

TEST(OptimSchedules, AScheduledOptimizerUsesTheCountOfItsState) {
  // sgd with a linear decay 1 -> 0 over 4 steps on a constant gradient 1: steps of 1, .75, .5,
  // .25, 0, 0 (the count is the number of earlier updates).
  GradientTransformation tx = opt::sgd(opt::linear_schedule(1.0, 0.0, 4));
  Tree p0 = Tree(f64_array({0}, {1}));
  Tree out = jit([tx](Tree p, Tree gs) { return scan_program(tx, p, gs); })(
      p0, Tree(f64_array({1, 1, 1, 1, 1, 1}, {6, 1})));
  EXPECT_TRUE(ArrayNear(out[1].array(), {-1, -1.75, -2.25, -2.5, -2.5, -2.5}, 1e-15, 0));
  // A lambda is a schedule too.
  GradientTransformation doubling =
      opt::sgd([](const Value& count) { return astype(count, f64) + 1.0; });
  Tree d = jit([doubling](Tree p, Tree gs) { return scan_program(doubling, p, gs); })(
      p0, Tree(f64_array({1, 1, 1}, {3, 1})));
  EXPECT_TRUE(ArrayNear(d[1].array(), {-1, -3, -6}, 0, 0));
}

// ---- differentiating through optimizer steps -----------------------------------------------

// The loss after three adam steps on the quadratic 0.5 * sum(c * p^2), as a function of p0.
Value loss_after_steps(const Tree& p0) {
  GradientTransformation tx = opt::adam(0.1, 0.9, 0.99);
  Tree p = p0, s = tx.init(p0);
  for (int t = 0; t < 3; ++t) {
    Tree g = tree_map([](const Value& x) { return x * (1.0 + x * x); }, p);  // d/dp of a quartic
    auto [u, next] = tx.update(g, s, p);
    p = opt::apply_updates(p, u), s = next;
  }
  return 0.5 * tree_vdot(p, p).value();
}

TEST(OptimTransforms, GradThroughAdamStepsMatchesFiniteDifferences) {
  Tree p0 = tree_of(kInitial);
  Tree g = jit(grad([](Tree p) { return loss_after_steps(p); }))(p0);
  auto f = jit([](Tree p) { return loss_after_steps(p); });
  // Directional derivatives along a few directions, by central differences on host trees.
  for (int k = 0; k < 3; ++k) {
    Tree dir = tree_of(gradient(k, 2));
    const double h = 1e-6;
    double up = f(tree_axpy(h, dir, p0)).item<double>();
    double down = f(tree_axpy(-h, dir, p0)).item<double>();
    double want = (up - down) / (2 * h);
    EXPECT_NEAR(tree_vdot(g, dir).array().item<double>(), want, 1e-6 * (1 + std::abs(want)))
        << "direction " << k;
  }
}

// ---- the server optimizers ---------------------------------------------------------------

TEST(OptimServerKinds, ParseAndNameTheNewKinds) {
  EXPECT_EQ(opt::parse_server_kind("fedyogi"), opt::ServerKind::fedyogi);
  EXPECT_EQ(opt::parse_server_kind("fedadagrad"), opt::ServerKind::fedadagrad);
  EXPECT_EQ(opt::server_kind_name(opt::ServerKind::fedyogi), "fedyogi");
  EXPECT_EQ(opt::server_kind_name(opt::ServerKind::fedadagrad), "fedadagrad");
  expect_error([] { opt::parse_server_kind("yogi"); },
               {"'yogi'", "fedavg, fedavgm, fedadam, fedyogi, fedadagrad"});
}

TEST(OptimServerKinds, ReddiServersMatchAlgorithm2OverRounds) {
  struct Kind {
    opt::ServerKind kind;
    Reddi ref;
  };
  for (Kind k :
       {Kind{opt::ServerKind::fedadam, Reddi::adam}, Kind{opt::ServerKind::fedyogi, Reddi::yogi},
        Kind{opt::ServerKind::fedadagrad, Reddi::adagrad}}) {
    SCOPED_TRACE(opt::server_kind_name(k.kind));
    opt::ServerOptimizer s;
    s.kind = k.kind, s.lr = 0.3, s.beta1 = 0.8, s.beta2 = 0.95, s.eps = 1e-2;
    auto step = jit([s](Tree p, Tree d, Tree st) {
      auto [np, ns] = s.apply(p, d, st);
      return Tree::list({np, ns});
    });
    Tree p = tree_of(kInitial), st = s.init(p);
    EXPECT_EQ(st.structure(), "{m:{b:*,w:*},v:{b:*,w:*}}");
    RefStep ref = ref_reddi(k.ref, 0.3, 0.8, 0.95, 1e-2, 0);
    std::vector<double> x = kInitial;
    for (int r = 0; r < 5; ++r) {
      std::vector<double> delta = gradient(r, 3);  // the clients' mean change
      Tree out = step(p, tree_of(delta), st);
      p = out[0], st = out[1];
      std::vector<double> pseudo(delta.size());
      for (size_t i = 0; i < delta.size(); ++i) pseudo[i] = -delta[i];
      ref(x, pseudo, r + 1);
      EXPECT_TRUE(Close(flat_of(p), x)) << "round " << r;
    }
    // The state holds the paper's m, a moment of delta (not of the pseudo-gradient).
    double m0 = 0;
    for (int r = 0; r < 5; ++r) m0 = 0.8 * m0 + 0.2 * gradient(r, 3)[0];
    EXPECT_NEAR(flat_of(st["m"])[0], m0, 1e-14);
  }
}

// The server step as drx computed it before it was a GradientTransformation, op for op.
std::pair<Tree, Tree> former_server_step(const opt::ServerOptimizer& s, const Tree& p,
                                         const Tree& d, const Tree& st) {
  const double lr = s.lr;
  if (s.kind == opt::ServerKind::fedavgm) {
    const double mu = s.momentum;
    Tree v =
        tree_map([&](const Value& dv, const Value& m) { return mu * m + dv; }, d, st["momentum"]);
    return {tree_map([&](const Value& a, const Value& b) { return a + lr * b; }, p, v),
            Tree::dict({{"momentum", v}})};
  }
  const double b1 = s.beta1, b2 = s.beta2, e = s.eps;
  Tree m = tree_map([&](const Value& dv, const Value& mv) { return b1 * mv + (1.0 - b1) * dv; }, d,
                    st["m"]);
  Tree v =
      tree_map([&](const Value& dv, const Value& vv) { return b2 * vv + (1.0 - b2) * square(dv); },
               d, st["v"]);
  Tree x = tree_map(
      [&](const std::vector<Value>& l) { return l[0] + lr * l[1] / (sqrt(l[2]) + e); }, {p, m, v});
  return {x, Tree::dict({{"m", m}, {"v", v}})};
}

TEST(OptimServerKinds, FedAvgMAndFedAdamRoundAsBeforeBitForBit) {
  for (opt::ServerKind kind : {opt::ServerKind::fedavgm, opt::ServerKind::fedadam}) {
    SCOPED_TRACE(opt::server_kind_name(kind));
    opt::ServerOptimizer s;
    s.kind = kind, s.lr = 0.7, s.momentum = 0.85, s.beta1 = 0.9, s.beta2 = 0.99, s.eps = 1e-3;
    auto both = jit([s](Tree p, Tree d, Tree st_new, Tree st_old) {
      auto [pn, sn] = s.apply(p, d, st_new);
      auto [po, so] = former_server_step(s, p, d, st_old);
      return Tree::list({pn, sn, po, so});
    });
    Tree p = tree_map([](const Array& a) { return convert_array(a, f32); }, tree_of(kInitial));
    Tree st_new = s.init(p), st_old = s.init(p);
    for (int r = 0; r < 4; ++r) {
      Tree d =
          tree_map([](const Array& a) { return convert_array(a, f32); }, tree_of(gradient(r, 1)));
      Tree out = both(p, d, st_new, st_old);
      std::vector<Tree> a = tree_leaves(Tree::list({out[0], out[1]}));
      std::vector<Tree> b = tree_leaves(Tree::list({out[2], out[3]}));
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_TRUE(a[i].array().bitwise_equal(b[i].array())) << "round " << r << " leaf " << i;
      p = out[0], st_new = out[1], st_old = out[3];
    }
  }
}

TEST(OptimServerKinds, ClientSgdStepsAsBeforeBitForBit) {
  for (double mu : {0.0, 0.9}) {
    opt::ClientSgd c{0.05, mu};
    GradientTransformation tx = c.transformation();
    auto both = jit([tx, c](Tree p, Tree g, Tree s, Tree m) {
      auto [u, next] = tx.update(g, s, p);
      Tree pn = opt::apply_updates(p, u);
      // The former local step: m = mu * m + g; p = p - lr * m (or p - lr * g).
      Tree mo =
          c.momentum != 0.0
              ? tree_map([&](const Value& a, const Value& b) { return c.momentum * a + b; }, m, g)
              : m;
      Tree po = tree_map([&](const Value& a, const Value& b) { return a - c.lr * b; }, p,
                         c.momentum != 0.0 ? mo : g);
      return Tree::list({pn, next, po, mo});
    });
    Tree p = tree_map([](const Array& a) { return convert_array(a, f32); }, tree_of(kInitial));
    Tree s = tx.init(p), m = tree_zeros_like(p), po = p;
    for (int t = 0; t < 5; ++t) {
      Tree g = tree_map([](const Array& a) { return convert_array(a, f32); }, tree_of(gradient(t)));
      Tree out = both(p, g, s, m);
      std::vector<Tree> a = tree_leaves(out[0]), b = tree_leaves(out[2]);
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_TRUE(a[i].array().bitwise_equal(b[i].array())) << "step " << t << " mu " << mu;
      p = out[0], s = out[1], m = out[3];
    }
  }
}

TEST(OptimServerKinds, FedYogiAndFedAdagradRunInTheFederatedRound) {
  Tree params = nn::mlp_init({4, 3}, 0, nn::Init::glorot_uniform, f64);
  Array x = random_array({12, 4}, f64, 1), y = random_array({12}, i32, 2, 0, 3);
  Array idx = random_array({2, 2, 3}, i32, 3, 0, 12), mask = ones({2, 2, 3});
  Array w = f64_array({6, 6}, {2});
  for (opt::ServerKind kind : {opt::ServerKind::fedyogi, opt::ServerKind::fedadagrad}) {
    opt::RoundSpec spec;
    spec.cohort = 2, spec.steps = 2, spec.batch = 3, spec.client = {0.1, 0.5};
    spec.server.kind = kind, spec.server.lr = 0.05;
    auto round = jit(opt::fedavg_round(spec));
    Tree st = spec.server.init(params);
    Tree out = round(params, st, x, y, idx, mask, w);
    out = round(out["params"], out["state"], x, y, idx, mask, w);
    EXPECT_EQ(round.trace_count(), 1);
    EXPECT_EQ(out["state"].structure(), st.structure());
    EXPECT_GT(max_abs_diff({out["params"]["layer0"]["w"].array()}, {params["layer0"]["w"].array()}),
              1e-3);
  }
}

// ---- errors --------------------------------------------------------------------------------

TEST(OptimTransforms, UserErrorsNameTheOperationAndTheValues) {
  expect_error([] { opt::sgd(-0.1); }, {"sgd", "learning rate", "-0.1", ">= 0"});
  expect_error([] { opt::adam(NAN); }, {"adam", "learning rate", "nan"});
  expect_error([] { opt::adam(0.1, 1.0); }, {"scale_by_adam", "b1", "[0, 1)", "got 1"});
  expect_error([] { opt::sgd(0.1, -0.5); }, {"sgd", "momentum", "-0.5"});
  expect_error([] { opt::clip_by_global_norm(0); }, {"clip_by_global_norm", "max_norm", "> 0"});
  expect_error([] { opt::fedyogi(0.1, 0.9, 1.5); }, {"fedyogi", "b2", "1.5"});
  expect_error([] { opt::cosine_decay_schedule(0.1, 0); },
               {"cosine_decay_schedule", "decay_steps"});
  expect_error([] { opt::warmup_cosine_decay_schedule(0, 1, 10, 10); },
               {"warmup_cosine_decay_schedule", "decay_steps", "warmup_steps = 10"});
  expect_error([] { opt::join_schedules({opt::constant_schedule(1)}, {3}); },
               {"join_schedules", "1 schedules need 0 boundaries", "got 1"});

  GradientTransformation adam = opt::adam(0.1);
  Tree p = tree_of(kInitial);
  Tree other = Tree::dict({{"b", p["b"]}});
  auto update = [&](const GradientTransformation& tx, const Tree& g, const Tree& s,
                    const Tree& params) {
    return jit([tx](Tree g, Tree s, Tree params) { return tx.update(g, s, params).first; })(g, s,
                                                                                            params);
  };
  // grads and params of different structures.
  expect_error([&] { update(adam, other, adam.init(other), p); },
               {"adam", "params of structure {b:*,w:*}", "grads of structure {b:*}"});
  // A state of another optimizer.
  expect_error([&] { update(adam, p, opt::sgd(0.1, 0.9).init(p), p); },
               {"scale_by_adam", "count, mu, nu", "init(params)"});
  expect_error([&] { update(opt::sgd(0.1), p, adam.init(p), p); }, {"empty state"});
  expect_error([&] { update(adam, p, Tree::list({adam.init(p)[0]}), p); },
               {"chain(scale_by_adam, scale_by_learning_rate)", "list of 2 states"});
  // Moments of another shape than the grads.
  Tree moments_of_other = opt::trace(0.9).init(Tree::dict({{"b", p["b"]}, {"w", p["b"]}}));
  expect_error([&] { update(opt::trace(0.9), p, moments_of_other, p); },
               {"trace", "state[\"trace\"][\"w\"]", "f64[2]", "f64[2,3]"});
  // Integer gradients.
  Tree ints = Tree(Array::scalar<int32_t>(1));
  expect_error([&] { update(opt::sgd(0.1), ints, Tree(), ints); }, {"sgd", "floating-point"});
  // A schedule that returns no scalar.
  GradientTransformation bad = opt::scale_by_schedule([](const Value& c) { return c; });
  expect_error([&] { update(bad, p, bad.init(p), p); },
               {"scale_by_schedule", "i32[]", "floating-point scalar"});
  // apply_updates with mismatched trees.
  expect_error([&] { opt::apply_updates(p, other); }, {"apply_updates", "{b:*}", "{b:*,w:*}"});
  // The federated round checks its optimizers when it is built, naming which one is wrong.
  opt::RoundSpec spec;
  spec.server.lr = -1;
  expect_error(
      [&] { opt::fedavg_round(spec); },
      {"fedavg_round", "server optimizer", "ServerOptimizer (fedavg)", "learning rate", "-1"});
  spec = opt::RoundSpec();
  spec.client.lr = -0.5;
  expect_error([&] { opt::fedavg_round(spec); },
               {"fedavg_round", "client optimizer", "sgd", "-0.5"});
  // The server optimizers' state errors name the server kind.
  opt::ServerOptimizer yogi;
  yogi.kind = opt::ServerKind::fedyogi;
  expect_error(
      [&] { jit([yogi](Tree p, Tree d) { return yogi.apply(p, d, Tree()).first; })(p, p); },
      {"ServerOptimizer::apply", "fedyogi", "init(params)"});
}

}  // namespace
}  // namespace drx::testing
