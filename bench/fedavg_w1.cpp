// Workload W1 of issue 5, timed the way shared/peers/torch_fedavg.py times its
// PyTorch rounds: one FedAvg round of a 784-H-H-10 ReLU MLP (softmax
// cross-entropy, f32), `cohort` clients each running `steps` local SGD steps on
// batches of `batch` examples at learning rate 0.05, server = mean of the client
// models. The round is one jitted drx::program; rounds are chained (each round
// starts from the previous server model), the first call (trace + compile) is
// timed separately, and the median/min of the timed rounds are reported with
// GFLOP/s from the peer's FLOP count. Two reference figures follow: the
// machine's sgemm rate (OpenBLAS, when the build found it) and the jit dispatch
// overhead of a 10-op elementwise program on a tiny array.
//
// After the timed rounds, one more round of a second compiled copy runs under exec::profile:
// its products through sgemm (the same shapes and calls, on the same threads: the better of
// threaded sgemm and one-thread calls side by side) give W1's shape-matched GEMM bound, reported
// as a share of the median round (--skip-roofline leaves it out).
//
// --json prints one JSON line per measurement (for bench/run_peer_comparison.sh);
// --check compares a round against a float64 plain-loop reference and fails on a
// mismatch; --smoke selects tiny sizes and --check (CI runs it).
#include <algorithm>
#include <chrono>
#include <cmath>
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
#include "drx/exec/profile.h"
#include "drx/exec/thread_pool.h"
#include "fedavg_w1_reference.h"
#include "w1_model.h"

#ifdef DRX_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace {

using drx::bench::cpu_seconds;
using drx::bench::median;
using drx::bench::seconds_since;

using namespace w1;

struct Options {
  int64_t cohort = 32, steps = 10, batch = 32, hidden = 200;
  int64_t rounds = 7, warmup = 1, threads = 0;  // 0: drx's default
  int64_t sgemm_n = 1024, dispatch_calls = 20000;
  bool check = false, json = false, sgemm = true, dispatch = true, w1 = true;
  bool unrolled = false;  // local steps unrolled at trace time instead of a scan
  bool roofline = true;   // W1's shape-matched GEMM bound after the timed rounds
};

const char* kUsage =
    "usage: fedavg_w1 [--cohort N] [--steps N] [--batch N] [--hidden N] [--rounds N]\n"
    "                 [--warmup N] [--threads N] [--sgemm-n N] [--dispatch-calls N] [--smoke] "
    "[--check]\n"
    "                 [--json] [--skip-w1] [--skip-sgemm] [--skip-dispatch] [--unrolled]\n"
    "Defaults: W1 (cohort 32, 10 steps of batch 32, hidden 200), 7 timed rounds after 1 warm-up.\n"
    "--unrolled: local steps as a C++ loop at trace time (default: one drx::scan).\n"
    "--threads: drx's thread count (default: DRX_NUM_THREADS, else every hardware thread).\n"
    "--smoke: cohort 4, 2 steps of batch 8, hidden 16, 2 rounds, small sgemm and dispatch\n"
    "runs, and --check (a float64 reference round must agree). Later flags override it.\n";

const drx::bench::CommandLine kCommandLine{"fedavg_w1", kUsage};

Options parse(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Options o;
  // --smoke first, so that explicit sizes given with it win wherever they appear.
  if (std::find(args.begin(), args.end(), "--smoke") != args.end()) {
    o.cohort = 4, o.steps = 2, o.batch = 8, o.hidden = 16, o.rounds = 2;
    o.sgemm_n = 128, o.dispatch_calls = 500, o.check = true;
  }
  std::map<std::string, int64_t*> counts = {{"--cohort", &o.cohort},
                                            {"--steps", &o.steps},
                                            {"--batch", &o.batch},
                                            {"--hidden", &o.hidden},
                                            {"--rounds", &o.rounds},
                                            {"--warmup", &o.warmup},
                                            {"--threads", &o.threads},
                                            {"--sgemm-n", &o.sgemm_n},
                                            {"--dispatch-calls", &o.dispatch_calls}};
  std::map<std::string, std::function<void()>> switches = {
      {"--smoke", [] {}},
      {"--check", [&] { o.check = true; }},
      {"--json", [&] { o.json = true; }},
      {"--skip-w1", [&] { o.w1 = false; }},
      {"--skip-sgemm", [&] { o.sgemm = false; }},
      {"--skip-roofline", [&] { o.roofline = false; }},
      {"--skip-dispatch", [&] { o.dispatch = false; }},
      {"--unrolled", [&] { o.unrolled = true; }},
      {"--help", [] {
         std::fputs(kUsage, stdout);
         std::exit(0);
       }}};
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool has_value = false;
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1), flag = flag.substr(0, eq), has_value = true;
    }
    if (auto s = switches.find(flag); s != switches.end() && !has_value) {
      s->second();
    } else if (auto c = counts.find(flag); c != counts.end()) {
      if (!has_value) {
        if (i + 1 >= args.size()) kCommandLine.error(flag + " needs a value");
        value = args[++i];
      }
      *c->second = kCommandLine.count(flag, value, flag == "--warmup" ? 0 : 1);
      if (flag == "--threads" && *c->second > 1024) kCommandLine.error("--threads is at most 1024");
    } else {
      kCommandLine.error("unknown argument '" + args[i] + "'");
    }
  }
  return o;
}

