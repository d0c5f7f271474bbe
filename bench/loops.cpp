// Local SGD steps as a loop (drx::scan) versus unrolled, on the W1 model
// (bench/w1_model.h: 784-200-200-10 ReLU MLP, softmax cross-entropy, f32,
// learning rate 0.05, batch 32).
//
//   --first-call (default)  A federated round over a "clients" placement
//       (cohort 2): each client runs `steps` local SGD steps from the broadcast
//       server model, either as one scan over [steps, batch, ...] slices or
//       unrolled by a C++ loop over row slices (as bench/fedavg_w1.cpp), and the
//       server averages the clients (reduce_mean). The hyper-objective h(server)
//       is the W1 loss of the averaged model on client 0's first batch. For each
//       step count and variant: the first call of a fresh jit(grad(h)) (trace +
//       transform + compile + run), a second call, and the equations of the
//       compiled gradient program (top level, and including every sub-program
//       body). The two variants' gradients are compared.
//   --memory MODE           One client (no placement) running --steps SGD steps
//       with scan; objective = the loss of the final model on the first batch.
//       forward: jit(objective); stored | remat | checkpoint: jit(grad(objective))
//       with ScanOptions{}, {.remat = true}, {.checkpoint_every = --every}.
//       Reports the peak resident memory (VmHWM after two calls) minus the
//       resident memory once the inputs exist (VmRSS), and the second call's time.
//   --memory-table          All four modes, each in a fresh child process (the
//       peak is per process), as one table with the bound 2 x forward + 64 x |carry|.
#include "drx/transforms/loops.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "bench/common.h"
#include "drx/drx.h"
#include "drx/exec/executable.h"
#include "drx/exec/thread_pool.h"
#include "w1_model.h"

