// The compiled executor against its references, side by side:
//   sgemm 512^3 through jit vs cblas_sgemm directly (GFLOP/s),
//   jit dispatch of a 10-op program (time per call) vs the interpreter,
//   an elementwise chain and a row sum on 1M floats, compiled vs interpreted,
//   one FedAvg-style round with map_fn (sequential and on the thread pool).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <random>

#include "drx/drx.h"
#include "drx/exec/executable.h"
#include "drx/exec/thread_pool.h"

namespace {

using namespace drx;

Array random(const Shape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Array a(DType::f32, shape);
  for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = dist(rng);
  return a;
}

void gflops(benchmark::State& state, double flop_per_iter) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      flop_per_iter * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}

void BM_SgemmDrx(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto f = jit([](Value a, Value b) { return matmul(a, b); });
  Array a = random({n, n}, 1), b = random({n, n}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(f(a, b));
  gflops(state, 2.0 * n * n * n);
}
BENCHMARK(BM_SgemmDrx)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SgemmCblas(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Array a = random({n, n}, 1), b = random({n, n}, 2), c(DType::f32, {n, n});
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n,
                b.data<float>(), n, 0.0f, c.data<float>(), n);
    benchmark::DoNotOptimize(c.data<float>());
  }
  gflops(state, 2.0 * n * n * n);
}
BENCHMARK(BM_SgemmCblas)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

// Ten primitive equations on tiny arrays: the per-call cost of the executor.
Value ten_ops(Value x, Value y) {
  Value a = x * y, b = a + x, c = exp(b), d = c - y, e = tanh(d);
  Value f = e * e, g = f / (c + y), h = maximum(g, x);
  return sum(h, {0});
}

void BM_Dispatch10OpsJit(benchmark::State& state) {
  auto f = jit(ten_ops);
  Array x = random({4}, 1), y = random({4}, 2);
  for (auto _ : state) benchmark::DoNotOptimize(f(x, y));
  state.counters["ops"] = static_cast<double>(f.last_program().eqns.size());
}
BENCHMARK(BM_Dispatch10OpsJit);

void BM_Dispatch10OpsExecutable(benchmark::State& state) {
  Executable exe = compile(simplify(trace(ten_ops, {Type(f32, {4}), Type(f32, {4})})));
  std::vector<Array> args = {random({4}, 1), random({4}, 2)};
  for (auto _ : state) benchmark::DoNotOptimize(exe.run(args));
}
BENCHMARK(BM_Dispatch10OpsExecutable);

void BM_Dispatch10OpsInterpret(benchmark::State& state) {
  Program p = simplify(trace(ten_ops, {Type(f32, {4}), Type(f32, {4})}));
  std::vector<Array> args = {random({4}, 1), random({4}, 2)};
  for (auto _ : state) benchmark::DoNotOptimize(interpret(p, args));
}
BENCHMARK(BM_Dispatch10OpsInterpret);

Value chain(Value x, Value y) { return sum(maximum(x * y + x, 0.0) * 0.5 - y, {1}); }

void BM_Chain1MCompiled(benchmark::State& state) {
  Executable exe =
      compile(simplify(trace(chain, {Type(f32, {1000, 1000}), Type(f32, {1000, 1000})})));
  std::vector<Array> args = {random({1000, 1000}, 1), random({1000, 1000}, 2)};
  for (auto _ : state) benchmark::DoNotOptimize(exe.run(args));
  state.SetItemsProcessed(state.iterations() * 1000000);
}
BENCHMARK(BM_Chain1MCompiled)->Unit(benchmark::kMicrosecond);

void BM_Chain1MInterpret(benchmark::State& state) {
  Program p = simplify(trace(chain, {Type(f32, {1000, 1000}), Type(f32, {1000, 1000})}));
  std::vector<Array> args = {random({1000, 1000}, 1), random({1000, 1000}, 2)};
  for (auto _ : state) benchmark::DoNotOptimize(interpret(p, args));
  state.SetItemsProcessed(state.iterations() * 1000000);
}
BENCHMARK(BM_Chain1MInterpret)->Unit(benchmark::kMicrosecond);

// A small federated round: MLP 64-32-10 clients, 5 local steps of batch 16.
Value mlp_loss(Value w1, Value w2, Value x, Value y) {
  Value logits = matmul(relu(matmul(x, w1)), w2);
  return -mean(sum(log_softmax(logits, -1) * y, {1}));
}

Program fed_round(int64_t clients) {
  auto round = program({{"clients", clients}},
                       [](Value w1, Value w2, Value xs, Value ys) {
                         std::vector<Value> d = map_fn(
                             [](Value a, Value b, Value x, Value y) -> std::vector<Value> {
                               Value u = a, v = b;
                               for (int k = 0; k < 5; ++k) {
                                 std::vector<Value> g = grad(mlp_loss, {0, 1})(u, v, x, y);
                                 u = u - 0.05 * g[0];
                                 v = v - 0.05 * g[1];
                               }
                               return {u, v};
                             },
                             broadcast(w1), broadcast(w2), xs, ys);
                         return std::vector<Value>{reduce_mean(d[0]), reduce_mean(d[1])};
                       },
                       {"", "", "clients", "clients"});
  return simplify(trace(round, {Type(f32, {64, 32}), Type(f32, {32, 10}),
                                Type(f32, {clients, 16, 64}), Type(f32, {clients, 16, 10})}));
}

void BM_FedRound(benchmark::State& state) {
  const int64_t clients = 16;
  const int threads = static_cast<int>(state.range(0));
  int before = num_threads();
  set_num_threads(threads);
  Executable exe = compile(fed_round(clients));
  std::vector<Array> args = {random({64, 32}, 1), random({32, 10}, 2), random({clients, 16, 64}, 3),
                             random({clients, 16, 10}, 4)};
  for (auto _ : state) benchmark::DoNotOptimize(exe.run(args));
  set_num_threads(before);
}
BENCHMARK(BM_FedRound)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_FedRoundInterpret(benchmark::State& state) {
  const int64_t clients = 16;
  Program p = fed_round(clients);
  std::vector<Array> args = {random({64, 32}, 1), random({32, 10}, 2), random({clients, 16, 64}, 3),
                             random({clients, 16, 10}, 4)};
  for (auto _ : state) benchmark::DoNotOptimize(interpret(p, args));
}
BENCHMARK(BM_FedRoundInterpret)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  drx::set_blas_thread_control(true);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
