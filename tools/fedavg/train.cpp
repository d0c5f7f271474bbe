#include "tools/fedavg/train.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string_view>
#include <utility>

#include "drx/core/mesh.h"
#include "drx/data/data.h"
#include "drx/exec/thread_pool.h"
#include "drx/jit/jit.h"
#include "drx/nn/nn.h"
#include "drx/optim/optim.h"
#include "drx/privacy/accountant.h"
#include "drx/random/random.h"
#include "tools/fedavg/atomic_file.h"
#include "tools/fedavg/checkpoint.h"
#include "tools/fedavg/export_round.h"
#include "tools/fedavg/metrics.h"
#include "tools/fedavg/progress.h"
#include "tools/fedavg/ranks.h"
#include "tools/fedavg/scopes.h"

namespace drx::tool::fedavg {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Independent random streams derived from --seed.
enum Stream : uint64_t {
  kPartitionStream = 1,
  kInitStream = 2,
  kCohortStream = 3,
  kBatchStream = 4,
  kNoiseStream = 5  // DP noise: the round state's random key
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

// ---- DP-FedAvg: sampling, the round's DP spec and the accountant ----------------------

bool poisson(const Options& o) { return o.dp() && o.dp_sampling == "poisson"; }
double sampling_rate(const Options& o) {
  return static_cast<double>(o.cohort) / static_cast<double>(o.clients);
}
// The size of the round program's "clients" placement: the cohort, or for Poisson sampling
// the padded capacity its random cohort fits in.
int64_t cohort_slots(const Options& o) {
  return poisson(o) ? data::poisson_cohort_capacity(o.clients, sampling_rate(o)) : o.cohort;
}
double count_noise(const Options& o) {
  return o.dp_count_noise >= 0 ? o.dp_count_noise : static_cast<double>(o.cohort) / 20.0;
}

std::optional<optim::DpSpec> dp_spec(const Options& o) {
  if (!o.dp()) return std::nullopt;
  optim::DpSpec d;
  d.noise_multiplier = o.dp_noise;
  d.expected_cohort = static_cast<double>(o.cohort);  // q N for Poisson, m for fixed
  d.target_quantile = o.dp_quantile;
  d.clip_lr = o.dp_clip_lr;
  d.count_noise = count_noise(o);
  return d;
}

// epsilon after any number of rounds, for --dp-delta.
class PrivacyLedger {
 public:
  explicit PrivacyLedger(const Options& o) : o_(o) {
    if (!o.dp()) return;
    // Fixed-size sampling is accounted with replace-one neighbours, under which the sum of
    // clipped updates has L2 sensitivity 2C: the multiplier relative to it is z / 2.
    const bool fixed = o.dp_sampling == "fixed";
    privacy::RdpAccountant a(fixed ? privacy::Sampling::fixed_size : privacy::Sampling::poisson,
                             o.cohort, o.clients, fixed ? o.dp_noise / 2 : o.dp_noise);
    orders_ = a.orders();
    per_round_ = a.rdp_per_step();
  }
  double epsilon(int64_t rounds) const {
    if (!o_.dp()) return kNaN;
    std::vector<double> total = per_round_;
    for (double& v : total) v *= static_cast<double>(rounds);
    return privacy::epsilon_from_rdp(orders_, total, o_.dp_delta).epsilon;
  }

