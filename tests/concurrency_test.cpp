// Compiled programs on meshes and from several threads. scripts/test.sh runs
// this suite (and Mesh*) under ThreadSanitizer in CI.
#include <thread>

#include "tests/test_util.h"

namespace drx::testing {
namespace {

// Elementwise ops and axis reductions only: the executor computes those
// bitwise as the interpreter does (a matmul would reassociate in BLAS).
Value client_loss(Value w, Value x) { return mean(square(tanh(x * w))); }

// A server-level cond whose true branch maps over the clients: the branch is
// a sub-program compiled inside the outer one and must run on the outer mesh.
auto cond_round(int64_t clients) {
  return program({{"clients", clients}},
                 [](Value w, Value xs) -> Value {
                   Value pred = greater(sum(w), scalar_like(w, 0.0));
                   Tree r = cond(
                       pred,
                       [&](const Tree& t) {
                         Value g =
                             map_fn([](Value wi, Value xi) { return grad(client_loss)(wi, xi); },
                                    broadcast(t.value()), xs);
                         return Tree(t.value() - 0.5 * reduce_mean(g));
                       },
                       [](const Tree& t) { return Tree(t.value() * 0.5); }, Tree(w));
                   return r.value();
                 },
                 {"", "clients"});
}

TEST(Concurrency, ACondBranchThatMapsOverClientsRunsOnTheMeshBitwise) {
  const int64_t n = 7;
  // sum(w) > 0 for w_pos and < 0 for w_neg, so both branches run.
  const Array w_pos = random_array({4, 3}, DType::f64, 1, 0.1, 1.0);
  const Array w_neg = random_array({4, 3}, DType::f64, 2, -1.0, -0.1);
  const Array xs = random_array({n, 4, 3}, DType::f64, 3);
  const Program p = trace(cond_round(n), {Type(DType::f64, {4, 3}), Type(DType::f64, {n, 4, 3})});
  for (const Array& start : {w_pos, w_neg}) {
    const Array want = interpret(p, {start, xs})[0];
    for (int devices : {1, 2, 3}) {
      auto f = jit(cond_round(n), Mesh({{"clients", devices}}));
      EXPECT_TRUE(f(start, xs).bitwise_equal(want)) << devices << " devices";
    }
  }
}

TEST(Concurrency, OneJittedFunctionCalledFromSeveralThreadsAtOnce) {
  auto f = jit([](Value x, Value w) { return sum(tanh(matmul(x, w)), {1}); });
  const std::vector<Shape> rows = {{3, 4}, {5, 4}, {8, 4}};
  std::vector<Array> xs, want;
  const Array w = random_array({4, 6}, DType::f32, 9);
  for (size_t k = 0; k < rows.size(); ++k) {
    xs.push_back(random_array(rows[k], DType::f32, static_cast<uint64_t>(10 + k)));
    // The reference: the same compiled program, called from one thread.
    want.push_back(jit([](Value x, Value v) { return sum(tanh(matmul(x, v)), {1}); })(xs[k], w));
  }
  constexpr int kThreads = 6, kCalls = 40;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const size_t k = static_cast<size_t>(t + i) % rows.size();
        if (!f(xs[k], w).bitwise_equal(want[k])) ++mismatches[static_cast<size_t>(t)];
      }
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[static_cast<size_t>(t)], 0) << t;
  // Each signature was traced once, however many threads asked for it first.
  EXPECT_EQ(f.trace_count(), 3);
  EXPECT_EQ(f.cache_size(), 3u);
}

TEST(Concurrency, AMeshProgramCalledFromSeveralThreadsAtOnce) {
  const int64_t n = 6;
  auto f = jit(cond_round(n), Mesh({{"clients", 2}}));
  Array w = random_array({4, 3}, DType::f64, 4);
  Array xs = random_array({n, 4, 3}, DType::f64, 5);
  const Array want = f(w, xs);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i)
        if (!f(w, xs).bitwise_equal(want)) ++mismatches[static_cast<size_t>(t)];
    });
  for (std::thread& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace
}  // namespace drx::testing