// ---- the workload -----------------------------------------------------------

auto round_program(const Options& o) {
  int64_t steps = o.steps, batch = o.batch;
  const bool unrolled = o.unrolled;
  return drx::program({{"clients", o.cohort}},
                      [steps, batch, unrolled](drx::Tree server, drx::Value xs, drx::Value ys) {
                        drx::Tree clients = drx::map_fn(
                            [steps, batch, unrolled](drx::Tree p, drx::Value x, drx::Value y) {
                              return unrolled ? w1::local_train_unrolled(std::move(p), x, y, steps,
                                                                         batch)
                                              : w1::local_train_scan(p, x, y, steps, batch);
                            },
                            drx::broadcast(server), xs, ys);
                        return drx::reduce_mean(clients);
                      },
                      {"", "clients", "clients"});
}

struct Inputs {
  drx::Tree server;
  drx::Array xs, ys;
};

// The peer's scheme: He-normal weights, zero biases, uniform [0, 1) inputs,
// uniform labels. Timing does not depend on the values.
Inputs make_inputs(const Options& o) {
  std::mt19937_64 rng(0);
  Inputs in;
  in.server = init_params(o.hidden, rng);
  const int64_t rows = o.steps * o.batch;
  in.xs = drx::Array(drx::f32, {o.cohort, rows, kIn});
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int64_t i = 0; i < in.xs.size(); ++i) in.xs.data<float>()[i] = unit(rng);
  in.ys = drx::Array(drx::i32, {o.cohort, rows});
  std::uniform_int_distribution<int32_t> label(0, kClasses - 1);
  for (int64_t i = 0; i < in.ys.size(); ++i) in.ys.data<int32_t>()[i] = label(rng);
  return in;
}

double round_flops(const Options& o) {
  return w1::round_flops(o.cohort, o.steps, o.batch, o.hidden);
}

w1ref::Mlp to_reference(const drx::Tree& server, int64_t hidden) {
  w1ref::Mlp m;
  m.dims = {kIn, hidden, hidden, kClasses};
  for (auto& keys : kLayerKeys) {
    std::vector<double> w, b;
    const drx::Array& wa = server[keys[0]].array();
    const drx::Array& ba = server[keys[1]].array();
    for (int64_t i = 0; i < wa.size(); ++i) w.push_back(wa.element_as_double(i));
    for (int64_t i = 0; i < ba.size(); ++i) b.push_back(ba.element_as_double(i));
    m.w.push_back(std::move(w));
    m.b.push_back(std::move(b));
  }
  return m;
}

// Largest |drx - reference| over all parameters, relative to the largest |reference|.
double reference_error(const Options& o, const Inputs& in, const drx::Tree& after) {
  w1ref::Mlp want =
      w1ref::fedavg_round(to_reference(in.server, o.hidden), in.xs.data<float>(),
                          in.ys.data<int32_t>(), o.cohort, o.steps, o.batch, kLearningRate);
  w1ref::Mlp got = to_reference(after, o.hidden);
  double err = 0, scale = 0;
  for (size_t l = 0; l < 3; ++l) {
    for (size_t i = 0; i < want.w[l].size(); ++i) {
      err = std::max(err, std::abs(got.w[l][i] - want.w[l][i]));
      scale = std::max(scale, std::abs(want.w[l][i]));
    }
    for (size_t i = 0; i < want.b[l].size(); ++i) {
      err = std::max(err, std::abs(got.b[l][i] - want.b[l][i]));
      scale = std::max(scale, std::abs(want.b[l][i]));
    }
  }
  return err / std::max(scale, 1e-30);
}