 private:
  const Options& o_;
  std::vector<double> orders_, per_round_;
};

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

std::optional<Checkpoint> checkpoint_to_resume(const Options& o, const std::string& path) {
  return tool::fedavg::checkpoint_to_resume("fedavg", o.resume, o.overwrite, path,
                                            trajectory_fields(o));
}

data::Dataset load_split(const Options& o, data::Split split) {
  return first_examples(data::load_fashion_mnist(split, o.data_dir), o.max_examples);
}

void check_shards_fit(const Options& o, const data::Dataset& train) {
  if (o.partition == "shards" && o.clients * o.shards_per_client > train.size())
    throw Error("fedavg: --clients x --shards-per-client = " +
                std::to_string(o.clients * o.shards_per_client) + " shards exceed the " +
                std::to_string(train.size()) + " training examples");
}

// What a run reads: all of it is checked before the first output file exists.
struct Inputs {
  std::optional<Checkpoint> resumed;
  data::Dataset train, test;
  data::Partition partition;
};

Inputs load_inputs(const Options& o, const Ranks& ranks, const std::string& ckpt_path) {
  // Rank 0 reads it and sends it on: the ranks need not share a filesystem.
  const std::string bytes = ranks.from_root(
      [&] {
        std::optional<Checkpoint> c = checkpoint_to_resume(o, ckpt_path);
        return c ? encode_checkpoint(*c) : std::string();
      },
      "the checkpoint of --resume");
  std::optional<Checkpoint> resumed;
  if (!bytes.empty()) resumed = decode_checkpoint(bytes, ckpt_path);
  data::Dataset train = load_split(o, data::Split::train);
  data::Dataset test = load_split(o, data::Split::test);
  check_shards_fit(o, train);
  data::Partition partition = make_partition(o, train);
  return Inputs{std::move(resumed), std::move(train), std::move(test), std::move(partition)};
}

// Where training stands.
struct TrainState {
  Tree params, state;
  int64_t round = 0;        // rounds completed
  int64_t start_round = 0;  // those completed before this process started
  std::vector<MetricsRow> history;
  double elapsed_before = 0;                 // wall clock of the runs before a resume
  double last_acc = kNaN, last_loss = kNaN;  // of the latest evaluation
};

std::vector<int64_t> layer_sizes(const Options& o, const data::Dataset& train) {
  const int64_t in_features = train.images.size() / std::max<int64_t>(train.size(), 1);
  std::vector<int64_t> sizes = {in_features};
  sizes.insert(sizes.end(), o.hidden.begin(), o.hidden.end());
  sizes.push_back(data::kFashionMnistClasses);
  return sizes;
}

void resume_from(const Checkpoint& c, TrainState& s, const std::string& ckpt_path) {
  check_trees(c, s.params, s.state, ckpt_path);
  s.params = c.params;
  s.state = c.state;
  s.start_round = c.round;
  s.history = c.history;
  if (!s.history.empty()) s.elapsed_before = s.history.back().elapsed_s;
  for (const MetricsRow& r : s.history)
    if (r.evaluated()) s.last_acc = r.test_accuracy, s.last_loss = r.test_loss;
}

// A fresh model and server state, or those of the checkpoint being resumed (built fresh all
// the same, to check the checkpoint's shapes against).
TrainState initial_state(const Options& o, const Inputs& in, const optim::ServerOptimizer& server,
                         const std::string& ckpt_path) {
  TrainState s;
  s.params = nn::mlp_init(layer_sizes(o, in.train), data::derive_seed(o.seed, kInitStream));
  s.state = server.init(s.params);
  if (o.dp())
    s.state = optim::dp_round_state(
        s.state, o.dp_clip,
        random::key(static_cast<int64_t>(data::derive_seed(o.seed, kNoiseStream))), f32,
        *dp_spec(o));
  if (in.resumed) resume_from(*in.resumed, s, ckpt_path);
  s.round = s.start_round;
  return s;
}

// mkstemp's replacement for the "XXXXXX" of write_file_atomic's temporary names.
// A temporary file of write_file_atomic for one of the files a run writes.
// Other files in --out are the user's.
bool is_temp_leftover(const std::string& name) {
  for (const char* file : {kCheckpointFile, kMetricsCsvFile, kMetricsSvgFile})
    if (is_atomic_temp_of(name, file)) return true;
  return false;
}

// Removes what writes of a killed run left behind. Best effort: a leftover that stays does no
// harm, and a directory this run cannot write fails at its first output with a clear message.
void remove_temp_leftovers(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ignored;
    if (fs::is_regular_file(it->symlink_status(ignored)) &&
        is_temp_leftover(it->path().filename().string()))
      fs::remove(it->path(), ignored);
  }
}

// The largest step count any cohort can need, which caps the bucketed step counts.
int64_t most_local_steps(const Options& o, const data::Partition& partition) {
  if (o.local_steps != 0) return o.local_steps;
  int64_t biggest = 0;
  for (const auto& c : partition) biggest = std::max<int64_t>(biggest, c.size());
  return o.epochs * ((biggest + o.batch - 1) / o.batch);
}

// Trains round after round, compiling a round program per (steps, full steps) pair met.
class RoundTrainer {
 public:
  RoundTrainer(const Options& o, const optim::ServerOptimizer& server, const Inputs& in,
               const Ranks& ranks)
      : o_(o),
        server_(server),
        in_(in),
        ranks_(ranks),
        mesh_(ranks.round_mesh(o.devices)),
        most_steps_(most_local_steps(o, in.partition)) {
    if (!o.export_rounds.empty()) exporter_.emplace(o.export_rounds);
  }

