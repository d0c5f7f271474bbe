// Everything README.md shows is reachable through <drx/drx.h> alone: this file
// includes nothing else of drx's, and uses each documented name once, in the
// README's order. A name that moves to a header drx.h does not include breaks
// the build here.
#include <drx/drx.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// "Using the library": trace, print, jit, grad; errors.
TEST(DrxHeader, UsingTheLibrary) {
  auto f = [](drx::Value x, drx::Value w) { return drx::sum(drx::tanh(drx::matmul(x, w))); };
  drx::Program p = drx::trace(f, {drx::Type(drx::f32, {2, 3}), drx::Type(drx::f32, {3, 2})});
  std::ostringstream printed;
  printed << p;
  EXPECT_NE(printed.str().find("tanh"), std::string::npos);
  drx::Array x = drx::Array::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  drx::Array w = drx::full({3, 2}, 0.1);
  drx::Array y = drx::jit(f)(x, w);
  drx::Array g = drx::jit(drx::grad(f, /*argnum=*/1))(x, w);
  EXPECT_TRUE(y.shape().empty());
  EXPECT_EQ(g.shape(), (drx::Shape{3, 2}));
  // trace by example, as jax.make_jaxpr.
  EXPECT_EQ(drx::to_string(drx::trace(f, x, w)), drx::to_string(p));
  auto int_arg = [](drx::Value a, drx::Value n) { return drx::sum(a * drx::astype(n, drx::f32)); };
  drx::Array n = drx::Array::from_vector<int32_t>({2}, {1});
  drx::Array dn =
      drx::jit(drx::grad(int_arg, 1, drx::GradOptions{.allow_int = true}))(drx::full({1}, 1.0), n);
  EXPECT_EQ(dn.shape(), (drx::Shape{1}));
  EXPECT_THROW(drx::jit(f)(x, x), drx::Error);
  EXPECT_THROW(drx::parse_program("not a program"), drx::ParseError);
  static_assert(std::is_base_of_v<drx::Error, drx::TypeError>);
}

// "MapReduce programs": program, broadcast, map_fn, reduce_*, grad of a program.
TEST(DrxHeader, MapReducePrograms) {
  auto round = drx::program(
      {{"clients", 4}},
      [](drx::Value w, drx::Value xs) {
        drx::Value per_client = drx::map_fn(
            [](drx::Value wi, drx::Value xi) { return drx::sum(wi * xi); }, drx::broadcast(w), xs);
        return drx::reduce_mean(per_client) + drx::reduce_sum(per_client) +
               drx::reduce_max(per_client) + drx::reduce_min(per_client) +
               drx::reduce_weighted_mean(
                   per_client, drx::map_fn([](drx::Value xi) { return drx::sum(xi); }, xs));
      },
      /*in_placements=*/{"", "clients"});
  drx::Array w = drx::full({3}, 1.0), xs = drx::full({4, 3}, 0.5);
  EXPECT_EQ(drx::jit(round)(w, xs).shape(), drx::Shape{});
  EXPECT_EQ(drx::jit(drx::grad(round, 0))(w, xs).shape(), (drx::Shape{3}));
  auto nested = drx::program(
      {{"groups", 2}, {"clients", 2}},
      [](drx::Value w) {
        return drx::reduce_mean(drx::map_fn(
            [](drx::Value wg) { return drx::reduce_sum(drx::broadcast(wg, "clients")); },
            drx::broadcast(w, "groups")));
      },
      /*in_placements=*/{""});
  EXPECT_EQ(drx::jit(nested)(drx::full({2}, 1.0)).to_vector<float>(), (std::vector<float>{2, 2}));
}

// "Control flow" and "Loops": cond, scan, fori_loop, while_loop, Tree helpers.
TEST(DrxHeader, ControlFlowAndLoops) {
  auto f = [](drx::Value x) {
    drx::Tree next = drx::cond(
        drx::greater(drx::sum(x), drx::scalar_like(drx::sum(x), 0.0)),
        [](const drx::Tree& s) { return drx::Tree(s.value() * 2.0); },
        [](const drx::Tree& s) { return s; }, drx::Tree(x));
    auto [carry, ys] = drx::scan(
        [](const drx::Tree& c, const drx::Tree& xi) -> std::pair<drx::Tree, drx::Tree> {
          drx::Tree c2 = drx::tree_map([&](const drx::Value& a) { return a + xi.value(); }, c);
          return {c2, drx::Tree::list({drx::Tree(xi.value())})};
        },
        next, drx::Tree(drx::broadcast_to(x, {3, 2})), drx::ScanOptions{.checkpoint_every = 2});
    (void)ys;
    drx::Tree looped = drx::fori_loop(
        0, 3,
        [](const drx::Value& i, const drx::Tree& c) {
          return drx::Tree(c.value() * 0.5 + drx::astype(i, drx::f32));
        },
        carry);
    return drx::while_loop(
               [](const drx::Tree& c) {
                 return drx::less(drx::sum(c.value()), drx::scalar_like(drx::sum(c.value()), 1e3));
               },
               [](const drx::Tree& c) { return drx::Tree(c.value() * 2.0); }, looped)
        .value();
  };
  EXPECT_EQ(drx::jit(f)(drx::full({2}, 1.0)).shape(), (drx::Shape{2}));
}