// One round of a freshly compiled copy under exec::profile (not the timed copy: timing every
// kernel would slow the rounds it measures), and the roofline of its kernels.
drx::exec::profile::Roofline round_roofline(const Options& o, const Inputs& in,
                                            const drx::Tree& server) {
  namespace profile = drx::exec::profile;
  profile::reset();
  profile::enable("");
  auto round = drx::jit(round_program(o));
  round(server, in.xs, in.ys);
  profile::disable();
  profile::Roofline r = profile::roofline();
  profile::reset();
  return r;
}

// Returns false when --check fails.
bool bench_w1(const Options& o) {
  Inputs in = make_inputs(o);
  auto round = drx::jit(round_program(o));
  auto t0 = std::chrono::steady_clock::now();
  drx::Tree server = round(in.server, in.xs, in.ys);
  const double first_s = seconds_since(t0);
  bool ok = true;
  double check_err = -1;
  if (o.check) {
    check_err = reference_error(o, in, server);
    ok = check_err <= 1e-4;  // f32 against f64 over a few SGD steps
  }
  for (int64_t r = 1; r < o.warmup; ++r) server = round(server, in.xs, in.ys);
  std::vector<double> times, cpu_times;
  for (int64_t r = 0; r < o.rounds; ++r) {
    t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    server = round(server, in.xs, in.ys);
    times.push_back(seconds_since(t0));
    cpu_times.push_back(cpu_seconds() - c0);
  }
  const double med = median(times), best = *std::min_element(times.begin(), times.end());
  const double cpu_med = median(cpu_times);
  const double gflops = round_flops(o) / med * 1e-9;
  const size_t eqns = round.last_program().eqns.size();
  double gemm_bound_s = -1, gemm_share = -1;
  if (o.roofline) {
    const drx::exec::profile::Roofline r = round_roofline(o, in, server);
    gemm_bound_s = r.product_bound_s;
    gemm_share = r.gemm_s > 0 ? r.sgemm1_s / r.gemm_s : 0;
  }
  if (o.json) {
    std::printf(
        "{\"bench\": \"drx-w1\", \"cohort\": %lld, \"steps\": %lld, \"batch\": %lld, "
        "\"hidden\": %lld, \"rounds\": %lld, \"first_call_s\": %.5f, \"median_s\": %.5f, "
        "\"min_s\": %.5f, \"cpu_median_s\": %.5f, \"gflops\": %.3f, \"eqns\": %zu, "
        "\"traces\": %d, \"threads\": %d, \"local_steps\": \"%s\"",
        static_cast<long long>(o.cohort), static_cast<long long>(o.steps),
        static_cast<long long>(o.batch), static_cast<long long>(o.hidden),
        static_cast<long long>(o.rounds), first_s, med, best, cpu_med, gflops, eqns,
        round.trace_count(), drx::num_threads(), o.unrolled ? "unrolled" : "scan");
    if (o.check) std::printf(", \"check_rel_err\": %.3g", check_err);
    if (o.roofline)
      std::printf(
          ", \"gemm_bound_s\": %.5f, \"of_gemm_bound\": %.4f, \"gemm_kernels_of_sgemm\": %.4f",
          gemm_bound_s, gemm_bound_s / med, gemm_share);
    std::printf("}\n");
  } else {
    std::printf(
        "W1 FedAvg round (drx jit, %d threads, local steps %s): cohort %lld, %lld steps x batch "
        "%lld, MLP "
        "%lld-%lld-%lld-%lld, f32\n",
        drx::num_threads(), o.unrolled ? "unrolled" : "in a scan", static_cast<long long>(o.cohort),
        static_cast<long long>(o.steps), static_cast<long long>(o.batch),
        static_cast<long long>(kIn), static_cast<long long>(o.hidden),
        static_cast<long long>(o.hidden), static_cast<long long>(kClasses));
    std::printf("  first call (trace + compile + run): %.3f s; program: %zu top-level equations\n",
                first_s, eqns);
    std::printf(
        "  %lld timed rounds: median %.4f s, min %.4f s (CPU time median %.4f s), %.3f GFLOP/s "
        "(%.3f GFLOP/round)\n",
        static_cast<long long>(o.rounds), med, best, cpu_med, gflops, round_flops(o) * 1e-9);
    if (o.roofline)
      std::printf(
          "  shape-matched GEMM bound (the round's products through sgemm on %d threads): %.4f "
          "s = %.1f%% of the median round; drx's gemm kernels at %.1f%% of one-thread sgemm\n",
          drx::num_threads(), gemm_bound_s, 100 * gemm_bound_s / med, 100 * gemm_share);
    if (o.check)
      std::printf("  check against the float64 reference round: max rel error %.3g (%s)\n",
                  check_err, ok ? "ok" : "FAILED, limit 1e-4");
  }
  if (round.trace_count() != 1) {
    std::fprintf(stderr, "fedavg_w1: the round was traced %d times (expected once)\n",
                 round.trace_count());
    ok = false;
  }
  return ok;
}

