// The generic federated round (drx/optim/federated_round.h) against a float64 reference of
// FedAvg written here, loop by loop, and the MLP and transformer rounds against it bitwise.
#include "drx/optim/federated_round.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "drx/drx.h"
#include "drx/nn/nn.h"
#include "drx/optim/lm.h"
#include "drx/optim/optim.h"
#include "drx/random/random.h"
#include "drx/trace/program_of.h"
#include "test_util.h"

namespace {
using namespace drx;
using drx::testing::BitwiseEqual;
using drx::testing::expect_error;

constexpr int64_t K = 3, S = 2, B = 2, D = 2;  // clients, local steps, batch, features

// Linear regression y ~ x.w + b: one step's batch is {"m": [B], "x": [B, D], "y": [B]}, its loss
// the masked mean squared error.
Value lr_loss(const Tree& p, const Tree& batch) {
  Value pred = matmul(batch["x"].value(), p["w"].value()) + p["b"].value();
  Value r = pred - batch["y"].value();
  const Value m = batch["m"].value();
  return sum(m * r * r) / maximum(sum(m), 1.0);
}
Value lr_examples(const Tree& batch) { return sum(batch["m"].value()); }

struct Data {
  std::vector<double> x, y, m, w;  // x [K, S, B, D], y and m [K, S, B], w [K]
  std::vector<double> w0 = {0.3, -0.2}, client_state;
  double b0 = 0.1;
  Data() {
    for (int64_t i = 0; i < K * S * B * D; ++i) x.push_back(std::sin(1.3 * i + 0.2));
    for (int64_t i = 0; i < K * S * B; ++i) {
      y.push_back(std::cos(0.7 * i));
      m.push_back(1.0);
    }
    w = {1.0, 2.0, 0.5};
  }
  Tree params() const {
    return Tree::dict({{"b", Tree(Array::scalar<double>(b0))}, {"w", Tree(f64(w0, {D}))}});
  }
  static Array f64(const std::vector<double>& v, Shape s) { return Array::from_vector(v, s); }
  Tree clients() const {
    return Tree::dict({{"data", Tree::dict({{"m", Tree(f64(m, {K, S, B}))},
                                            {"x", Tree(f64(x, {K, S, B, D}))},
                                            {"y", Tree(f64(y, {K, S, B}))}})},
                       {"weights", Tree(f64(w, {K}))}});
  }
};

// The float64 reference: client SGD with momentum (steps of no examples skipped when
// `skip`), the weighted mean of the deltas, server SGD with momentum on -delta.
struct Ref {
  std::vector<double> params;               // w..., b
  std::vector<double> server_trace;         // the server's momentum of -delta
  double loss = 0;                          // weighted mean of the clients' losses
  std::vector<std::vector<double>> client;  // per client: final buffer (w..., b)
  std::vector<double> client_loss, delta_norm2;
  std::vector<std::vector<double>> delta;  // per client: p - params
};
Ref reference(const Data& d, double client_lr, double client_mom, double server_lr,
              double server_mom, const std::vector<double>& server_trace, bool skip,
              const std::vector<std::vector<double>>& start_buf = {}) {
  const std::vector<double> p0 = {d.w0[0], d.w0[1], d.b0};
  std::vector<double> sum_delta(3, 0.0);
  double total = 0, loss_sum = 0;
  Ref r;
  for (int64_t k = 0; k < K; ++k) {
    std::vector<double> p = p0, buf = start_buf.empty() ? std::vector<double>(3, 0.0)
                                                        : start_buf[static_cast<size_t>(k)];
    double lsum = 0, count = 0;
    for (int64_t s = 0; s < S; ++s) {
      double n = 0, l = 0;
      std::vector<double> g(3, 0.0);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t e = (k * S + s) * B + b;
        const double mk = d.m[e];
        n += mk;
        const double* xe = &d.x[e * D];
        const double res = xe[0] * p[0] + xe[1] * p[1] + p[2] - d.y[e];
        l += mk * res * res;
        for (int j = 0; j < 2; ++j) g[j] += 2 * mk * res * xe[j];
        g[2] += 2 * mk * res;
      }
      count += n;
      if (skip && n == 0) continue;
      const double div = std::max(n, 1.0);
      lsum += l / div * div;
      for (int j = 0; j < 3; ++j) {
        buf[j] = client_mom * buf[j] + g[j] / div;
        p[j] -= client_lr * buf[j];
      }
    }
    const double wk = d.w[k];
    const double lk = lsum / std::max(count, 1.0);
    double n2 = 0;
    for (int j = 0; j < 3; ++j) {
      sum_delta[j] += wk * (p[j] - p0[j]);
      n2 += (p[j] - p0[j]) * (p[j] - p0[j]);
    }
    loss_sum += wk * lk;
    total += wk;
    r.client.push_back(buf);
    r.delta.push_back({p[0] - p0[0], p[1] - p0[1], p[2] - p0[2]});
    r.client_loss.push_back(lk);
    r.delta_norm2.push_back(n2);
  }
  r.params = p0;
  r.server_trace = server_trace;
  if (total > 0) {
    for (int j = 0; j < 3; ++j) {
      const double g = -sum_delta[j] / total;
      r.server_trace[j] = server_mom * r.server_trace[j] + g;
      r.params[j] = p0[j] - server_lr * r.server_trace[j];
    }
  }
  r.loss = total > 0 ? loss_sum / total : 0;
  return r;
}

