// One FedAvg round of McMahan et al.'s CNN (issue 34; drx fedavg --model cnn), timed the way
// bench/fedavg_w1.cpp times W1 and bench/torch_fedavg_cnn_round.py times its PyTorch peer:
// `cohort` clients, each running `steps` local SGD steps on batches of `batch` synthetic
// Fashion-MNIST-shaped examples (pixels uniform in [0, 1), uniform labels of 10 classes), server
// = the example-weighted mean of the client models (FedAvg, server lr 1). The round is
// optim::fedavg_round_on_client_data with RoundSpec::model = nn::Model::cnn(), jitted once;
// rounds are chained (each starts from the previous server model), the first call (trace +
// compile + run) is timed separately, and the median/min of the timed rounds are reported with
// GFLOP/s from a FLOP count by hand:
//   per example forward: conv0 2 * 28*28*32 * 1*5*5, conv1 2 * 14*14*64 * 32*5*5,
//   dense0 2 * 3136*512, dense1 2 * 512*10 (24.5 MFLOP); backward = 2 x forward.
//
// usage: drx_fedavg_cnn_round [--cohort N] [--steps N] [--batch N] [--rounds N] [--warmup N]
//                             [--threads N] [--precision f32|bf16] [--lr LR] [--json] [--smoke]
// --json prints one JSON line; --smoke: cohort 2, 1 step of batch 4, 1 round (CI runs it).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/common.h"
#include "drx/drx.h"
#include "drx/exec/thread_pool.h"

namespace {

using drx::bench::cpu_seconds;
using drx::bench::median;
using drx::bench::seconds_since;

constexpr int64_t kSide = 28, kPixels = kSide * kSide, kClasses = 10;

struct Options {
  int64_t cohort = 10, steps = 10, batch = 32;  // as bench/torch_fedavg_cnn_round.py
  int64_t rounds = 5, warmup = 1, threads = 0;  // threads 0: drx's default
  std::string precision = "f32";
  double lr = 0.05;
  bool json = false;
};

const char* kUsage =
    "usage: drx_fedavg_cnn_round [--cohort N] [--steps N] [--batch N] [--rounds N] [--warmup N]\n"
    "                            [--threads N] [--precision f32|bf16] [--lr LR] [--json] "
    "[--smoke]\n"
    "Defaults: cohort 10, 10 local steps of batch 32 (the PyTorch peer's), client lr 0.05, f32,\n"
    "5 timed rounds after 1 warm-up (the first call).\n"
    "--threads: drx's thread count (default: DRX_NUM_THREADS, else every hardware thread).\n"
    "--smoke: cohort 2, 1 step of batch 4, 1 timed round. Later flags override it.\n";

const drx::bench::CommandLine kCommandLine{"fedavg_cnn_round", kUsage};

Options parse(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Options o;
  if (std::find(args.begin(), args.end(), "--smoke") != args.end())
    o.cohort = 2, o.steps = 1, o.batch = 4, o.rounds = 1;
  std::map<std::string, int64_t*> counts = {{"--cohort", &o.cohort}, {"--steps", &o.steps},
                                            {"--batch", &o.batch},   {"--rounds", &o.rounds},
                                            {"--warmup", &o.warmup}, {"--threads", &o.threads}};
  std::map<std::string, std::function<void()>> switches = {
      {"--smoke", [] {}}, {"--json", [&] { o.json = true; }}, {"--help", [] {
                                                                 std::fputs(kUsage, stdout);
                                                                 std::exit(0);
                                                               }}};
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool has_value = false;
    if (size_t eq = flag.find('='); eq != std::string::npos)
      value = flag.substr(eq + 1), flag = flag.substr(0, eq), has_value = true;
    if (auto s = switches.find(flag); s != switches.end() && !has_value) {
      s->second();
      continue;
    }
    const bool known = counts.count(flag) || flag == "--precision" || flag == "--lr";
    if (!known) kCommandLine.error("unknown argument '" + args[i] + "'");
    if (!has_value) {
      if (i + 1 >= args.size()) kCommandLine.error(flag + " needs a value");
      value = args[++i];
    }
    if (flag == "--precision") {
      if (value != "f32" && value != "bf16")
        kCommandLine.error("--precision expects f32 or bf16, got '" + value + "'");
      o.precision = value;
    } else if (flag == "--lr") {
      char* end = nullptr;
      o.lr = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(o.lr > 0))
        kCommandLine.error("--lr expects a number > 0, got '" + value + "'");
    } else {
      *counts[flag] =
          kCommandLine.count(flag, value, flag == "--warmup" || flag == "--threads" ? 0 : 1);
      if (flag == "--threads" && o.threads > 1024) kCommandLine.error("--threads is at most 1024");
    }
  }
  return o;
}