  // Trains round s.round + 1 of s; returns the cohort's training loss.
  double train(TrainState& s) {
    const uint64_t cohort_seed = data::derive_seed(o_.seed, kCohortStream);
    std::vector<int64_t> cohort =
        poisson(o_)
            ? data::sample_poisson_cohort(o_.clients, sampling_rate(o_), cohort_seed, s.round)
            : data::sample_cohort(o_.clients, o_.cohort, cohort_seed, s.round);
    const int64_t real = static_cast<int64_t>(cohort.size()), slots = cohort_slots(o_);
    if (real > slots)
      throw Error("fedavg: round " + std::to_string(s.round + 1) + " sampled " +
                  std::to_string(real) + " clients, more than the " + std::to_string(slots) +
                  " padded slots (a probability below 1e-12 per round)");
    // Padding slots repeat a client with every example masked and weight 0.
    cohort.resize(static_cast<size_t>(slots), cohort.empty() ? 0 : cohort[0]);
    const data::BatchOptions bo = batch_options(cohort, s.round);
    // Each rank gathers the batches of its own slots only.
    const auto [first, end] = ranks_.clients(slots);
    const std::vector<int64_t> mine(cohort.begin() + first, cohort.begin() + end);
    data::CohortBatches b = data::cohort_batches(in_.partition, mine, bo);
    Array weights = b.sizes;
    if (o_.dp()) {
      // DP-FedAvg weighs the clients uniformly: 1 for a sampled client, 0 for padding.
      weights = Array(f32, {end - first});
      const int64_t per_client = b.mask.size() / std::max<int64_t>(end - first, 1);
      for (int64_t k = 0; k < end - first; ++k) {
        const bool sampled = first + k < real;
        weights.data<float>()[k] = sampled ? 1.0f : 0.0f;
        if (!sampled) std::fill_n(b.mask.data<float>() + k * per_client, per_client, 0.0f);
      }
    }
    const std::string round_name = "round " + std::to_string(s.round + 1);
    const auto activity = ranks_.activity(round_name);
    const std::pair<int64_t, int64_t> key = round_key(bo.steps, b.mask, round_name);
    Tree result = program(key)(s.params, s.state, in_.train.images, in_.train.labels,
                               ranks_.placed(b.idx, slots), ranks_.placed(b.mask, slots),
                               ranks_.placed(weights, slots));
    if (exporter_)
      exporter_->write(s.round + 1, round_spec(key.first, key.second), s.params, s.state, in_.train,
                       b.idx, b.mask, weights, result);
    s.params = result["params"];
    s.state = result["state"];
    ++s.round;
    return result["loss"].array().item<float>();
  }

 private:
  using RoundJit = decltype(jit(std::declval<optim::RoundFn>()));