// (w..., b) of a {"b", "w"} tree of Arrays.
std::vector<double> flat(const Tree& t) {
  std::vector<double> v = drx::testing::to_doubles(t["w"].array());
  v.push_back(t["b"].array().element_as_double(0));
  return v;
}
void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << what << "[" << i << "]";
}

optim::FederatedRoundSpec weighted_spec() {
  optim::FederatedRoundSpec spec;
  spec.step_weight = lr_examples;
  return spec;
}

TEST(FederatedRound, MatchesAFloat64ReferenceInterpretedAndCompiled) {
  Data d;
  d.m[(0 * S + 1) * B + 1] = 0;  // a partial batch: the masked mean divides by 1
  const double mom = 0.9;
  auto round =
      optim::fedavg_round(lr_loss, optim::sgd(0.1, 0.5), optim::sgd(0.8, mom), K, weighted_spec());
  Tree params = d.params();
  Tree state = optim::sgd(0.8, mom).init(params);
  // Run two rounds so the server momentum carries over.
  Ref r1 = reference(d, 0.1, 0.5, 0.8, mom, {0, 0, 0}, true);
  Tree out = jit(round)(params, state, d.clients(), Tree());
  expect_near(flat(out["params"]), r1.params, "compiled params");
  EXPECT_NEAR(out["loss"].array().element_as_double(0), r1.loss, 1e-12);
  Data d2 = d;
  d2.w0 = {r1.params[0], r1.params[1]};
  d2.b0 = r1.params[2];
  Ref r2 = reference(d2, 0.1, 0.5, 0.8, mom, r1.server_trace, true);
  Tree out2 = jit(round)(out["params"], out["state"], d.clients(), Tree());
  expect_near(flat(out2["params"]), r2.params, "second round params");

  // The reference interpreter runs the traced program to the same bits as the compiled one.
  const Program prog = trace(round, params, state, d.clients(), Tree());
  std::vector<Array> args;
  for (const Tree& t : {params, state, d.clients()})
    for (const Tree& leaf : tree_leaves(t)) args.push_back(leaf.array());
  std::vector<Array> interpreted = interpret(prog, args);
  std::vector<Array> compiled;
  for (const Tree& leaf : tree_leaves(out)) compiled.push_back(leaf.array());
  EXPECT_TRUE(BitwiseEqual(interpreted, compiled));
}

TEST(FederatedRound, ServerOptimizerAndTransformationAgree) {
  // fedavgm (its state keeps the momentum of delta) against sgd(lr, momentum) of -delta.
  Data d;
  optim::ServerOptimizer s;
  s.kind = optim::ServerKind::fedavgm;
  s.lr = 0.7;
  s.momentum = 0.6;
  Tree params = d.params();
  Tree out = jit(optim::fedavg_round(lr_loss, optim::sgd(0.1), s, K))(params, s.init(params),
                                                                      d.clients(), Tree());
  Ref r = reference(d, 0.1, 0, 0.7, 0.6, {0, 0, 0}, false);
  expect_near(flat(out["params"]), r.params, "fedavgm params");
  // The fedavgm state is the momentum of delta, the negative of the trace of -delta.
  std::vector<double> v = flat(out["state"]["momentum"]);
  for (double& x : v) x = -x;
  expect_near(v, r.server_trace, "fedavgm momentum");
}

