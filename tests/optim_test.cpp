// drx::optim: client SGD, server optimisers and the federated round, against plain-loop float64
// references of the formulas.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <vector>

#include "drx/exec/executable.h"
#include "test_util.h"

namespace {

using drx::Array;
using drx::Tree;
using drx::Value;
using drx::optim::RoundSpec;
using drx::optim::ServerKind;
using drx::optim::ServerOptimizer;
using drx::testing::ArrayNear;
using drx::testing::random_array;
using drx::testing::to_doubles;

// All leaves of a tree of Arrays, concatenated in canonical order.
std::vector<double> flat(const Tree& t) {
  std::vector<double> v;
  for (const Tree& l : drx::tree_leaves(t))
    for (double d : to_doubles(l.array())) v.push_back(d);
  return v;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// ---- server optimisers on their own ------------------------------------------

TEST(OptimServer, ParseKindAndInit) {
  EXPECT_EQ(drx::optim::parse_server_kind("fedavg"), ServerKind::fedavg);
  EXPECT_EQ(drx::optim::parse_server_kind("fedavgm"), ServerKind::fedavgm);
  EXPECT_EQ(drx::optim::parse_server_kind("fedadam"), ServerKind::fedadam);
  try {
    drx::optim::parse_server_kind("adam");
    FAIL() << "no error";
  } catch (const drx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fedavg, fedavgm, fedadam"), std::string::npos);
  }
  Tree p = drx::nn::mlp_init({3, 2}, 0);
  ServerOptimizer s;
  EXPECT_EQ(s.init(p).structure(), Tree().structure());
  s.kind = ServerKind::fedavgm;
  Tree m = s.init(p);
  EXPECT_EQ(m.keys(), std::vector<std::string>{"momentum"});
  EXPECT_EQ(m["momentum"].structure(), p.structure());
  EXPECT_TRUE(ArrayNear(m["momentum"]["layer0"]["w"].array(), std::vector<double>(6, 0.0), 0, 0));
  s.kind = ServerKind::fedadam;
  Tree a = s.init(p);
  EXPECT_EQ(a.keys(), (std::vector<std::string>{"m", "v"}));
  EXPECT_EQ(a["v"].structure(), p.structure());
}

// Plain-loop reference of one server step on flat vectors.
void ref_server_step(const ServerOptimizer& s, std::vector<double>& x, const std::vector<double>& d,
                     std::vector<double>& m, std::vector<double>& v) {
  for (size_t i = 0; i < x.size(); ++i) {
    switch (s.kind) {
      case ServerKind::fedavg:
        x[i] += s.lr * d[i];
        break;
      case ServerKind::fedavgm:
        m[i] = s.momentum * m[i] + d[i];
        x[i] += s.lr * m[i];
        break;
      case ServerKind::fedadam:
        m[i] = s.beta1 * m[i] + (1 - s.beta1) * d[i];
        v[i] = s.beta2 * v[i] + (1 - s.beta2) * d[i] * d[i];
        x[i] += s.lr * m[i] / (std::sqrt(v[i]) + s.eps);
        break;
      case ServerKind::fedyogi:
      case ServerKind::fedadagrad: {
        const double d2 = d[i] * d[i];
        m[i] = s.beta1 * m[i] + (1 - s.beta1) * d[i];
        const double sign = v[i] > d2 ? 1.0 : v[i] < d2 ? -1.0 : 0.0;
        v[i] = s.kind == ServerKind::fedadagrad ? v[i] + d2 : v[i] - (1 - s.beta2) * d2 * sign;
        x[i] += s.lr * m[i] / (std::sqrt(v[i]) + s.eps);
        break;
      }
    }
  }
}

TEST(OptimServer, ThreeRoundsMatchFormulas) {
  Tree params =
      Tree::dict({{"a", random_array({3}, drx::f64, 1)}, {"b", random_array({2, 2}, drx::f64, 2)}});
  for (ServerKind kind : {ServerKind::fedavg, ServerKind::fedavgm, ServerKind::fedadam}) {
    ServerOptimizer s;
    s.kind = kind;
    s.lr = kind == ServerKind::fedadam ? 0.1 : 0.7;
    s.momentum = 0.8;
    s.beta1 = 0.85, s.beta2 = 0.95, s.eps = 1e-2;
    auto step = drx::jit([s](Tree p, Tree d, Tree st) {
      auto [np, ns] = s.apply(p, d, st);
      return Tree::list({np, ns});
    });
    Tree p = params, st = s.init(params);
    std::vector<double> x = flat(params), m(x.size(), 0.0), v(x.size(), 0.0);
    for (int r = 0; r < 3; ++r) {
      Tree d = Tree::dict({{"a", random_array({3}, drx::f64, 10 + r)},
                           {"b", random_array({2, 2}, drx::f64, 20 + r)}});
      Tree out = step(p, d, st);
      p = out[0], st = out[1];
      ref_server_step(s, x, flat(d), m, v);
      EXPECT_LT(max_abs_diff(flat(p), x), 1e-14) << "kind " << server_kind_name(kind);
      if (kind == ServerKind::fedavgm) {
        EXPECT_LT(max_abs_diff(flat(st["momentum"]), m), 1e-14);
      }
      if (kind == ServerKind::fedadam) {
        EXPECT_LT(max_abs_diff(flat(st["m"]), m), 1e-14);
        EXPECT_LT(max_abs_diff(flat(st["v"]), v), 1e-14);
      }
    }
    EXPECT_GT(max_abs_diff(flat(p), flat(params)), 1e-3);  // it did move
  }
  // A state from another optimiser is refused.
  ServerOptimizer adam;
  adam.kind = ServerKind::fedadam;
  auto bad = drx::jit([adam](Tree p, Tree d, Tree st) { return adam.apply(p, d, st).first; });
  EXPECT_THROW(bad(params, params, Tree()), drx::Error);
}

// ---- a float64 reference MLP with plain-loop backprop ----------------------------

struct RefMlp {
  std::vector<int64_t> dims;
  std::vector<std::vector<double>> w, b;  // w[l] row-major [dims[l], dims[l+1]]

  static RefMlp of(const Tree& p) {
    RefMlp m;
    for (const Tree& layer : p.children()) {
      const Array& w = layer["w"].array();
      if (m.dims.empty()) m.dims.push_back(w.shape()[0]);
      m.dims.push_back(w.shape()[1]);
      m.w.push_back(to_doubles(w));
      m.b.push_back(to_doubles(layer["b"].array()));
    }
    return m;
  }
  // Canonical leaf order of the Tree: layer0.b, layer0.w, layer1.b, ...
  std::vector<double> flat() const {
    std::vector<double> v;
    for (size_t l = 0; l < w.size(); ++l) {
      v.insert(v.end(), b[l].begin(), b[l].end());
      v.insert(v.end(), w[l].begin(), w[l].end());
    }
    return v;
  }
  RefMlp zeros() const {
    RefMlp z = *this;
    for (auto& l : z.w) std::fill(l.begin(), l.end(), 0.0);
    for (auto& l : z.b) std::fill(l.begin(), l.end(), 0.0);
    return z;
  }
  // out = a * out + c * other, elementwise.
  void axpby(double a, double c, const RefMlp& other) {
    for (size_t l = 0; l < w.size(); ++l) {
      for (size_t i = 0; i < w[l].size(); ++i) w[l][i] = a * w[l][i] + c * other.w[l][i];
      for (size_t i = 0; i < b[l].size(); ++i) b[l][i] = a * b[l][i] + c * other.b[l][i];
    }
  }
};

struct Dataset {
  std::vector<double> x;  // [n, features]
  std::vector<int64_t> y;
  int64_t features;
};

// Mean cross-entropy over `rows` and its gradient (into *grad).
double ref_loss_grad(const RefMlp& m, const Dataset& d, const std::vector<int64_t>& rows,
                     RefMlp* grad) {
  *grad = m.zeros();
  const size_t L = m.w.size();
  const double n = static_cast<double>(rows.size());
  double loss = 0;
  for (int64_t r : rows) {
    std::vector<std::vector<double>> a(L + 1), z(L);
    a[0].assign(d.x.begin() + r * d.features, d.x.begin() + (r + 1) * d.features);
    for (size_t l = 0; l < L; ++l) {
      const int64_t in = m.dims[l], out = m.dims[l + 1];
      z[l].assign(out, 0.0);
      for (int64_t j = 0; j < out; ++j) {
        double s = m.b[l][j];
        for (int64_t i = 0; i < in; ++i) s += a[l][i] * m.w[l][i * out + j];
        z[l][j] = s;
      }
      a[l + 1] = z[l];
      if (l + 1 < L)
        for (double& v : a[l + 1]) v = std::max(v, 0.0);
    }
    const std::vector<double>& logits = z[L - 1];
    double mx = *std::max_element(logits.begin(), logits.end()), se = 0;
    for (double v : logits) se += std::exp(v - mx);
    loss += (mx + std::log(se) - logits[d.y[r]]) / n;
    std::vector<double> dz(logits.size());
    for (size_t j = 0; j < logits.size(); ++j)
      dz[j] = (std::exp(logits[j] - mx) / se - (static_cast<int64_t>(j) == d.y[r] ? 1.0 : 0.0)) / n;
    for (size_t l = L; l-- > 0;) {
      const int64_t in = m.dims[l], out = m.dims[l + 1];
      std::vector<double> da(in, 0.0);
      for (int64_t j = 0; j < out; ++j) {
        grad->b[l][j] += dz[j];
        for (int64_t i = 0; i < in; ++i) {
          grad->w[l][i * out + j] += a[l][i] * dz[j];
          da[i] += m.w[l][i * out + j] * dz[j];
        }
      }
      if (l > 0) {
        dz.assign(in, 0.0);
        for (int64_t i = 0; i < in; ++i) dz[i] = z[l - 1][i] > 0 ? da[i] : 0.0;
      }
    }
  }
  return loss;
}

// One client's local training on its step batches (an empty batch: no step at all, unless
// `decay_on_empty`, which models the wrong behaviour of letting momentum run on).
RefMlp ref_client(RefMlp p, const Dataset& d, const std::vector<std::vector<int64_t>>& steps,
                  double lr, double mu, double* loss_sum, double* count,
                  bool decay_on_empty = false) {
  RefMlp m = p.zeros(), g;
  for (const auto& rows : steps) {
    if (rows.empty()) {
      if (decay_on_empty && mu != 0) {
        m.axpby(mu, 0.0, m);
        p.axpby(1.0, -lr, m);
      }
      continue;
    }
    double loss = ref_loss_grad(p, d, rows, &g);
    *loss_sum += loss * static_cast<double>(rows.size());
    *count += static_cast<double>(rows.size());
    if (mu != 0) {
      m.axpby(mu, 1.0, g);
      p.axpby(1.0, -lr, m);
    } else {
      p.axpby(1.0, -lr, g);
    }
  }
  return p;
}

// Each client's real examples per step, read from the unmasked grid slots.
std::vector<std::vector<std::vector<int64_t>>> real_rows(const Array& idx, const Array& mask) {
  const int64_t c = idx.shape()[0], s = idx.shape()[1], b = idx.shape()[2];
  std::vector<std::vector<std::vector<int64_t>>> out(c, std::vector<std::vector<int64_t>>(s));
  for (int64_t k = 0; k < c; ++k)
    for (int64_t t = 0; t < s; ++t)
      for (int64_t j = 0; j < b; ++j) {
        int64_t at = (k * s + t) * b + j;
        if (mask.element_as_double(at) != 0)
          out[k][t].push_back(static_cast<int64_t>(idx.element_as_double(at)));
      }
  return out;
}

struct RefRound {
  std::vector<double> params, state_m, state_v;
  double loss;
};
// The whole round: clients from the same server model, weighted mean delta, server step.
RefRound ref_round(const RoundSpec& spec, const RefMlp& server, const Dataset& d, const Array& idx,
                   const Array& mask, const std::vector<double>& weights,
                   std::vector<double> state_m, std::vector<double> state_v) {
  auto rows = real_rows(idx, mask);
  std::vector<double> x = server.flat(), delta(x.size(), 0.0);
  double total = 0, loss = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    double ls = 0, cnt = 0;
    RefMlp pk = ref_client(server, d, rows[k], spec.client.lr, spec.client.momentum, &ls, &cnt);
    std::vector<double> fk = pk.flat();
    for (size_t i = 0; i < x.size(); ++i) delta[i] += weights[k] * (fk[i] - x[i]);
    total += weights[k];
    loss += weights[k] * (cnt > 0 ? ls / cnt : 0.0);
  }
  if (total > 0) {
    for (double& v : delta) v /= total;
    ref_server_step(spec.server, x, delta, state_m, state_v);
  }
  return {x, state_m, state_v, total > 0 ? loss / total : 0.0};
}

Dataset make_dataset(int64_t n, int64_t features, int64_t classes, uint64_t seed) {
  Array x = random_array({n, features}, drx::f64, seed, -1.5, 1.5);
  Array y = random_array({n}, drx::i32, seed + 1, 0, static_cast<double>(classes));
  Dataset d{to_doubles(x), {}, features};
  for (double v : to_doubles(y)) d.y.push_back(static_cast<int64_t>(v));
  return d;
}
Array x_array(const Dataset& d, drx::DType dt = drx::f64) {
  return drx::convert_array(
      drx::testing::f64_array(d.x, {static_cast<int64_t>(d.y.size()), d.features}), dt);
}
Array y_array(const Dataset& d) {
  std::vector<int32_t> y(d.y.begin(), d.y.end());
  return Array::from_vector<int32_t>(y, {static_cast<int64_t>(y.size())});
}

// Biases non-zero so that every parameter matters.
Tree with_random_biases(Tree p, uint64_t seed) {
  return drx::tree_map(
      [&](const Array& a) {
        return a.ndim() == 1 ? random_array(a.shape(), a.dtype(), seed++, -0.2, 0.2) : a;
      },
      p);
}

// ---- client SGD ----------------------------------------------------------------

TEST(OptimRound, ClientMomentumSkipsFullyMaskedStepExactly) {
  Dataset d = make_dataset(12, 4, 3, 5);
  Tree params = with_random_biases(
      drx::nn::mlp_init({4, 5, 3}, 1, drx::nn::Init::glorot_uniform, drx::f64), 3);
  RoundSpec spec;
  spec.cohort = 1, spec.steps = 5, spec.batch = 3;
  spec.client = {0.3, 0.9};  // server: FedAvg with lr 1, so the result is the client's model
  // Steps: full, fully masked (indices that would matter if used), partial, full, partial.
  std::vector<int32_t> idx = {0, 1, 2, 5, 6, 7, 3, 4, 0, 8, 9, 10, 11, 0, 0};
  std::vector<float> mask = {1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0};
  Array ia = Array::from_vector<int32_t>(idx, {1, 5, 3});
  Array ma = Array::from_vector<float>(mask, {1, 5, 3});
  Array w = Array::from_vector<float>({12}, {1});
  auto round = drx::jit(drx::optim::fedavg_round(spec));
  Tree out = round(params, Tree(), x_array(d), y_array(d), ia, ma, w);

  std::vector<std::vector<int64_t>> steps = {{0, 1, 2}, {}, {3, 4}, {8, 9, 10}, {11}};
  double ls = 0, cnt = 0;
  RefMlp want = ref_client(RefMlp::of(params), d, steps, 0.3, 0.9, &ls, &cnt);
  EXPECT_LT(max_abs_diff(flat(out["params"]), want.flat()), 1e-12);
  EXPECT_NEAR(out["loss"].array().item<double>(), ls / cnt, 1e-12);
  // The test can tell: letting momentum decay and move on the empty step is far off.
  double ls2 = 0, cnt2 = 0;
  RefMlp wrong = ref_client(RefMlp::of(params), d, steps, 0.3, 0.9, &ls2, &cnt2, true);
  EXPECT_GT(max_abs_diff(wrong.flat(), want.flat()), 1e-4);

  // Plain SGD (momentum 0) too.
  spec.client = {0.2, 0.0};
  Tree out0 =
      drx::jit(drx::optim::fedavg_round(spec))(params, Tree(), x_array(d), y_array(d), ia, ma, w);
  ls = cnt = 0;
  RefMlp want0 = ref_client(RefMlp::of(params), d, steps, 0.2, 0.0, &ls, &cnt);
  EXPECT_LT(max_abs_diff(flat(out0["params"]), want0.flat()), 1e-12);

  // A client with data weight but every step masked leaves the model bit for bit unchanged.
  for (double mu : {0.0, 0.9}) {
    spec.client = {0.3, mu};
    Tree same = drx::jit(drx::optim::fedavg_round(spec))(params, Tree(), x_array(d), y_array(d), ia,
                                                         drx::zeros({1, 5, 3}), w);
    std::vector<Tree> got = drx::tree_leaves(same["params"]), want = drx::tree_leaves(params);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(got[i].array().bitwise_equal(want[i].array())) << "momentum " << mu;
  }
}

TEST(OptimRound, FullStepsRunWithoutTheSkipAndGiveTheSameModel) {
  // Steps 0 and 1 have examples, step 2 is empty: declaring the first two "full" runs them
  // without the cond and must not change the result; the empty step is still skipped.
  Dataset d = make_dataset(12, 4, 3, 5);
  Tree params = with_random_biases(
      drx::nn::mlp_init({4, 5, 3}, 1, drx::nn::Init::glorot_uniform, drx::f64), 3);
  RoundSpec spec;
  spec.cohort = 1, spec.steps = 3, spec.batch = 3;
  spec.client = {0.3, 0.9};
  Array ia = Array::from_vector<int32_t>({0, 1, 2, 3, 4, 5, 0, 0, 0}, {1, 3, 3});
  Array ma = Array::from_vector<float>({1, 1, 1, 1, 1, 0, 0, 0, 0}, {1, 3, 3});
  Array w = Array::from_vector<float>({12}, {1});
  Tree checked =
      drx::jit(drx::optim::fedavg_round(spec))(params, Tree(), x_array(d), y_array(d), ia, ma, w);
  spec.full_steps = 2;
  auto full = drx::jit(drx::optim::fedavg_round(spec));
  Tree unchecked = full(params, Tree(), x_array(d), y_array(d), ia, ma, w);
  EXPECT_LT(max_abs_diff(flat(unchecked["params"]), flat(checked["params"])), 1e-15);
  std::vector<std::vector<int64_t>> steps = {{0, 1, 2}, {3, 4}, {}};
  double ls = 0, cnt = 0;
  RefMlp want = ref_client(RefMlp::of(params), d, steps, 0.3, 0.9, &ls, &cnt);
  EXPECT_LT(max_abs_diff(flat(unchecked["params"]), want.flat()), 1e-12);
  // The full steps run in a scan of their own whose body has no cond; the others in a scan
  // whose body has the cond.
  std::function<void(const drx::Program&, std::vector<std::string>&)> bodies_with_cond;
  bodies_with_cond = [&](const drx::Program& p, std::vector<std::string>& out) {
    for (const drx::Eqn& e : p.eqns) {
      if (e.prim->name() == "cond") out.push_back(p.name);
      if (e.params.has("body")) bodies_with_cond(e.params.get_program("body", e.prim->name()), out);
    }
  };
  auto scans = [](const drx::Program& p) {
    size_t n = 0;
    for (const drx::Eqn& e : p.eqns)
      if (e.prim->name() == "map_fn")
        for (const drx::Eqn& b : e.params.get_program("body", "map_fn").eqns)
          n += b.prim->name() == "scan";
    return n;
  };
  std::vector<std::string> with_cond;
  bodies_with_cond(full.last_program(), with_cond);
  EXPECT_EQ(with_cond.size(), 1u);
  EXPECT_EQ(scans(full.last_program()), 2u);
  spec.full_steps = 4;
  EXPECT_THROW(drx::optim::fedavg_round(spec), drx::Error);
}

// ---- THE round test: masked fixed-shape batches == example-by-example -------------

struct UnevenSetup {
  Dataset d = make_dataset(40, 6, 3, 77);
  drx::data::Partition partition;
  std::vector<int64_t> cohort = {2, 0, 4, 3};  // sizes 7, 3, 12, 0
  UnevenSetup() {
    // A fixed shuffle of 0..39 cut into clients of sizes 3, 9, 7, 0, 12, 9 (ascending within).
    std::vector<int64_t> order(40);
    for (int64_t i = 0; i < 40; ++i) order[i] = (i * 17 + 5) % 40;
    const int64_t sizes[] = {3, 9, 7, 0, 12, 9};
    size_t at = 0;
    for (int64_t s : sizes) {
      std::vector<int64_t> c(order.begin() + at, order.begin() + at + s);
      std::sort(c.begin(), c.end());
      partition.push_back(c);
      at += s;
    }
  }
  drx::data::CohortBatches batches(int64_t steps, int64_t max_epochs, int64_t round) const {
    drx::data::BatchOptions o;
    o.steps = steps, o.batch_size = 4, o.max_epochs = max_epochs, o.seed = 9, o.round = round;
    return drx::data::cohort_batches(partition, cohort, o);
  }
};

TEST(OptimRound, UnevenClientsMaskedRoundEqualsExampleByExample) {
  UnevenSetup u;
  Tree params0 = with_random_biases(
      drx::nn::mlp_init({6, 5, 3}, 4, drx::nn::Init::glorot_uniform, drx::f64), 50);
  ServerOptimizer avg, avgm, adam;
  avgm.kind = ServerKind::fedavgm, avgm.lr = 0.7, avgm.momentum = 0.9;
  adam.kind = ServerKind::fedadam, adam.lr = 0.05, adam.beta1 = 0.9, adam.beta2 = 0.99,
  adam.eps = 1e-3;
  // (steps, max_epochs): clients cycling through epochs; one epoch each, then masked steps.
  for (auto [steps, epochs] : {std::pair<int64_t, int64_t>{5, 0}, {3, 1}}) {
    for (const ServerOptimizer& server : {avg, avgm, adam}) {
      RoundSpec spec;
      spec.cohort = 4, spec.steps = steps, spec.batch = 4;
      spec.client = {0.2, 0.8};
      spec.server = server;
      auto round = drx::jit(drx::optim::fedavg_round(spec));
      Tree p = params0, st = server.init(params0);
      std::vector<double> ref_x = flat(params0), m(ref_x.size(), 0.0), v = m;
      for (int64_t r = 0; r < 2; ++r) {
        drx::data::CohortBatches b = u.batches(steps, epochs, r);
        ASSERT_EQ(to_doubles(b.sizes), (std::vector<double>{7, 3, 12, 0}));
        Tree out = round(p, st, x_array(u.d), y_array(u.d), b.idx, b.mask, b.sizes);
        // The reference starts from the same server model (round 1: the reference's own).
        RefMlp server_model = RefMlp::of(p);
        RefRound want =
            ref_round(spec, server_model, u.d, b.idx, b.mask, to_doubles(b.sizes), m, v);
        const std::string what = server_kind_name(server.kind) + " steps " + std::to_string(steps) +
                                 " round " + std::to_string(r);
        EXPECT_LT(max_abs_diff(flat(out["params"]), want.params), 1e-10) << what;
        EXPECT_NEAR(out["loss"].array().item<double>(), want.loss, 1e-10) << what;
        if (server.kind == ServerKind::fedavgm) {
          EXPECT_LT(max_abs_diff(flat(out["state"]["momentum"]), want.state_m), 1e-10) << what;
        }
        if (server.kind == ServerKind::fedadam) {
          EXPECT_LT(max_abs_diff(flat(out["state"]["m"]), want.state_m), 1e-10) << what;
          EXPECT_LT(max_abs_diff(flat(out["state"]["v"]), want.state_v), 1e-10) << what;
        }
        EXPECT_GT(max_abs_diff(flat(out["params"]), flat(p)), 1e-3) << what;
        p = out["params"], st = out["state"], m = want.state_m, v = want.state_v;
        ref_x = want.params;
      }
      EXPECT_EQ(round.trace_count(), 1);
    }
  }
}

TEST(OptimRound, FedAvgLrOneIsTheWeightedMeanOfClientModels) {
  UnevenSetup u;
  Tree params = drx::nn::mlp_init({6, 5, 3}, 6, drx::nn::Init::he_normal, drx::f64);
  RoundSpec spec;
  spec.cohort = 4, spec.steps = 4, spec.batch = 4, spec.client = {0.1, 0.5};
  drx::data::CohortBatches b = u.batches(4, 0, 0);
  Tree out = drx::jit(drx::optim::fedavg_round(spec))(params, Tree(), x_array(u.d), y_array(u.d),
                                                      b.idx, b.mask, b.sizes);
  auto rows = real_rows(b.idx, b.mask);
  std::vector<double> mean(flat(params).size(), 0.0);
  const double n[] = {7, 3, 12, 0};
  for (size_t k = 0; k < 4; ++k) {
    double ls = 0, cnt = 0;
    std::vector<double> pk =
        ref_client(RefMlp::of(params), u.d, rows[k], 0.1, 0.5, &ls, &cnt).flat();
    for (size_t i = 0; i < mean.size(); ++i) mean[i] += n[k] * pk[i] / 22.0;
  }
  EXPECT_LT(max_abs_diff(flat(out["params"]), mean), 1e-12);
}

// ---- f32: compiled vs interpreter, determinism, empty cohorts -------------------

// Runs a round through the interpreter: trace on flat leaves, then drx::run.
std::vector<Array> interpret_round(const drx::optim::RoundFn& fn, const Tree& params,
                                   const Tree& state, const std::vector<Array>& data) {
  std::vector<Tree> pl = drx::tree_leaves(params), sl = drx::tree_leaves(state);
  std::vector<drx::Type> types;
  std::vector<Array> args;
  for (const auto* leaves : {&pl, &sl})
    for (const Tree& l : *leaves) args.push_back(l.array());
  for (const Array& a : data) args.push_back(a);
  for (const Array& a : args) types.emplace_back(a.dtype(), a.shape());
  auto flat_fn = [&](std::vector<Value> v) -> Tree {
    std::vector<Tree> ps(v.begin(), v.begin() + pl.size());
    std::vector<Tree> ss(v.begin() + pl.size(), v.begin() + pl.size() + sl.size());
    size_t at = pl.size() + sl.size();
    return fn(drx::tree_unflatten(params, ps), drx::tree_unflatten(state, ss), v[at], v[at + 1],
              v[at + 2], v[at + 3], v[at + 4]);
  };
  return drx::run(drx::trace(flat_fn, types), args);
}

TEST(OptimRound, F32CompiledMatchesInterpreterAndIsDeterministic) {
  UnevenSetup u;
  Tree params = drx::tree_map(
      [](const Array& a) { return drx::convert_array(a, drx::f32); },
      with_random_biases(drx::nn::mlp_init({6, 5, 3}, 4, drx::nn::Init::glorot_uniform, drx::f64),
                         50));
  RoundSpec spec;
  spec.cohort = 4, spec.steps = 5, spec.batch = 4, spec.client = {0.2, 0.8};
  spec.server.kind = ServerKind::fedadam, spec.server.lr = 0.05;
  Tree state = spec.server.init(params);
  drx::data::CohortBatches b = u.batches(5, 0, 0);
  std::vector<Array> data = {x_array(u.d, drx::f32), y_array(u.d), b.idx, b.mask, b.sizes};
  auto fn = drx::optim::fedavg_round(spec);
  auto round = drx::jit(fn);
  Tree out = round(params, state, data[0], data[1], data[2], data[3], data[4]);
  std::vector<Array> want = interpret_round(fn, params, state, data);
  std::vector<Tree> got = drx::tree_leaves(out);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].array().dtype(), drx::f32);
    EXPECT_TRUE(ArrayNear(got[i].array(), to_doubles(want[i]), 1e-5, 1e-5)) << "leaf " << i;
  }
  // Against the f64 reference too (f32 rounding only).
  RefRound ref = ref_round(spec, RefMlp::of(params), u.d, b.idx, b.mask, to_doubles(b.sizes),
                           std::vector<double>(flat(params).size(), 0.0),
                           std::vector<double>(flat(params).size(), 0.0));
  EXPECT_LT(max_abs_diff(flat(out["params"]), ref.params), 1e-4);
  // Same inputs, same bits.
  Tree again = round(params, state, data[0], data[1], data[2], data[3], data[4]);
  std::vector<Tree> a = drx::tree_leaves(again);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(a[i].array().bitwise_equal(got[i].array()));
}