namespace {

using drx::bench::cpu_seconds;
using drx::bench::median;
using drx::bench::seconds_since;

using namespace w1;

enum class Mode { first_call, memory, memory_table };

struct Options {
  Mode mode = Mode::first_call;
  std::vector<int64_t> steps_list = {1, 100, 500, 5000};
  int64_t batch = 32, cohort = 2, hidden = 200, max_unrolled = 500;
  int64_t steps = 1000, every = 32, threads = 0;  // threads 0: drx's default
  int64_t scan_checkpoint = 0;  // --first-call's scan: checkpoint_every (0: stored residuals)
  std::string memory_mode;
  bool json = false;
};

const char* kUsage =
    "usage: drx_loops_bench [--first-call] [--steps-list N,N,...] [--cohort N] [--max-unrolled N]\n"
    "                       [--scan-checkpoint K]\n"
    "       drx_loops_bench --memory forward|stored|remat|checkpoint [--steps N] [--every K]\n"
    "       drx_loops_bench --memory-table [--steps N] [--every K]\n"
    "common: [--batch N] [--hidden N] [--threads N] [--json] [--help]\n"
    "\n"
    "Local SGD on the W1 model (784-H-H-10 ReLU MLP, f32, lr 0.05), the steps as a\n"
    "drx::scan or unrolled.\n"
    "--first-call (default): for each step count of --steps-list (default 1,100,500,5000),\n"
    "  a round over a 'clients' placement of --cohort (default 2) clients, each running\n"
    "  the steps from the server model; server = mean of the clients; h(server) = loss\n"
    "  of the mean on client 0's first batch. Times the first call of a fresh\n"
    "  jit(grad(h)) (trace + transform + compile + run) and a second call, counts the\n"
    "  gradient program's equations, and checks that scan and unrolled agree. The\n"
    "  unrolled variant runs only up to --max-unrolled steps (default 500).\n"
    "  --scan-checkpoint K: that scan with ScanOptions{.checkpoint_every=K} (default 0:\n"
    "  ScanOptions{}, which stores ~1.6 MiB of residuals per step and client at hidden 200).\n"
    "--memory MODE: one client, --steps steps (default 1000) with scan; forward =\n"
    "  jit(objective), stored / remat / checkpoint = jit(grad(objective)) with\n"
    "  ScanOptions{} / {.remat=true} / {.checkpoint_every=K} (--every, default 32).\n"
    "  Reports peak resident memory minus resident memory with the inputs, in MiB,\n"
    "  and the seconds per call (second call).\n"
    "--memory-table: the four --memory modes, each in a fresh child process.\n"
    "--batch: examples per step (default 32). --hidden: hidden width (default 200).\n"
    "--threads: drx's thread count (default: DRX_NUM_THREADS, else every hardware thread).\n"
    "--json: one JSON line per measurement instead of tables.\n";

const drx::bench::CommandLine kCommandLine{"drx_loops_bench", kUsage};

std::vector<int64_t> parse_list(const std::string& flag, const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(kCommandLine.count(flag, item, 1));
  if (out.empty() || text.back() == ',') kCommandLine.error(flag + " needs a list like 1,100,500");
  return out;
}

Options parse(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Options o;
  int modes = 0;
  std::map<std::string, int64_t*> counts = {
      {"--batch", &o.batch},     {"--cohort", &o.cohort},
      {"--hidden", &o.hidden},   {"--steps", &o.steps},
      {"--every", &o.every},     {"--max-unrolled", &o.max_unrolled},
      {"--threads", &o.threads}, {"--scan-checkpoint", &o.scan_checkpoint}};
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool has_value = false;
    if (size_t eq = flag.find('='); eq != std::string::npos && flag.rfind("--", 0) == 0) {
      value = flag.substr(eq + 1), flag = flag.substr(0, eq), has_value = true;
    }
    auto take_value = [&] {
      if (!has_value) {
        if (i + 1 >= args.size()) kCommandLine.error(flag + " needs a value");
        value = args[++i];
      }
      return value;
    };
    auto no_value = [&] {
      if (has_value) kCommandLine.error(flag + " takes no value");
    };
    if (flag == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (flag == "--first-call") {
      no_value(), o.mode = Mode::first_call, ++modes;
    } else if (flag == "--memory-table") {
      no_value(), o.mode = Mode::memory_table, ++modes;
    } else if (flag == "--memory") {
      o.memory_mode = take_value(), o.mode = Mode::memory, ++modes;
      if (o.memory_mode != "forward" && o.memory_mode != "stored" && o.memory_mode != "remat" &&
          o.memory_mode != "checkpoint")
        kCommandLine.error("--memory needs forward, stored, remat or checkpoint, got '" +
                           o.memory_mode + "'");
    } else if (flag == "--json") {
      no_value(), o.json = true;
    } else if (flag == "--steps-list") {
      o.steps_list = parse_list(flag, take_value());
    } else if (auto c = counts.find(flag); c != counts.end()) {
      *c->second = kCommandLine.count(
          flag, take_value(), (flag == "--max-unrolled" || flag == "--scan-checkpoint") ? 0 : 1);
      if (flag == "--threads" && *c->second > 1024) kCommandLine.error("--threads is at most 1024");
    } else {
      kCommandLine.error("unknown argument '" + args[i] + "'");
    }
  }
  if (modes > 1)
    kCommandLine.error("give at most one of --first-call, --memory and --memory-table");
  return o;
}

constexpr double kMiB = 1024.0 * 1024.0;

size_t tree_bytes(const drx::Tree& t) {
  size_t n = 0;
  for (const drx::Tree& leaf : drx::tree_leaves(t)) n += leaf.array().nbytes();
  return n;
}

// Equations of p, with (all = true) those of every sub-program body found in
// equation parameters, recursively (each occurrence counted).
size_t count_eqns(const drx::Program& p, bool all) {
  size_t n = p.eqns.size();
  if (!all) return n;
  for (const drx::Eqn& e : p.eqns)
    for (const auto& [key, attr] : e.params.items())
      if (const auto* body = std::get_if<std::shared_ptr<const drx::Program>>(&attr))
        if (*body) n += count_eqns(**body, true);
  return n;
}

// Largest |a - b| over all leaves, relative to the largest |b|.
double max_rel_diff(const drx::Tree& a, const drx::Tree& b) {
  std::vector<drx::Tree> la = drx::tree_leaves(a), lb = drx::tree_leaves(b);
  double err = 0, scale = 0;
  for (size_t l = 0; l < la.size() && l < lb.size(); ++l) {
    const drx::Array &x = la[l].array(), &y = lb[l].array();
    for (int64_t i = 0; i < x.size() && i < y.size(); ++i) {
      err = std::max(err, std::abs(x.element_as_double(i) - y.element_as_double(i)));
      scale = std::max(scale, std::abs(y.element_as_double(i)));
    }
  }
  return err / std::max(scale, 1e-30);
}

// ---- the workload -----------------------------------------------------------

// h(server, xs, ys) for the round with `steps` local steps per client:
// xs [cohort, steps * batch, 784], ys [cohort, steps * batch].
auto hyper_objective(bool use_scan, int64_t cohort, int64_t steps, int64_t batch,
                     int64_t checkpoint_every) {
  drx::ScanOptions options;
  options.checkpoint_every = checkpoint_every;
  auto round = drx::program(
      {{"clients", cohort}},
      [use_scan, steps, batch, options](drx::Tree server, drx::Value xs, drx::Value ys) {
        drx::Tree clients = drx::map_fn(
            [use_scan, steps, batch, options](drx::Tree p, drx::Value x, drx::Value y) {
              if (!use_scan) return local_train_unrolled(std::move(p), x, y, steps, batch);
              return local_train_scan(p, x, y, steps, batch, options);
            },
            drx::broadcast(server), xs, ys);
        return drx::reduce_mean(clients);
      },
      {"", "clients", "clients"});
  return [round, batch](drx::Tree server, drx::Value xs, drx::Value ys) -> drx::Value {
    drx::Tree mean_params = round(std::move(server), xs, ys);
    drx::Value x0 = drx::reshape(drx::slice(xs, {0, 0, 0}, {1, batch, kIn}), {batch, kIn});
    drx::Value y0 = drx::reshape(drx::slice(ys, {0, 0}, {1, batch}), {batch});
    return loss(mean_params, x0, y0);
  };
}

// He-normal weights, zero biases (w1::init_params), uniform [0, 1) inputs and
// uniform labels, with the given leading shape of the data.
struct Inputs {
  drx::Tree params;
  drx::Array xs, ys;
};

Inputs make_inputs(int64_t hidden, const drx::Shape& lead) {
  std::mt19937_64 rng(0);
  Inputs in;
  in.params = init_params(hidden, rng);
  drx::Shape xshape = lead;
  xshape.push_back(kIn);
  in.xs = drx::Array(drx::f32, xshape);
  in.ys = drx::Array(drx::i32, lead);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  float* x = in.xs.data<float>();
  for (int64_t i = 0; i < in.xs.size(); ++i) x[i] = unit(rng);
  std::uniform_int_distribution<int32_t> label(0, kClasses - 1);
  int32_t* y = in.ys.data<int32_t>();
  for (int64_t i = 0; i < in.ys.size(); ++i) y[i] = label(rng);
  return in;
}

// ---- --first-call -------------------------------------------------------------

struct FirstCall {
  double first_s = 0, second_s = 0;
  double compile_s = 0;  // trace + transforms + simplify + compile, without running
  size_t eqns_all = 0, eqns_top = 0;
  drx::Tree grad;
};

FirstCall time_first_call(bool use_scan, const Options& o, int64_t steps, const Inputs& in) {
  FirstCall r;
  {
    // What jit does before it runs: trace grad(h) (with every transformation), simplify, compile.
    auto h = drx::grad(hyper_objective(use_scan, o.cohort, steps, o.batch, o.scan_checkpoint));
    std::vector<drx::Type> types;
    for (const drx::Tree& l : drx::tree_leaves(in.params))
      types.emplace_back(l.array().dtype(), l.array().shape());
    types.emplace_back(in.xs.dtype(), in.xs.shape());
    types.emplace_back(in.ys.dtype(), in.ys.shape());
    const size_t n_params = types.size() - 2;
    auto t0 = std::chrono::steady_clock::now();
    drx::Program p = drx::trace(
        [&](const std::vector<drx::Value>& a) {
          std::vector<drx::Tree> leaves(a.begin(), a.begin() + static_cast<long>(n_params));
          drx::Tree g = h(drx::tree_unflatten(in.params, leaves), a[n_params], a[n_params + 1]);
          std::vector<drx::Value> out;
          for (const drx::Tree& l : drx::tree_leaves(g)) out.push_back(l.value());
          return out;
        },
        types);
    drx::Executable exe = drx::compile(drx::simplify(p));
    r.compile_s = seconds_since(t0);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto g =
      drx::jit(drx::grad(hyper_objective(use_scan, o.cohort, steps, o.batch, o.scan_checkpoint)));
  r.grad = g(in.params, in.xs, in.ys);
  r.first_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  r.grad = g(in.params, in.xs, in.ys);
  r.second_s = seconds_since(t0);
  r.eqns_all = count_eqns(g.last_program(), true);
  r.eqns_top = count_eqns(g.last_program(), false);
  return r;
}

// Relative differences above this get a warning (f32: expect ~1e-5).
constexpr double kAgreeLimit = 1e-4;

int run_first_call(const Options& o) {
  if (!o.json) {
    std::printf(
        "First call of jit(grad(h)), h = W1 loss of a FedAvg round's mean model; cohort %lld, "
        "batch %lld, MLP %lld-%lld-%lld-%lld, f32, %d threads, scan checkpoint_every %lld\n\n",
        static_cast<long long>(o.cohort), static_cast<long long>(o.batch),
        static_cast<long long>(kIn), static_cast<long long>(o.hidden),
        static_cast<long long>(o.hidden), static_cast<long long>(kClasses), drx::num_threads(),
        static_cast<long long>(o.scan_checkpoint));
    std::printf(
        "| steps | variant | equations (all bodies) | equations (top level) | first call s | "
        "second call s | first - second s | trace + compile s | unrolled/scan first call |\n");
    std::printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    std::fflush(stdout);
  }
  bool agree = true;
  std::vector<std::string> notes;
  for (int64_t steps : o.steps_list) {
    Inputs in = make_inputs(o.hidden, {o.cohort, steps * o.batch});
    FirstCall scan = time_first_call(true, o, steps, in);
    const bool unroll = steps <= o.max_unrolled;
    FirstCall unrolled;
    double diff = -1;
    if (unroll) {
      unrolled = time_first_call(false, o, steps, in);
      diff = max_rel_diff(scan.grad, unrolled.grad);
      if (!(diff <= kAgreeLimit)) agree = false;
    }
    if (o.json) {
      std::printf(
          "{\"bench\": \"loops-first-call\", \"steps\": %lld, \"variant\": \"scan\", "
          "\"eqns_all\": %zu, \"eqns_top\": %zu, \"first_call_s\": %.4f, \"second_call_s\": "
          "%.4f, \"trace_compile_s\": %.5f}\n",
          static_cast<long long>(steps), scan.eqns_all, scan.eqns_top, scan.first_s, scan.second_s,
          scan.compile_s);
      if (unroll)
        std::printf(
            "{\"bench\": \"loops-first-call\", \"steps\": %lld, \"variant\": \"unrolled\", "
            "\"eqns_all\": %zu, \"eqns_top\": %zu, \"first_call_s\": %.4f, \"second_call_s\": "
            "%.4f, \"ratio_first_call\": %.3f, \"max_rel_diff\": %.3g}\n",
            static_cast<long long>(steps), unrolled.eqns_all, unrolled.eqns_top, unrolled.first_s,
            unrolled.second_s, unrolled.first_s / scan.first_s, diff);
    } else {
      // first - second: what the first call adds (trace, transforms, compile, first allocations).
      std::printf("| %lld | scan | %zu | %zu | %.3f | %.3f | %.3f | %.4f | |\n",
                  static_cast<long long>(steps), scan.eqns_all, scan.eqns_top, scan.first_s,
                  scan.second_s, scan.first_s - scan.second_s, scan.compile_s);
      if (unroll)
        std::printf("| %lld | unrolled | %zu | %zu | %.3f | %.3f | %.3f | %.4f | %.2f |\n",
                    static_cast<long long>(steps), unrolled.eqns_all, unrolled.eqns_top,
                    unrolled.first_s, unrolled.second_s, unrolled.first_s - unrolled.second_s,
                    unrolled.compile_s, unrolled.first_s / scan.first_s);
      else
        std::printf("| %lld | unrolled | - | - | - | - | - | - | - |\n",
                    static_cast<long long>(steps));
    }
    std::fflush(stdout);
    if (unroll) {
      char line[200];
      std::snprintf(line, sizeof line,
                    "%lld steps: scan vs unrolled gradient, max |difference| / max |unrolled| = "
                    "%.3g%s",
                    static_cast<long long>(steps), diff,
                    diff <= kAgreeLimit ? "" : "  WARNING: above 1e-4 (expected ~1e-5 in f32)");
      notes.push_back(line);
    }
  }
  if (!o.json) {
    std::printf("\n");
    for (const std::string& n : notes) std::printf("%s\n", n.c_str());
  }
  if (!agree)
    std::fprintf(stderr, "drx_loops_bench: WARNING: scan and unrolled gradients differ\n");
  return 0;
}

// ---- --memory -----------------------------------------------------------------

// A field of /proc/self/status in kB ("VmRSS", "VmHWM"), as bytes.
double proc_status_bytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0)
      return std::strtod(line.c_str() + prefix.size(), nullptr) * 1024;
  throw std::runtime_error(std::string("no ") + field + " in /proc/self/status");
}

