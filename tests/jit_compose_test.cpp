// jit composes with the transformations (a jitted function called on traced
// Values inlines its program) and traces user code outside its cache lock.
// scripts/test.sh runs the Concurrency* suites under ThreadSanitizer.
#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "drx/exec/mesh.h"  // the old path of drx/core/mesh.h: a forwarding header
#include "tests/test_util.h"

namespace drx::testing {
namespace {

using namespace std::chrono_literals;

Value loss(Value w, Value x) { return mean(square(tanh(matmul(x, w)))); }

TEST(JitCompose, GradOfJitIsGradOfTheFunction) {
  const Array w = random_array({4, 3}, f64, 1), x = random_array({5, 4}, f64, 2);
  auto jitted = jit(loss);
  const Array want = jit(grad(loss))(w, x);
  const Array got = jit(grad(jitted))(w, x);
  EXPECT_LT(max_abs_diff({got}, {want}), 1e-15);
  // Second order: the hessian-vector product through two jits.
  auto hvp = [&](Value wv, Value xv) {
    return grad([&](Value u) { return sum(grad(jitted)(u, xv) * wv); })(wv);
  };
  auto hvp_plain = [&](Value wv, Value xv) {
    return grad([&](Value u) { return sum(grad(loss)(u, xv) * wv); })(wv);
  };
  EXPECT_LT(max_abs_diff({jit(hvp)(w, x)}, {jit(hvp_plain)(w, x)}), 1e-14);
  // The jitted function itself was traced once per signature it met: the
  // Arrays call's, and one for Values of these types (reused by every trace).
  EXPECT_LE(jitted.trace_count(), 2);
}

TEST(JitCompose, VmapOfJitIsVmapOfTheFunction) {
  const Array w = random_array({4, 3}, f64, 3), xs = random_array({6, 5, 4}, f64, 4);
  auto jitted = jit(loss);
  const Array want = jit(vmap(loss, {std::nullopt, 0}))(w, xs);
  const Array got = jit(vmap(jitted, {std::nullopt, 0}))(w, xs);
  EXPECT_EQ(got.shape(), Shape({6}));
  EXPECT_LT(max_abs_diff({got}, {want}), 1e-15);
}

TEST(JitCompose, AJittedFunctionInsideAMapFnBody) {
  const int64_t n = 5;
  auto jitted_grad = jit(grad(loss));
  auto round = [&](auto client_grad) {
    return program({{"clients", n}},
                   [client_grad](Value w, Value xs) -> Value {
                     Value g = map_fn(client_grad, broadcast(w), xs);
                     return w - 0.1 * reduce_mean(g);
                   },
                   {"", "clients"});
  };
  const Array w = random_array({4, 3}, f64, 5), xs = random_array({n, 7, 4}, f64, 6);
  const Array want = jit(round(grad(loss)))(w, xs);
  const Array got = jit(round(jitted_grad))(w, xs);
  EXPECT_TRUE(got.bitwise_equal(want)) << got.str() << " vs " << want.str();
  // On a mesh too: the inlined body is split like any other.
  const Array on_mesh = jit(round(jitted_grad), Mesh({{"clients", 2}}))(w, xs);
  EXPECT_TRUE(on_mesh.bitwise_equal(want));
}

TEST(JitCompose, ATreeSignatureInlinesToo) {
  auto f = jit([](const Tree& t) { return Tree(sum(t["a"].value() * t["b"].value())); });
  const Array a = random_array({3}, f64, 7), b = random_array({3}, f64, 8);
  auto g = grad([&](Value x) {
    return f(Tree::dict({{"a", Tree(x)}, {"b", Tree(x * x)}})).value();
  });
  // d/dx sum(x * x^2) = 3 x^2
  const Array got = jit(g)(a);
  for (int64_t i = 0; i < 3; ++i)
    EXPECT_NEAR(got.to_vector<double>()[static_cast<size_t>(i)],
                3 * a.to_vector<double>()[static_cast<size_t>(i)] *
                    a.to_vector<double>()[static_cast<size_t>(i)],
                1e-14);
  (void)b;
}

TEST(JitCompose, ATraceThatCapturesAnEnclosingValueIsNotReused) {
  // A jitted closure over a Value of an enclosing trace: each trace inlines its own capture.
  auto outer = [](Value x) {
    auto scaled = jit([x](Value y) { return y * x; });
    return sum(scaled(x) + scaled(x * 2.0));
  };
  const Array a = random_array({4}, f64, 9);
  const Array got = jit(grad(outer))(a);
  // d/dx sum(x*x + 2x*x) = 6x
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_NEAR(got.to_vector<double>()[static_cast<size_t>(i)],
                6 * a.to_vector<double>()[static_cast<size_t>(i)], 1e-14);
}

TEST(JitCompose, RecursionIntoItsOwnTraceIsAClearError) {
  auto self = std::make_shared<std::function<Value(Value)>>();
  auto f = jit([self](Value x) { return (*self)(x) + 1.0; });
  *self = [f](Value x) { return f(x); };
  expect_error([&] { f(random_array({2}, f32, 1)); },
               {"jit", "calls itself", "f32[2]", "fori_loop"});
  self->operator=(nullptr);  // break the cycle between f and self
}

// ---- tracing outside the lock ------------------------------------------------------

TEST(Concurrency, JitTracesOutsideItsLockSoOtherSignaturesProceed) {
  std::promise<void> other_done;
  std::shared_future<void> other = other_done.get_future().share();
  std::atomic<bool> waited_in_trace{false};
  auto f = jit([&](Value x) {
    // The [1] signature's trace waits (bounded) for a call of another signature to finish.
    if (x.shape() == Shape{1}) waited_in_trace = other.wait_for(20s) == std::future_status::ready;
    return x * 2.0;
  });
  std::thread slow(
      [&] { EXPECT_EQ(f(f32_array({1}, {1})).to_vector<float>()[static_cast<size_t>(0)], 2.0f); });
  std::this_thread::sleep_for(50ms);  // let the slow trace start
  EXPECT_EQ(f(f32_array({1, 2}, {2})).to_vector<float>()[static_cast<size_t>(1)], 4.0f);
  other_done.set_value();
  slow.join();
  EXPECT_TRUE(waited_in_trace) << "the [2] call waited for the [1] trace: traced under the lock";
  EXPECT_EQ(f.trace_count(), 2);
}

TEST(Concurrency, CallersOfOneSignatureWaitThroughTheHookAndShareOneTrace) {
  std::atomic<int> hook_calls{0};
  std::promise<void> a_waiter;
  std::shared_future<void> someone_waits = a_waiter.get_future().share();
  std::atomic<bool> signalled{false};
  set_jit_wait_hook([&](const std::function<void()>& wait) {
    ++hook_calls;
    if (!signalled.exchange(true)) a_waiter.set_value();
    wait();
  });
  auto f = jit([&](Value x) {
    someone_waits.wait_for(20s);  // hold the trace until another caller is waiting on it
    return x + 1.0;
  });
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      right += f(f32_array({1, 2, 3}, {3})).to_vector<float>()[static_cast<size_t>(2)] == 4.0f;
    });
  for (std::thread& th : threads) th.join();
  set_jit_wait_hook(nullptr);
  EXPECT_EQ(right.load(), 4);
  EXPECT_EQ(f.trace_count(), 1);
  EXPECT_GE(hook_calls.load(), 1);
}