TEST(OptimRound, EmptyCohortLeavesServerUnchanged) {
  UnevenSetup u;
  Tree params = drx::nn::mlp_init({6, 5, 3}, 4);
  for (ServerKind kind : {ServerKind::fedavg, ServerKind::fedavgm, ServerKind::fedadam}) {
    RoundSpec spec;
    spec.cohort = 3, spec.steps = 2, spec.batch = 4, spec.client = {0.5, 0.9};
    spec.server.kind = kind;
    // A non-zero server state, which a careless step would still apply.
    Tree state = drx::tree_map([](const Array& a) { return drx::full(a.shape(), 0.25, a.dtype()); },
                               spec.server.init(params));
    Array idx = drx::zeros({3, 2, 4}, drx::i32), mask = drx::zeros({3, 2, 4}, drx::f32);
    idx.data<int32_t>()[5] = 7;  // indices in masked slots do not matter
    Tree out = drx::jit(drx::optim::fedavg_round(spec))(
        params, state, x_array(u.d, drx::f32), y_array(u.d), idx, mask, drx::zeros({3}, drx::f32));
    std::vector<Tree> got = drx::tree_leaves(out["params"]), want = drx::tree_leaves(params);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(got[i].array().bitwise_equal(want[i].array()));
    got = drx::tree_leaves(out["state"]), want = drx::tree_leaves(state);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(got[i].array().bitwise_equal(want[i].array()));
    EXPECT_EQ(out["loss"].array().item<float>(), 0.0f);
  }
}

