#include "tools/fedavg/train.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>

#include "drx/data/data.h"
#include "drx/exec/mesh.h"
#include "drx/exec/thread_pool.h"
#include "drx/nn/nn.h"
#include "drx/optim/optim.h"
#include "drx/trace/jit.h"
#include "tools/fedavg/atomic_file.h"
#include "tools/fedavg/checkpoint.h"
#include "tools/fedavg/metrics.h"
#include "tools/fedavg/progress.h"

namespace drx::tool::fedavg {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Independent random streams derived from --seed.
enum Stream : uint64_t {
  kPartitionStream = 1,
  kInitStream = 2,
  kCohortStream = 3,
  kBatchStream = 4
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The first n examples (all of them when n is 0 or at least the size).
data::Dataset first_examples(const data::Dataset& d, int64_t n) {
  if (n <= 0 || n >= d.size()) return d;
  Shape shape = d.images.shape();
  const size_t row = d.images.nbytes() / static_cast<size_t>(shape[0]);
  shape[0] = n;
  data::Dataset out{Array(d.images.dtype(), shape), Array(d.labels.dtype(), {n})};
  std::memcpy(out.images.raw(), d.images.raw(), row * static_cast<size_t>(n));
  std::memcpy(out.labels.raw(), d.labels.raw(), out.labels.nbytes());
  return out;
}

data::Partition make_partition(const Options& o, const data::Dataset& train) {
  const uint64_t seed = data::derive_seed(o.seed, kPartitionStream);
  if (o.partition == "dirichlet")
    return data::partition_dirichlet(train.labels, o.clients, o.alpha, seed);
  if (o.partition == "shards")
    return data::partition_shards(train.labels, o.clients, o.shards_per_client, seed);
  return data::partition_iid(train.size(), o.clients, seed);
}

optim::ServerOptimizer server_optimizer(const Options& o) {
  optim::ServerOptimizer s;
  s.kind = optim::parse_server_kind(o.server_opt);
  s.lr = o.server_lr;
  s.momentum = o.server_momentum;
  s.beta1 = o.adam_beta1;
  s.beta2 = o.adam_beta2;
  s.eps = o.adam_eps;
  return s;
}

std::string tree_signature(const Tree& t) {
  std::string s = t.structure();
  for (const Tree& leaf : tree_leaves(t))
    s += " " + std::string(dtype_name(leaf.array().dtype())) + shape_str(leaf.array().shape());
  return s;
}

// Restores a checkpoint's trees, checking them against the shapes this configuration builds.
void check_trees(const Checkpoint& c, const Tree& params, const Tree& state,
                 const std::string& source) {
  if (tree_signature(c.params) != tree_signature(params))
    throw Error(source + ": checkpoint params " + tree_signature(c.params) +
                " do not match the model of this run " + tree_signature(params));
  if (tree_signature(c.state) != tree_signature(state))
    throw Error(source + ": checkpoint server state " + tree_signature(c.state) +
                " does not match --server-opt " + tree_signature(state));
}

std::string join(const std::string& dir, const char* file) {
  return (std::filesystem::path(dir) / file).string();
}

void make_out_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw Error("cannot create output directory '" + dir +
                "': " + (ec ? ec.message() : std::string("not a directory")));
}

// Sets drx's thread count for the run and restores it afterwards.
class ThreadsScope {
 public:
  explicit ThreadsScope(int64_t n) : saved_(num_threads()) {
    if (n > 0) set_num_threads(static_cast<int>(n));
  }
  ~ThreadsScope() {
    if (num_threads() != saved_) set_num_threads(saved_);
  }

 private:
  int saved_;
};

std::string run_title(const Options& o) {
  std::ostringstream os;
  os << "drx fedavg: " << o.partition << ", " << o.clients << " clients, cohort " << o.cohort
     << ", server " << o.server_opt;
  return os.str();
}

// The leading steps in which every client has an example.
int64_t full_steps(const Array& mask) {
  const Shape& s = mask.shape();  // [cohort, steps, batch]
  const float* m = mask.data<float>();
  for (int64_t step = 0; step < s[1]; ++step)
    for (int64_t k = 0; k < s[0]; ++k) {
      const float* row = m + (k * s[1] + step) * s[2];
      if (std::all_of(row, row + s[2], [](float v) { return v == 0.0f; })) return step;
    }
  return s[1];
}

// n rounded down to three significant bits.
int64_t bucket_down(int64_t n) {
  if (n <= 8) return n;
  const int64_t unit = int64_t{1} << (std::bit_width(static_cast<uint64_t>(n)) - 3);
  return n / unit * unit;
}

}  // namespace

