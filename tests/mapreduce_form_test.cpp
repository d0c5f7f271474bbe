// The MapReduce form (drx/export/mapreduce_form.h): programs split into
// stages whose parts, run one after another with every client's work in
// isolation and the aggregation streamed in client order, give jit's results
// bitwise, on one device and on several; the parts print and parse; the
// programs without a form are refused with the equation named.
#include "drx/export/mapreduce_form.h"

#include <gtest/gtest.h>

#include "drx/drx.h"
#include "drx/mapreduce/primitives.h"
#include "drx/ops/primitives.h"
#include "drx/optim/optim.h"
#include "examples/fed_hypergradient_lib.h"
#include "tests/mapreduce_cases.h"
#include "tests/test_util.h"

namespace drx::testing {
namespace {

void expect_error_with(const std::function<void()>& fn, const std::string& part) {
  expect_error(fn, {part});
}

// jit's results: the simplified program compiled on the mesh.
std::vector<Array> jit_results(const Program& p, const std::vector<Array>& args, int devices) {
  return compile(simplify(p), Mesh({{"clients", devices}})).run(args);
}

// Splits p and checks the composition against jit on 1 and 3 devices and
// every part against its printed and parsed text; returns the form.
MapReduceForm expect_composes(const Program& p, const std::vector<Array>& args,
                              const std::string& what) {
  SCOPED_TRACE(what);
  MapReduceForm form = mapreduce_form(p);
  const std::vector<Array> parts = run_mapreduce_form(form, args);
  for (int devices : {1, 3}) {
    SCOPED_TRACE("devices " + std::to_string(devices));
    EXPECT_TRUE(BitwiseEqual(parts, jit_results(p, args, devices)));
  }
  for (const Stage& s : form.stages)
    for (const Part* part : {&s.server_prepare, &s.client_work, &s.server_update}) {
      const std::string text = to_string(part->program);
      EXPECT_TRUE(same_structure(parse_program(text), part->program)) << text;
      for (const Type& t : part->program.input_types()) EXPECT_TRUE(t.placement.empty()) << text;
    }
  return form;
}

std::vector<Array> leaf_arrays(const std::vector<Tree>& trees) {
  std::vector<Array> out;
  for (const Tree& t : trees)
    for (const Tree& l : tree_leaves(t)) out.push_back(l.array());
  return out;
}

// A small classification task for the FedAvg rounds of drx/optim.
struct RoundData {
  int64_t cohort = 5, steps = 3, batch = 16, examples = 60;
  // Sizes where multithreaded BLAS rounds differently from one thread (the
  // client work must run as map_fn bodies do).
  Tree params = nn::mlp_init({40, 96, 3}, 2, nn::Init::glorot_uniform, f32);
  Array x, y, idx, mask, weights;
  RoundData() {
    x = random_array({examples, 40}, f32, 11);
    std::vector<int32_t> labels, ids;
    for (int64_t i = 0; i < examples; ++i) labels.push_back(static_cast<int32_t>((i * 7) % 3));
    for (int64_t i = 0; i < cohort * steps * batch; ++i)
      ids.push_back(static_cast<int32_t>((i * 13 + 5) % examples));
    y = Array::from_vector<int32_t>(labels, {examples});
    idx = Array::from_vector<int32_t>(ids, {cohort, steps, batch});
    // The last client's last step is padding: the round's cond skips it.
    std::vector<float> m(static_cast<size_t>(cohort * steps * batch), 1.0f);
    for (int64_t b = 0; b < batch; ++b)
      m[static_cast<size_t>(((cohort - 1) * steps + steps - 1) * batch + b)] = 0;
    mask = Array::from_vector<float>(m, {cohort, steps, batch});
    weights = Array::from_vector<float>({12, 12, 12, 12, 8}, {cohort});
  }
};

TEST(MapReduceForm, FedAvgFedAvgMAndFedAdamRoundsComposeBitwise) {
  RoundData d;
  for (optim::ServerKind kind :
       {optim::ServerKind::fedavg, optim::ServerKind::fedavgm, optim::ServerKind::fedadam}) {
    optim::RoundSpec spec;
    spec.cohort = d.cohort;
    spec.steps = d.steps;
    spec.batch = d.batch;
    spec.client.momentum = 0.5;
    spec.server.kind = kind;
    spec.server.lr = 0.7;
    const Tree state = spec.server.init(d.params);
    const Program p =
        trace(optim::fedavg_round(spec), d.params, state, d.x, d.y, d.idx, d.mask, d.weights);
    std::vector<Array> args = leaf_arrays(
        {d.params, state, Tree(d.x), Tree(d.y), Tree(d.idx), Tree(d.mask), Tree(d.weights)});
    MapReduceForm form = expect_composes(p, args, optim::server_kind_name(kind));
    // One round of communication: TFF's form. The clients receive the params
    // and the dataset; the round's local steps are scans in the client work.
    ASSERT_EQ(form.stages.size(), 1u);
    const Stage& s = form.stages[0];
    EXPECT_EQ(s.client_data.size(), 3u);  // idx, mask, weights
    EXPECT_TRUE(s.state_in.empty() && s.state_out.empty());
    bool has_scan = false;
    for (const Eqn& e : s.client_work.program.eqns) has_scan |= e.prim->name() == "scan";
    EXPECT_TRUE(has_scan);
    for (const AggregationSpec& a : s.aggregations) EXPECT_EQ(a.kind, Aggregation::sum);
  }
}

// The round over the clients' own rows (what drx fedavg --export-rounds splits) gives
// fedavg_round's results bitwise, and so do its parts; DP-FedAvg's noise is the server's.
TEST(MapReduceForm, RoundsOnClientDataAndDpFedAvgComposeBitwise) {
  RoundData d;
  optim::RoundSpec spec;
  spec.cohort = d.cohort;
  spec.steps = d.steps;
  spec.batch = d.batch;
  const Tree state = spec.server.init(d.params);
  const int64_t rows = d.steps * d.batch;
  Array x(f32, {d.cohort, rows, 40});
  Array y(DType::i32, {d.cohort, rows});
  for (int64_t k = 0; k < d.cohort * rows; ++k) {
    const int32_t id = d.idx.data<int32_t>()[k];
    for (int64_t j = 0; j < 40; ++j) x.data<float>()[k * 40 + j] = d.x.data<float>()[id * 40 + j];
    y.data<int32_t>()[k] = d.y.data<int32_t>()[id];
  }
  const Program shared =
      trace(optim::fedavg_round(spec), d.params, state, d.x, d.y, d.idx, d.mask, d.weights);
  const Program own =
      trace(optim::fedavg_round_on_client_data(spec), d.params, state, x, y, d.mask, d.weights);
  const std::vector<Array> own_args =
      leaf_arrays({d.params, state, Tree(x), Tree(y), Tree(d.mask), Tree(d.weights)});
  EXPECT_TRUE(BitwiseEqual(jit_results(own, own_args, 1),
                           jit_results(shared,
                                       leaf_arrays({d.params, state, Tree(d.x), Tree(d.y),
                                                    Tree(d.idx), Tree(d.mask), Tree(d.weights)}),
                                       1)));
  MapReduceForm form = expect_composes(own, own_args, "round on client data");
  EXPECT_EQ(form.stages[0].client_data.size(), 4u);  // x, y, mask, weights rows
  expect_error_with(
      [&] {
        trace(optim::fedavg_round_on_client_data(spec), d.params, state,
              Array(f32, {d.cohort, rows - 1, 40}), y, d.mask, d.weights);
      },
      "x must be floating [5, 48, ...]");

  spec.dp = optim::DpSpec{};
  spec.dp->noise_multiplier = 0.8;
  spec.dp->expected_cohort = 5;
  const Tree dp_state = optim::dp_round_state(state, 1.5, random::key(3), f32);
  const Program dp =
      trace(optim::fedavg_round(spec), d.params, dp_state, d.x, d.y, d.idx, d.mask, d.weights);
  expect_composes(dp,
                  leaf_arrays({d.params, dp_state, Tree(d.x), Tree(d.y), Tree(d.idx), Tree(d.mask),
                               Tree(d.weights)}),
                  "DP-FedAvg");
}

TEST(MapReduceForm, FederatedEvaluationComposesBitwise) {
  RoundData d;
  const Program p = trace(optim::evaluate_fn(d.cohort), d.params, d.x, d.y, d.idx, d.mask);
  std::vector<Array> args =
      leaf_arrays({d.params, Tree(d.x), Tree(d.y), Tree(d.idx), Tree(d.mask)});
  EXPECT_EQ(expect_composes(p, args, "evaluation").stages.size(), 1u);
}

// The hypergradient example's programs (examples/fed_hypergradient_lib.h):
// a round of local SGD steps (a loop in the client work), its gradient, and
// the gradient of the loss after the round with respect to the server's
// learning rate.
struct HyperCase {
  fedhg::Config c;
  fedhg::Data data;
  std::vector<Type> types;
  std::vector<Array> args;
  HyperCase() {
    c.clients = 5;
    data = fedhg::make_data(c);
    types = {Type(f64, {c.dim}), Type(f64, {}), Type(f64, data.x.shape()),
             Type(f64, data.y.shape())};
    args = {random_array({c.dim}, f64, 3), full({}, c.eta0, f64), data.x, data.y};
  }
};

TEST(MapReduceForm, GradientOfARoundGoesBackToTheClients) {
  HyperCase h;
  auto round = fedhg::round_program(h.c);
  const Program g = trace(grad([round](Value w, Value eta, Value x, Value y) {
                            return sum(round(w, eta, x, y) * round(w, eta, x, y));
                          }),
                          h.types);
  MapReduceForm form = expect_composes(g, h.args, "grad of a round");
  // Forward: the round; backward: the cotangent of the new params is
  // broadcast and the clients' backward passes aggregated.
  ASSERT_GE(form.stages.size(), 2u);
  EXPECT_FALSE(form.stages[1].broadcast.empty());
}

TEST(MapReduceForm, HypergradientIsARoundThenAnEvaluation) {
  HyperCase h;
  const Program hyper = trace(value_and_grad(fedhg::hyper_objective(h.c), 1), h.types);
  MapReduceForm form = expect_composes(hyper, h.args, "hypergradient");
  ASSERT_EQ(form.stages.size(), 2u);
  // Stage 1 evaluates the new params on every client: what stage 0's update
  // computes is what stage 1's prepare broadcasts.
  // The round's reduce_sum / clients is a mean aggregation.
  ASSERT_EQ(form.stages[0].aggregations.size(), 1u);
  EXPECT_EQ(form.stages[0].aggregations[0].kind, Aggregation::mean);
  const Stage& eval = form.stages[1];
  EXPECT_EQ(eval.client_data.size(), 2u);
  EXPECT_EQ(eval.aggregations.size(), 2u);
  const Program forward = trace(fedhg::hyper_objective(h.c), h.types);
  EXPECT_EQ(expect_composes(forward, h.args, "round + evaluation").stages.size(), 2u);
}

// A client's locally trained model, kept on the client between the round and
// a personalised evaluation after the server's update: client state.
TEST(MapReduceForm, ValuesAMapComputedEarlierAreClientState) {
  auto f = personalised_evaluation_program();
  const std::vector<Type> types = {Type(f64, {3}), Type(f64, {4, 6, 3}), Type(f64, {4, 6})};
  const std::vector<Array> args = {random_array({3}, f64, 1), random_array({4, 6, 3}, f64, 2),
                                   random_array({4, 6}, f64, 3)};
  MapReduceForm form = expect_composes(trace(f, types), args, "personalised evaluation");
  ASSERT_EQ(form.stages.size(), 2u);
  ASSERT_EQ(form.stages[0].state_out.size(), 1u);
  EXPECT_EQ(form.stages[1].state_in, form.stages[0].state_out);
  EXPECT_EQ(form.stages[1].aggregations.size(), 2u);
  EXPECT_EQ(form.types.at(form.stages[0].state_out[0]), Type(f64, {3}));
}

// Top-level ops on placed values that work row by row (a weighted mean's
// products, numbers meeting placed values), the client index, and max/min.
TEST(MapReduceForm, PerClientTopLevelOpsAndTheClientIndex) {
  auto f = weighted_mean_program();
  const std::vector<Type> types = {Type(f32, {4}), Type(f32, {5, 4}), Type(f32, {5})};
  const std::vector<Array> args = {random_array({4}, f32, 1), random_array({5, 4}, f32, 2),
                                   Array::from_vector<float>({1, 2, 0.5f, 3, 1}, {5})};
  MapReduceForm form = expect_composes(trace(f, types), args, "weighted mean");
  EXPECT_EQ(form.stages.size(), 1u);
  const Program g = trace(grad([f](Value w, Value x, Value wt) {
                            std::vector<Value> r = f(w, x, wt);
                            return sum(r[0]) + r[2];
                          }),
                          types);
  expect_composes(g, args, "its gradient");
}

TEST(MapReduceForm, ProgramsWithoutAFormAreRefusedNamingTheEquation) {
  auto rows = [](auto body) {
    return trace(program({{"clients", 3}}, body, {"clients"}), {Type(f32, {3, 2})});
  };
  // Work across clients' rows at the top level.
  expect_error_with(
      [&] { mapreduce_form(rows([](Value x) { return reduce_sum(reverse(x, {0})); })); },
      "works across the clients' rows");
  // Rounds inside a loop: the communication is not at the top level.
  auto looped = program(
      {{"clients", 3}},
      [](Value w, Value x) {
        return fori_loop(
            0, 2,
            [x](Value, Value v) {
              return reduce_mean(map_fn([](Value a, Value b) { return a + b; }, broadcast(v), x));
            },
            w);
      },
      {"", "clients"});
  expect_error_with(
      [&] {
        mapreduce_form(trace(looped, {Type(f32, {2}), Type(f32, {3, 2})}));
      },
      "unroll the rounds");
  expect_error_with([&] { mapreduce_form(rows([](Value x) { return x; })); },
                    "output 0 (f32[3,2]@clients) is placed");
  expect_error_with(
      [&] { mapreduce_form(trace([](Value x) { return x * 2.0; }, {Type(f32, {2})})); },
      "places no values");
}

TEST(MapReduceForm, StreamingReduceFollowsTheCanonicalTree) {
  // Sums of floats whose order shows: the canonical tree over 1..13 clients,
  // against reduce_sum of the stacked rows.
  for (int64_t n = 1; n <= 13; ++n) {
    Array rows = random_array({n, 7}, f32, static_cast<uint64_t>(n));
    for (Aggregation kind : {Aggregation::sum, Aggregation::max, Aggregation::min}) {
      StreamingReduce r(kind, Type(f32, {7}));
      for (int64_t i = 0; i < n; ++i)
        r.add(prims::take().evaluate({rows, full({}, static_cast<double>(i), DType::i32)},
                                     Params{{"axis", int64_t{0}}})[0]);
      const Primitive& reduce = kind == Aggregation::sum   ? prims::reduce_sum()
                                : kind == Aggregation::max ? prims::reduce_max()
                                                           : prims::reduce_min();
      Array placed =
          prims::place().evaluate({rows}, Params{{"placement", std::string("clients")}})[0];
      EXPECT_TRUE(r.finish().bitwise_equal(
          reduce.evaluate({placed}, Params{{"placement", std::string("clients")}})[0]))
          << n << " rows";
    }
  }
  StreamingReduce r(Aggregation::sum, Type(f32, {2}));
  expect_error_with([&] { r.add(full({3}, 1.0)); },
                    "client 0's value holds f32[3], expected f32[2]");
  expect_error_with([&] { StreamingReduce(Aggregation::mean, Type(f32, {})); }, "sum, max or min");
}

TEST(MapReduceForm, MeanAndWeightedMeanAggregations) {
  AggregationSpec mean{"c1", Aggregation::mean, "", "v2"};
  StreamingAggregate m(mean, Type(f64, {2}));
  AggregationSpec wmean{"c1", Aggregation::weighted_mean, "c3", "v4"};
  StreamingAggregate w(wmean, Type(f64, {2}), Type(f64, {}));
  const double xs[3][2] = {{1, 2}, {3, 5}, {-2, 0.5}}, ws[3] = {1, 3, 0.5};
  for (int i = 0; i < 3; ++i) {
    Array x = Array::from_vector<double>({xs[i][0], xs[i][1]}, {2});
    m.add(x);
    Array wi = full({}, ws[i], f64);
    w.add(x, &wi);
  }
  // Hand-computed: the canonical tree of 3 is (x0 + x1) + x2.
  EXPECT_EQ(m.finish().to_vector<double>(), (std::vector<double>{(1.0 + 3.0 - 2.0) / 3, 7.5 / 3}));
  EXPECT_EQ(w.finish().to_vector<double>(),
            (std::vector<double>{(1.0 + 9.0 - 1.0) / 4.5, (2.0 + 15.0 + 0.25) / 4.5}));
  expect_error_with([&] { w.add(Array::from_vector<double>({1, 2}, {2})); }, "needs its weight");
}

}  // namespace
}  // namespace drx::testing