TEST(OptimRound, InputErrors) {
  RoundSpec spec;
  spec.cohort = 2, spec.steps = 3, spec.batch = 4;
  auto round = drx::jit(drx::optim::fedavg_round(spec));
  Tree p = drx::nn::mlp_init({6, 3}, 0);
  Array x = drx::zeros({10, 6}), y = drx::zeros({10}, drx::i32);
  Array idx = drx::zeros({2, 3, 4}, drx::i32), mask = drx::zeros({2, 3, 4}), w = drx::ones({2});
  EXPECT_NO_THROW(round(p, Tree(), x, y, idx, mask, w));
  EXPECT_THROW(round(p, Tree(), x, y, drx::zeros({2, 2, 4}, drx::i32), drx::zeros({2, 2, 4}), w),
               drx::Error);
  EXPECT_THROW(round(p, Tree(), x, y, drx::zeros({2, 3, 4}), mask, w), drx::Error);
  EXPECT_THROW(round(p, Tree(), x, drx::zeros({9}, drx::i32), idx, mask, w), drx::Error);
  EXPECT_THROW(round(p, Tree(), x, y, idx, drx::zeros({2, 3, 5}), w), drx::Error);
  EXPECT_THROW(round(p, Tree(), x, y, idx, mask, drx::ones({3})), drx::Error);
  ServerOptimizer avgm;
  avgm.kind = ServerKind::fedavgm;
  EXPECT_THROW(round(p, avgm.init(p), x, y, idx, mask, w), drx::Error);  // fedavg's state is []
  RoundSpec bad = spec;
  bad.steps = -1;
  EXPECT_THROW(drx::optim::fedavg_round(bad), drx::Error);
  bad = spec;
  bad.client.lr = NAN;
  EXPECT_THROW(drx::optim::fedavg_round(bad), drx::Error);
  EXPECT_THROW(drx::optim::evaluate_fn(0), drx::Error);
}