drx::ScanOptions scan_options(const Options& o) {
  drx::ScanOptions s;
  if (o.memory_mode == "remat") s.remat = true;
  if (o.memory_mode == "checkpoint") s.checkpoint_every = o.every;
  return s;
}

int run_memory(const Options& o) {
  Inputs in = make_inputs(o.hidden, {o.steps, o.batch});
  const drx::ScanOptions options = scan_options(o);
  auto objective = [options](drx::Tree p, drx::Value xs, drx::Value ys) -> drx::Value {
    const int64_t batch = ys.shape()[1];
    drx::Tree final_p = local_train_scan(p, xs, ys, ys.shape()[0], batch, options);
    drx::Value x0 = drx::reshape(drx::slice(xs, {0, 0, 0}, {1, batch, kIn}), {batch, kIn});
    drx::Value y0 = drx::reshape(drx::slice(ys, {0, 0}, {1, batch}), {batch});
    return loss(final_p, x0, y0);
  };
  const double carry_bytes = static_cast<double>(tree_bytes(in.params));
  const double input_bytes =
      carry_bytes + static_cast<double>(in.xs.nbytes()) + static_cast<double>(in.ys.nbytes());
  const double baseline = proc_status_bytes("VmRSS");
  double second_s = 0;
  auto time_two_calls = [&](auto&& f) {
    f(in.params, in.xs, in.ys);
    auto t0 = std::chrono::steady_clock::now();
    f(in.params, in.xs, in.ys);
    second_s = seconds_since(t0);
  };
  if (o.memory_mode == "forward")
    time_two_calls(drx::jit(objective));
  else
    time_two_calls(drx::jit(drx::grad(objective)));
  const double peak = proc_status_bytes("VmHWM");
  const double extra_mib = (peak - baseline) / kMiB;
  if (o.json) {
    std::printf(
        "{\"bench\": \"loops-memory\", \"mode\": \"%s\", \"steps\": %lld, \"every\": %lld, "
        "\"batch\": %lld, \"hidden\": %lld, \"peak_minus_inputs_mib\": %.3f, \"s_per_call\": "
        "%.5f, \"carry_mib\": %.4f, \"inputs_mib\": %.3f, \"baseline_rss_mib\": %.3f, "
        "\"peak_rss_mib\": %.3f}\n",
        o.memory_mode.c_str(), static_cast<long long>(o.steps), static_cast<long long>(o.every),
        static_cast<long long>(o.batch), static_cast<long long>(o.hidden), extra_mib, second_s,
        carry_bytes / kMiB, input_bytes / kMiB, baseline / kMiB, peak / kMiB);
  } else {
    std::printf(
        "%s, %lld scan steps of batch %lld (|carry| %.3f MiB, inputs %.1f MiB): peak - inputs "
        "%.1f MiB, %.4f s/call\n",
        o.memory_mode.c_str(), static_cast<long long>(o.steps), static_cast<long long>(o.batch),
        carry_bytes / kMiB, input_bytes / kMiB, extra_mib, second_s);
  }
  return 0;
}

