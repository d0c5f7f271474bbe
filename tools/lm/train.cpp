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
#include "tools/fedavg/atomic_file.h"
#include "tools/fedavg/checkpoint.h"
#include "tools/fedavg/progress.h"
#include "tools/fedavg/ranks.h"
#include "tools/fedavg/scopes.h"
#include "tools/lm/flops.h"
#include "tools/svg_plot.h"

namespace drx::tool::lm {
namespace {

using fedavg::Checkpoint;
using fedavg::MetricsRow;
using fedavg::Ranks;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr const char* kCheckpointFile = "checkpoint.bin";
constexpr const char* kMetricsCsvFile = "metrics.csv";
constexpr const char* kMetricsSvgFile = "metrics.svg";

// Independent random streams derived from --seed.
enum Stream : uint64_t { kInitStream = 1, kCohortStream = 2, kWindowStream = 3 };

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
double bits(double nats) { return nats / std::log(2.0); }

std::string join(const std::string& dir, const char* file) {
  return (std::filesystem::path(dir) / file).string();
}

nn::TransformerConfig model_config(const Options& o) {
  nn::TransformerConfig c;
  c.vocab = data::kByteVocabulary;
  c.context = o.context;
  c.layers = o.layers;
  c.width = o.width;
  c.heads = o.heads;
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

struct Corpus {
  std::vector<std::string> train, held_out;  // the documents' bytes
};

Corpus load_corpus(const Options& o) {
  Corpus c;
  for (data::BrownDocument& d : data::load_brown(o.data_dir)) {
    if (static_cast<int64_t>(d.text.size()) < o.context + 2)
      throw Error("lm: document " + d.id + " has " + std::to_string(d.text.size()) +
                  " bytes, fewer than --context + 2 = " + std::to_string(o.context + 2));
    (d.held_out ? c.held_out : c.train).push_back(std::move(d.text));
  }
  return c;
}

// A uniform integer in [0, n) from 64 random bits (the bias is below 2^-40 for these sizes, and
// unlike std::uniform_int_distribution the result is the same on every platform).
int64_t below(std::mt19937_64& rng, int64_t n) {
  return static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
}

// The held-out windows: per held-out document, offsets 0, T, 2T, ... that fit, the first
// --eval-windows of them.
std::vector<std::string> eval_windows(const Options& o, const Corpus& c) {
  std::vector<std::string> w;
  const auto T = static_cast<size_t>(o.context);
  for (const std::string& doc : c.held_out)
    for (size_t k = 0; k < static_cast<size_t>(o.eval_windows) && k * T + T + 1 <= doc.size(); ++k)
      w.push_back(doc.substr(k * T, T + 1));
  return w;
}

// Baselines on the bytes the model is evaluated on (each window's last T bytes).
std::pair<double, double> baselines(const Corpus& c, const std::vector<std::string>& windows) {
  std::vector<double> unigram(256, 0), first(256, 0);
  std::vector<double> pairs(256 * 256, 0);
  for (const std::string& doc : c.train)
    for (size_t i = 0; i + 1 < doc.size(); ++i) {
      const auto a = static_cast<unsigned char>(doc[i]), b = static_cast<unsigned char>(doc[i + 1]);
      ++first[a];
      ++pairs[a * 256 + b];
    }
  double n = 0, bigram = 0;
  for (const std::string& w : windows)
    for (size_t i = 1; i < w.size(); ++i) {
      const auto a = static_cast<unsigned char>(w[i - 1]), b = static_cast<unsigned char>(w[i]);
      ++unigram[b];
      ++n;
      bigram -= std::log2((pairs[a * 256 + b] + 0.5) / (first[a] + 0.5 * 128));
    }
  double entropy = 0;
  for (double k : unigram)
    if (k > 0) entropy -= k / n * std::log2(k / n);
  return {entropy, bigram / n};
}

// Windows [rows, steps, batch, T + 1] from `pick(row, rng)` -> (document, offset).
template <class Pick>
Array windows_array(const Options& o, int64_t rows, const Pick& pick) {
  const int64_t T = o.context;
  Array a(DType::i32, {rows, o.local_steps, o.batch, T + 1});
  int32_t* out = a.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r) {
    std::mt19937_64 rng = pick.rng(r);
    for (int64_t s = 0; s < o.local_steps * o.batch; ++s) {
      const std::string& doc = pick.document(r, rng);
      const int64_t at = below(rng, static_cast<int64_t>(doc.size()) - T);
      for (int64_t i = 0; i <= T; ++i)
        *out++ = static_cast<unsigned char>(doc[static_cast<size_t>(at + i)]);
    }
  }
  return a;
}

// ---- training state, checkpoints and outputs ----------------------------------------------

struct TrainState {
  Tree params, state;  // state: the server's (fedavg) or {"inner", "outer"} (diloco)
  int64_t round = 0, start_round = 0;
  std::vector<MetricsRow> history;
  double elapsed_before = 0, last_heldout = kNaN;
};

std::string tree_signature(const Tree& t) {
  std::string s = t.structure();
  for (const Tree& leaf : tree_leaves(t))
    s += " " + std::string(dtype_name(leaf.array().dtype())) + shape_str(leaf.array().shape());
  return s;
}

std::optional<Checkpoint> checkpoint_to_resume(const Options& o, const std::string& path) {
  return fedavg::checkpoint_to_resume("lm", o.resume, o.overwrite, path, trajectory_fields(o));
}

std::string lm_metrics_csv(const std::vector<MetricsRow>& rows) {
  std::ostringstream os;
  os << "round,train_bpb,heldout_bpb,elapsed_s\n";
  char line[128];
  for (const MetricsRow& r : rows) {
    std::snprintf(line, sizeof line, "%lld,%.6f,", static_cast<long long>(r.round), r.train_loss);
    os << line;
    if (r.evaluated()) {
      std::snprintf(line, sizeof line, "%.6f", r.test_loss);
      os << line;
    }
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
      for (int64_t i = 0; i < static_cast<int64_t>(corpus.train.size()); ++i)
        shards_[i % o.workers].push_back(i);
      for (int64_t w = 0; w < o.workers; ++w)
        if (shards_[w].empty())
          throw Error("lm: --workers " + std::to_string(o.workers) + " leaves worker " +
                      std::to_string(w) + " without documents");
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
      struct Pick {
        const std::vector<std::string>& docs;
        const std::vector<int64_t>& cohort;
        int64_t first;
        uint64_t seed;
        std::mt19937_64 rng(int64_t r) const {
          return std::mt19937_64(data::derive_seed(seed, static_cast<uint64_t>(cohort[first + r])));
        }
        const std::string& document(int64_t r, std::mt19937_64&) const {
          return docs[static_cast<size_t>(cohort[static_cast<size_t>(first + r)])];
        }
      } pick{corpus_.train, cohort, first, window_seed};
      Array windows = windows_array(o_, end - first, pick);
      Array weights(DType::f32, {end - first});
      for (int64_t k = first; k < end; ++k)
        weights.data<float>()[k - first] =
            static_cast<float>(corpus_.train[static_cast<size_t>(cohort[k])].size());
      result = (*fedavg_)(s.params, s.state, ranks_.placed(windows, slots),
                          ranks_.placed(weights, slots));
      s.state = result["state"];
    } else {
      struct Pick {
        const std::vector<std::string>& docs;
        const std::map<int64_t, std::vector<int64_t>>& shards;
        const std::map<int64_t, std::vector<double>>& cumulative;
        int64_t first;
        uint64_t seed;
        std::mt19937_64 rng(int64_t r) const {
          return std::mt19937_64(data::derive_seed(seed, static_cast<uint64_t>(first + r)));
        }
        // A document of the worker's shard with probability proportional to its length.
        const std::string& document(int64_t r, std::mt19937_64& rng) const {
          const std::vector<double>& cum = cumulative.at(first + r);
          const double u = static_cast<double>(below(rng, static_cast<int64_t>(cum.back())));
          const auto at = std::upper_bound(cum.begin(), cum.end(), u) - cum.begin();
          return docs[static_cast<size_t>(shards.at(first + r)[static_cast<size_t>(at)])];
        }
      } pick{corpus_.train, shards_, cumulative(), first, window_seed};
      Array windows = windows_array(o_, end - first, pick);
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
  const std::map<int64_t, std::vector<double>>& cumulative() {
    if (cumulative_.empty())
      for (const auto& [w, docs] : shards_) {
        double total = 0;
        for (int64_t i : docs)
          cumulative_[w].push_back(
              total += static_cast<double>(corpus_.train[static_cast<size_t>(i)].size()));
      }
    return cumulative_;
  }

  const Options& o_;
  const Corpus& corpus_;
  const Ranks& ranks_;
  const optim::LmRoundSpec spec_;
  const std::optional<Mesh> mesh_;
  std::map<int64_t, std::vector<int64_t>> shards_;
  std::map<int64_t, std::vector<double>> cumulative_;
  std::optional<decltype(jit(std::declval<optim::LmRoundFn>()))> fedavg_;
  std::optional<decltype(jit(std::declval<optim::DilocoRoundFn>()))> diloco_;
};

// The held-out windows in eval_shards(devices) shards.
class Evaluator {
 public:
  Evaluator(const Options& o, const std::vector<std::string>& windows)
      : shards_(eval_shards(o.devices)), fn_(jit(optim::lm_evaluate_fn(model_config(o), shards_))) {
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

RunSummary run_ranks(const Options& o, const Ranks& ranks, Clock::time_point t0, std::ostream& out,
                     std::ostream& progress_os, bool terminal) {
  ThreadsScope threads(ranks.threads(o.threads));
  fedavg::Progress progress(progress_os, terminal, o.quiet || !ranks.is_root(), "held-out bpb",
                            "heldout_bpb");
  const std::string ckpt_path = join(o.out_dir, kCheckpointFile);
  const std::string ckpt_bytes = ranks.from_root(
      [&] {
        std::optional<Checkpoint> c = checkpoint_to_resume(o, ckpt_path);
        return c ? fedavg::encode_checkpoint(*c) : std::string();
      },
      "the checkpoint of --resume");
  const Corpus corpus = load_corpus(o);
  const std::vector<std::string> held_windows = eval_windows(o, corpus);
  const auto [unigram, bigram] = baselines(corpus, held_windows);

  DevicesScope devices(o.devices);
  Trainer trainer(o, corpus, ranks);
  TrainState s;
  s.params = trainer.initial_params();
  s.state = trainer.initial_state(s.params);
  if (!ckpt_bytes.empty()) {
    Checkpoint c = fedavg::decode_checkpoint(ckpt_bytes, ckpt_path);
    if (tree_signature(c.params) != tree_signature(s.params) ||
        tree_signature(c.state) != tree_signature(s.state))
      throw Error(ckpt_path +
                  ": the checkpoint's trees do not match this run's model and "
                  "optimizer state");
    s.params = c.params;
    s.state = c.state;
    if (ranks.size() > 1 && o.diloco()) {
      // Each rank keeps only its own workers' rows, as a round leaves them.
      const auto [first, end] = ranks.clients(o.workers);
      s.state =
          Tree::dict({{"inner", tree_map(
                                    [&, first = first, end = end](const Array& a) {
                                      Array mine(a.dtype(), a.shape());
                                      const size_t row =
                                          a.nbytes() / static_cast<size_t>(o.workers);
                                      std::memcpy(static_cast<char*>(mine.raw()) + first * row,
                                                  static_cast<const char*>(a.raw()) + first * row,
                                                  static_cast<size_t>(end - first) * row);
                                      return mine;
                                    },
                                    s.state["inner"])},
                      {"outer", s.state["outer"]}});
    }
    s.start_round = s.round = c.round;
    s.history = c.history;
    if (!s.history.empty()) s.elapsed_before = s.history.back().elapsed_s;
    for (const MetricsRow& r : s.history)
      if (r.evaluated()) s.last_heldout = r.test_loss;
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

  bool prepared = false;
  auto save = [&](bool metrics, bool checkpoint) {
    // Every rank takes part in gathering the inner states; rank 0 writes.
    const Tree state = checkpoint ? trainer.gathered_state(s.state) : Tree();
    if (!ranks.is_root()) return;
    if (!prepared) {
      std::error_code ec;
      std::filesystem::create_directories(o.out_dir, ec);
      if (!std::filesystem::is_directory(o.out_dir))
        throw Error("cannot create output directory '" + o.out_dir + "'");
      prepared = true;
    }
    if (metrics) {
      fedavg::write_file_atomic(join(o.out_dir, kMetricsCsvFile), lm_metrics_csv(s.history));
      fedavg::write_file_atomic(join(o.out_dir, kMetricsSvgFile),
                                lm_metrics_svg(s.history, run_title(o), bigram));
    }
    if (checkpoint)
      fedavg::write_checkpoint(
          ckpt_path, Checkpoint{trajectory_fields(o), s.round, s.params, state, s.history});
  };

  RunSummary summary;
  std::vector<double> round_seconds;
  const Clock::time_point loop_start = Clock::now();
  double last_round_s = 0;
  while (s.round < o.rounds) {
    if (o.max_seconds > 0 && s.round > s.start_round &&
        ranks.root_decides(seconds_since(t0) + last_round_s > o.max_seconds,
                           "the --max-seconds check")) {
      summary.stopped_early = true;
      break;
    }
    const Clock::time_point round_start = Clock::now();
    const double train_bpb = trainer.train(s);
    last_round_s = seconds_since(round_start);
    round_seconds.push_back(last_round_s);
    const bool out_of_time =
        o.max_seconds > 0 &&
        ranks.root_decides(seconds_since(t0) > o.max_seconds, "the --max-seconds check");
    MetricsRow row{s.round, train_bpb, kNaN, kNaN, 0};
    const bool last = s.round == o.rounds || out_of_time;
    if ((s.round % o.eval_every == 0 || last) && ranks.is_root())
      row.test_loss = s.last_heldout = evaluate(s.params);
    row.elapsed_s = s.elapsed_before + seconds_since(t0);
    s.history.push_back(row);
    save(s.round % o.eval_every == 0 || last, s.round % o.checkpoint_every == 0 || last);
    progress.update(s.round, o.rounds, train_bpb, s.last_heldout, row.elapsed_s,
                    seconds_since(loop_start) / static_cast<double>(s.round - s.start_round));
    if (out_of_time && s.round != o.rounds) {
      summary.stopped_early = true;
      break;
    }
  }
  progress.finish();

  summary.rounds_done = s.round;
  summary.heldout_bpb = s.last_heldout;
  summary.train_bpb = s.history.empty() ? kNaN : s.history.back().train_loss;
  summary.unigram_bpb = unigram;
  summary.bigram_bpb = bigram;
  summary.seconds = seconds_since(t0);
  // The first round compiles; the median of the others is the steady state.
  if (round_seconds.size() > 1) round_seconds.erase(round_seconds.begin());
  summary.seconds_per_round = median(round_seconds);
  summary.ranks = ranks.size();
  summary.parameters = model_config(o).parameters();
  summary.tokens_per_round =
      static_cast<double>(o.clients_per_round() * o.local_steps * o.batch * o.context);
  summary.flops_6nt = 6.0 * static_cast<double>(summary.parameters) * summary.tokens_per_round;
  if (s.round > s.start_round) summary.flops_exact = dot_flops(trainer.round_program());
  if (ranks.is_root()) {
    char line[640];
    if (s.round == s.start_round && !summary.stopped_early) {
      std::snprintf(line, sizeof line,
                    "lm: nothing to do: the checkpoint is at round %lld, --rounds is %lld; last "
                    "held-out loss %.4f bits/byte\n",
                    static_cast<long long>(s.round), static_cast<long long>(o.rounds),
                    summary.heldout_bpb);
    } else {
      std::snprintf(
          line, sizeof line,
          "lm: held-out %.4f bits/byte (unigram %.3f, bigram %.3f) after %lld/%lld rounds in "
          "%.1f s; %.3f s/round, %.0f tokens/round, %.3g GFLOP/round (6NT %.3g, N = %lld), "
          "%.2f GFLOP/s%s%s; outputs in %s\n",
          summary.heldout_bpb, unigram, bigram, static_cast<long long>(s.round),
          static_cast<long long>(o.rounds), summary.seconds, summary.seconds_per_round,
          summary.tokens_per_round, summary.flops_exact * 1e-9, summary.flops_6nt * 1e-9,
          static_cast<long long>(summary.parameters),
          summary.flops_exact * 1e-9 / summary.seconds_per_round,
          ranks.size() > 1 ? (" on " + std::to_string(ranks.size()) + " ranks").c_str() : "",
          summary.stopped_early ? " (stopped by --max-seconds; continue with --resume)" : "",
          o.out_dir.c_str());
    }
    out << line;
  }
  return summary;
}

}  // namespace

RunSummary run_lm(const Options& o, std::ostream& out, std::ostream& progress, bool terminal) {
  const Clock::time_point t0 = Clock::now();
  const Ranks ranks("lm", o.mpi, o.mpi_timeout);
  return ranks.run_or_abort([&] { return run_ranks(o, ranks, t0, out, progress, terminal); });
}

}  // namespace drx::tool::lm
