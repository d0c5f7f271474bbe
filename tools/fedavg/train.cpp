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
#include "drx/privacy/dp_accounting.h"
#include "drx/random/random.h"
#include "tools/fedavg/export_round.h"
#include "tools/fedavg/metrics.h"
#include "tools/training/run_loop.h"
#include "tools/training/scopes.h"

namespace drx::tool::fedavg {
namespace {

using data::Checkpoint;
using training::Ranks;
using training::TrainState;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Independent random streams derived from --seed.
enum Stream : uint64_t {
  kPartitionStream = 1,
  kInitStream = 2,
  kCohortStream = 3,
  kBatchStream = 4,
  kNoiseStream = 5  // DP noise: the round state's random key
};

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

// ---- DP-FedAvg: sampling, the round's DP spec and the accountant ----------------------

data::CohortSampling cohort_sampling(const Options& o) {
  return o.dp() && o.dp_sampling == "poisson" ? data::CohortSampling::poisson
                                              : data::CohortSampling::fixed_size;
}
int64_t cohort_slots(const Options& o) {
  return data::cohort_slots(cohort_sampling(o), o.clients, o.cohort);
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
    if (o.dp())
      acc_.emplace(
          o.dp_sampling == "fixed" ? privacy::Sampling::fixed_size : privacy::Sampling::poisson,
          o.cohort, o.clients, o.dp_noise);
  }
  double epsilon(int64_t rounds) const { return acc_ ? acc_->epsilon(rounds, o_.dp_delta) : kNaN; }

