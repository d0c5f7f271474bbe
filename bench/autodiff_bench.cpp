// Cost of reverse-mode autodiff relative to the forward pass, on the reference
// interpreter: the jitted loss of a 784-200-200-10 ReLU MLP (softmax
// cross-entropy, batch 32, f32) against the jitted value_and_grad of the same
// loss with respect to all parameters. Prints the time ratio at the end.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "drx/drx.h"

namespace {

constexpr int64_t kBatch = 32, kIn = 784, kHidden = 200, kClasses = 10;

drx::Array uniform(const drx::Shape& shape, double scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(static_cast<float>(-scale), static_cast<float>(scale));
  drx::Array a(drx::f32, shape);
  for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = dist(rng);
  return a;
}

struct Problem {
  drx::Tree params;
  drx::Array x, labels;
};

Problem make_problem() {
  auto layer = [](int64_t in, int64_t out, uint64_t seed) {
    // Glorot-uniform weights, small biases.
    double limit = std::sqrt(6.0 / static_cast<double>(in + out));
    return drx::Tree::dict({{"w", drx::Tree(uniform({in, out}, limit, seed))},
                            {"b", drx::Tree(uniform({out}, 0.01, seed + 1))}});
  };
  Problem p;
  p.params = drx::Tree::list(
      {layer(kIn, kHidden, 1), layer(kHidden, kHidden, 3), layer(kHidden, kClasses, 5)});
  p.x = uniform({kBatch, kIn}, 1.0, 7);
  std::vector<int32_t> labels(kBatch);
  for (int64_t i = 0; i < kBatch; ++i)
    labels[static_cast<size_t>(i)] = static_cast<int32_t>(i % kClasses);
  p.labels = drx::Array::from_vector<int32_t>(labels, {kBatch});
  return p;
}

drx::Value loss(drx::Tree params, drx::Value x, drx::Value labels) {
  drx::Value h = x;
  for (size_t l = 0; l < params.size(); ++l) {
    h = drx::matmul(h, params[l]["w"].value()) + params[l]["b"].value();
    if (l + 1 < params.size()) h = drx::relu(h);
  }
  drx::Value logp = drx::log_softmax(h, -1);
  return -drx::mean(drx::sum(logp * drx::one_hot(labels, kClasses, drx::f32), {1}));
}

// Multiply-adds of the matrix products, counted as 2 flops each: the forward
// pass has three products; the backward pass adds dW for every layer and dx
// for the two upper layers (the input needs no gradient).
constexpr double kForwardFlops =
    2.0 * kBatch * (kIn * kHidden + kHidden * kHidden + kHidden * kClasses);
constexpr double kBackwardFlops =
    2.0 * kBatch * (kIn * kHidden + 2 * kHidden * kHidden + 2 * kHidden * kClasses);

const Problem& problem() {
  static const Problem p = make_problem();
  return p;
}

void set_counters(benchmark::State& state, double flops, size_t equations) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["eqns"] = static_cast<double>(equations);
}

void BM_Forward(benchmark::State& state) {
  const Problem& p = problem();
  auto f = drx::jit(loss);
  f(p.params, p.x, p.labels);  // compile outside the timed loop
  for (auto _ : state) {
    drx::Array l = f(p.params, p.x, p.labels);
    benchmark::DoNotOptimize(l.raw());
  }
  set_counters(state, kForwardFlops, f.last_program().eqns.size());
}
BENCHMARK(BM_Forward)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ValueAndGrad(benchmark::State& state) {
  const Problem& p = problem();
  auto vg = drx::jit(drx::value_and_grad(loss));
  // Both programs must compute the same loss, or the comparison means nothing.
  float want = drx::jit(loss)(p.params, p.x, p.labels).item<float>();
  float got = vg(p.params, p.x, p.labels).first.item<float>();
  if (!(std::abs(got - want) <= 1e-5f * std::abs(want))) {
    state.SkipWithError("value_and_grad and the forward pass disagree on the loss");
    return;
  }
  for (auto _ : state) {
    auto [l, g] = vg(p.params, p.x, p.labels);
    benchmark::DoNotOptimize(l.raw());
    benchmark::DoNotOptimize(g);
  }
  set_counters(state, kForwardFlops + kBackwardFlops, vg.last_program().eqns.size());
}
BENCHMARK(BM_ValueAndGrad)->Unit(benchmark::kMillisecond)->UseRealTime();

// The console reporter, also keeping the fastest wall and CPU time per
// iteration of each benchmark (the minimum is the least disturbed by other
// load on the machine).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  explicit RatioReporter(bool color) : ConsoleReporter(color ? OO_Defaults : OO_Tabular) {}
  struct Best {
    double real = std::numeric_limits<double>::infinity();
    double cpu = std::numeric_limits<double>::infinity();
  };
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Iteration || r.error_occurred || r.iterations == 0) continue;
      Best& b = best_[r.run_name.function_name];
      b.real = std::min(b.real, r.GetAdjustedRealTime());
      b.cpu = std::min(b.cpu, r.GetAdjustedCPUTime());
    }
    ConsoleReporter::ReportRuns(runs);
  }
  Best best(const std::string& name) const {
    auto it = best_.find(name);
    return it == best_.end() ? Best{} : it->second;
  }

 private:
  std::map<std::string, Best> best_;
};

}  // namespace

int main(int argc, char** argv) {
  drx::set_blas_thread_control(true);
  // A short default so a plain run takes seconds; an explicit flag wins.
  std::vector<char*> args(argv, argv + argc);
  bool has_min_time = false;
  for (int i = 1; i < argc; ++i)
    has_min_time = has_min_time || std::strncmp(argv[i], "--benchmark_min_time", 20) == 0;
  static char default_min_time[] = "--benchmark_min_time=0.5";
  if (!has_min_time) args.insert(args.begin() + 1, default_min_time);
  // Colour only on a terminal, and never when asked not to.
  bool color = isatty(fileno(stdout)) != 0;
  for (char* a : args)
    if (std::strcmp(a, "--benchmark_color=false") == 0 ||
        std::strcmp(a, "--benchmark_color=no") == 0)
      color = false;
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  RatioReporter reporter(color);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  RatioReporter::Best fwd = reporter.best("BM_Forward"), vg = reporter.best("BM_ValueAndGrad");
  if (std::isfinite(fwd.real) && std::isfinite(vg.real)) {
    std::printf("\n                wall        cpu\n");
    std::printf("forward:        %8.3f ms %8.3f ms\n", fwd.real, fwd.cpu);
    std::printf("value_and_grad: %8.3f ms %8.3f ms\n", vg.real, vg.cpu);
    std::printf("value_and_grad / forward = %.2fx wall, %.2fx cpu (target: at most 3x)\n",
                vg.real / fwd.real, vg.cpu / fwd.cpu);
  }
  benchmark::Shutdown();
  return 0;
}