// "Devices, sharding and memory": Mesh, MeshScope, jit on a mesh, compile and stats.
TEST(DrxHeader, DevicesAndExecutables) {
  auto round = drx::program({{"clients", 4}}, [](drx::Value xs) {
    return drx::reduce_sum(drx::map_fn([](drx::Value x) { return x * 2.0; }, xs));
  });
  drx::Mesh mesh({{"clients", 2}});
  drx::Array xs = drx::full({4, 3}, 1.0);
  drx::Array a = drx::jit(round, mesh)(xs);
  drx::Array b;
  {
    drx::MeshScope scope(mesh);
    b = drx::jit(round)(xs);
  }
  EXPECT_TRUE(a.bitwise_equal(b));
  EXPECT_GE(drx::num_threads(), 1);
  drx::Program p = drx::trace(round, xs);
  drx::Executable exe = drx::compile(drx::simplify(p), mesh);
  EXPECT_TRUE(exe.run({xs})[0].bitwise_equal(a));
  EXPECT_EQ(exe.stats().chunked_maps, 1u);
}

// Transformations, program text and the interpreter.
TEST(DrxHeader, TransformsTextAndInterpreter) {
  auto f = [](drx::Value x) { return drx::sum(x * x); };
  auto traced = [&](drx::Value x) {
    auto [y, dy] = drx::jvp(f, {drx::Tree(x)}, {drx::Tree(drx::ones_like(x))});
    auto [y2, pullback] = drx::vjp(f, {drx::Tree(x)});
    std::vector<drx::Tree> ct = pullback(drx::Tree(drx::scalar_like(y2, 1.0)));
    return std::vector<drx::Value>{y, dy, ct[0].value()};
  };
  drx::Program p = drx::trace(traced, drx::full({3}, 1.0));
  drx::verify(p);
  drx::Program back = drx::parse_program(drx::to_string(p));
  std::vector<drx::Array> out = drx::run(back, {drx::full({3}, 2.0)});
  EXPECT_EQ(out[0].item<float>(), 12.0f);
  EXPECT_EQ(out[1].item<float>(), 12.0f);
  EXPECT_EQ(drx::interpret(back, {drx::full({3}, 2.0)})[2].to_vector<float>(),
            (std::vector<float>{4, 4, 4}));
  auto batched = drx::vmap(f);
  EXPECT_EQ(drx::jit(batched)(drx::full({5, 3}, 1.0)).shape(), (drx::Shape{5}));
  auto [v, g] = drx::jit(drx::value_and_grad(f))(drx::full({3}, 1.0));
  EXPECT_EQ(v.item<float>(), 3.0f);
  EXPECT_EQ(g.shape(), (drx::Shape{3}));
}

// drx::nn, drx::optim and drx::data, as `drx fedavg` uses them.
TEST(DrxHeader, NnOptimAndData) {
  drx::Tree params = drx::nn::mlp_init({4, 8, 3}, /*seed=*/1);
  drx::Array init = drx::nn::init_array(drx::nn::Init::glorot_uniform, {4, 3}, 4, 3, 2);
  EXPECT_EQ(init.shape(), (drx::Shape{4, 3}));
  auto loss = [](drx::Tree p, drx::Value x, drx::Value y) {
    drx::Value logits = drx::nn::mlp_apply(p, x);
    drx::Value first = drx::nn::dense(x, p["layer0"]["w"].value(), p["layer0"]["b"].value());
    return drx::mean(drx::nn::softmax_cross_entropy(logits, y)) +
           drx::nn::accuracy(logits, y) * 0.0 + drx::sum(first) * 0.0;
  };
  drx::Array x = drx::full({2, 4}, 0.5);
  drx::Array y = drx::Array::from_vector<int32_t>({0, 2}, {2});
  EXPECT_EQ(drx::jit(loss)(params, x, y).shape(), drx::Shape{});

  drx::optim::RoundSpec spec;
  spec.client = drx::optim::ClientSgd{.lr = 0.1};
  spec.server.kind = drx::optim::parse_server_kind("fedadam");
  spec.cohort = 2;
  drx::optim::RoundFn round = drx::optim::fedavg_round(spec);
  drx::optim::EvalFn eval = drx::optim::evaluate_fn(2);
  (void)round;
  (void)eval;

  drx::data::Partition clients =
      drx::data::partition_iid(/*num_examples=*/20, /*num_clients=*/4, 7);
  std::vector<int64_t> cohort = drx::data::sample_cohort(4, 2, 7, /*round=*/0);
  drx::data::CohortBatches batches = drx::data::cohort_batches(
      clients, cohort, drx::data::BatchOptions{.steps = 2, .batch_size = 3});
  EXPECT_EQ(batches.idx.shape(), (drx::Shape{2, 2, 3}));
  drx::data::Dataset (*load)(drx::data::Split, const std::string&) = drx::data::load_fashion_mnist;
  EXPECT_NE(load, nullptr);
}