 private:
  const Options& o_;
  std::optional<privacy::DpFedAvgAccounting> acc_;
};

std::string run_title(const Options& o) {
  std::ostringstream os;
  os << "drx fedavg: " << (o.model == "mlp" ? "" : o.model + ", ") << o.partition << ", "
     << o.clients << " clients, cohort " << o.cohort << ", server " << o.server_opt;
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

data::Dataset load_split(const Options& o, data::Split split) {
  return first_examples(data::load_fashion_mnist(split, o.data_dir), o.max_examples);
}

void check_shards_fit(const Options& o, const data::Dataset& train) {
  if (o.partition == "shards" && o.clients * o.shards_per_client > train.size())
    throw Error("fedavg: --clients x --shards-per-client = " +
                std::to_string(o.clients * o.shards_per_client) + " shards exceed the " +
                std::to_string(train.size()) + " training examples");
}

// The data a run reads: all of it is checked before the first output file exists.
struct Inputs {
  data::Dataset train, test;
  data::Partition partition;
};

Inputs load_inputs(const Options& o) {
  data::Dataset train = load_split(o, data::Split::train);
  data::Dataset test = load_split(o, data::Split::test);
  check_shards_fit(o, train);
  data::Partition partition = make_partition(o, train);
  return Inputs{std::move(train), std::move(test), std::move(partition)};
}

std::vector<int64_t> layer_sizes(const Options& o, const data::Dataset& train) {
  const int64_t in_features = train.images.size() / std::max<int64_t>(train.size(), 1);
  std::vector<int64_t> sizes = {in_features};
  sizes.insert(sizes.end(), o.hidden.begin(), o.hidden.end());
  sizes.push_back(data::kFashionMnistClasses);
  return sizes;
}

// The CNN's parameters for the training images (square, one channel: Fashion-MNIST's 28x28).
Tree cnn_params(const data::Dataset& train, uint64_t seed) {
  const int64_t pixels = train.images.size() / std::max<int64_t>(train.size(), 1);
  int64_t side = 0;
  while ((side + 1) * (side + 1) <= pixels) ++side;
  if (side * side != pixels)
    throw Error(
        "fedavg: --model cnn needs square one-channel images, but the training images have " +
        std::to_string(pixels) + " pixels");
  return nn::cnn_init(side, side, 1, data::kFashionMnistClasses, seed);
}

// A fresh model and server state (of a checkpoint being resumed too: its shapes are checked
// against them).
TrainState initial_state(const Options& o, const Inputs& in, const optim::ServerOptimizer& server) {
  TrainState s;
  const uint64_t seed = data::derive_seed(o.seed, kInitStream);
  s.params =
      o.model == "cnn" ? cnn_params(in.train, seed) : nn::mlp_init(layer_sizes(o, in.train), seed);
  s.state = server.init(s.params);
  if (o.dp())
    s.state = optim::dp_round_state(
        s.state, o.dp_clip,
        random::key(static_cast<int64_t>(data::derive_seed(o.seed, kNoiseStream))), f32,
        *dp_spec(o));
  return s;
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
    const data::PaddedCohort padded = data::sample_padded_cohort(cohort_sampling(o_), o_.clients,
                                                                 o_.cohort, cohort_seed, s.round);
    const std::vector<int64_t>& cohort = padded.slots;
    const int64_t slots = static_cast<int64_t>(cohort.size());
    const data::BatchOptions bo = batch_options(cohort, s.round);
    // Each rank gathers the batches of its own slots only.
    const auto [first, end] = ranks_.clients(slots);
    const std::vector<int64_t> mine(cohort.begin() + first, cohort.begin() + end);
    data::CohortBatches b = data::cohort_batches(in_.partition, mine, bo);
    Array weights = b.sizes;
    if (o_.dp()) weights = data::dp_participation(padded.real, first, end, b.mask);
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
    spec.policy = nn::Policy::named(o_.precision);
    spec.model = nn::Model::named(o_.model);
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
        shards_(training::eval_shards(o.devices)),
        grid_(data::eval_batches(test.size(), shards_,
                                 std::max<int64_t>(1, (test.size() + shards_ - 1) / shards_))),
        fn_(jit(optim::evaluate_fn(shards_, nn::Model::named(o.model)))) {}

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

// drx fedavg's rounds and evaluation for the run loop.
class FedavgTask : public training::RoundTask {
 public:
  FedavgTask(const Options& o, RoundTrainer& trainer, Evaluator& evaluate,
             const PrivacyLedger& privacy)
      : o_(o), trainer_(trainer), evaluate_(evaluate), privacy_(privacy) {}

  double train(TrainState& s) override { return trainer_.train(s); }

  void evaluate(const Tree& params, MetricsRow& row) override {
    const TestResult t = evaluate_(params);
    row.test_loss = t.loss;
    row.test_accuracy = t.accuracy;
  }
  double progress_figure(const MetricsRow& row) const override { return row.test_accuracy; }

  void evaluated(MetricsRow& row, training::Progress& progress) override {
    if (!o_.dp()) return;
    row.epsilon = privacy_.epsilon(row.round);
    char line[160];
    std::snprintf(line, sizeof line, "round %lld: test accuracy %.4f, DP epsilon %.4g (delta %g)",
                  static_cast<long long>(row.round), row.test_accuracy, row.epsilon, o_.dp_delta);
    progress.message(line);
  }

  std::string metrics_csv(const std::vector<MetricsRow>& rows, bool diverged) const override {
    return fedavg::metrics_csv(rows, diverged);
  }
  std::string metrics_svg(const std::vector<MetricsRow>& rows) const override {
    return fedavg::metrics_svg(rows, run_title(o_));
  }

 private:
  const Options& o_;
  RoundTrainer& trainer_;
  Evaluator& evaluate_;
  const PrivacyLedger& privacy_;
};

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

std::string report_line(const Options& o, const RunSummary& summary, const training::LoopResult& r,
                        int64_t start_round) {
  char line[768];
  if (r.diverged) {
    const std::string m = training::divergence_message(
        "fedavg", o, r, "the learning rates are likely too high: lower --client-lr or --server-lr");
    std::snprintf(line, sizeof line, "%s%s\n", m.c_str(), dp_text(o, summary).c_str());
  } else if (training::nothing_done(summary, start_round)) {
    char last[64];
    std::snprintf(last, sizeof last, "last test accuracy %.4f", summary.test_accuracy);
    return training::nothing_to_do("fedavg", summary, o.rounds, last);
  } else {
    std::snprintf(line, sizeof line,
                  "fedavg: test accuracy %.4f (loss %.4f) after %lld/%lld rounds in %s%s%s%s; "
                  "outputs in %s\n",
                  summary.test_accuracy, summary.test_loss,
                  static_cast<long long>(summary.rounds_done), static_cast<long long>(o.rounds),
                  training::elapsed_text(r, start_round).c_str(), ranks_text(summary).c_str(),
                  dp_text(o, summary).c_str(), training::stop_note(r).c_str(), o.out_dir.c_str());
  }
  return line;
}

RunSummary run_ranks(const Options& o, const Ranks& ranks, training::Clock::time_point t0,
                     std::ostream& out, std::ostream& progress_os, bool terminal) {
  training::ThreadsScope threads(ranks.threads(o.threads));
  training::Progress progress(progress_os, terminal, o.quiet || !ranks.is_root());
  training::RunLoop loop("fedavg", o, trajectory_fields(o), ranks, t0);
  const std::optional<Checkpoint> resumed = loop.checkpoint_to_resume();
  const Inputs in = load_inputs(o);
  const optim::ServerOptimizer server = o.server_optimizer();
  TrainState s = initial_state(o, in, server);
  if (resumed) loop.restore(*resumed, s);

  training::DevicesScope devices(o.devices);
  RoundTrainer trainer(o, server, in, ranks);
  Evaluator evaluate(o, in.test);
  const PrivacyLedger privacy(o);
  // epsilon is not checkpointed: the rows of a resumed run get theirs again.
  for (MetricsRow& row : s.history)
    if (row.evaluated()) row.epsilon = privacy.epsilon(row.round);
  FedavgTask task(o, trainer, evaluate, privacy);
  const training::LoopResult r = loop.run(task, s, progress);

  RunSummary summary;
  static_cast<training::RunOutcome&>(summary) = training::outcome(r, s, ranks);
  summary.test_accuracy = s.last_eval.test_accuracy;
  summary.test_loss = s.last_eval.test_loss;
  summary.epsilon = privacy.epsilon(s.round);
  const double communicating = ranks.seconds_communicating();
  const uint64_t most_bytes = ranks.most_bytes_sent();
  if (s.round > s.start_round) {
    const auto rounds = static_cast<double>(s.round - s.start_round);
    summary.bytes_sent_per_round = static_cast<double>(most_bytes) / rounds;
    summary.seconds_communicating_per_round = communicating / rounds;
  }
  for (const Tree& leaf : tree_leaves(s.params))
    summary.model_bytes += static_cast<double>(leaf.array().nbytes());
  if (ranks.is_root()) out << report_line(o, summary, r, s.start_round);
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
  const training::Clock::time_point t0 = training::Clock::now();
  const Ranks ranks("fedavg", o.mpi, o.mpi_timeout);
  if (ranks.distributed() && !o.export_rounds.empty())
    throw Error(
        "fedavg: --export-rounds writes every client's data, which no rank of an MPI run holds; "
        "export from a run of one process");
  return ranks.run_or_abort([&] { return run_ranks(o, ranks, t0, out, progress_os, terminal); });
}

}  // namespace drx::tool::fedavg