int64_t bucket_steps(int64_t need, int64_t most) {
  if (need <= 8) return std::max<int64_t>(need, 1);
  const int shift = std::bit_width(static_cast<uint64_t>(need)) - 3;
  const int64_t unit = int64_t{1} << shift;
  return std::max<int64_t>(1, std::min((need + unit - 1) / unit * unit, std::max(most, need)));
}

RunSummary run_fedavg(const Options& o, std::ostream& out, std::ostream& progress_os,
                      bool terminal) {
  const Clock::time_point t0 = Clock::now();
  ThreadsScope threads(o.threads);
  Progress progress(progress_os, terminal, o.quiet);

  // Everything that can fail on the inputs happens before the first output file exists.
  const std::string ckpt_path = join(o.out_dir, kCheckpointFile);
  std::optional<Checkpoint> resumed;
  if (o.resume) {
    if (!std::filesystem::exists(ckpt_path))
      throw Error("--resume: no checkpoint '" + ckpt_path + "' to resume from");
    resumed = read_checkpoint(ckpt_path);
    check_same_config(resumed->config, trajectory_fields(o), ckpt_path);
  } else if (!o.overwrite && std::filesystem::exists(ckpt_path)) {
    // An earlier run's results are not replaced by accident.
    throw Error("fedavg: '" + ckpt_path +
                "' holds the checkpoint of an earlier run; pass --resume to continue it, "
                "--overwrite to start over, or choose another --out");
  }
  const data::Dataset train =
      first_examples(data::load_fashion_mnist(data::Split::train, o.data_dir), o.max_examples);
  const data::Dataset test =
      first_examples(data::load_fashion_mnist(data::Split::test, o.data_dir), o.max_examples);
  if (o.partition == "shards" && o.clients * o.shards_per_client > train.size())
    throw Error("fedavg: --clients x --shards-per-client = " +
                std::to_string(o.clients * o.shards_per_client) + " shards exceed the " +
                std::to_string(train.size()) + " training examples");
  const data::Partition partition = make_partition(o, train);

  const int64_t in_features = train.images.size() / std::max<int64_t>(train.size(), 1);
  std::vector<int64_t> sizes = {in_features};
  sizes.insert(sizes.end(), o.hidden.begin(), o.hidden.end());
  sizes.push_back(data::kFashionMnistClasses);
  const optim::ServerOptimizer server = server_optimizer(o);
  Tree params = nn::mlp_init(sizes, data::derive_seed(o.seed, kInitStream));
  Tree state = server.init(params);
  int64_t start_round = 0;
  std::vector<MetricsRow> history;
  double elapsed_before = 0;
  if (resumed) {
    check_trees(*resumed, params, state, ckpt_path);
    params = resumed->params;
    state = resumed->state;
    start_round = resumed->round;
    history = resumed->history;
    if (!history.empty()) elapsed_before = history.back().elapsed_s;
  }

  // The largest step count any cohort can need, which caps the bucketed step counts.
  int64_t most_steps = o.local_steps;
  if (o.local_steps == 0) {
    int64_t biggest = 0;
    for (const auto& c : partition) biggest = std::max<int64_t>(biggest, c.size());
    most_steps = o.epochs * ((biggest + o.batch - 1) / o.batch);
  }

  std::optional<Mesh> mesh;
  std::optional<MeshScope> mesh_scope;
  if (o.devices > 1) {
    mesh.emplace(std::vector<Mesh::Axis>{{"clients", static_cast<int>(o.devices)}});
    mesh_scope.emplace(*mesh);
  }

  using RoundJit = decltype(jit(std::declval<optim::RoundFn>()));
  std::map<std::pair<int64_t, int64_t>, RoundJit> round_fns;  // by steps and full steps
  const int64_t shards = std::max<int64_t>({1, o.devices, num_threads()});
  const int64_t eval_batch = std::max<int64_t>(1, (test.size() + shards - 1) / shards);
  const data::CohortBatches eval_grid = data::eval_batches(test.size(), shards, eval_batch);
  auto evaluate = jit(optim::evaluate_fn(shards));

  double last_acc = kNaN, last_loss = kNaN;
  for (const MetricsRow& r : history)
    if (r.evaluated()) last_acc = r.test_accuracy, last_loss = r.test_loss;

  bool outputs_ready = false;
  auto write_metrics = [&] {
    if (!outputs_ready) make_out_dir(o.out_dir), outputs_ready = true;
    write_file_atomic(join(o.out_dir, kMetricsCsvFile), metrics_csv(history));
    write_file_atomic(join(o.out_dir, kMetricsSvgFile), metrics_svg(history, run_title(o)));
  };
  auto write_ckpt = [&](int64_t round) {
    if (!outputs_ready) make_out_dir(o.out_dir), outputs_ready = true;
    write_checkpoint(ckpt_path, Checkpoint{trajectory_fields(o), round, params, state, history});
  };

  RunSummary summary;
  int64_t round = start_round;
  double last_round_s = 0;
  const Clock::time_point loop_start = Clock::now();
  while (round < o.rounds) {
    // Stop before a round that would overrun the budget (but always make progress).
    if (o.max_seconds > 0 && round > start_round &&
        seconds_since(t0) + last_round_s > o.max_seconds) {
      summary.stopped_early = true;
      break;
    }
    const Clock::time_point round_start = Clock::now();
    const std::vector<int64_t> cohort =
        data::sample_cohort(o.clients, o.cohort, data::derive_seed(o.seed, kCohortStream), round);
    data::BatchOptions bo;
    bo.batch_size = o.batch;
    bo.seed = data::derive_seed(o.seed, kBatchStream);
    bo.round = round;
    if (o.local_steps > 0) {
      bo.steps = o.local_steps;
    } else {
      bo.max_epochs = o.epochs;
      bo.steps =
          bucket_steps(data::steps_for_epochs(partition, cohort, o.epochs, o.batch), most_steps);
    }
    const data::CohortBatches b = data::cohort_batches(partition, cohort, bo);
    // Steps every client has an example in skip no check. Worth a program of its own only when
    // they are most of the steps (else the skipped steps dominate); bucketed, so few compile.
    const int64_t full = full_steps(b.mask);
    const std::pair<int64_t, int64_t> key(bo.steps, 2 * full >= bo.steps ? bucket_down(full) : 0);
    auto fn = round_fns.find(key);
    if (fn == round_fns.end()) {
      optim::RoundSpec spec;
      spec.client = {o.client_lr, o.client_momentum};
      spec.server = server;
      spec.cohort = o.cohort;
      spec.steps = bo.steps;
      spec.batch = o.batch;
      spec.full_steps = key.second;
      fn = round_fns.emplace(key, jit(optim::fedavg_round(spec))).first;
    }
    Tree result = fn->second(params, state, train.images, train.labels, b.idx, b.mask, b.sizes);
    params = result["params"];
    state = result["state"];
    const double train_loss = result["loss"].array().item<float>();
    ++round;

    MetricsRow row{round, train_loss, kNaN, kNaN, 0};
    const bool last = round == o.rounds;
    const bool out_of_time =
        o.max_seconds > 0 && seconds_since(t0) + seconds_since(round_start) > o.max_seconds;
    if (round % o.eval_every == 0 || last || out_of_time) {
      Tree e = evaluate(params, test.images, test.labels, eval_grid.idx, eval_grid.mask);
      row.test_loss = last_loss = e["loss"].array().item<float>();
      row.test_accuracy = last_acc = e["accuracy"].array().item<float>();
    }
    row.elapsed_s = elapsed_before + seconds_since(t0);
    history.push_back(row);
    if (row.evaluated()) write_metrics();
    if (round % o.checkpoint_every == 0 || last || out_of_time) write_ckpt(round);

    last_round_s = seconds_since(round_start);
    const double done = static_cast<double>(round - start_round);
    progress.update(round, o.rounds, train_loss, last_acc, row.elapsed_s,
                    seconds_since(loop_start) / done);
    if (out_of_time && !last) {
      summary.stopped_early = true;
      break;
    }
  }
  // A stop decided before a round: the last round's outputs may not be written yet.
  if (summary.stopped_early && !history.empty() && !history.back().evaluated()) {
    Tree e = evaluate(params, test.images, test.labels, eval_grid.idx, eval_grid.mask);
    history.back().test_loss = last_loss = e["loss"].array().item<float>();
    history.back().test_accuracy = last_acc = e["accuracy"].array().item<float>();
    write_metrics();
    write_ckpt(round);
  } else if (summary.stopped_early) {
    write_ckpt(round);
  }
  progress.finish();

  summary.rounds_done = round;
  summary.test_accuracy = last_acc;
  summary.test_loss = last_loss;
  summary.seconds = seconds_since(t0);
  char line[512];
  if (round == start_round && !summary.stopped_early) {
    std::snprintf(line, sizeof line,
                  "fedavg: nothing to do: the checkpoint is at round %lld, --rounds is %lld; "
                  "last test accuracy %.4f\n",
                  static_cast<long long>(round), static_cast<long long>(o.rounds), last_acc);
  } else {
    std::snprintf(
        line, sizeof line,
        "fedavg: test accuracy %.4f (loss %.4f) after %lld/%lld rounds in %.1f s%s; "
        "outputs in %s\n",
        last_acc, last_loss, static_cast<long long>(round), static_cast<long long>(o.rounds),
        summary.seconds,
        summary.stopped_early ? " (stopped by --max-seconds; continue with --resume)" : "",
        o.out_dir.c_str());
  }
  out << line;
  return summary;
}

}  // namespace drx::tool::fedavg