TEST(FederatedRound, MaskedStepsAreSkippedExactlyMomentumIncluded) {
  Data d;
  for (int64_t b = 0; b < B; ++b) d.m[(1 * S + 1) * B + b] = 0;  // client 1's last step: empty
  auto round =
      optim::fedavg_round(lr_loss, optim::sgd(0.2, 0.9), optim::sgd(1.0), K, weighted_spec());
  Tree params = d.params();
  Tree out = jit(round)(params, Tree(), d.clients(), Tree());
  Ref skipped = reference(d, 0.2, 0.9, 1.0, 0, {0, 0, 0}, true);
  Ref moved = reference(d, 0.2, 0.9, 1.0, 0, {0, 0, 0}, false);
  expect_near(flat(out["params"]), skipped.params, "skipped");
  // Without the skip, momentum would have moved client 1 in its empty step.
  EXPECT_GT(std::abs(skipped.params[0] - moved.params[0]), 1e-6);

  // full_steps = 1 promises the first step is full everywhere: the same results, bitwise.
  optim::FederatedRoundSpec full = weighted_spec();
  full.full_steps = 1;
  Tree same = jit(optim::fedavg_round(lr_loss, optim::sgd(0.2, 0.9), optim::sgd(1.0), K, full))(
      params, Tree(), d.clients(), Tree());
  EXPECT_TRUE(BitwiseEqual({same["params"]["w"].array(), same["params"]["b"].array()},
                           {out["params"]["w"].array(), out["params"]["b"].array()}));
}

TEST(FederatedRound, ZeroTotalWeightChangesNothing) {
  Data d;
  d.w = {0, 0, 0};
  optim::ServerOptimizer s;
  s.kind = optim::ServerKind::fedadam;
  Tree params = d.params();
  Tree state = s.init(params);
  state = Tree::dict(
      {{"m", tree_map([](const Array& a) { return full(a.shape(), 0.25, a.dtype()); }, state["m"])},
       {"v",
        tree_map([](const Array& a) { return full(a.shape(), 0.5, a.dtype()); }, state["v"])}});
  Tree out =
      jit(optim::fedavg_round(lr_loss, optim::sgd(0.1), s, K))(params, state, d.clients(), Tree());
  EXPECT_TRUE(BitwiseEqual({out["params"]["w"].array(), out["params"]["b"].array(),
                            out["state"]["m"]["w"].array(), out["state"]["v"]["b"].array()},
                           {params["w"].array(), params["b"].array(), state["m"]["w"].array(),
                            state["v"]["b"].array()}));
  EXPECT_EQ(out["loss"].array().element_as_double(0), 0.0);
}

TEST(FederatedRound, ClientStateIsCarriedAndReturned) {
  Data d;
  optim::FederatedRoundSpec spec = weighted_spec();
  spec.client_state = true;
  const optim::GradientTransformation client = optim::sgd(0.1, 0.5);
  // Each client starts from its own momentum buffer.
  std::vector<std::vector<double>> start = {{0.1, 0.2, 0.3}, {-0.1, 0.0, 0.05}, {0.4, -0.3, 0.2}};
  std::vector<double> bw, bb;
  for (const auto& s : start) bw.insert(bw.end(), {s[0], s[1]}), bb.push_back(s[2]);
  Tree states =
      Tree::list({Tree::dict({{"trace", Tree::dict({{"b", Tree(Data::f64(bb, {K}))},
                                                    {"w", Tree(Data::f64(bw, {K, D}))}})}}),
                  Tree()});
  Tree clients = d.clients();
  clients =
      Tree::dict({{"data", clients["data"]}, {"state", states}, {"weights", clients["weights"]}});
  Tree out = jit(optim::fedavg_round(lr_loss, client, optim::sgd(1.0), K, spec))(d.params(), Tree(),
                                                                                 clients, Tree());
  Ref r = reference(d, 0.1, 0.5, 1.0, 0, {0, 0, 0}, true, start);
  expect_near(flat(out["params"]), r.params, "params");
  const Tree& got = out["client_state"][0]["trace"];
  for (int64_t k = 0; k < K; ++k) {
    std::vector<double> v = {got["w"].array().element_as_double(k * D),
                             got["w"].array().element_as_double(k * D + 1),
                             got["b"].array().element_as_double(k)};
    expect_near(v, r.client[static_cast<size_t>(k)], "client state " + std::to_string(k));
  }
}

