// The algorithm examples (FedProx, SCAFFOLD, DiLoCo, DP-FedAvg, learned aggregation) against
// plain-loop references: float64 loops over the clients on host vectors, with no
// placements and no drx ops, so the reference shares nothing with the MapReduce path.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "../examples/diloco_lib.h"
#include "../examples/dp_fedavg_lib.h"
#include "../examples/fedprox_lib.h"
#include "../examples/learned_aggregation_lib.h"
#include "../examples/scaffold_lib.h"
#include "test_util.h"

namespace drx::testing {
namespace {

// ---- the plain-loop reference ------------------------------------------------------
using Vec = std::vector<double>;

struct Client {
  std::vector<Vec> x;  // examples x dim
  Vec y, mask;
};

std::vector<Client> clients_of(const algos::Data& d) {
  const int64_t n = d.x.shape()[0], e = d.x.shape()[1], dim = d.x.shape()[2];
  std::vector<Client> out(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = 0; i < e; ++i) {
      const double* row = d.x.data<double>() + (k * e + i) * dim;
      out[static_cast<size_t>(k)].x.emplace_back(row, row + dim);
      out[static_cast<size_t>(k)].y.push_back(d.y.data<double>()[k * e + i]);
      out[static_cast<size_t>(k)].mask.push_back(d.mask.data<double>()[k * e + i]);
    }
  return out;
}

double count(const Client& cl) {
  double n = 0;
  for (double m : cl.mask) n += m;
  return n;
}

double residual(const Client& cl, const Vec& w, size_t i) {
  double r = -cl.y[i];
  for (size_t j = 0; j < w.size(); ++j) r += cl.x[i][j] * w[j];
  return r;
}

// sum_i m_i r_i^2 / sum_i m_i
double ref_loss(const Client& cl, const Vec& w) {
  double s = 0;
  for (size_t i = 0; i < cl.y.size(); ++i)
    s += cl.mask[i] * residual(cl, w, i) * residual(cl, w, i);
  return s / count(cl);
}

double ref_mean_loss(const std::vector<Client>& cls, const Vec& w) {
  double s = 0;
  for (const Client& cl : cls) s += ref_loss(cl, w);
  return s / static_cast<double>(cls.size());
}

// (2 / sum m) sum_i m_i r_i x_i
Vec ref_grad(const Client& cl, const Vec& w) {
  Vec g(w.size(), 0.0);
  for (size_t i = 0; i < cl.y.size(); ++i) {
    const double r = residual(cl, w, i);
    for (size_t j = 0; j < w.size(); ++j) g[j] += 2.0 * cl.mask[i] * r * cl.x[i][j];
  }
  for (double& v : g) v /= count(cl);
  return g;
}

// `steps` plain gradient steps on client cl from w.
Vec ref_local_sgd(const Client& cl, Vec w, int steps, double lr) {
  for (int s = 0; s < steps; ++s) {
    Vec g = ref_grad(cl, w);
    for (size_t j = 0; j < w.size(); ++j) w[j] -= lr * g[j];
  }
  return w;
}

Array f64_vec(const Vec& v) { return f64_array(v, {static_cast<int64_t>(v.size())}); }

Array f64_rows(const std::vector<Vec>& rows) {
  Vec flat;
  for (const Vec& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return f64_array(flat, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
}

Vec flatten(const std::vector<Vec>& rows) {
  Vec flat;
  for (const Vec& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return flat;
}

constexpr double kTol = 1e-12;

// ---- FedProx --------------------------------------------------------------------------

Vec ref_fedprox_round(const fedprox::Config& c, const std::vector<Client>& cls, const Vec& w) {
  Vec sum(w.size(), 0.0);
  double total = 0;
  for (const Client& cl : cls) {
    Vec v = w;
    for (int s = 0; s < c.local_steps; ++s) {
      Vec g = ref_grad(cl, v);
      for (size_t j = 0; j < w.size(); ++j) v[j] -= c.lr * (g[j] + c.mu * (v[j] - w[j]));
    }
    for (size_t j = 0; j < w.size(); ++j) sum[j] += count(cl) * v[j];
    total += count(cl);
  }
  for (double& s : sum) s /= total;
  return sum;
}

TEST(Algorithms, FedProxRoundsMatchPlainLoops) {
  fedprox::Config c;
  algos::Data d = algos::make_data(c.data);
  std::vector<Client> cls = clients_of(d);
  std::set<double> counts;
  for (const Client& cl : cls) counts.insert(count(cl));
  ASSERT_GT(counts.size(), 2u) << "the example counts should differ, so the weighting matters";
  auto round = jit(fedprox::round_program(c));
  auto loss = jit(algos::loss_program(c.data.clients));
  Vec w = {0.3, -0.1, 0.2, 0.0, 0.5};
  Array got = f64_vec(w);
  for (int r = 0; r < 3; ++r) {
    got = round(got, d.x, d.y, d.mask);
    w = ref_fedprox_round(c, cls, w);
    EXPECT_TRUE(ArrayNear(got, w, kTol, kTol)) << "round " << r + 1;
    const double want = ref_mean_loss(cls, w);
    EXPECT_NEAR(loss(got, d.x, d.y, d.mask).item<double>(), want, kTol * want);
  }
  // The proximal term matters: mu = 0 (FedAvg) gives another round.
  fedprox::Config fedavg = c;
  fedavg.mu = 0.0;
  Vec w0(5, 0.0);
  Array plain = jit(fedprox::round_program(fedavg))(f64_vec(w0), d.x, d.y, d.mask);
  Vec want_plain = ref_fedprox_round(fedavg, cls, w0), want_prox = ref_fedprox_round(c, cls, w0);
  EXPECT_TRUE(ArrayNear(plain, want_plain, kTol, kTol));
  EXPECT_GT(std::abs(want_plain[0] - want_prox[0]), 1e-4);
}

// ---- SCAFFOLD -------------------------------------------------------------------------

struct ScaffoldState {
  Vec w, c;
  std::vector<Vec> c_all;
};

ScaffoldState ref_scaffold_round(const scaffold::Config& cfg, const std::vector<Client>& cls,
                                 const ScaffoldState& s, const std::vector<int32_t>& cohort) {
  const size_t dim = s.w.size();
  const double k = static_cast<double>(cohort.size());
  ScaffoldState next = s;
  Vec sum_dy(dim, 0.0), sum_dc(dim, 0.0);
  for (int32_t i : cohort) {
    const Vec& ci = s.c_all[static_cast<size_t>(i)];
    Vec y = s.w;
    for (int step = 0; step < cfg.local_steps; ++step) {
      Vec g = ref_grad(cls[static_cast<size_t>(i)], y);
      for (size_t j = 0; j < dim; ++j) y[j] -= cfg.lr * (g[j] - ci[j] + s.c[j]);
    }
    Vec ci_new(dim);
    for (size_t j = 0; j < dim; ++j) {
      ci_new[j] = ci[j] - s.c[j] + (s.w[j] - y[j]) / (cfg.local_steps * cfg.lr);
      sum_dy[j] += y[j] - s.w[j];
      sum_dc[j] += ci_new[j] - ci[j];
    }
    next.c_all[static_cast<size_t>(i)] = ci_new;
  }
  for (size_t j = 0; j < dim; ++j) {
    next.w[j] += cfg.server_lr * sum_dy[j] / k;
    next.c[j] += sum_dc[j] / static_cast<double>(cfg.data.clients);  // (k / N) * mean
  }
  return next;
}

TEST(Algorithms, ScaffoldRoundsMatchPlainLoopsAndTouchOnlyTheCohortsVariates) {
  scaffold::Config cfg;
  algos::Data d = algos::make_data(cfg.data);
  std::vector<Client> cls = clients_of(d);
  const int64_t n = cfg.data.clients, dim = cfg.data.dim;
  auto round = jit(scaffold::round_program(cfg));
  // Start from nonzero variates, so that reading them matters from the first round.
  ScaffoldState ref{Vec(static_cast<size_t>(dim), 0.1), Vec(static_cast<size_t>(dim), 0.0), {}};
  std::mt19937 init(5);
  std::normal_distribution<double> normal(0.0, 0.1);
  for (int64_t i = 0; i < n; ++i) {
    Vec row(static_cast<size_t>(dim));
    for (double& v : row) v = normal(init);
    ref.c_all.push_back(row);
  }
  for (double& v : ref.c) v = normal(init);
  Array w = f64_vec(ref.w), cv = f64_vec(ref.c), c_all = f64_rows(ref.c_all);
  std::mt19937 rng(cfg.cohort_seed);
  std::set<int32_t> ever;
  for (int r = 0; r < 3; ++r) {
    Array cohort = algos::sample_cohort(rng, n, cfg.cohort);
    std::vector<int32_t> members = cohort.to_vector<int32_t>();
    ASSERT_EQ(std::set<int32_t>(members.begin(), members.end()).size(), members.size());
    std::vector<Array> next = round(w, cv, c_all, cohort, d.x, d.y, d.mask);
    ASSERT_EQ(next.size(), 3u);
    ASSERT_EQ(next[2].shape(), (Shape{n, dim}));
    ref = ref_scaffold_round(cfg, cls, ref, members);
    EXPECT_TRUE(ArrayNear(next[0], ref.w, kTol, kTol)) << "w, round " << r + 1;
    EXPECT_TRUE(ArrayNear(next[1], ref.c, kTol, kTol)) << "c, round " << r + 1;
    EXPECT_TRUE(ArrayNear(next[2], flatten(ref.c_all), kTol, kTol)) << "c_all, round " << r + 1;
    // Rows outside the cohort: bitwise the previous state; rows in it: changed.
    const size_t row_bytes = static_cast<size_t>(dim) * sizeof(double);
    for (int32_t i = 0; i < n; ++i) {
      const bool in = std::find(members.begin(), members.end(), i) != members.end();
      const bool same = std::memcmp(next[2].data<double>() + i * dim,
                                    c_all.data<double>() + i * dim, row_bytes) == 0;
      EXPECT_EQ(same, !in) << "client " << i << (in ? " (in" : " (not in") << " the cohort), round "
                           << r + 1;
    }
    ever.insert(members.begin(), members.end());
    w = next[0], cv = next[1], c_all = next[2];
  }
  EXPECT_LT(ever.size(), static_cast<size_t>(n)) << "some client should never have been sampled";
  // The example's own run lowers the population's loss.
  auto loss = jit(algos::loss_program(n));
  EXPECT_NEAR(loss(w, d.x, d.y, d.mask).item<double>(), ref_mean_loss(cls, ref.w),
              kTol * ref_mean_loss(cls, ref.w));
}

// ---- DiLoCo ---------------------------------------------------------------------------

struct AdamState {
  Vec m, v;
  int t = 0;
};

void ref_adamw_step(const diloco::Config& c, const Vec& g, AdamState& s, Vec& p) {
  ++s.t;
  for (size_t j = 0; j < p.size(); ++j) {
    s.m[j] = c.b1 * s.m[j] + (1 - c.b1) * g[j];
    s.v[j] = c.b2 * s.v[j] + (1 - c.b2) * g[j] * g[j];
    const double m_hat = s.m[j] / (1 - std::pow(c.b1, s.t));
    const double v_hat = s.v[j] / (1 - std::pow(c.b2, s.t));
    p[j] -= c.inner_lr * (m_hat / (std::sqrt(v_hat) + c.eps) + c.weight_decay * p[j]);
  }
}

struct DilocoState {
  Vec w, b;  // server model and Nesterov buffer
  std::vector<AdamState> inner;
};

void ref_diloco_step(const diloco::Config& c, const std::vector<Client>& cls, DilocoState& s) {
  Vec mean(s.w.size(), 0.0);
  for (size_t k = 0; k < cls.size(); ++k) {
    Vec p = s.w;
    for (int h = 0; h < c.inner_steps; ++h) ref_adamw_step(c, ref_grad(cls[k], p), s.inner[k], p);
    for (size_t j = 0; j < p.size(); ++j) mean[j] += p[j] / static_cast<double>(cls.size());
  }
  for (size_t j = 0; j < s.w.size(); ++j) {
    const double g = s.w[j] - mean[j];
    s.b[j] = g + c.outer_momentum * s.b[j];
    s.w[j] -= c.outer_lr * (g + c.outer_momentum * s.b[j]);
  }
}

// The one leaf of `t` whose path contains `key` (e.g. "[\"mu\"]").
Array leaf_at(const Tree& t, const std::string& key) {
  std::vector<Tree> leaves = tree_leaves(t);
  std::vector<std::string> paths = tree_leaf_paths(t);
  std::vector<Array> found;
  for (size_t i = 0; i < leaves.size(); ++i)
    if (paths[i].find(key) != std::string::npos) found.push_back(leaves[i].array());
  if (found.size() != 1) throw Error("leaf_at: " + std::to_string(found.size()) + " leaves " + key);
  return found[0];
}

TEST(Algorithms, DilocoOuterStepsMatchPlainLoops) {
  diloco::Config c;
  algos::Data d = algos::make_data(c.data);
  std::vector<Client> cls = clients_of(d);
  const size_t dim = static_cast<size_t>(c.data.dim);
  auto step = jit(diloco::outer_step_program(c));
  Vec w0 = {0.2, -0.4, 0.1, 0.3, -0.2};
  Array w = f64_vec(w0);
  Tree outer_state = diloco::outer_optimizer(c).init(w);
  Tree inner_states = jit(diloco::inner_init_program(c))(w);
  EXPECT_EQ(leaf_at(inner_states, "[\"mu\"]").shape(), (Shape{c.data.clients, c.data.dim}));
  DilocoState ref{w0, Vec(dim, 0.0),
                  std::vector<AdamState>(cls.size(), AdamState{Vec(dim, 0.0), Vec(dim, 0.0), 0})};
  for (int r = 0; r < 3; ++r) {
    Tree next = step(w, outer_state, inner_states, d.x, d.y, d.mask);
    ref_diloco_step(c, cls, ref);
    w = next[0].array(), outer_state = next[1], inner_states = next[2];
    EXPECT_TRUE(ArrayNear(w, ref.w, kTol, kTol)) << "w, outer step " << r + 1;
    EXPECT_TRUE(ArrayNear(leaf_at(outer_state, "[\"trace\"]"), ref.b, kTol, kTol))
        << "Nesterov buffer, outer step " << r + 1;
    Vec m, v;
    for (const AdamState& s : ref.inner) {
      m.insert(m.end(), s.m.begin(), s.m.end());
      v.insert(v.end(), s.v.begin(), s.v.end());
    }
    // The workers' AdamW states carry over from one outer step to the next.
    EXPECT_TRUE(ArrayNear(leaf_at(inner_states, "[\"mu\"]"), m, kTol, kTol)) << r + 1;
    EXPECT_TRUE(ArrayNear(leaf_at(inner_states, "[\"nu\"]"), v, kTol, kTol)) << r + 1;
    EXPECT_TRUE(ArrayNear(leaf_at(inner_states, "[\"count\"]"),
                          Vec(cls.size(), (r + 1.0) * c.inner_steps), 0, 0));
  }
}

// ---- learned aggregation --------------------------------------------------------------

struct Validation {
  std::vector<Vec> x;
  Vec y;
};

Validation validation_of(const algos::Data& d) {
  Validation v;
  const int64_t n = d.x_val.shape()[0], dim = d.x_val.shape()[1];
  for (int64_t i = 0; i < n; ++i) {
    const double* row = d.x_val.data<double>() + i * dim;
    v.x.emplace_back(row, row + dim);
    v.y.push_back(d.y_val.data<double>()[i]);
  }
  return v;
}

double ref_validation_loss(const Validation& v, const Vec& w) {
  double s = 0;
  for (size_t i = 0; i < v.y.size(); ++i) {
    double r = -v.y[i];
    for (size_t j = 0; j < w.size(); ++j) r += v.x[i][j] * w[j];
    s += r * r;
  }
  return s / static_cast<double>(v.y.size());
}

Vec ref_softmax(const Vec& l) {
  const double m = *std::max_element(l.begin(), l.end());
  Vec a(l.size());
  double z = 0;
  for (size_t i = 0; i < l.size(); ++i) z += (a[i] = std::exp(l[i] - m));
  for (double& v : a) v /= z;
  return a;
}

Vec ref_weighted_round(const learned_agg::Config& c, const std::vector<Client>& cls, const Vec& w,
                       const Vec& logits) {
  Vec a = ref_softmax(logits), out(w.size(), 0.0);
  for (size_t k = 0; k < cls.size(); ++k) {
    Vec wk = ref_local_sgd(cls[k], w, c.local_steps, c.lr);
    for (size_t j = 0; j < w.size(); ++j) out[j] += a[k] * wk[j];
  }
  return out;
}

TEST(Algorithms, LearnedAggregationHypergradientMatchesFiniteDifferencesOfPlainLoops) {
  learned_agg::Config c;
  algos::Data d = algos::make_data(c.data);
  std::vector<Client> cls = clients_of(d);
  Validation val = validation_of(d);
  auto objective = [&](const Vec& w, const Vec& l) {
    return ref_validation_loss(val, ref_weighted_round(c, cls, w, l));
  };
  auto value_and_hypergrad = jit(value_and_grad(learned_agg::hyper_objective(c), 1));
  auto round = jit(learned_agg::round_program(c));
  for (const Vec& w : {Vec(5, 0.0), Vec{0.5, -0.3, 0.8, 0.1, -0.6}})
    for (const Vec& l : {Vec(8, 0.0), Vec{0.4, -1.0, 0.2, 0.9, -0.3, 0.0, 1.5, -0.7}}) {
      Array w1 = round(f64_vec(w), f64_vec(l), d.x, d.y, d.mask, d.x_val, d.y_val);
      EXPECT_TRUE(ArrayNear(w1, ref_weighted_round(c, cls, w, l), kTol, kTol));
      auto [value, g] =
          value_and_hypergrad(f64_vec(w), f64_vec(l), d.x, d.y, d.mask, d.x_val, d.y_val);
      ASSERT_EQ(g.shape(), Shape{8});
      const double want = objective(w, l);
      EXPECT_NEAR(value.item<double>(), want, kTol * want);
      // Central differences of the plain-loop reference, logit by logit.
      double sum = 0;
      for (size_t i = 0; i < l.size(); ++i) {
        const double h = 1e-5;
        Vec up = l, down = l;
        up[i] += h;
        down[i] -= h;
        const double fd = (objective(w, up) - objective(w, down)) / (2 * h);
        EXPECT_NEAR(g.data<double>()[i], fd, 1e-7 * std::abs(fd) + 1e-10) << "logit " << i;
        sum += g.data<double>()[i];
      }
      // Adding a constant to every logit changes nothing.
      EXPECT_NEAR(sum, 0.0, 1e-12);
      // A small step against the hypergradient lowers the reference's objective.
      Vec stepped = l;
      for (size_t i = 0; i < l.size(); ++i) stepped[i] -= 0.1 * g.data<double>()[i];
      EXPECT_LT(objective(w, stepped), want);
    }
}

TEST(Algorithms, LearnedAggregationTrainingLowersValidationLossAndDownweightsCorruptedClients) {
  learned_agg::Config c;
  algos::Data d = algos::make_data(c.data);
  std::vector<Client> cls = clients_of(d);
  Validation val = validation_of(d);
  auto value_and_hypergrad = jit(value_and_grad(learned_agg::hyper_objective(c), 1));
  auto round = jit(learned_agg::round_program(c));
  const size_t n = cls.size(), dim = static_cast<size_t>(c.data.dim);
  // The example's loop, with the reference's trajectory alongside.
  Array w(f64, {c.data.dim}), logits(f64, {c.data.clients});
  Vec ref_w(dim, 0.0), ref_l(n, 0.0), uniform_w(dim, 0.0);
  double learned = 0, uniform = 0;
  for (int r = 0; r < c.rounds; ++r) {
    auto [value, g] = value_and_hypergrad(w, logits, d.x, d.y, d.mask, d.x_val, d.y_val);
    w = round(w, logits, d.x, d.y, d.mask, d.x_val, d.y_val);
    ref_w = ref_weighted_round(c, cls, ref_w, ref_l);
    learned = value.item<double>();
    EXPECT_NEAR(learned, ref_validation_loss(val, ref_w), 1e-10 * learned) << "round " << r + 1;
    EXPECT_TRUE(ArrayNear(w, ref_w, 1e-10, 1e-12)) << "round " << r + 1;
    uniform_w = ref_weighted_round(c, cls, uniform_w, Vec(n, 0.0));
    uniform = ref_validation_loss(val, uniform_w);
    Vec next = logits.to_vector<double>();
    for (size_t k = 0; k < n; ++k) {
      next[k] -= c.hyper_lr * g.data<double>()[k];
      ref_l[k] = next[k];
    }
    logits = f64_vec(next);
  }
  EXPECT_LT(learned, 0.9 * uniform) << "learned " << learned << ", uniform " << uniform;
  Vec a = learned_agg::weights_of(logits);
  const auto corrupted_end = a.begin() + c.data.corrupted;
  EXPECT_LT(*std::max_element(a.begin(), corrupted_end), *std::min_element(corrupted_end, a.end()));
  for (auto it = a.begin(); it != corrupted_end; ++it) EXPECT_LT(*it, 1.0 / static_cast<double>(n));
}

// ---- DP-FedAvg --------------------------------------------------------------------------

// The random draws come from drx::random on their own (unplaced programs; the
// PRNG is pinned in tests/random_test.cpp); everything else is plain loops.
Vec ref_dp_fedavg_round(const dpfedavg::Config& c, const std::vector<Client>& cls, const Vec& w,
                        const Array& key, int* participants) {
  namespace rnd = drx::random;
  auto [sample_key, noise_key] = rnd::split2(key);
  auto joins = jit([q = c.q](Value k) { return astype(rnd::bernoulli(k, q, {}), DType::i32); });
  Vec sum(w.size(), 0.0);
  *participants = 0;
  for (size_t k = 0; k < cls.size(); ++k) {
    if (joins(rnd::fold_in(sample_key, static_cast<int64_t>(k))).item<int32_t>() == 0) continue;
    ++*participants;
    Vec v = ref_local_sgd(cls[k], w, c.local_steps, c.lr);
    double norm = 0;
    for (size_t j = 0; j < w.size(); ++j) norm += (v[j] - w[j]) * (v[j] - w[j]);
    const double f = std::min(1.0, c.clip / std::sqrt(norm));
    for (size_t j = 0; j < w.size(); ++j) sum[j] += f * (v[j] - w[j]);
  }
  // The sum's single leaf gets the key split(noise_key, 1)[0].
  const int64_t dim = static_cast<int64_t>(w.size());
  Array noise =
      jit([dim](Value k) { return rnd::normal(k, {dim}, drx::f64); })(rnd::split(noise_key, 1)[0]);
  const double expected = c.q * static_cast<double>(cls.size());
  Vec out = w;
  for (size_t j = 0; j < w.size(); ++j)
    out[j] += (sum[j] + c.noise * c.clip * noise.data<double>()[j]) / expected;
  return out;
}

TEST(Algorithms, DpFedAvgRoundsMatchPlainLoopsOnAnyMesh) {
  dpfedavg::Config c;
  algos::Data d = algos::make_data(c.data);
  std::vector<Client> cls = clients_of(d);
  auto round = jit(dpfedavg::round_program(c));
  Vec w(static_cast<size_t>(c.data.dim), 0.0);
  Array wa = f64_vec(w);
  std::set<int> counts;
  for (int r = 0; r < 4; ++r) {
    const Array key = dpfedavg::round_key(c, r);
    int participants = 0;
    w = ref_dp_fedavg_round(c, cls, w, key, &participants);
    counts.insert(participants);
    Array next = round(wa, key, d.x, d.y, d.mask);
    EXPECT_TRUE(ArrayNear(next, w, kTol, kTol)) << "round " << r;
    for (int devices : {2, 3, 4})
      EXPECT_TRUE(
          jit(dpfedavg::round_program(c), Mesh({{"clients", devices}}))(wa, key, d.x, d.y, d.mask)
              .bitwise_equal(next))
          << devices << " devices, round " << r;
    wa = next;
  }
  // Poisson sampling: the cohort size varies from round to round.
  EXPECT_GT(counts.size(), 1u);
  // Without noise and clipping the round is the plain sum of the participants' updates
  // over qN: the noise and the clip both matter to the result above.
  dpfedavg::Config plain = c;
  plain.noise = 0, plain.clip = 1e9;
  int participants = 0;
  Vec w0(static_cast<size_t>(c.data.dim), 0.0);
  Vec want = ref_dp_fedavg_round(plain, cls, w0, dpfedavg::round_key(c, 0), &participants);
  Array got =
      jit(dpfedavg::round_program(plain))(f64_vec(w0), dpfedavg::round_key(c, 0), d.x, d.y, d.mask);
  EXPECT_TRUE(ArrayNear(got, want, kTol, kTol));
  Vec noisy = ref_dp_fedavg_round(c, cls, w0, dpfedavg::round_key(c, 0), &participants);
  double diff = 0;
  for (size_t j = 0; j < want.size(); ++j) diff = std::max(diff, std::abs(want[j] - noisy[j]));
  EXPECT_GT(diff, 1e-3);
  // The accountant's epsilon grows with the rounds.
  EXPECT_LT(dpfedavg::epsilon(c, 5), dpfedavg::epsilon(c, 15));
}

}  // namespace
}  // namespace drx::testing
