#include "tools/lm/train.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>

#include "drx/core/mesh.h"
#include "drx/data/data.h"
#include "drx/exec/thread_pool.h"
#include "drx/jit/jit.h"
#include "drx/nn/transformer.h"
#include "drx/optim/lm.h"
#include "tools/lm/flops.h"
#include "tools/svg_plot.h"
#include "tools/training/run_loop.h"
#include "tools/training/scopes.h"

namespace drx::tool::lm {
namespace {

using data::Checkpoint;
using fedavg::MetricsRow;
using training::Ranks;
using training::TrainState;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Independent random streams derived from --seed.
enum Stream : uint64_t { kInitStream = 1, kCohortStream = 2, kWindowStream = 3 };

double bits(double nats) { return nats / std::log(2.0); }

nn::TransformerConfig model_config(const Options& o) {
  nn::TransformerConfig c;
  c.vocab = data::kByteVocabulary;
  c.context = o.context;
  c.layers = o.layers;
  c.width = o.width;
  c.heads = o.heads;
  c.policy = nn::Policy::named(o.precision);
  return c;
}

optim::LmRoundSpec round_spec(const Options& o) {
  optim::LmRoundSpec s;
  s.model = model_config(o);
  s.client.kind = o.client_opt;
  s.client.lr = o.client_lr;
  s.client.momentum = o.client_momentum;
  s.client.weight_decay = o.weight_decay;
  s.server.kind = optim::parse_server_kind(o.server_opt);
  s.server.lr = o.server_lr;
  s.server.momentum = o.server_momentum;
  s.server.beta1 = o.adam_beta1;
  s.server.beta2 = o.adam_beta2;
  s.server.eps = o.adam_eps;
  s.cohort = o.clients_per_round();
  s.steps = o.local_steps;
  s.batch = o.batch;
  return s;
}

// ---- the corpus ---------------------------------------------------------------------------

using Corpus = data::LmCorpus;

// ---- training state, checkpoints and outputs ----------------------------------------------

// A figure of the table: "nan" as such (printf may write "-nan").
std::string cell(double v) {
  if (std::isnan(v)) return "nan";
  char text[64];
  std::snprintf(text, sizeof text, "%.6f", v);
  return text;
}

// `diverged`: the last row is the round that diverged; its missing figures are written as nan.
std::string lm_metrics_csv(const std::vector<MetricsRow>& rows, bool diverged) {
  std::ostringstream os;
  os << "round,train_bpb,heldout_bpb,elapsed_s\n";
  char line[64];
  for (size_t i = 0; i < rows.size(); ++i) {
    const MetricsRow& r = rows[i];
    os << r.round << "," << cell(r.train_loss) << ",";
    if (r.evaluated() || (diverged && i + 1 == rows.size())) os << cell(r.test_loss);
    std::snprintf(line, sizeof line, ",%.3f\n", r.elapsed_s);
    os << line;
  }
  return os.str();
}

std::string lm_metrics_svg(const std::vector<MetricsRow>& rows, const std::string& title,
                           double bigram) {
  std::vector<std::pair<double, double>> train, held;
  double hi = bigram, lo = bigram;
  for (const MetricsRow& r : rows) {
    const auto x = static_cast<double>(r.round);
    if (std::isfinite(r.train_loss)) train.emplace_back(x, r.train_loss);
    if (r.evaluated() && std::isfinite(r.test_loss)) held.emplace_back(x, r.test_loss);
  }
  for (const auto& pts : {train, held})
    for (const auto& [_, y] : pts) hi = std::max(hi, y), lo = std::min(lo, y);
  const double width = 720, height = 420, left = 70, right = 20, top = 50, bottom = 50;
  svg::Panel p{left,
               top,
               width - left - right,
               height - top - bottom,
               0,
               rows.empty() ? 1.0 : std::max(1.0, static_cast<double>(rows.back().round)),
               std::floor(lo * 2) / 2,
               std::ceil(hi * 2) / 2};
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << svg::num(width) << "\" height=\""
     << svg::num(height) << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << svg::num(width / 2)
     << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << svg::xml_escape(title)
     << "</text>\n";
  svg::axes(os, p, "bits per byte: training (red), held-out (blue), byte bigram (grey)", true);
  svg::polyline(os, p, {{p.xmin, bigram}, {p.xmax, bigram}}, "#999", "bigram");
  svg::polyline(os, p, train, "#d62728", "train_bpb");
  svg::polyline(os, p, held, "#1f77b4", "heldout_bpb");
  os << "<text x=\"" << svg::num(left + (width - left - right) / 2) << "\" y=\""
     << svg::num(height - 10) << "\" text-anchor=\"middle\">round</text>\n</svg>\n";
  return os.str();
}

std::string run_title(const Options& o) {
  std::ostringstream os;
  os << "drx lm: " << o.algorithm << ", " << (o.diloco() ? "workers " : "cohort ")
     << o.clients_per_round() << ", " << o.layers << " layers x " << o.width << ", context "
     << o.context;
  return os.str();
}

double median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---- the run ------------------------------------------------------------------------------

class Trainer {
 public:
  Trainer(const Options& o, const Corpus& corpus, const Ranks& ranks)
      : o_(o),
        corpus_(corpus),
        ranks_(ranks),
        spec_(round_spec(o)),
        mesh_(ranks.round_mesh(o.devices)) {
    if (o.diloco()) {
      shards_.emplace(corpus.train, o.workers);
      diloco_.emplace(jit(optim::diloco_round(spec_, {o.outer_lr, o.outer_momentum}), mesh_));
    } else {
      fedavg_.emplace(jit(optim::lm_fedavg_round(spec_), mesh_));
    }
  }