  data::BatchOptions batch_options(const std::vector<int64_t>& cohort, int64_t round) const {
    data::BatchOptions bo;
    bo.batch_size = o_.batch;
    bo.seed = data::derive_seed(o_.seed, kBatchStream);
    bo.round = round;
    if (o_.local_steps > 0) {
      bo.steps = o_.local_steps;
      return bo;
    }
    bo.max_epochs = o_.epochs;
    bo.steps = bucket_steps(data::steps_for_epochs(in_.partition, cohort, o_.epochs, o_.batch),
                            most_steps_);
    return bo;
  }

  // The round program's (steps, full steps): steps every client has an example in skip no
  // check. Worth a program of its own only when they are most of the steps (else the skipped
  // steps dominate); bucketed, so few compile.
  std::pair<int64_t, int64_t> round_key(int64_t steps, const Array& mask,
                                        const std::string& round_name) const {
    const int64_t full =
        ranks_.min(full_steps(mask), "the full steps of " + round_name + "'s cohort");
    return {steps, 2 * full >= steps ? bucket_down(full) : 0};
  }

  RoundJit& program(const std::pair<int64_t, int64_t>& key) {
    auto fn = programs_.find(key);
    if (fn == programs_.end())
      fn =
          programs_.emplace(key, jit(optim::fedavg_round(round_spec(key.first, key.second)), mesh_))
              .first;
    return fn->second;
  }

  optim::RoundSpec round_spec(int64_t steps, int64_t full_steps) const {
    optim::RoundSpec spec;
    spec.client = {o_.client_lr, o_.client_momentum};
    spec.server = server_;
    spec.cohort = cohort_slots(o_);
    spec.dp = dp_spec(o_);
    spec.steps = steps;
    spec.batch = o_.batch;
    spec.full_steps = full_steps;
    return spec;
  }

  const Options& o_;
  const optim::ServerOptimizer server_;
  const Inputs& in_;
  const Ranks& ranks_;
  const std::optional<Mesh> mesh_;  // the ranks' mesh under MPI
  const int64_t most_steps_;
  std::map<std::pair<int64_t, int64_t>, RoundJit> programs_;
  std::optional<RoundExporter> exporter_;
};

struct TestResult {
  double loss, accuracy;
};

// The test set in eval_shards(devices) shards.
class Evaluator {
 public:
  Evaluator(const Options& o, const data::Dataset& test)
      : test_(test),
        shards_(eval_shards(o.devices)),
        grid_(data::eval_batches(test.size(), shards_,
                                 std::max<int64_t>(1, (test.size() + shards_ - 1) / shards_))),
        fn_(jit(optim::evaluate_fn(shards_))) {}

  TestResult operator()(const Tree& params) {
    Tree e = fn_(params, test_.images, test_.labels, grid_.idx, grid_.mask);
    return {e["loss"].array().item<float>(), e["accuracy"].array().item<float>()};
  }

 private:
  const data::Dataset& test_;
  const int64_t shards_;
  const data::CohortBatches grid_;
  decltype(jit(std::declval<optim::EvalFn>())) fn_;
};

// The files of --out. The directory is made by the first write, so that a run failing before
// it leaves nothing behind.
class Outputs {
 public:
  // Only one process writes --out (rank 0 of an MPI run).
  Outputs(const Options& o, const std::string& ckpt_path, bool writes)
      : o_(o), ckpt_path_(ckpt_path), writes_(writes) {}

  void save_metrics(const std::vector<MetricsRow>& history) {
    if (!writes_) return;
    prepare();
    write_file_atomic(join(o_.out_dir, kMetricsCsvFile), metrics_csv(history));
    write_file_atomic(join(o_.out_dir, kMetricsSvgFile), metrics_svg(history, run_title(o_)));
  }

  void save_checkpoint(const TrainState& s) {
    if (!writes_) return;
    prepare();
    write_checkpoint(ckpt_path_,
                     Checkpoint{trajectory_fields(o_), s.round, s.params, s.state, s.history});
  }