// NumPy files.
TEST(DrxHeader, NpyFiles) {
  drx::Array a = drx::Array::from_vector<double>({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(drx::decode_npy(drx::encode_npy(a)).bitwise_equal(a));
  const std::string path =
      ::testing::TempDir() + "drx_h_test_" + std::to_string(::getpid()) + ".npy";
  drx::save_npy(path, a);
  EXPECT_TRUE(drx::load_npy(path).bitwise_equal(a));
  std::remove(path.c_str());
}

}  // namespace

// "Dtypes and elementwise ops", "Indexing, sorting and running sums",
// "Optimizers" and tree arithmetic.
TEST(DrxHeader, ToolboxOpsOptimizersAndTrees) {
  auto ops = [](drx::Value x, drx::Value u) {
    drx::Value bits = drx::bitwise_xor(drx::shift_left(u, drx::scalar_like(u, 1.0)), u);
    drx::Value r = drx::floor(x) + drx::ceil(x) + drx::round(x) + drx::remainder(x, x + 2.0);
    drx::Value a = drx::sigmoid(x) + drx::softplus(x) + drx::log_sigmoid(x) + drx::gelu(x) +
                   drx::clip(x, -1.0, 1.0);
    drx::Value s = drx::sort(x) + drx::cumsum(x, 0);
    return drx::sum(r + a + s) + drx::sum(drx::top_k(x, 2).values) +
           drx::sum(drx::astype(bits, drx::f32)) +
           drx::sum(drx::astype(drx::argmax(x, 0), drx::f32));
  };
  drx::Array x = drx::Array::from_vector<float>({0.5f, -1.5f, 2.0f}, {3});
  drx::Array u = drx::Array::from_vector<uint32_t>({1u, 2u, 3u}, {3});
  EXPECT_TRUE(std::isfinite(drx::jit(ops)(x, u).item<float>()));
  auto ln = [](drx::Value v, drx::Value s, drx::Value b) { return drx::nn::layer_norm(v, s, b); };
  EXPECT_EQ(drx::jit(ln)(x, drx::ones({3}), drx::zeros({3})).shape(), (drx::Shape{3}));
  drx::Tree params = drx::Tree::dict({{"w", drx::Tree(x)}});
  drx::optim::GradientTransformation opt = drx::optim::adam(1e-3);
  drx::Tree state = opt.init(params);
  EXPECT_EQ(drx::tree_size(drx::tree_add(params, params)), 3);
  EXPECT_NEAR(drx::tree_l2_norm(params).array().element_as_double(0), std::sqrt(6.5), 1e-6);
  (void)state;
}

// "Differential privacy: the accountant".
// The random-number snippet of the public API (shared/API.md).
TEST(DrxHeader, RandomNumbers) {
  drx::Array key = drx::random::key(42);
  auto keys = drx::random::split(key, 2);
  ASSERT_EQ(keys.size(), 2u);
  auto f = drx::jit([](drx::Value k) {
    drx::Value u = drx::random::uniform(k, {3, 4}, drx::f32);
    drx::Value z = drx::random::normal(k, {3, 4}, drx::f32);
    drx::Value k2 = drx::random::fold_in(k, 7);
    return drx::Tree::list({drx::Tree(u), drx::Tree(z), drx::Tree(k2)});
  });
  drx::Tree out = f(keys[0]);
  EXPECT_EQ(out[0].array().shape(), (drx::Shape{3, 4}));
  EXPECT_TRUE(out[2].array().bitwise_equal(drx::random::fold_in(keys[0], 7)));
}

// StableHLO in, as the README shows it.
TEST(DrxHeader, FromStablehloAndGrad) {
  drx::Program p =
      drx::from_stablehlo(R"(func.func public @main(%x: tensor<3xf64>) -> tensor<3xf64> {
    %0 = stablehlo.multiply %x, %x : tensor<3xf64>
    return %0 : tensor<3xf64>
  })");
  auto f = [p](drx::Value x) { return drx::sum(drx::inline_program(p, {x})[0]); };
  drx::Array g = drx::jit(drx::grad(f))(drx::Array::from_vector<double>({1, -2, 3}, {3}));
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{2, -4, 6}));
}

TEST(DrxHeader, DifferentialPrivacyAccountant) {
  namespace dp = drx::privacy;
  dp::RdpAccountant acct(dp::Sampling::poisson, 100, 10000, 1.0);
  acct.step(500);
  dp::EpsilonAtOrder e = acct.epsilon(1e-6);
  EXPECT_GT(e.epsilon, 0);
  EXPECT_EQ(dp::default_rdp_orders().size(), 72u);
  EXPECT_EQ(dp::rdp_poisson_gaussian(1.0, 1.0, {2})[0], 1.0);
  EXPECT_EQ(dp::rdp_fixed_size_gaussian(5, 5, 1.0, {2}, dp::FixedSizeBound::general_theorem9)[0],
            1.0);
  EXPECT_LE(dp::epsilon_from_rdp({2}, {1.0}, 1e-5).epsilon,
            dp::epsilon_from_rdp({2}, {1.0}, 1e-5, dp::RdpConversion::mironov2017).epsilon);
}