// ---- --memory-table -----------------------------------------------------------

// The number after "key": in a JSON line (NaN when absent).
double json_number(const std::string& line, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  size_t at = line.find(k);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(line.c_str() + at + k.size(), nullptr);
}

// Runs this program with `args` in a child process; returns its stdout, or
// throws when it fails.
std::string run_child(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    close(fds[1]);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    std::fprintf(stderr, "drx_loops_bench: execv /proc/self/exe: %s\n", std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string cmd;
    for (const std::string& a : args) cmd += " " + a;
    throw std::runtime_error("child process failed (" +
                             (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                : "signal " + std::to_string(WTERMSIG(status))) +
                             "):" + cmd);
  }
  return out;
}

int run_memory_table(const Options& o) {
  const char* modes[] = {"forward", "stored", "remat", "checkpoint"};
  struct Row {
    double mib, s;
  };
  std::map<std::string, Row> rows;
  double carry_mib = 0, inputs_mib = 0;
  std::vector<std::string> lines;
  for (const char* m : modes) {
    std::vector<std::string> args = {"drx_loops_bench",
                                     "--memory",
                                     m,
                                     "--steps",
                                     std::to_string(o.steps),
                                     "--every",
                                     std::to_string(o.every),
                                     "--batch",
                                     std::to_string(o.batch),
                                     "--hidden",
                                     std::to_string(o.hidden),
                                     "--json"};
    if (o.threads > 0) args.insert(args.end(), {"--threads", std::to_string(o.threads)});
    std::string out = run_child(args);
    std::string line = out.substr(0, out.find('\n'));
    Row r{json_number(line, "peak_minus_inputs_mib"), json_number(line, "s_per_call")};
    if (std::isnan(r.mib) || std::isnan(r.s))
      throw std::runtime_error("unparseable output of the " + std::string(m) + " child: " + out);
    rows[m] = r;
    carry_mib = json_number(line, "carry_mib");
    inputs_mib = json_number(line, "inputs_mib");
    lines.push_back(line);
  }
  const double bound = 2 * rows["forward"].mib + 64 * carry_mib;
  const bool meets = rows["checkpoint"].mib <= bound;
  if (o.json) {
    for (const std::string& l : lines) std::printf("%s\n", l.c_str());
    std::printf(
        "{\"bench\": \"loops-memory-bound\", \"carry_mib\": %.4f, \"bound_mib\": %.3f, "
        "\"checkpoint_mib\": %.3f, \"checkpoint_meets_bound\": %s}\n",
        carry_mib, bound, rows["checkpoint"].mib, meets ? "true" : "false");
    return 0;
  }
  std::printf(
      "Peak memory of reverse mode through a scan of %lld local SGD steps (W1, batch %lld, "
      "hidden %lld, f32; inputs %.1f MiB), each mode in a fresh process\n\n",
      static_cast<long long>(o.steps), static_cast<long long>(o.batch),
      static_cast<long long>(o.hidden), inputs_mib);
  std::printf(
      "| mode | process peak MiB | peak - inputs MiB | s/call | recompute cost (time / stored "
      "time) |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (const char* m : modes) {
    std::string name = m;
    if (name == "checkpoint") name += " (every " + std::to_string(o.every) + ")";
    std::printf("| %s | %.1f | %.1f | %.4f | %.2f |\n", name.c_str(), rows[m].mib + inputs_mib,
                rows[m].mib, rows[m].s, rows[m].s / rows["stored"].s);
  }
  // The bound read two ways: on process peaks (the forward pass holds its inputs too), and on
  // working memory alone (peak minus the inputs both share).
  const double process_bound = 2 * (rows["forward"].mib + inputs_mib) + 64 * carry_mib;
  const double process_peak = rows["checkpoint"].mib + inputs_mib;
  std::printf("\n|carry| = params = %.3f MiB.\n", carry_mib);
  std::printf(
      "process peaks: 2 x forward + 64 x |carry| = %.1f MiB; checkpoint peak %.1f MiB %s it\n",
      process_bound, process_peak, process_peak <= process_bound ? "meets" : "EXCEEDS");
  std::printf(
      "working memory (peak - inputs): 2 x forward + 64 x |carry| = %.1f MiB; checkpoint %.1f "
      "MiB %s it\n",
      bound, rows["checkpoint"].mib, meets ? "meets" : "EXCEEDS");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  drx::set_blas_thread_control(true);
  Options o = parse(argc, argv);
  try {
    if (o.threads > 0) drx::set_num_threads(static_cast<int>(o.threads));
    switch (o.mode) {
      case Mode::first_call:
        return run_first_call(o);
      case Mode::memory:
        return run_memory(o);
      case Mode::memory_table:
        return run_memory_table(o);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "drx_loops_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