TEST(FederatedRound, PerClientMetrics) {
  Data d;
  optim::FederatedRoundSpec spec = weighted_spec();
  spec.metrics = [](const Tree& p, const Tree& start, const Tree&, const Value& loss) {
    Tree diff = tree_sub(p, start);
    Value n2 = sum(square(diff["w"].value())) + square(diff["b"].value());
    return Tree::dict({{"delta_norm2", Tree(n2)}, {"loss", Tree(loss)}});
  };
  Tree out = jit(optim::fedavg_round(lr_loss, optim::sgd(0.1), optim::sgd(1.0), K, spec))(
      d.params(), Tree(), d.clients(), Tree());
  Ref r = reference(d, 0.1, 0, 1.0, 0, {0, 0, 0}, true);
  expect_near(drx::testing::to_doubles(out["metrics"]["loss"].array()), r.client_loss, "losses");
  expect_near(drx::testing::to_doubles(out["metrics"]["delta_norm2"].array()), r.delta_norm2,
              "norms");
}

TEST(FederatedRound, PrepareBuildsBatchesFromSharedInputs) {
  // The clients gather their batches from a shared table by index, as the MLP round does.
  Data d;
  const int64_t n = K * S * B;
  std::vector<double> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<double>(i));
  optim::FederatedRoundSpec spec = weighted_spec();
  spec.prepare = [](const Tree& shared, const Tree& data) {
    Value idx = astype(data.value(), DType::i32);
    auto rows = [&](const Value& table) { return take(table, idx, 0); };
    return Tree::dict({{"m", Tree(rows(shared["m"].value()))},
                       {"x", Tree(rows(shared["x"].value()))},
                       {"y", Tree(rows(shared["y"].value()))}});
  };
  Tree shared = Tree::dict({{"m", Tree(Data::f64(d.m, {n}))},
                            {"x", Tree(Data::f64(d.x, {n, D}))},
                            {"y", Tree(Data::f64(d.y, {n}))}});
  Tree clients = Tree::dict(
      {{"data", Tree(Data::f64(ids, {K, S, B}))}, {"weights", Tree(Data::f64(d.w, {K}))}});
  Tree out = jit(optim::fedavg_round(lr_loss, optim::sgd(0.1), optim::sgd(1.0), K, spec))(
      d.params(), Tree(), clients, shared);
  expect_near(flat(out["params"]), reference(d, 0.1, 0, 1.0, 0, {0, 0, 0}, true).params, "params");
}

// DP-FedAvg through the generic round: without noise, the server applies the mean over the
// expected cohort of the clients' updates clipped to L2 norm `clip`, and the key is split.
TEST(FederatedRound, DpClipsEachUpdateAndDividesByTheExpectedCohort) {
  Data d;
  d.w = {1, 1, 0};  // client 2 does not participate
  optim::FederatedRoundSpec spec = weighted_spec();
  spec.dp = optim::DpSpec{};
  spec.dp->expected_cohort = 4;
  const double clip = 0.05;
  Tree params = d.params();
  Tree state = optim::dp_round_state(Tree(), clip, random::key(7), DType::f64, *spec.dp);
  Tree out = jit(optim::fedavg_round(lr_loss, optim::sgd(0.2), optim::sgd(1.0), K, spec))(
      params, state, d.clients(), Tree());
  Ref r = reference(d, 0.2, 0, 1.0, 0, {0, 0, 0}, true);
  std::vector<double> want = {d.w0[0], d.w0[1], d.b0};
  for (int64_t k = 0; k < 2; ++k) {
    const std::vector<double>& dk = r.delta[static_cast<size_t>(k)];
    const double norm = std::sqrt(dk[0] * dk[0] + dk[1] * dk[1] + dk[2] * dk[2]);
    ASSERT_GT(norm, clip) << "the test needs updates that get clipped";
    for (int j = 0; j < 3; ++j) want[j] += dk[j] * clip / norm / 4;
  }
  expect_near(flat(out["params"]), want, "DP params");
  EXPECT_EQ(out["state"]["dp"]["clip"].array().element_as_double(0), clip);
  EXPECT_FALSE(BitwiseEqual({out["state"]["dp"]["key"].array()}, {random::key(7)}));
}

