// The MapReduce building blocks: values, federated AD, batching, errors.
#include <cstring>

#include "transform_checks.h"

namespace drx::testing {
namespace {

::testing::AssertionResult HasText(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' not found in: " << text;
}

constexpr int64_t kClients = 4, kExamples = 6, kDim = 3;

Value local_loss(Value w, Value x, Value y) { return mean(square(matmul(x, w) - y)); }

// K local SGD steps from w on one client's data.
Value local_train(Value w, Value x, Value y, Value client_lr, int steps) {
  for (int k = 0; k < steps; ++k) w = w - client_lr * grad(local_loss)(w, x, y);
  return w;
}

// One FedAvg round: the server moves against the mean client delta, scaled by eta.
Value fedavg_round(Value w, Value eta, Value xs, Value ys, int steps = 3) {
  Value wb = broadcast(w);
  Value lr = broadcast(fill({}, 0.1, w.dtype()));
  Value delta = map_fn([steps](Value wi, Value xi, Value yi,
                               Value lri) { return wi - local_train(wi, xi, yi, lri, steps); },
                       wb, xs, ys, lr);
  return w - eta * reduce_mean(delta);
}

Value loss_after_round(Value w, Value eta, Value xs, Value ys) {
  Value w1 = fedavg_round(w, eta, xs, ys);
  return reduce_mean(map_fn(local_loss, broadcast(w1), xs, ys));
}

const std::vector<std::string> kServerServerData = {"", "", "clients", "clients"};

auto round_program() {
  return program(
      {{"clients", kClients}},
      [](Value w, Value eta, Value xs, Value ys) { return fedavg_round(w, eta, xs, ys); },
      kServerServerData);
}
auto hyper_program() {
  return program({{"clients", kClients}}, loss_after_round, kServerServerData);
}

struct Data {
  Array w = random_array({kDim}, f64, 1);
  Array xs = random_array({kClients, kExamples, kDim}, f64, 2);
  Array ys = random_array({kClients, kExamples}, f64, 3);
};

TEST(MapReduce, BlockValuesAgainstHandComputedResults) {
  auto f = program({{"clients", 3}},
                   [](Value s, Value xs) -> std::vector<Value> {
                     Value b = broadcast(s);  // [3, 2]
                     Value m = map_fn([](Value bi, Value xi) { return bi * xi + 1.0; }, b, xs);
                     return {b, m, reduce_sum(m), reduce_mean(m), reduce_max(m), reduce_min(m)};
                   },
                   {"", "clients"});
  Array s = f64_array({1, 2}, {2});
  Array xs = f64_array({1, -1, 0, 3, 2, 0.5}, {3, 2});
  std::vector<Array> r = jit(f)(s, xs);
  // m = [[2, -1], [1, 7], [3, 2]]
  EXPECT_TRUE(ArrayNear(r[0], {1, 2, 1, 2, 1, 2}));
  EXPECT_TRUE(ArrayNear(r[1], {2, -1, 1, 7, 3, 2}));
  EXPECT_TRUE(ArrayNear(r[2], {6, 8}));
  EXPECT_TRUE(ArrayNear(r[3], {2, 8.0 / 3}));
  EXPECT_TRUE(ArrayNear(r[4], {3, 7}));
  EXPECT_TRUE(ArrayNear(r[5], {1, -1}));
  auto wm =
      program({{"clients", 3}}, [](Value xs, Value w) { return reduce_weighted_mean(xs, w); });
  Array w = f64_array({1, 2, 5}, {3});
  // (1*[1,-1] + 2*[0,3] + 5*[2,0.5]) / 8
  EXPECT_TRUE(ArrayNear(jit(wm)(xs, w), {11.0 / 8, 7.5 / 8}, 1e-14));
}

TEST(MapReduce, BlocksAcceptTrees) {
  auto f = program({{"clients", 2}},
                   [](Tree server, Value data) {
                     Tree b = broadcast(server);
                     Tree local = map_fn(
                         [](Tree s, Value x) {
                           return Tree::dict({{"a", Tree(s["a"].value() * x)},
                                              {"b", Tree(s["b"].value() + sum(x))}});
                         },
                         b, data);
                     return Tree::list({reduce_sum(local), reduce_mean(local), reduce_max(local)});
                   },
                   {"", "clients"});
  Tree server =
      Tree::dict({{"a", Tree(f64_array({1, 2}, {2}))}, {"b", Tree(f64_array({10}, {1}))}});
  Array data = f64_array({1, 2, 3, 4}, {2, 2});
  Tree r = jit(f)(server, data);
  // client 0: a = [1, 4], b = [13]; client 1: a = [3, 8], b = [17]
  EXPECT_TRUE(ArrayNear(r[0]["a"].array(), {4, 12}));
  EXPECT_TRUE(ArrayNear(r[0]["b"].array(), {30}));
  EXPECT_TRUE(ArrayNear(r[1]["a"].array(), {2, 6}));
  EXPECT_TRUE(ArrayNear(r[2]["b"].array(), {17}));
}

TEST(MapReduce, GradOfMeanOfMappedLossIsMeanOfClientGradients) {
  Data d;
  auto objective = program({{"clients", kClients}},
                           [](Value w, Value xs, Value ys) {
                             return reduce_mean(map_fn(local_loss, broadcast(w), xs, ys));
                           },
                           {"", "clients", "clients"});
  Array g = jit(grad(objective))(d.w, d.xs, d.ys);
  auto client_grad = jit(grad(local_loss));
  std::vector<double> want(kDim, 0.0);
  for (int64_t i = 0; i < kClients; ++i) {
    Array gi = client_grad(d.w, slice_axis(d.xs, 0, i), slice_axis(d.ys, 0, i));
    for (int64_t k = 0; k < kDim; ++k)
      want[static_cast<size_t>(k)] += gi.element_as_double(k) / kClients;
  }
  EXPECT_TRUE(ArrayNear(g, want, 1e-12, 0));
}

TEST(MapReduce, GradientOfARoundIsStillAMapReduceProgram) {
  Data d;
  Program p = trace(grad(hyper_program(), 0),
                    {Type(f64, {kDim}), Type(f64, {}), Type(f64, {kClients, kExamples, kDim}),
                     Type(f64, {kClients, kExamples})});
  std::string text = to_string(p);
  EXPECT_TRUE(HasText(text, "broadcast["));
  EXPECT_TRUE(HasText(text, "map_fn["));
  EXPECT_TRUE(HasText(text, "reduce_sum["));
  EXPECT_TRUE(HasText(text, "program @main [clients=4]"));
  for (const Eqn& e : p.eqns) {
    bool placed_in = false, placed_out = false;
    for (int v : e.ins) placed_in = placed_in || !p.type_of(v).placement.empty();
    for (int v : e.outs) placed_out = placed_out || !p.type_of(v).placement.empty();
    if (placed_in && !placed_out) {
      EXPECT_TRUE(e.prim->name().rfind("reduce_", 0) == 0)
          << e.prim->name() << " leaves the placement without a reduce_*";
    }
  }
  // The printed gradient program parses back and computes the same gradient.
  Program q = parse_program(text);
  Array eta = Array::scalar(0.7);
  std::vector<Array> args = {d.w, eta, d.xs, d.ys};
  EXPECT_TRUE(ArrayNear(run(q, args)[0], to_doubles(run(p, args)[0]), 1e-15, 0));
}

TEST(MapReduce, HypergradientMatchesFiniteDifferences) {
  Data d;
  auto hyper = hyper_program();
  auto value = jit(hyper);
  auto dhyper = jit(grad(hyper, 1));
  for (double eta : {0.3, 1.0, 1.7}) {
    const double h = 1e-5;
    double fd = (value(d.w, Array::scalar(eta + h), d.xs, d.ys).item<double>() -
                 value(d.w, Array::scalar(eta - h), d.xs, d.ys).item<double>()) /
                (2 * h);
    double g = dhyper(d.w, Array::scalar(eta), d.xs, d.ys).item<double>();
    EXPECT_NEAR(g, fd, 1e-6 * std::max(1.0, std::abs(fd))) << "eta " << eta;
  }
}

TEST(MapReduce, JvpThroughARoundMatchesFiniteDifferencesAndVjp) {
  Data d;
  auto round = round_program();
  Array tw = random_array({kDim}, f64, 7), teta = Array::scalar(0.3), eta = Array::scalar(0.8);
  auto jv = jit([round](Value w, Value e, Value xs, Value ys, Value tw_, Value te) {
    return jvp(round, {w, e, xs, ys}, {tw_, te, zeros_like(xs), zeros_like(ys)}).second;
  });
  Array jt = jv(d.w, eta, d.xs, d.ys, tw, teta);
  auto f = jit(round);
  const double h = 1e-6;
  auto shifted = [&](double s) {
    Array w(f64, {kDim});
    for (int64_t k = 0; k < kDim; ++k)
      w.data<double>()[k] = d.w.element_as_double(k) + s * tw.element_as_double(k);
    return f(w, Array::scalar(0.8 + s * 0.3), d.xs, d.ys);
  };
  Array plus = shifted(h), minus = shifted(-h);
  std::vector<double> fd;
  for (int64_t k = 0; k < kDim; ++k)
    fd.push_back((plus.element_as_double(k) - minus.element_as_double(k)) / (2 * h));
  EXPECT_TRUE(ArrayNear(jt, fd, 1e-6, 1e-8));
  // <u, J v> = <J^T u, v>
  Array u = random_array({kDim}, f64, 8);
  auto vj = jit([round](Value w, Value e, Value xs, Value ys, Value ct) {
    auto [y, pullback] = vjp(round, {w, e, xs, ys});
    std::vector<Tree> cts = pullback(Tree(ct));
    return std::vector<Value>{cts[0].value(), cts[1].value()};
  });
  std::vector<Array> jtu = vj(d.w, eta, d.xs, d.ys, u);
  double lhs = 0, rhs = 0;
  for (int64_t k = 0; k < kDim; ++k) {
    lhs += u.element_as_double(k) * jt.element_as_double(k);
    rhs += jtu[0].element_as_double(k) * tw.element_as_double(k);
  }
  rhs += jtu[1].item<double>() * 0.3;
  EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::abs(lhs)));
}