// FLOPs of one example's forward pass, counted by hand (see the top of the file).
double forward_flops_per_example() {
  const double conv0 = 2.0 * (28 * 28 * 32) * (1 * 5 * 5);
  const double conv1 = 2.0 * (14 * 14 * 64) * (32 * 5 * 5);
  const double dense0 = 2.0 * 3136 * 512, dense1 = 2.0 * 512 * kClasses;
  return conv0 + conv1 + dense0 + dense1;
}

// Forward and backward (2 x forward) of every example of the round.
double round_flops(const Options& o) {
  return static_cast<double>(o.cohort * o.steps * o.batch) * 3.0 * forward_flops_per_example();
}

int run(const Options& o) {
  if (o.threads > 0) drx::set_num_threads(static_cast<int>(o.threads));
  drx::optim::RoundSpec spec;
  spec.client.lr = o.lr;
  spec.cohort = o.cohort;
  spec.steps = o.steps;
  spec.batch = o.batch;
  spec.full_steps = o.steps;  // every client has data in every step: no empty-step check
  spec.model = drx::nn::Model::cnn();
  spec.policy = drx::nn::Policy::named(o.precision);

  const int64_t rows = o.steps * o.batch;
  std::mt19937_64 rng(0);
  drx::Array x(drx::f32, {o.cohort, rows, kPixels});
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = unit(rng);
  drx::Array y(drx::i32, {o.cohort, rows});
  std::uniform_int_distribution<int32_t> label(0, kClasses - 1);
  for (int64_t i = 0; i < y.size(); ++i) y.data<int32_t>()[i] = label(rng);
  const drx::Array mask = drx::full({o.cohort, o.steps, o.batch}, 1.0, drx::f32);
  const drx::Array weights = drx::full({o.cohort}, static_cast<double>(rows), drx::f32);

  drx::Tree params = drx::nn::cnn_init(kSide, kSide, 1, kClasses, 0);
  drx::Tree state = spec.server.init(params);
  auto round = drx::jit(drx::optim::fedavg_round_on_client_data(spec));
  auto step = [&] {
    drx::Tree out = round(params, state, x, y, mask, weights);
    params = out["params"];
    state = out["state"];
    return out["loss"].array().element_as_double(0);
  };
  auto t0 = std::chrono::steady_clock::now();
  double loss = step();
  const double first_s = seconds_since(t0);
  for (int64_t r = 1; r < o.warmup; ++r) loss = step();
  std::vector<double> times, cpu_times;
  for (int64_t r = 0; r < o.rounds; ++r) {
    t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    loss = step();
    times.push_back(seconds_since(t0));
    cpu_times.push_back(cpu_seconds() - c0);
  }
  const double med = median(times), best = *std::min_element(times.begin(), times.end());
  const double gflop = round_flops(o) * 1e-9;
  if (o.json) {
    std::printf(
        "{\"bench\": \"drx-fedavg-cnn\", \"cohort\": %lld, \"steps\": %lld, \"batch\": %lld, "
        "\"precision\": \"%s\", \"threads\": %d, \"rounds\": %lld, \"first_call_s\": %.5f, "
        "\"median_s\": %.5f, \"min_s\": %.5f, \"cpu_median_s\": %.5f, \"gflop_per_round\": "
        "%.4f, \"gflops\": %.3f, \"last_loss\": %.5f, \"traces\": %d}\n",
        static_cast<long long>(o.cohort), static_cast<long long>(o.steps),
        static_cast<long long>(o.batch), o.precision.c_str(), drx::num_threads(),
        static_cast<long long>(o.rounds), first_s, med, best, median(cpu_times), gflop, gflop / med,
        loss, round.trace_count());
  } else {
    std::printf(
        "CNN FedAvg round (drx jit, %d threads, %s): cohort %lld, %lld steps x batch %lld, "
        "McMahan et al.'s CNN on 28x28x1\n",
        drx::num_threads(), o.precision.c_str(), static_cast<long long>(o.cohort),
        static_cast<long long>(o.steps), static_cast<long long>(o.batch));
    std::printf("  first call (trace + compile + run): %.3f s\n", first_s);
    std::printf(
        "  %lld timed rounds: median %.4f s, min %.4f s (CPU time median %.4f s), %.3f GFLOP/s "
        "(%.3f GFLOP/round); last training loss %.4f\n",
        static_cast<long long>(o.rounds), med, best, median(cpu_times), gflop / med, gflop, loss);
  }
  if (round.trace_count() != 1) {
    std::fprintf(stderr, "fedavg_cnn_round: the round was traced %d times (expected once)\n",
                 round.trace_count());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  drx::set_blas_thread_control(true);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fedavg_cnn_round: %s\n", e.what());
    return 1;
  }
}