// The MLP round of optim.h is the generic round with the MLP's loss, SGD and a gather.
TEST(FederatedRound, MlpRoundIsTheGenericRoundBitwise) {
  const DType f32 = DType::f32;
  Tree params = nn::mlp_init({6, 5, 3}, 2, nn::Init::glorot_uniform, f32);
  const int64_t cohort = 3, steps = 3, batch = 4, examples = 30;
  Array x = drx::testing::random_array({examples, 6}, f32, 5);
  std::vector<int32_t> labels, ids;
  for (int64_t i = 0; i < examples; ++i) labels.push_back(static_cast<int32_t>(i % 3));
  for (int64_t i = 0; i < cohort * steps * batch; ++i)
    ids.push_back(static_cast<int32_t>((i * 7 + 1) % examples));
  std::vector<float> m(static_cast<size_t>(cohort * steps * batch), 1.0f);
  for (int64_t b = 0; b < batch; ++b) m[static_cast<size_t>((2 * steps + 2) * batch + b)] = 0;
  Array y = Array::from_vector<int32_t>(labels, {examples});
  Array idx = Array::from_vector<int32_t>(ids, {cohort, steps, batch});
  Array mask = Array::from_vector<float>(m, {cohort, steps, batch});
  Array w = Array::from_vector<float>({4, 4, 3}, {cohort});
  optim::RoundSpec spec;
  spec.cohort = cohort, spec.steps = steps, spec.batch = batch;
  spec.client.momentum = 0.5;
  spec.server.kind = optim::ServerKind::fedavgm;
  const Tree state = spec.server.init(params);
  Tree old = jit(optim::fedavg_round(spec))(params, state, x, y, idx, mask, w);

  optim::FederatedRoundSpec g;
  g.step_weight = [](const Tree& b) { return sum(b[2].value()); };
  g.prepare = [](const Tree& xy, const Tree& data) {
    Value flat_idx = reshape(data[0].value(), {steps * batch});
    Value xs = take(xy[0].value(), flat_idx, 0), ys = take(xy[1].value(), flat_idx, 0);
    return Tree::list({Tree(reshape(xs, {steps, batch, 6})), Tree(reshape(ys, {steps, batch})),
                       Tree(data[1].value())});
  };
  auto loss = [](const Tree& p, const Tree& b) {
    return nn::masked_mean_loss(nn::mlp_apply(p, b[0].value()), b[1].value(), b[2].value());
  };
  Tree fresh = jit(optim::fedavg_round(loss, spec.client.transformation(), spec.server, cohort, g))(
      params, state,
      Tree::dict({{"data", Tree::list({Tree(idx), Tree(mask)})}, {"weights", Tree(w)}}),
      Tree::list({Tree(x), Tree(y)}));
  std::vector<Array> a, b;
  for (const Tree& l : tree_leaves(old)) a.push_back(l.array());
  for (const Tree& l : tree_leaves(fresh)) b.push_back(l.array());
  EXPECT_TRUE(BitwiseEqual(b, a));
}

// The transformer round of lm.h is the generic round with the transformer's loss, bitwise.
TEST(FederatedRound, TransformerRoundIsTheGenericRoundBitwise) {
  optim::LmRoundSpec s;
  s.model.vocab = 16, s.model.context = 4, s.model.layers = 1, s.model.width = 8, s.model.heads = 2;
  s.cohort = 2, s.steps = 2, s.batch = 2;
  s.server.kind = optim::ServerKind::fedadam;
  s.server.lr = 0.01;
  Tree params = nn::transformer_init(s.model, 1);
  Array windows = drx::testing::random_array({2, 2, 2, 5}, DType::i32, 3, 0, 16);
  Array w = Array::from_vector<float>({3, 1}, {2});
  const Tree state = s.server.init(params);
  Tree old = jit(optim::lm_fedavg_round(s))(params, state, windows, w);
  const nn::TransformerConfig model = s.model;
  auto loss = [model](const Tree& p, const Tree& b) {
    return nn::transformer_loss(model, p, b.value());
  };
  Tree fresh = jit(optim::fedavg_round(loss, s.client.transformation(), s.server, s.cohort))(
      params, state, Tree::dict({{"data", Tree(windows)}, {"weights", Tree(w)}}), Tree());
  std::vector<Array> a, b;
  for (const Tree& l : tree_leaves(old)) a.push_back(l.array());
  for (const Tree& l : tree_leaves(fresh)) b.push_back(l.array());
  EXPECT_TRUE(BitwiseEqual(b, a));
}