TEST(MapReduce, VmapOverServerLearningRatesEqualsSeparateRuns) {
  Data d;
  auto round = round_program();
  Array etas = f64_array({0.1, 0.5, 1.0, 1.5}, {4});
  Array batched =
      jit(vmap(round, {std::nullopt, 0, std::nullopt, std::nullopt}))(d.w, etas, d.xs, d.ys);
  ASSERT_EQ(batched.shape(), (Shape{4, kDim}));
  auto single = jit(round);
  for (int64_t b = 0; b < 4; ++b) {
    Array want = single(d.w, Array::scalar(etas.element_as_double(b)), d.xs, d.ys);
    EXPECT_TRUE(ArrayNear(slice_axis(batched, 0, b), to_doubles(want), 1e-13, 1e-15))
        << "eta " << b;
  }
  // Batching the client data too (a batch of 2 cohorts).
  Array xs2 = random_array({2, kClients, kExamples, kDim}, f64, 11);
  Array two = jit(vmap(round, {std::nullopt, std::nullopt, 0, std::nullopt}))(
      d.w, Array::scalar(0.5), xs2, d.ys);
  for (int64_t b = 0; b < 2; ++b)
    EXPECT_TRUE(ArrayNear(slice_axis(two, 0, b),
                          to_doubles(single(d.w, Array::scalar(0.5), slice_axis(xs2, 0, b), d.ys)),
                          1e-13, 1e-15));
}