// ---- evaluation -------------------------------------------------------------------

TEST(OptimEval, MatchesReference) {
  Dataset d = make_dataset(23, 6, 3, 101);
  Tree params = with_random_biases(
      drx::nn::mlp_init({6, 5, 3}, 12, drx::nn::Init::lecun_normal, drx::f64), 7);
  drx::data::CohortBatches b = drx::data::eval_batches(23, 3, 4);
  Tree out = drx::jit(drx::optim::evaluate_fn(3))(params, x_array(d), y_array(d), b.idx, b.mask);
  // Reference: every example once.
  RefMlp m = RefMlp::of(params), g;
  double ce = 0, hits = 0;
  for (int64_t r = 0; r < 23; ++r) {
    ce += ref_loss_grad(m, d, {r}, &g);
    // argmax via the reference forward: recompute logits.
    std::vector<double> h(d.x.begin() + r * 6, d.x.begin() + (r + 1) * 6);
    for (size_t l = 0; l < m.w.size(); ++l) {
      std::vector<double> o(m.dims[l + 1]);
      for (int64_t j = 0; j < m.dims[l + 1]; ++j) {
        o[j] = m.b[l][j];
        for (int64_t i = 0; i < m.dims[l]; ++i) o[j] += h[i] * m.w[l][i * m.dims[l + 1] + j];
      }
      if (l + 1 < m.w.size())
        for (double& v : o) v = std::max(v, 0.0);
      h = o;
    }
    hits += (std::max_element(h.begin(), h.end()) - h.begin()) == d.y[r] ? 1 : 0;
  }
  EXPECT_NEAR(out["loss"].array().item<double>(), ce / 23, 1e-12);
  EXPECT_NEAR(out["accuracy"].array().item<double>(), hits / 23, 1e-15);
  EXPECT_GT(hits, 0);
  EXPECT_LT(hits, 23);
  // No real examples: zeros, not NaN.
  Tree none = drx::jit(drx::optim::evaluate_fn(3))(params, x_array(d), y_array(d), b.idx,
                                                   drx::zeros(b.mask.shape()));
  EXPECT_EQ(none["loss"].array().item<double>(), 0.0);
  EXPECT_EQ(none["accuracy"].array().item<double>(), 0.0);
}