TEST(FederatedRound, BadInputsNameTheRoundAndTheExpectedTypes) {
  Data d;
  auto round = jit(optim::fedavg_round(lr_loss, optim::sgd(0.1), optim::sgd(1.0), K));
  Tree params = d.params();
  Tree c = d.clients();
  // Weights of the wrong length.
  expect_error(
      [&] {
        round(params, Tree(),
              Tree::dict({{"data", c["data"]}, {"weights", Tree(Data::f64({1, 2}, {2}))}}), Tree());
      },
      {"fedavg_round", "leading axis 3"});
  // Integer weights.
  expect_error(
      [&] {
        round(params, Tree(),
              Tree::dict({{"data", c["data"]},
                          {"weights", Tree(Array::from_vector<int32_t>({1, 1, 1}, {K}))}}),
              Tree());
      },
      {"fedavg_round: weights must be floating [3] placed at clients", "i32[3]@clients"});
  // No weights.
  expect_error(
      [&] {
        round(params, Tree(), Tree::dict({{"data", c["data"]}}), Tree());
      },
      {"fedavg_round: clients must be the dict {\"data\", \"weights\"}"});
  // A client state given to a round without spec.client_state.
  expect_error(
      [&] {
        round(params, Tree(),
              Tree::dict({{"data", c["data"]}, {"state", c["weights"]}, {"weights", c["weights"]}}),
              Tree());
      },
      {"fedavg_round: clients must be the dict"});
  // Batches whose leaves disagree on the steps.
  expect_error(
      [&] {
        Tree data =
            Tree::dict({{"m", Tree(Data::f64(std::vector<double>(K * 3 * B, 1), {K, 3, B}))},
                        {"x", c["data"]["x"]},
                        {"y", c["data"]["y"]}});
        round(params, Tree(), Tree::dict({{"data", data}, {"weights", c["weights"]}}), Tree());
      },
      {"local_steps", "leading [steps] axis"});
  // A loss that is not a scalar.
  auto vector_loss = [](const Tree& p, const Tree&) { return p["w"].value(); };
  expect_error(
      [&] {
        jit(optim::fedavg_round(vector_loss, optim::sgd(0.1), optim::sgd(1.0), K))(params, Tree(),
                                                                                   c, Tree());
      },
      {"local_steps: the loss function must return a floating scalar []", "f64[2]"});
  // Integer params.
  expect_error(
      [&] {
        round(Tree::dict({{"w", Tree(Array::from_vector<int32_t>({1, 2}, {2}))}}), Tree(), c,
              Tree());
      },
      {"fedavg_round"});
  // Configuration errors, when the round is built.
  expect_error([&] { optim::fedavg_round(lr_loss, optim::sgd(0.1), optim::sgd(1.0), 0); },
               {"fedavg_round: cohort must be >= 1, got 0"});
  optim::FederatedRoundSpec full;
  full.full_steps = 1;
  expect_error([&] { optim::fedavg_round(lr_loss, optim::sgd(0.1), optim::sgd(1.0), K, full); },
               {"full_steps 1 without a step_weight"});
  optim::FederatedRoundSpec dp;
  dp.dp = optim::DpSpec{};
  dp.dp->noise_multiplier = -1;
  expect_error([&] { optim::fedavg_round(lr_loss, optim::sgd(0.1), optim::sgd(1.0), K, dp); },
               {"fedavg_round: DP noise multiplier must be finite and >= 0"});
}

// The round is differentiable: the gradient of a function of the new params with respect to
// the initial params (a hypergradient through the clients' steps, the skip of an empty step
// and the server's momentum) against central differences.
TEST(FederatedRound, GradientThroughTheRoundMatchesCentralDifferences) {
  Data d;
  for (int64_t b = 0; b < B; ++b) d.m[(2 * S + 1) * B + b] = 0;
  auto round =
      optim::fedavg_round(lr_loss, optim::sgd(0.3, 0.5), optim::sgd(0.9), K, weighted_spec());
  const Tree clients = d.clients();
  auto objective = [&](Tree params) -> Value {
    Tree out = round(params, Tree(), clients, Tree());
    Value w = out["params"]["w"].value();
    return sum(w * w) + out["params"]["b"].value() * 3.0 + out["loss"].value();
  };
  Tree g = jit(grad(objective))(d.params());
  std::vector<double> got = flat(g);
  auto f = jit(objective);
  const double eps = 1e-6;
  std::vector<double> base = {d.w0[0], d.w0[1], d.b0};
  for (int j = 0; j < 3; ++j) {
    auto at = [&](double delta) {
      std::vector<double> p = base;
      p[j] += delta;
      Tree t = Tree::dict(
          {{"b", Tree(Array::scalar<double>(p[2]))}, {"w", Tree(Data::f64({p[0], p[1]}, {D}))}});
      return Tree(f(t)).array().element_as_double(0);
    };
    const double fd = (at(eps) - at(-eps)) / (2 * eps);
    EXPECT_NEAR(got[static_cast<size_t>(j)], fd, 1e-6 * (1 + std::abs(fd))) << "param " << j;
  }
}

}  // namespace