 private:
  void prepare() {
    if (!ready_) make_out_dir(o_.out_dir), ready_ = true;
  }

  const Options& o_;
  const std::string ckpt_path_;
  const bool writes_;
  bool ready_ = false;
};

// What the round loop works with besides the training state.
struct Run {
  const Options& o;
  const Ranks& ranks;
  const PrivacyLedger& privacy;
  Clock::time_point t0;
  Progress& progress;
  RoundTrainer& trainer;
  Evaluator& evaluate;
  Outputs& outputs;
};

// Evaluates the model after row.round and records the test metrics (and epsilon) in row.
void record_test(const Run& r, TrainState& s, MetricsRow& row) {
  if (!r.ranks.is_root()) return;  // rank 0 evaluates for every rank
  const TestResult t = r.evaluate(s.params);
  row.test_loss = s.last_loss = t.loss;
  row.test_accuracy = s.last_acc = t.accuracy;
  if (!r.o.dp()) return;
  row.epsilon = r.privacy.epsilon(row.round);
  char line[160];
  std::snprintf(line, sizeof line, "round %lld: test accuracy %.4f, DP epsilon %.4g (delta %g)",
                static_cast<long long>(row.round), row.test_accuracy, row.epsilon, r.o.dp_delta);
  r.progress.message(line);
}

// Evaluates, records and saves the round just trained, as the schedule asks.
void end_round(const Run& r, TrainState& s, double train_loss, bool out_of_time) {
  const Options& o = r.o;
  MetricsRow row{s.round, train_loss, kNaN, kNaN, 0};
  const bool last = s.round == o.rounds;
  if (s.round % o.eval_every == 0 || last || out_of_time) record_test(r, s, row);
  row.elapsed_s = s.elapsed_before + seconds_since(r.t0);
  s.history.push_back(row);
  if (row.evaluated()) r.outputs.save_metrics(s.history);
  if (s.round % o.checkpoint_every == 0 || last || out_of_time) r.outputs.save_checkpoint(s);
}

// Trains up to --rounds; true when --max-seconds stopped it first.
bool train_rounds(const Run& r, TrainState& s) {
  const Options& o = r.o;
  double last_round_s = 0;
  const Clock::time_point loop_start = Clock::now();
  while (s.round < o.rounds) {
    // Stop before a round that would overrun the budget (but always make progress).
    if (o.max_seconds > 0 && s.round > s.start_round &&
        r.ranks.root_decides(seconds_since(r.t0) + last_round_s > o.max_seconds,
                             "the --max-seconds check"))
      return true;
    const Clock::time_point round_start = Clock::now();
    const double train_loss = r.trainer.train(s);
    const bool out_of_time =
        o.max_seconds > 0 &&
        r.ranks.root_decides(seconds_since(r.t0) + seconds_since(round_start) > o.max_seconds,
                             "the --max-seconds check");
    end_round(r, s, train_loss, out_of_time);
    last_round_s = seconds_since(round_start);
    const double done = static_cast<double>(s.round - s.start_round);
    r.progress.update(s.round, o.rounds, train_loss, s.last_acc, s.history.back().elapsed_s,
                      seconds_since(loop_start) / done);
    if (out_of_time && s.round != o.rounds) return true;
  }
  return false;
}

// A stop decided before a round: the last round's outputs may not be written yet.
void finish_early_stop(const Run& r, TrainState& s) {
  if (!s.history.empty() && !s.history.back().evaluated()) {
    record_test(r, s, s.history.back());
    r.outputs.save_metrics(s.history);
  }
  r.outputs.save_checkpoint(s);
}

std::string dp_text(const Options& o, const RunSummary& summary) {
  if (!o.dp()) return "";
  char text[96];
  std::snprintf(text, sizeof text, ", DP (epsilon %.4g, delta %g)", summary.epsilon, o.dp_delta);
  return text;
}

std::string ranks_text(const RunSummary& summary) {
  if (summary.ranks <= 1) return "";
  char text[200];
  std::snprintf(text, sizeof text,
                " on %d ranks (a rank sent at most %.3g MB a round; the model is %.3g MB; rank 0 "
                "communicated %.1f ms a round)",
                summary.ranks, summary.bytes_sent_per_round / 1e6, summary.model_bytes / 1e6,
                summary.seconds_communicating_per_round * 1e3);
  return text;
}

std::string report_line(const Options& o, const RunSummary& summary, int64_t start_round) {
  char line[512];
  if (summary.rounds_done == start_round && !summary.stopped_early) {
    std::snprintf(line, sizeof line,
                  "fedavg: nothing to do: the checkpoint is at round %lld, --rounds is %lld; "
                  "last test accuracy %.4f\n",
                  static_cast<long long>(summary.rounds_done), static_cast<long long>(o.rounds),
                  summary.test_accuracy);
  } else {
    std::snprintf(
        line, sizeof line,
        "fedavg: test accuracy %.4f (loss %.4f) after %lld/%lld rounds in %.1f s%s%s%s; "
        "outputs in %s\n",
        summary.test_accuracy, summary.test_loss, static_cast<long long>(summary.rounds_done),
        static_cast<long long>(o.rounds), summary.seconds, ranks_text(summary).c_str(),
        dp_text(o, summary).c_str(),
        summary.stopped_early ? " (stopped by --max-seconds; continue with --resume)" : "",
        o.out_dir.c_str());
  }
  return line;
}

RunSummary run_ranks(const Options& o, const Ranks& ranks, Clock::time_point t0, std::ostream& out,
                     std::ostream& progress_os, bool terminal) {
  ThreadsScope threads(ranks.threads(o.threads));
  Progress progress(progress_os, terminal, o.quiet || !ranks.is_root());
  const std::string ckpt_path = join(o.out_dir, kCheckpointFile);
  const Inputs in = load_inputs(o, ranks, ckpt_path);
  const optim::ServerOptimizer server = server_optimizer(o);
  TrainState s = initial_state(o, in, server, ckpt_path);
  // Only once the inputs passed: a refused run leaves --out as it found it.
  if (ranks.is_root()) remove_temp_leftovers(o.out_dir);

  DevicesScope devices(o.devices);
  RoundTrainer trainer(o, server, in, ranks);
  Evaluator evaluate(o, in.test);
  Outputs outputs(o, ckpt_path, ranks.is_root());
  const PrivacyLedger privacy(o);
  // epsilon is not checkpointed: the rows of a resumed run get theirs again.
  for (MetricsRow& row : s.history)
    if (row.evaluated()) row.epsilon = privacy.epsilon(row.round);
  const Run r{o, ranks, privacy, t0, progress, trainer, evaluate, outputs};
  RunSummary summary;
  summary.stopped_early = train_rounds(r, s);
  if (summary.stopped_early) finish_early_stop(r, s);
  progress.finish();

  summary.rounds_done = s.round;
  summary.test_accuracy = s.last_acc;
  summary.test_loss = s.last_loss;
  summary.epsilon = privacy.epsilon(s.round);
  summary.seconds = seconds_since(t0);
  summary.ranks = ranks.size();
  const double communicating = ranks.seconds_communicating();
  const uint64_t most_bytes = ranks.most_bytes_sent();
  if (s.round > s.start_round) {
    const auto rounds = static_cast<double>(s.round - s.start_round);
    summary.bytes_sent_per_round = static_cast<double>(most_bytes) / rounds;
    summary.seconds_communicating_per_round = communicating / rounds;
  }
  for (const Tree& leaf : tree_leaves(s.params))
    summary.model_bytes += static_cast<double>(leaf.array().nbytes());
  if (ranks.is_root()) out << report_line(o, summary, s.start_round);
  return summary;
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
  const Ranks ranks(o);
  return ranks.run_or_abort([&] { return run_ranks(o, ranks, t0, out, progress_os, terminal); });
}

}  // namespace drx::tool::fedavg