  Tree initial_params() const {
    return nn::transformer_init(spec_.model, data::derive_seed(o_.seed, kInitStream));
  }
  Tree initial_state(const Tree& params) const {
    if (!o_.diloco()) return spec_.server.init(params);
    return Tree::dict(
        {{"inner", optim::diloco_inner_init(spec_, params)},
         {"outer",
          optim::OuterNesterov{o_.outer_lr, o_.outer_momentum}.transformation().init(params)}});
  }

  // Trains round s.round + 1; returns its training loss in bits per byte.
  double train(TrainState& s) {
    const int64_t slots = o_.clients_per_round();
    const auto [first, end] = ranks_.clients(slots);
    const auto activity = ranks_.activity("round " + std::to_string(s.round + 1));
    const uint64_t window_seed = data::derive_seed(data::derive_seed(o_.seed, kWindowStream),
                                                   static_cast<uint64_t>(s.round));
    Tree result;
    if (!o_.diloco()) {
      const std::vector<int64_t> cohort =
          data::sample_cohort(static_cast<int64_t>(corpus_.train.size()), o_.cohort,
                              data::derive_seed(o_.seed, kCohortStream), s.round);
      const data::WindowGrid grid{o_.local_steps, o_.batch, o_.context};
      Array windows = data::cohort_windows(corpus_.train, cohort, first, end, window_seed, grid);
      Array weights = data::cohort_document_lengths(corpus_.train, cohort, first, end);
      result = (*fedavg_)(s.params, s.state, ranks_.placed(windows, slots),
                          ranks_.placed(weights, slots));
      s.state = result["state"];
    } else {
      Array windows =
          shards_->windows(first, end, window_seed, {o_.local_steps, o_.batch, o_.context});
      result =
          (*diloco_)(s.params, s.state["outer"], s.state["inner"], ranks_.placed(windows, slots));
      s.state = Tree::dict({{"inner", result["inner"]}, {"outer", result["state"]}});
    }
    s.params = result["params"];
    ++s.round;
    return bits(result["loss"].array().item<float>());
  }

  // The state with every rank's workers' inner states (on rank 0; for checkpoints).
  Tree gathered_state(const Tree& state) const {
    if (!o_.diloco() || ranks_.size() == 1) return state;
    const int64_t slots = o_.clients_per_round();
    Tree inner =
        tree_map([&](const Array& a) { return ranks_.gather_rows(a, slots, "the inner states"); },
                 state["inner"]);
    return Tree::dict({{"inner", inner}, {"outer", state["outer"]}});
  }

  const Program& round_program() const {
    return diloco_ ? diloco_->last_program() : fedavg_->last_program();
  }