TEST(MapReduce, WeightedMeanGradientInWeightsMatchesFiniteDifferences) {
  auto f = program({{"clients", 3}},
                   [](Value xs, Value w) { return sum(square(reduce_weighted_mean(xs, w))); },
                   {"clients", "clients"});
  Array xs = random_array({3, 2}, f64, 4), w = random_array({3}, f64, 5, 0.5, 2.0);
  std::vector<Array> g = jit(grad(f, std::vector<int>{0, 1}))(xs, w);
  auto fj = jit(f);
  const double h = 1e-6;
  for (int64_t i = 0; i < 3; ++i) {
    Array wp(f64, {3}), wm(f64, {3});
    std::memcpy(wp.raw(), w.raw(), w.nbytes());
    std::memcpy(wm.raw(), w.raw(), w.nbytes());
    wp.data<double>()[i] += h;
    wm.data<double>()[i] -= h;
    double fd = (fj(xs, wp).item<double>() - fj(xs, wm).item<double>()) / (2 * h);
    EXPECT_NEAR(g[1].element_as_double(i), fd, 1e-7 * std::max(1.0, std::abs(fd)));
  }
}

TEST(MapReduce, ReduceMaxGradientFollowsTheMaximum) {
  auto f = program({{"clients", 3}}, [](Value xs) { return sum(reduce_max(xs) * 2.0); });
  Array xs = f64_array({1, 5, 4, 2, 3, 0}, {3, 2});
  EXPECT_TRUE(ArrayNear(jit(grad(f))(xs), {0, 2, 2, 0, 0, 0}));
}