// ---- the Fashion-MNIST-sized round traces and compiles quickly ----------------------

size_t count_eqns(const drx::Program& p, size_t* body) {
  for (const drx::Eqn& e : p.eqns)
    if (e.prim->name() == "map_fn") *body += e.params.get_program("body", "map_fn").eqns.size();
  return p.eqns.size();
}

TEST(OptimRound, MnistSizedRoundTracesAndCompilesQuickly) {
  for (bool fancy : {false, true}) {
    RoundSpec spec;
    spec.cohort = 10, spec.steps = 19, spec.batch = 32;
    spec.client = {0.05, fancy ? 0.9 : 0.0};
    spec.server.kind = fancy ? ServerKind::fedadam : ServerKind::fedavg;
    Tree params = drx::nn::mlp_init({784, 200, 200, 10}, 0);
    Tree state = spec.server.init(params);
    std::vector<Array> data = {drx::zeros({1000, 784}), drx::zeros({1000}, drx::i32),
                               drx::zeros({10, 19, 32}, drx::i32), drx::zeros({10, 19, 32}),
                               drx::zeros({10})};
    std::vector<Tree> pl = drx::tree_leaves(params), sl = drx::tree_leaves(state);
    std::vector<drx::Type> types;
    for (const auto* leaves : {&pl, &sl})
      for (const Tree& l : *leaves) types.emplace_back(l.array().dtype(), l.array().shape());
    for (const Array& a : data) types.emplace_back(a.dtype(), a.shape());
    auto fn = drx::optim::fedavg_round(spec);
    auto flat_fn = [&](std::vector<Value> v) -> Tree {
      std::vector<Tree> ps(v.begin(), v.begin() + pl.size());
      std::vector<Tree> ss(v.begin() + pl.size(), v.begin() + pl.size() + sl.size());
      size_t at = pl.size() + sl.size();
      return fn(drx::tree_unflatten(params, ps), drx::tree_unflatten(state, ss), v[at], v[at + 1],
                v[at + 2], v[at + 3], v[at + 4]);
    };
    auto t0 = std::chrono::steady_clock::now();
    drx::Program traced = drx::trace(flat_fn, types);
    auto t1 = std::chrono::steady_clock::now();
    drx::Program simplified = drx::simplify(traced);
    auto t2 = std::chrono::steady_clock::now();
    drx::Executable exe = drx::compile(simplified);
    auto t3 = std::chrono::steady_clock::now();
    auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    size_t body_traced = 0, body_simplified = 0;
    size_t top_traced = count_eqns(traced, &body_traced);
    size_t top_simplified = count_eqns(simplified, &body_simplified);
    std::cout << "[ fedavg_round 784-200-200-10, cohort 10, 19 steps x 32, "
              << (fancy ? "client momentum, fedadam" : "plain SGD, fedavg") << " ]\n"
              << "  traced: " << top_traced << " top-level + " << body_traced
              << " map_fn body equations; simplified: " << top_simplified << " + "
              << body_simplified << "\n  trace " << secs(t0, t1) << " s, simplify " << secs(t1, t2)
              << " s, compile " << secs(t2, t3) << " s\n";
    EXPECT_TRUE(exe.valid());
    EXPECT_LT(secs(t0, t3), 5.0);  // well under a second unloaded; generous for a busy machine
  }
}