TEST(Concurrency, AFailedTraceWakesItsWaitersWithItsErrorAndTheNextCallRetries) {
  std::atomic<bool> fail{true};
  std::promise<void> a_waiter;
  std::shared_future<void> someone_waits = a_waiter.get_future().share();
  std::atomic<bool> signalled{false};
  set_jit_wait_hook([&](const std::function<void()>& wait) {
    if (!signalled.exchange(true)) a_waiter.set_value();
    wait();
  });
  auto f = jit([&](Value x) {
    if (fail) {
      someone_waits.wait_for(20s);
      throw Error("user code: this trace fails on purpose");
    }
    return x * 3.0;
  });
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      try {
        f(f32_array({1}, {1}));
      } catch (const Error& e) {
        errors[t] = e.what();
      }
    });
  for (std::thread& th : threads) th.join();
  set_jit_wait_hook(nullptr);
  for (const std::string& e : errors) EXPECT_NE(e.find("fails on purpose"), std::string::npos) << e;
  EXPECT_EQ(f.trace_count(), 1);  // the waiter did not trace again
  EXPECT_EQ(f.cache_size(), 0u);
  fail = false;
  EXPECT_EQ(f(f32_array({2}, {1})).to_vector<float>()[static_cast<size_t>(0)], 6.0f);
  EXPECT_EQ(f.trace_count(), 2);
}

}  // namespace
}  // namespace drx::testing
