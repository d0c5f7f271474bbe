// Scaling figures of issue 5 for workload W1 with client data given as
// indices into one unplaced dataset (each client gathers its batches inside
// the map_fn body):
//
//   --weak-scaling   cohort base*D on a mesh of D devices, D = 1 .. --max-devices:
//                    seconds per round and efficiency t(1) / t(D)
//   --memory         one round at --cohort N: the process's peak resident memory
//                    minus the bytes of the inputs (run once per cohort: the peak
//                    is per process); --no-chunk compiles without the chunked
//                    reduce(map_fn) path, to show what it saves; --groups G
//                    runs it as hierarchical FedAvg with the cohort split into G
//                    groups (nested placements: clients within groups, each
//                    group's mean, then the server's), chunked at both levels
//
// --json prints one JSON line per measurement (bench/run_scaling.sh reads them).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/common.h"
#include "drx/drx.h"
#include "drx/exec/executable.h"
#include "drx/trace/trace_tree.h"
#include "w1_model.h"

namespace {

using namespace w1;

struct Options {
  int64_t cohort = 32, steps = 10, batch = 32, hidden = 200, examples = 8192;
  int64_t rounds = 5, max_devices = 2, devices = 1, groups = 1;
  bool weak = false, memory = false, chunk = true, json = false;
};

const char* kUsage =
    "usage: drx_scaling (--weak-scaling | --memory) [--cohort N] [--steps N] [--batch N]\n"
    "                   [--hidden N] [--examples N] [--rounds N] [--devices N]\n"
    "                   [--max-devices N] [--groups G] [--no-chunk] [--json] [--smoke]\n"
    "--weak-scaling: cohort N*D on D devices for D = 1 .. max-devices (default 2).\n"
    "--memory: peak resident memory minus inputs for one cohort on --devices devices;\n"
    "  --groups G: the cohort as G groups of cohort/G clients (hierarchical FedAvg).\n"
    "--smoke: hidden 16, 2 steps of batch 8, 256 examples, 2 rounds.\n";

const drx::bench::CommandLine kCommandLine{"drx_scaling", kUsage};

Options parse(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (std::find(args.begin(), args.end(), "--smoke") != args.end())
    o.hidden = 16, o.steps = 2, o.batch = 8, o.examples = 256, o.rounds = 2;
  std::map<std::string, int64_t*> counts = {
      {"--cohort", &o.cohort},     {"--steps", &o.steps},
      {"--batch", &o.batch},       {"--hidden", &o.hidden},
      {"--examples", &o.examples}, {"--rounds", &o.rounds},
      {"--devices", &o.devices},   {"--max-devices", &o.max_devices},
      {"--groups", &o.groups}};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--weak-scaling")
      o.weak = true;
    else if (a == "--memory")
      o.memory = true;
    else if (a == "--no-chunk")
      o.chunk = false;
    else if (a == "--json")
      o.json = true;
    else if (a == "--smoke")
      continue;
    else if (a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (auto c = counts.find(a); c != counts.end()) {
      if (i + 1 >= args.size()) kCommandLine.error(a + " needs a value");
      char* end = nullptr;
      long long v = std::strtoll(args[++i].c_str(), &end, 10);
      if (*end != '\0' || v < 1 || v > (1 << 30))
        kCommandLine.error(a + " needs a positive integer, got '" + args[i] + "'");
      *c->second = v;
    } else {
      kCommandLine.error("unknown argument '" + a + "'");
    }
  }
  if (o.weak == o.memory) kCommandLine.error("give exactly one of --weak-scaling and --memory");
  if (o.cohort % o.groups != 0)
    kCommandLine.error("--cohort " + std::to_string(o.cohort) + " does not split into --groups " +
                       std::to_string(o.groups) + " equal groups");
  if (o.weak && o.groups != 1) kCommandLine.error("--groups applies to --memory only");
  return o;
}

// One client's local steps on rows `rows` of the dataset (x, y).
drx::Tree local_steps(drx::Tree p, drx::Value x, drx::Value y, drx::Value rows, int64_t steps,
                      int64_t batch) {
  auto g = drx::grad(loss);
  for (int64_t s = 0; s < steps; ++s) {
    drx::Value r = drx::slice(rows, {s * batch}, {(s + 1) * batch});
    drx::Tree grads = g(p, drx::take(x, r, 0), drx::take(y, r, 0));
    p = drx::tree_map(
        [](const drx::Value& w, const drx::Value& dw) { return w - kLearningRate * dw; }, p, grads);
  }
  return p;
}

// The mean over `clients` of the clients' models after their local steps.
drx::Tree clients_mean(drx::Tree server, drx::Value x_all, drx::Value y_all, drx::Value idx,
                       int64_t steps, int64_t batch) {
  drx::Tree clients = drx::map_fn(
      [steps, batch](drx::Tree p, drx::Value x, drx::Value y, drx::Value rows) {
        return local_steps(p, x, y, rows, steps, batch);
      },
      drx::broadcast(server, "clients"), drx::broadcast(x_all, "clients"),
      drx::broadcast(y_all, "clients"), idx);
  return drx::reduce_mean(clients);
}

// One FedAvg round; client c trains on rows idx[c] of the dataset. With
// groups > 1, hierarchical: idx is [groups, clients per group, rows], each
// group averages its clients and the server averages the groups.
auto round_program(const Options& o, int64_t cohort) {
  const int64_t steps = o.steps, batch = o.batch, groups = o.groups;
  if (groups == 1)
    return drx::program(
        {{"clients", cohort}},
        [steps, batch](drx::Tree server, drx::Value x_all, drx::Value y_all, drx::Value idx) {
          return clients_mean(server, x_all, y_all, idx, steps, batch);
        },
        {"", "", "", "clients"});
  return drx::program(
      {{"groups", groups}, {"clients", cohort / groups}},
      [steps, batch](drx::Tree server, drx::Value x_all, drx::Value y_all, drx::Value idx) {
        drx::Tree per_group = drx::map_fn(
            [steps, batch](drx::Tree p, drx::Value x, drx::Value y, drx::Value rows) {
              return clients_mean(p, x, y, rows, steps, batch);
            },
            drx::broadcast(server, "groups"), drx::broadcast(x_all, "groups"),
            drx::broadcast(y_all, "groups"), idx);
        return drx::reduce_mean(per_group);
      },
      {"", "", "", "groups.clients"});
}

struct Inputs {
  std::vector<drx::Tree> args;  // server, x_all, y_all, idx
  size_t bytes = 0;
};

Inputs make_inputs(const Options& o, int64_t cohort) {
  std::mt19937_64 rng(0);
  drx::Array x(drx::f32, {o.examples, kIn}), y(drx::i32, {o.examples});
  drx::Array idx(drx::i32, o.groups == 1
                               ? drx::Shape{cohort, o.steps * o.batch}
                               : drx::Shape{o.groups, cohort / o.groups, o.steps * o.batch});
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = unit(rng);
  for (int64_t i = 0; i < y.size(); ++i)
    y.data<int32_t>()[i] = static_cast<int32_t>(rng() % kClasses);
  for (int64_t i = 0; i < idx.size(); ++i)
    idx.data<int32_t>()[i] = static_cast<int32_t>(rng() % static_cast<uint64_t>(o.examples));
  Inputs in;
  in.args = {init_params(o.hidden, rng), drx::Tree(x), drx::Tree(y), drx::Tree(idx)};
  for (const drx::Tree& leaf : drx::tree_leaves(drx::Tree::list(in.args)))
    in.bytes += static_cast<size_t>(leaf.array().nbytes());
  return in;
}

// The round compiled for `mesh`, and a function running it on the inputs.
struct Compiled {
  drx::Executable exe;
  std::vector<drx::Array> flat;
  std::vector<drx::Array> run() const { return exe.run(flat); }
};

Compiled compile_round(const Options& o, int64_t cohort, const Inputs& in, const drx::Mesh& mesh) {
  drx::TracedFn t = drx::trace_tree_fn(drx::erase(round_program(o, cohort)), in.args,
                                       drx::leaf_types(in.args), "w1_round");
  drx::CompileOptions options;
  options.chunk_map_reduce = o.chunk;
  Compiled c{drx::compile(drx::simplify(t.program), mesh, options), {}};
  for (const drx::Tree& leaf : drx::tree_leaves(drx::Tree::list(in.args)))
    c.flat.push_back(leaf.array());
  return c;
}

double median_round_seconds(const Compiled& c, int64_t rounds) {
  c.run();  // warm-up: workspaces, page faults
  std::vector<double> times;
  for (int64_t r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    c.run();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void weak_scaling(const Options& o) {
  double t1 = 0;
  for (int64_t d = 1; d <= o.max_devices; ++d) {
    const int64_t cohort = o.cohort * d;
    Inputs in = make_inputs(o, cohort);
    drx::Mesh mesh({{"clients", static_cast<int>(d)}});
    Compiled c = compile_round(o, cohort, in, mesh);
    const double t = median_round_seconds(c, o.rounds);
    if (d == 1) t1 = t;
    const double gflops = round_flops(cohort, o.steps, o.batch, o.hidden) / t * 1e-9;
    if (o.json)
      std::printf(
          "{\"bench\": \"weak-scaling\", \"devices\": %lld, \"cohort\": %lld, \"median_s\": "
          "%.5f, \"gflops\": %.3f, \"efficiency\": %.4f}\n",
          static_cast<long long>(d), static_cast<long long>(cohort), t, gflops, t1 / t);
    else
      std::printf(
          "weak scaling: %lld device(s), cohort %lld: %.4f s/round, %.2f GFLOP/s, efficiency "
          "%.1f%%\n",
          static_cast<long long>(d), static_cast<long long>(cohort), t, gflops, 100 * t1 / t);
    std::fflush(stdout);
  }
}

void memory(const Options& o) {
  Inputs in = make_inputs(o, o.cohort);
  // Devices split the outer placement: the groups when there are several.
  drx::Mesh mesh({{o.groups == 1 ? "clients" : "groups", static_cast<int>(o.devices)}});
  Compiled c = compile_round(o, o.cohort, in, mesh);
  for (int64_t r = 0; r < o.rounds; ++r) c.run();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double peak_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
  const double inputs_mb = static_cast<double>(in.bytes) / (1024.0 * 1024.0);
  if (o.json)
    std::printf(
        "{\"bench\": \"memory\", \"cohort\": %lld, \"groups\": %lld, \"devices\": %lld, "
        "\"chunked\": %s, \"chunked_maps\": %zu, \"nested_chunked_maps\": %zu, "
        "\"peak_rss_mb\": %.2f, \"inputs_mb\": %.2f, \"peak_minus_inputs_mb\": %.2f}\n",
        static_cast<long long>(o.cohort), static_cast<long long>(o.groups),
        static_cast<long long>(o.devices), o.chunk ? "true" : "false", c.exe.stats().chunked_maps,
        c.exe.stats().nested_chunked_maps, peak_mb, inputs_mb, peak_mb - inputs_mb);
  else
    std::printf(
        "memory: cohort %lld in %lld group(s) on %lld device(s), %s: peak RSS %.1f MiB, inputs "
        "%.1f MiB, peak minus inputs %.1f MiB\n",
        static_cast<long long>(o.cohort), static_cast<long long>(o.groups),
        static_cast<long long>(o.devices), o.chunk ? "chunked reduce(map_fn)" : "unchunked",
        peak_mb, inputs_mb, peak_mb - inputs_mb);
}

}  // namespace

int main(int argc, char** argv) {
  drx::set_blas_thread_control(true);
  Options o = parse(argc, argv);
  try {
    if (o.weak) weak_scaling(o);
    if (o.memory) memory(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "drx_scaling: %s\n", e.what());
    return 1;
  }
  return 0;
}