TEST(MapReduce, ErrorsNameWhatWentWrong) {
  Array v = f64_array({1, 2, 3}, {3}), m = f64_array({1, 2, 3, 4, 5, 6}, {3, 2});
  expect_error([&] { jit([](Value x) { return broadcast(x); })(v); },
               {"broadcast", "outside a drx::program"});
  expect_error(
      [&] {
        jit(program({{"clients", 3}}, [](Value x) { return reduce_sum(x); }, {""}))(v);
      },
      {"reduce_sum", "not placed", "f64[3]"});
  expect_error(
      [&] {
        jit(program({{"clients", 3}}, [](Value x) { return reduce_sum(broadcast(x)); },
                    {"clients"}))(m);
      },
      {"broadcast", "already placed at 'clients'"});
  expect_error(
      [&] {
        jit(program({{"clients", 4}}, [](Value x) { return reduce_sum(x); }, {"clients"}))(m);
      },
      {"program", "leading dimension", "4"});
  expect_error(
      [&] {
        jit(program({{"clients", 3}, {"groups", 2}},
                    [](Value a, Value b) {
                      return map_fn([](Value x, Value y) { return sum(x) + sum(y); }, a, b);
                    },
                    {"clients", "groups"}))(m, f64_array({1, 2}, {2}));
      },
      {"map_fn", "different placements", "clients", "groups"});
  expect_error(
      [&] {
        jit(program({{"clients", 3}}, [](Value x) { return broadcast(x, "groups"); }, {""}))(v);
      },
      {"broadcast", "'groups' is not declared", "clients=3"});
  expect_error(
      [&] {
        jit(program({{"clients", 3}},
                    [](Value x) { return map_fn([x](Value xi) { return xi + sum(x); }, x); },
                    {"clients"}))(m);
      },
      {"map_fn", "placed at 'clients'", "from outside"});
  expect_error(
      [&] {
        jit(program(
            {{"clients", 3}},
            [](Value x) { return map_fn([](Value xi) { return reduce_sum(broadcast(xi)); }, x); },
            {"clients"}))(m);
      },
      {"broadcast", "inside the body of a map_fn over 'clients'", "clients=3", "declare both"});
  expect_error(
      [&] {
        jit(program({{"clients", 3}},
                    [](Value x) { return map_fn([](Value xi) { return xi; }, x); }, {""}))(m);
      },
      {"map_fn", "not placed", "drx::broadcast"});
  expect_error(
      [&] {
        jit(program({{"clients", 3}}, [](Value x, Value w) { return reduce_sum(x * w); },
                    {"clients", ""}))(m, f64_array({1, 2}, {2}));
      },
      {"mul", "unplaced", "broadcast"});
}

}  // namespace
}  // namespace drx::testing