 private:
  const Options& o_;
  const Corpus& corpus_;
  const Ranks& ranks_;
  const optim::LmRoundSpec spec_;
  const std::optional<Mesh> mesh_;
  std::optional<data::WorkerShards> shards_;
  std::optional<decltype(jit(std::declval<optim::LmRoundFn>()))> fedavg_;
  std::optional<decltype(jit(std::declval<optim::DilocoRoundFn>()))> diloco_;
};

// The held-out windows in eval_shards(devices) shards.
class Evaluator {
 public:
  Evaluator(const Options& o, const std::vector<std::string>& windows)
      : shards_(training::eval_shards(o.devices)),
        fn_(jit(optim::lm_evaluate_fn(model_config(o), shards_))) {
    const auto n = static_cast<int64_t>(windows.size());
    const int64_t per = (n + shards_ - 1) / shards_, T = o.context;
    windows_ = Array(DType::i32, {shards_, per, T + 1});
    mask_ = Array(DType::f32, {shards_, per});
    for (int64_t i = 0; i < n; ++i) {
      // Window i goes to shard i % shards: every shard gets a spread of documents.
      const int64_t row = (i % shards_) * per + i / shards_;
      mask_.data<float>()[row] = 1;
      for (int64_t j = 0; j <= T; ++j)
        windows_.data<int32_t>()[row * (T + 1) + j] =
            static_cast<unsigned char>(windows[static_cast<size_t>(i)][static_cast<size_t>(j)]);
    }
  }
  double operator()(const Tree& params) {  // bits per byte
    Tree r = fn_(params, windows_, mask_);
    return bits(r["loss_sum"].array().item<float>() /
                std::max(1.0f, r["count"].array().item<float>()));
  }

 private:
  int64_t shards_;
  Array windows_, mask_;
  decltype(jit(std::declval<optim::LmEvalFn>())) fn_;
};

// drx lm's rounds and held-out evaluation for the run loop.
class LmTask : public training::RoundTask {
 public:
  LmTask(const Options& o, Trainer& trainer, Evaluator& evaluate, double bigram)
      : o_(o), trainer_(trainer), evaluate_(evaluate), bigram_(bigram) {}

  double train(TrainState& s) override { return trainer_.train(s); }
  void evaluate(const Tree& params, MetricsRow& row) override { row.test_loss = evaluate_(params); }
  double progress_figure(const MetricsRow& row) const override { return row.test_loss; }
  Tree checkpoint_state(const Tree& state) const override { return trainer_.gathered_state(state); }
  std::string metrics_csv(const std::vector<MetricsRow>& rows, bool diverged) const override {
    return lm_metrics_csv(rows, diverged);
  }
  std::string metrics_svg(const std::vector<MetricsRow>& rows) const override {
    return lm_metrics_svg(rows, run_title(o_), bigram_);
  }