// ---- reference figures -----------------------------------------------------

void bench_sgemm(const Options& o) {
#ifdef DRX_BENCH_HAVE_OPENBLAS
  const int n = static_cast<int>(o.sgemm_n);
  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = dist(rng), b[i] = dist(rng);
  auto gemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
  };
  gemm();  // warm-up: thread pool start, page faults
  // Best of several repetitions lasting ~0.5 s in all: the machine's capability.
  std::vector<double> times;
  auto start = std::chrono::steady_clock::now();
  do {
    auto t0 = std::chrono::steady_clock::now();
    gemm();
    times.push_back(seconds_since(t0));
  } while (times.size() < 3 || (seconds_since(start) < 0.5 && times.size() < 1000));
  const double best = *std::min_element(times.begin(), times.end());
  const double gflops = 2.0 * n * n * static_cast<double>(n) / best * 1e-9;
  const int threads = openblas_get_num_threads();
  if (o.json)
    std::printf(
        "{\"bench\": \"sgemm\", \"n\": %d, \"blas\": \"OpenBLAS\", \"threads\": %d, "
        "\"min_s\": %.6f, \"gflops\": %.2f}\n",
        n, threads, best, gflops);
  else
    std::printf("sgemm %d^3 (OpenBLAS cblas_sgemm, %d threads): best %.3f ms, %.2f GFLOP/s\n", n,
                threads, best * 1e3, gflops);
#else
  if (o.json)
    std::printf("{\"bench\": \"sgemm\", \"skipped\": \"OpenBLAS not found at build time\"}\n");
  else
    std::printf("sgemm: skipped (OpenBLAS was not found when this benchmark was built)\n");
#endif
}

void bench_dispatch(const Options& o) {
  // Ten elementwise ops that simplification cannot merge or fold away.
  auto f = drx::jit([](drx::Value x) {
    drx::Value y = x * 1.01;
    y = y + 0.1;
    y = drx::tanh(y);
    y = y * y;
    y = y - 0.2;
    y = drx::exp(y);
    y = y / 1.5;
    y = drx::maximum(y, 0.05);
    y = drx::sqrt(y);
    return y + x;
  });
  drx::Array x = drx::full({8}, 0.5, drx::f32);
  for (int i = 0; i < 100; ++i) f(x);  // trace, compile, warm caches
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < o.dispatch_calls; ++i) f(x);
  const double us = seconds_since(t0) / static_cast<double>(o.dispatch_calls) * 1e6;
  const size_t eqns = f.last_program().eqns.size();
  if (o.json)
    std::printf(
        "{\"bench\": \"jit-dispatch\", \"ops\": 10, \"eqns\": %zu, \"shape\": \"f32[8]\", "
        "\"calls\": %lld, \"us_per_call\": %.3f}\n",
        eqns, static_cast<long long>(o.dispatch_calls), us);
  else
    std::printf(
        "jit dispatch, 10-op elementwise program on f32[8] (%zu equations): %.3f us/call "
        "(mean of %lld calls)\n",
        eqns, us, static_cast<long long>(o.dispatch_calls));
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  bool ok = true;
  drx::set_blas_thread_control(true);
  try {
    if (o.threads > 0) drx::set_num_threads(static_cast<int>(o.threads));
    if (o.w1) ok = bench_w1(o);
    std::fflush(stdout);
    if (o.sgemm) {
      // The machine's sgemm rate: OpenBLAS on the threads it was started with.
      drx::set_blas_thread_control(false);
      bench_sgemm(o);
      drx::set_blas_thread_control(true);
    }
    if (o.dispatch) bench_dispatch(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fedavg_w1: %s\n", e.what());
    return 1;
  }
  return ok ? 0 : 1;
}