// ---- DP-FedAvg ---------------------------------------------------------------------

namespace dp = drx::privacy;

double l2(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// A DP round of the uneven setup: 4 clients, one of them empty, participation 0/1.
struct DpSetup {
  UnevenSetup u;
  Tree params =
      with_random_biases(drx::nn::mlp_init({6, 5, 3}, 6, drx::nn::Init::he_normal, drx::f64), 4);
  drx::data::CohortBatches b = u.batches(4, 0, 0);
  RoundSpec spec() const {
    RoundSpec s;
    s.cohort = 4, s.steps = 4, s.batch = 4, s.client = {0.3, 0.5};
    return s;
  }
  Tree run(const RoundSpec& s, double clip, const Array& participation, uint64_t key = 1) const {
    Tree state = drx::optim::dp_round_state(Tree(), clip, drx::random::key(key), drx::f64);
    return drx::jit(drx::optim::fedavg_round(s))(params, state, x_array(u.d), y_array(u.d), b.idx,
                                                 b.mask, participation);
  }
  // The clients' deltas from the plain-loop reference.
  std::vector<std::vector<double>> deltas() const {
    auto rows = real_rows(b.idx, b.mask);
    std::vector<double> x = flat(params);
    std::vector<std::vector<double>> out;
    for (size_t k = 0; k < 4; ++k) {
      double ls = 0, cnt = 0;
      std::vector<double> pk =
          ref_client(RefMlp::of(params), u.d, rows[k], 0.3, 0.5, &ls, &cnt).flat();
      for (size_t i = 0; i < x.size(); ++i) pk[i] -= x[i];
      out.push_back(pk);
    }
    return out;
  }
};

TEST(OptimDp, ClippedRoundIsTheFixedDenominatorMeanOfClippedDeltas) {
  DpSetup s;
  std::vector<std::vector<double>> deltas = s.deltas();
  const double clip = 0.5 * l2(deltas[2]);  // client 2 is clipped, the others not all
  RoundSpec spec = s.spec();
  spec.dp = drx::optim::DpSpec{0.0, 3.0};  // z = 0, expected cohort 3
  // Clients 0, 2, 3 take part (3 has no data); client 1 is padding.
  Array part = Array::from_vector<float>({1, 0, 1, 1}, {4});
  Tree out = s.run(spec, clip, part);
  std::vector<double> want = flat(s.params);
  for (size_t k : {0u, 2u, 3u}) {
    const double f = std::min(1.0, clip / std::max(l2(deltas[k]), 1e-300));
    for (size_t i = 0; i < want.size(); ++i) want[i] += f * deltas[k][i] / 3.0;
  }
  EXPECT_LT(max_abs_diff(flat(out["params"]), want), 1e-12);
  // One participant alone with expected cohort 1: the step is its clipped delta, norm <= C.
  spec.dp = drx::optim::DpSpec{0.0, 1.0};
  for (size_t k = 0; k < 3; ++k) {
    std::vector<float> one(4, 0.0f);
    one[k] = 1.0f;
    Tree alone = s.run(spec, clip, Array::from_vector<float>(one, {4}));
    std::vector<double> step = flat(alone["params"]), x = flat(s.params);
    for (size_t i = 0; i < x.size(); ++i) step[i] -= x[i];
    EXPECT_LE(l2(step), clip * (1 + 1e-12)) << k;
    EXPECT_NEAR(l2(step), std::min(clip, l2(deltas[k])), 1e-12) << k;
  }
  EXPECT_GT(l2(deltas[2]), 1.5 * clip);  // the test can tell clipped from unclipped
}

TEST(OptimDp, NoNoiseAndInfiniteClipIsUniformFedAvgBitwise) {
  DpSetup s;
  for (ServerKind kind : {ServerKind::fedavg, ServerKind::fedadam}) {
    RoundSpec plain = s.spec();
    plain.server.kind = kind;
    plain.server.lr = kind == ServerKind::fedavg ? 1.0 : 0.1;
    RoundSpec dp = plain;
    dp.dp = drx::optim::DpSpec{0.0, 4.0};
    Array uniform = Array::from_vector<float>({1, 1, 1, 1}, {4});
    Tree state0 = plain.server.init(s.params);
    Tree want = drx::jit(drx::optim::fedavg_round(plain))(
        s.params, state0, x_array(s.u.d), y_array(s.u.d), s.b.idx, s.b.mask, uniform);
    Tree state = drx::optim::dp_round_state(state0, INFINITY, drx::random::key(3), drx::f64);
    Tree got = drx::jit(drx::optim::fedavg_round(dp))(s.params, state, x_array(s.u.d),
                                                      y_array(s.u.d), s.b.idx, s.b.mask, uniform);
    std::vector<Tree> g = drx::tree_leaves(got["params"]), w = drx::tree_leaves(want["params"]);
    ASSERT_EQ(g.size(), w.size());
    for (size_t i = 0; i < g.size(); ++i)
      EXPECT_TRUE(g[i].array().bitwise_equal(w[i].array())) << server_kind_name(kind) << i;
    std::vector<Tree> gs = drx::tree_leaves(got["state"]["server"]),
                      ws = drx::tree_leaves(want["state"]);
    for (size_t i = 0; i < gs.size(); ++i) EXPECT_TRUE(gs[i].array().bitwise_equal(ws[i].array()));
    EXPECT_TRUE(got["loss"].array().bitwise_equal(want["loss"].array()));
  }
}

TEST(OptimDp, NoiseHasTheConfiguredStandardDeviation) {
  // Zero sums: the noisy mean is pure noise of std z C / m, drawn per leaf.
  const double z = 1.3, clip = 0.7, m = 2.0;
  auto f =
      drx::jit([&](Tree sums, Value key, Value c) { return dp::noisy_mean(sums, key, z, c, m); });
  Tree zeros =
      Tree::dict({{"a", drx::zeros({400000}, drx::f64)}, {"b", drx::zeros({200000}, drx::f32)}});
  Tree noise = f(zeros, drx::random::key(17), Array::scalar(clip));
  const double sd = z * clip / m;
  for (const char* leaf : {"a", "b"}) {
    std::vector<double> v = to_doubles(noise[leaf].array());
    double mean = 0, var = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    for (double x : v) var += (x - mean) * (x - mean);
    var /= static_cast<double>(v.size() - 1);
    const double n = static_cast<double>(v.size());
    EXPECT_NEAR(mean, 0.0, 5 * sd / std::sqrt(n)) << leaf;
    EXPECT_NEAR(std::sqrt(var), sd, 5 * sd / std::sqrt(2 * n)) << leaf;
  }
  // Leaves get independent streams; the same key gives the same noise.
  std::vector<double> a = to_doubles(noise["a"].array()), b = to_doubles(noise["b"].array());
  double c = 0;
  for (size_t i = 0; i < b.size(); ++i) c += a[i] * b[i];
  EXPECT_LT(std::abs(c / static_cast<double>(b.size())) / (sd * sd), 5 / std::sqrt(2e5));
  EXPECT_TRUE(f(zeros, drx::random::key(17), Array::scalar(clip))["a"].array().bitwise_equal(
      noise["a"].array()));
  // In the round: z = 2, clip 1e-9 (updates all clipped to almost nothing), one participant,
  // expected cohort 1: the step is N(0, (2e-9)^2) per parameter.
  DpSetup s;
  RoundSpec spec = s.spec();
  spec.dp = drx::optim::DpSpec{2.0, 1.0};
  Tree out = s.run(spec, 1e-9, Array::from_vector<float>({0, 0, 1, 0}, {4}), 5);
  std::vector<double> step = flat(out["params"]), x = flat(s.params);
  double ss = 0;
  for (size_t i = 0; i < x.size(); ++i) ss += (step[i] - x[i]) * (step[i] - x[i]);
  const double rms = std::sqrt(ss / static_cast<double>(x.size()));
  EXPECT_NEAR(rms, 2e-9, 2e-9 * 5 / std::sqrt(2.0 * static_cast<double>(x.size())));
  // The key moves on: the next round's noise differs.
  EXPECT_FALSE(out["state"]["dp"]["key"].array().bitwise_equal(drx::random::key(5)));
}

TEST(OptimDp, AdaptiveClippingFollowsTheGeometricRule) {
  auto step = drx::jit([](Value c, Value count, Value key) {
    return dp::adapted_clip(c, count, key, {0.5, 0.2, 0.0}, 4.0);
  });
  // No count noise: C exp(-eta (b - gamma)) exactly, b = 3 / 4.
  EXPECT_NEAR(step(Array::scalar(2.0), Array::scalar(3.0), drx::random::key(0)).item<double>(),
              2.0 * std::exp(-0.2 * (0.75 - 0.5)), 1e-15);
  // With count noise: E[b] = unclipped / m, and log C' - log C = -eta (b - gamma) has std
  // eta sigma_b / m over many keys.
  auto noisy = drx::jit(drx::vmap([](Value key) {
    return dp::adapted_clip(drx::fill({}, 1.0, drx::f64), drx::fill({}, 2.0, drx::f64), key,
                            {0.5, 0.2, 0.8}, 4.0);
  }));
  Array keys(drx::u32, {20000, 2});
  for (int64_t i = 0; i < 20000; ++i) {
    std::vector<uint32_t> k = drx::random::fold_in(drx::random::key(9), i).to_vector<uint32_t>();
    keys.data<uint32_t>()[2 * i] = k[0], keys.data<uint32_t>()[2 * i + 1] = k[1];
  }
  std::vector<double> logs;
  for (double c : to_doubles(noisy(keys))) logs.push_back(std::log(c));
  double mean = 0, var = 0;
  for (double l : logs) mean += l;
  mean /= 20000;
  for (double l : logs) var += (l - mean) * (l - mean);
  var /= 19999;
  const double sd = 0.2 * 0.8 / 4.0;
  EXPECT_NEAR(mean, 0.0, 5 * sd / std::sqrt(20000.0));
  EXPECT_NEAR(std::sqrt(var), sd, 5 * sd / std::sqrt(40000.0));
  // The round: every participant's norm under C -> b = participants / m -> C shrinks.
  DpSetup s;
  RoundSpec spec = s.spec();
  spec.dp = drx::optim::DpSpec{0.0, 3.0, 0.5, 0.2, 0.0};
  Tree out = s.run(spec, 1e6, Array::from_vector<float>({1, 0, 1, 1}, {4}));
  EXPECT_NEAR(out["state"]["dp"]["clip"].array().item<double>(), 1e6 * std::exp(-0.2 * 0.5), 1e-6);
  // The update's share of the noise: (z^-2 - (2 sigma_b)^-2)^(-1/2).
  EXPECT_NEAR(dp::update_noise_multiplier(1.0, 5.0), 1.0 / std::sqrt(1.0 - 0.01), 1e-15);
}

TEST(OptimDp, ClipAndErrors) {
  auto clip_fn = drx::jit([](Tree t, Value c) {
    dp::Clipped r = dp::clip_by_l2_norm(t, c);
    return Tree::list({r.update, Tree(r.norm)});
  });
  Tree t = Tree::dict(
      {{"a", drx::testing::f64_array({3, 0}, {2})}, {"b", drx::testing::f64_array({4}, {1})}});
  Tree r = clip_fn(t, Array::scalar(2.5));
  EXPECT_TRUE(ArrayNear(r[0]["a"].array(), {1.5, 0}, 1e-15));
  EXPECT_TRUE(ArrayNear(r[0]["b"].array(), {2.0}, 1e-15));
  EXPECT_DOUBLE_EQ(r[1].array().item<double>(), 5.0);
  Tree same = clip_fn(t, Array::scalar(INFINITY));
  EXPECT_TRUE(same[0]["a"].array().bitwise_equal(t["a"].array()));
  Tree zero = clip_fn(Tree::dict({{"a", drx::zeros({3}, drx::f64)}}), Array::scalar(1.0));
  EXPECT_TRUE(ArrayNear(zero[0]["a"].array(), {0, 0, 0}, 0));
  drx::testing::expect_error([] { dp::update_noise_multiplier(1.0, 0.4); },
                             {"update_noise_multiplier", "2 sigma_b > z"});
  drx::testing::expect_error(
      [] { drx::optim::dp_round_state(Tree(), -1, drx::random::key(0), drx::f64); },
      {"dp_round_state", "clip"});
  RoundSpec spec;
  spec.dp = drx::optim::DpSpec{-1.0, 3.0};
  drx::testing::expect_error([&] { drx::optim::fedavg_round(spec); }, {"noise multiplier"});
  spec.dp = drx::optim::DpSpec{1.0, 3.0, 0.5, 0.2, 0.1};  // 2 sigma_b < z
  drx::testing::expect_error([&] { drx::optim::fedavg_round(spec); }, {"2 sigma_b > z"});
}

}  // namespace