 private:
  const Options& o_;
  Trainer& trainer_;
  Evaluator& evaluate_;
  const double bigram_;
};

// Each rank keeps only its own workers' rows of the DiLoCo inner states, as a round leaves
// them.
Tree own_rows(const Options& o, const Ranks& ranks, const Tree& state) {
  if (ranks.size() == 1 || !o.diloco()) return state;
  return Tree::dict(
      {{"inner",
        tree_map([&](const Array& a) { return ranks.own_rows(a, o.workers, "the inner states"); },
                 state["inner"])},
       {"outer", state["outer"]}});
}

std::string report_line(const Options& o, const RunSummary& summary, const training::LoopResult& r,
                        int64_t start_round, int ranks) {
  char line[768];
  if (r.diverged) {
    const std::string m = training::divergence_message(
        "lm", o, r,
        o.diloco() ? "the learning rates are likely too high: lower --client-lr or --outer-lr"
                   : "the learning rates are likely too high: lower --client-lr or --server-lr");
    std::snprintf(line, sizeof line, "%s\n", m.c_str());
  } else if (training::nothing_done(summary, start_round)) {
    char last[64];
    std::snprintf(last, sizeof last, "last held-out loss %.4f bits/byte", summary.heldout_bpb);
    return training::nothing_to_do("lm", summary, o.rounds, last);
  } else {
    std::snprintf(
        line, sizeof line,
        "lm: held-out %.4f bits/byte (unigram %.3f, bigram %.3f) after %lld/%lld rounds in "
        "%s; %.3f s/round, %.0f tokens/round, %.3g GFLOP/round (6NT %.3g, N = %lld), "
        "%.2f GFLOP/s, %lld page faults/round%s%s; outputs in %s\n",
        summary.heldout_bpb, summary.unigram_bpb, summary.bigram_bpb,
        static_cast<long long>(summary.rounds_done), static_cast<long long>(o.rounds),
        training::elapsed_text(r, start_round).c_str(), summary.seconds_per_round,
        summary.tokens_per_round, summary.flops_exact * 1e-9, summary.flops_6nt * 1e-9,
        static_cast<long long>(summary.parameters),
        summary.flops_exact * 1e-9 / summary.seconds_per_round,
        static_cast<long long>(summary.page_faults_per_round),
        ranks > 1 ? (" on " + std::to_string(ranks) + " ranks").c_str() : "",
        training::stop_note(r).c_str(), o.out_dir.c_str());
  }
  return line;
}

RunSummary run_ranks(const Options& o, const Ranks& ranks, training::Clock::time_point t0,
                     std::ostream& out, std::ostream& progress_os, bool terminal) {
  training::ThreadsScope threads(ranks.threads(o.threads));
  training::Progress progress(progress_os, terminal, o.quiet || !ranks.is_root(), "held-out bpb",
                              "heldout_bpb");
  training::RunLoop loop("lm", o, trajectory_fields(o), ranks, t0);
  const std::optional<Checkpoint> resumed = loop.checkpoint_to_resume();
  const Corpus corpus = data::lm_corpus(data::load_brown(o.data_dir), o.context);
  const std::vector<std::string> held_windows =
      data::eval_windows(corpus, o.context, o.eval_windows);
  const auto [unigram, bigram] = data::lm_baselines(corpus, held_windows);

  training::DevicesScope devices(o.devices);
  Trainer trainer(o, corpus, ranks);
  TrainState s;
  s.params = trainer.initial_params();
  s.state = trainer.initial_state(s.params);
  if (resumed) {
    loop.restore(*resumed, s);
    s.state = own_rows(o, ranks, s.state);
  }
  Evaluator evaluate(o, held_windows);
  if (!o.quiet && ranks.is_root()) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "lm: %zu training and %zu held-out documents; %zu held-out windows; baselines "
                  "%.3f bits/byte (unigram entropy), %.3f (byte bigram)",
                  corpus.train.size(), corpus.held_out.size(), held_windows.size(), unigram,
                  bigram);
    progress.message(line);
  }
  LmTask task(o, trainer, evaluate, bigram);
  const training::LoopResult r = loop.run(task, s, progress);

  RunSummary summary;
  static_cast<training::RunOutcome&>(summary) = training::outcome(r, s, ranks);
  summary.heldout_bpb = s.last_eval.test_loss;
  summary.train_bpb = s.history.empty() ? kNaN : s.history.back().train_loss;
  summary.unigram_bpb = unigram;
  summary.bigram_bpb = bigram;
  // The first round compiles; the median of the others is the steady state.
  std::vector<double> round_seconds = r.round_seconds;
  if (round_seconds.size() > 1) round_seconds.erase(round_seconds.begin());
  summary.seconds_per_round = median(round_seconds);
  std::vector<double> faults(r.round_page_faults.begin(), r.round_page_faults.end());
  if (faults.size() > 1) faults.erase(faults.begin());
  summary.page_faults_per_round = faults.empty() ? 0 : static_cast<int64_t>(median(faults));
  summary.parameters = model_config(o).parameters();
  summary.tokens_per_round =
      static_cast<double>(o.clients_per_round() * o.local_steps * o.batch * o.context);
  summary.flops_6nt = 6.0 * static_cast<double>(summary.parameters) * summary.tokens_per_round;
  if (s.round > s.start_round) summary.flops_exact = dot_flops(trainer.round_program());
  if (ranks.is_root()) out << report_line(o, summary, r, s.start_round, ranks.size());
  return summary;
}

}  // namespace

RunSummary run_lm(const Options& o, std::ostream& out, std::ostream& progress, bool terminal) {
  const training::Clock::time_point t0 = training::Clock::now();
  const Ranks ranks("lm", o.mpi, o.mpi_timeout);
  return ranks.run_or_abort([&] { return run_ranks(o, ranks, t0, out, progress, terminal); });
}

}  // namespace drx::tool::lm
