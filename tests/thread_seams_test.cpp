// How a compiled program's products and pool calls behave beside other threads' programs: no
// process-wide state decides a kernel's path, concurrent callers share the pool, and changing
// the thread count while programs run is safe. scripts/test.sh runs Concurrency* under
// ThreadSanitizer in CI.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "tests/test_util.h"

namespace drx::testing {
namespace {

// Clients whose work is a product, one BLAS call each inside the map_fn body.
auto client_products(int64_t clients) {
  return program({{"clients", clients}},
                 [](Value w, Value xs) -> Value {
                   return reduce_sum(map_fn([](Value wi, Value xi) { return tanh(matmul(xi, wi)); },
                                            broadcast(w), xs));
                 },
                 {"", "clients"});
}

// Runs `fn` on `threads` threads until join(), counting the calls whose check failed.
class Background {
 public:
  Background(int threads, std::function<bool()> fn) {
    for (int t = 0; t < threads; ++t)
      threads_.emplace_back([this, fn] {
        while (!stop_.load()) {
          if (!fn()) mismatches_.fetch_add(1);
          calls_.fetch_add(1);
        }
      });
  }
  ~Background() { join(); }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  int join() {
    stop_.store(true);
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
    return mismatches_.load();
  }
  int calls() const { return calls_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> mismatches_{0}, calls_{0};
  std::vector<std::thread> threads_;
};

// A product over more than 128 rows at the top level runs as row blocks on the pool; inside a
// map_fn body as one call, which rounds differently. Which path it takes was decided, before,
// by whether any thread was inside a map_fn at that moment.
TEST(Concurrency, TopLevelProductBesideMapFnProgramsIsBitwiseAlone) {
  const Array x = random_array({1000, 784}, DType::f32, 1);
  const Array w = random_array({784, 200}, DType::f32, 2);
  auto top = jit([](Value a, Value b) { return matmul(a, b); });
  const Array want = top(x, w);
  // The map body's path rounds this product differently, so a call that took it because another
  // thread was inside a map_fn shows below.
  CompileOptions as_map_body;
  as_map_body.map_body = true;
  const Program p = trace([](Value a, Value b) { return matmul(a, b); },
                          {Type(DType::f32, {1000, 784}), Type(DType::f32, {784, 200})});
  if (compile(p, Mesh(), as_map_body).run({x, w})[0].bitwise_equal(want))
    GTEST_SKIP() << "this machine's sgemm rounds a product the same in one call as in row blocks "
                    "(its kernel's sums do not follow the row split), so which path a call took "
                    "cannot show in its bits here";

  const int64_t clients = 4;
  const Array cw = random_array({64, 32}, DType::f32, 3);
  const Array cxs = random_array({clients, 200, 64}, DType::f32, 4);
  auto maps = jit(client_products(clients));
  const Array maps_want = maps(cw, cxs);

  Background others(2, [&] { return maps(cw, cxs).bitwise_equal(maps_want); });
  int mismatches = 0;
  for (int i = 0; i < 8; ++i) mismatches += top(x, w).bitwise_equal(want) ? 0 : 1;
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(others.join(), 0);
}

// Waits, for at most a generous deadline that only a broken pool reaches, until `ready`.
bool wait_for(std::mutex& mu, std::condition_variable& cv, const std::function<bool()>& ready) {
  std::unique_lock<std::mutex> lock(mu);
  return cv.wait_for(lock, std::chrono::seconds(20), ready);
}

// Two threads call parallel_for at once. Each call's tasks wait until both calls have had a task
// run by a worker, so the test passes only if neither call runs inline while the other holds the
// pool (which it did before: a second caller ran all its tasks itself).
TEST(Concurrency, TwoCallersAtOnceBothGetPoolThreads) {
  // Three workers: one call's two tasks may hold two of them (its caller then only waits), and
  // the other call must still get the third.
  exec::ThreadPool pool(4);
  const exec::ThreadPool::Counters before = pool.counters();
  std::mutex mu;
  std::condition_variable cv;
  bool on_worker[2] = {false, false};
  bool in_time[2][2] = {{false, false}, {false, false}};
  auto call = [&](int c) {
    const std::thread::id caller = std::this_thread::get_id();
    pool.parallel_for(2, [&, c, caller](int64_t i) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (std::this_thread::get_id() != caller) on_worker[c] = true;
      }
      cv.notify_all();
      in_time[c][i] = wait_for(mu, cv, [&] { return on_worker[0] && on_worker[1]; });
    });
  };
  std::thread a(call, 0), b(call, 1);
  a.join();
  b.join();
  EXPECT_TRUE(on_worker[0]);
  EXPECT_TRUE(on_worker[1]);
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(in_time[c][i]) << "call " << c << " task " << i;
  const exec::ThreadPool::Counters after = pool.counters();
  EXPECT_EQ(after.calls - before.calls, 2u);
  EXPECT_EQ(after.inline_calls - before.inline_calls, 0u);
  EXPECT_GE(after.worker_joins - before.worker_joins, 2u);
}

TEST(Concurrency, ACallFromInsideATaskRunsInlineAndCountsSo) {
  exec::ThreadPool pool(2);
  std::atomic<int> ran{0};
  pool.parallel_for(2, [&](int64_t) { pool.parallel_for(3, [&](int64_t) { ++ran; }); });
  EXPECT_EQ(ran.load(), 6);
  const exec::ThreadPool::Counters c = pool.counters();
  EXPECT_EQ(c.calls, 3u);
  EXPECT_EQ(c.inline_calls, 2u);
}

// Programs keep running, bitwise as before, while another thread changes the thread count: a
// call keeps the pool it started on (before, set_num_threads destroyed it under the call).
TEST(Concurrency, SetNumThreadsWhileProgramsRunIsSafe) {
  const int saved = num_threads();
  const Array x = random_array({300, 64}, DType::f32, 5);
  const Array w = random_array({64, 48}, DType::f32, 6);
  auto top = jit([](Value a, Value b) { return tanh(matmul(a, b)); });
  const Array want = top(x, w);
  const int64_t clients = 6;
  const Array cw = random_array({64, 32}, DType::f32, 7);
  const Array cxs = random_array({clients, 20, 64}, DType::f32, 8);
  auto maps = jit(client_products(clients));
  const Array maps_want = maps(cw, cxs);
  {
    Background products(1, [&] { return top(x, w).bitwise_equal(want); });
    Background others(1, [&] { return maps(cw, cxs).bitwise_equal(maps_want); });
    for (int i = 0; i < 40 || products.calls() < 5 || others.calls() < 5; ++i)
      set_num_threads(1 + i % 4);
    EXPECT_EQ(products.join(), 0);
    EXPECT_EQ(others.join(), 0);
  }
  set_num_threads(saved);
  EXPECT_EQ(num_threads(), saved);
}

}  // namespace
}  // namespace drx::testing
