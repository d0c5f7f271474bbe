#include "tools/training/run_loop.h"

#include <sys/resource.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "drx/data/atomic_write.h"

namespace drx::tool::training {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string join(const std::string& dir, const char* file) {
  return (std::filesystem::path(dir) / file).string();
}

std::string tree_signature(const Tree& t) {
  std::string s = t.structure();
  for (const Tree& leaf : tree_leaves(t))
    s += " " + std::string(dtype_name(leaf.array().dtype())) + shape_str(leaf.array().shape());
  return s;
}

// A temporary file that an atomic write of one of the run's files makes: what a killed run
// leaves behind. Other files in --out are the user's.
bool is_temp_leftover(const std::string& name) {
  for (const char* file : {kCheckpointFile, kMetricsCsvFile, kMetricsSvgFile})
    if (data::is_atomic_temp_of(name, file)) return true;
  return false;
}

// Best effort: a leftover that stays does no harm, and a directory this run cannot write
// fails at its first output with a clear message.
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

// The process's minor page faults so far (pages first touched, or touched again after they were
// given back to the system).
int64_t minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

std::string number_text(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }

}  // namespace

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The files of --out, written by rank 0 alone.
class RunLoop::Outputs {
 public:
  Outputs(const RunLoop& loop, const RoundTask& task)
      : loop_(loop), task_(task), writes_(loop.ranks_.is_root()) {}

  void save_metrics(const std::vector<MetricsRow>& history, bool diverged) {
    if (!writes_) return;
    prepare();
    const std::string& dir = loop_.flags_.out_dir;
    data::write_file_atomically(join(dir, kMetricsCsvFile), {task_.metrics_csv(history, diverged)},
                                loop_.command_);
    data::write_file_atomically(join(dir, kMetricsSvgFile), {task_.metrics_svg(history)},
                                loop_.command_);
  }

  // Every rank calls it: the task may gather the state from them.
  void save_checkpoint(int64_t round, const Tree& params, const Tree& state,
                       const std::vector<MetricsRow>& history, LoopResult& result) {
    const Tree saved = task_.checkpoint_state(state);
    result.checkpoint_round = round;
    if (!writes_) return;
    prepare();
    data::write_checkpoint(loop_.checkpoint_path(),
                           Checkpoint{loop_.fields_, round, params, saved, history},
                           loop_.command_);
  }

 private:
  void prepare() {
    if (ready_) return;
    const std::string& dir = loop_.flags_.out_dir;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir))
      throw Error(loop_.command_ + ": cannot create output directory '" + dir +
                  "': " + (ec ? ec.message() : std::string("not a directory")));
    ready_ = true;
  }

  const RunLoop& loop_;
  const RoundTask& task_;
  const bool writes_;
  bool ready_ = false;
};

RunLoop::RunLoop(std::string command, const RunFlags& flags, Fields fields, const Ranks& ranks,
                 Clock::time_point t0)
    : command_(std::move(command)),
      flags_(flags),
      fields_(std::move(fields)),
      ranks_(ranks),
      t0_(t0) {}

std::string RunLoop::checkpoint_path() const { return join(flags_.out_dir, kCheckpointFile); }

std::optional<Checkpoint> RunLoop::checkpoint_to_resume() const {
  const std::string path = checkpoint_path();
  // Rank 0 reads it and sends it on: the ranks need not share a filesystem.
  const std::string bytes = ranks_.from_root(
      [&] {
        std::optional<Checkpoint> c = read_resume_checkpoint(path);
        return c ? data::encode_checkpoint(*c) : std::string();
      },
      "the checkpoint of --resume");
  if (bytes.empty()) return std::nullopt;
  return data::decode_checkpoint(bytes, path);
}

std::optional<Checkpoint> RunLoop::read_resume_checkpoint(const std::string& path) const {
  if (!flags_.resume) {
    // An earlier run's results are not replaced by accident.
    std::error_code ec;
    if (!flags_.overwrite && std::filesystem::exists(path, ec))
      throw Error(command_ + ": '" + path +
                  "' holds the checkpoint of an earlier run; pass --resume to continue it, "
                  "--overwrite to start over, or choose another --out");
    return std::nullopt;
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw Error(command_ + ": --resume: no checkpoint '" + path + "' to resume from");
  Checkpoint c = data::read_checkpoint(path);
  data::check_same_config(c.config, fields_, path);
  return c;
}

void RunLoop::restore(const Checkpoint& c, TrainState& s) const {
  const std::string path = checkpoint_path();
  if (tree_signature(c.params) != tree_signature(s.params))
    throw Error(path + ": checkpoint params " + tree_signature(c.params) +
                " do not match the model of this run " + tree_signature(s.params));
  if (tree_signature(c.state) != tree_signature(s.state))
    throw Error(path + ": checkpoint state " + tree_signature(c.state) +
                " does not match this run's optimizer state " + tree_signature(s.state));
  s.params = c.params;
  s.state = c.state;
  s.start_round = s.round = c.round;
  s.history = c.history;
  if (!s.history.empty()) s.elapsed_before = s.history.back().elapsed_s;
  for (const MetricsRow& r : s.history)
    if (r.evaluated()) s.last_eval = r;
}

std::string RunLoop::check_finite(double train_loss, const Tree& params) const {
  if (!std::isfinite(train_loss)) return "the training loss is " + number_text(train_loss);
  for (const Tree& leaf : tree_leaves(params)) {
    const Array& a = leaf.array();
    if (!is_floating(a.dtype())) continue;
    if (a.dtype() == DType::f32) {
      const float* v = a.data<float>();
      for (int64_t i = 0; i < a.size(); ++i)
        if (!std::isfinite(v[i])) return "the model's parameters are not finite";
      continue;
    }
    for (int64_t i = 0; i < a.size(); ++i)
      if (!std::isfinite(a.element_as_double(i))) return "the model's parameters are not finite";
  }
  return "";
}

// Rank 0 evaluates; every rank learns whether the evaluation was finite.
bool RunLoop::record_evaluation(RoundTask& task, TrainState& s, MetricsRow& row,
                                Progress& progress) {
  bool finite = true;
  if (ranks_.is_root()) {
    task.evaluate(s.params, row);
    finite = std::isfinite(row.test_loss);
    if (!std::isnan(row.test_accuracy)) finite = finite && std::isfinite(row.test_accuracy);
    s.last_eval = row;
    task.evaluated(row, progress);
  }
  return !ranks_.root_decides(!finite, "the evaluation's divergence check");
}

LoopResult RunLoop::run(RoundTask& task, TrainState& s, Progress& progress) {
  LoopResult result;
  Outputs outputs(*this, task);
  if (ranks_.is_root()) remove_temp_leftovers(flags_.out_dir);
  // A resumed run's metrics start where its checkpoint ends (an earlier run that went on
  // past its last checkpoint, or diverged, wrote rows beyond it).
  if (flags_.resume) outputs.save_metrics(s.history, false);

  const int64_t rounds = flags_.rounds;
  auto figure = [&] { return s.last_eval.evaluated() ? task.progress_figure(s.last_eval) : kNaN; };
  double last_round_s = 0;
  const Clock::time_point loop_start = Clock::now();
  while (s.round < rounds) {
    // Stop before a round that would overrun the budget (but always make progress).
    if (flags_.max_seconds > 0 && s.round > s.start_round &&
        ranks_.root_decides(seconds_since(t0_) + last_round_s > flags_.max_seconds,
                            "the --max-seconds check")) {
      result.stopped_early = true;
      break;
    }
    const Clock::time_point round_start = Clock::now();
    const int64_t faults_before = minor_page_faults();
    const Tree last_params = s.params, last_state = s.state;
    const double train_loss = task.train(s);
    const double train_s = seconds_since(round_start);
    result.round_seconds.push_back(train_s);
    result.round_page_faults.push_back(minor_page_faults() - faults_before);
    MetricsRow row{s.round, train_loss, kNaN, kNaN, 0};
    std::string bad = ranks_.is_root() ? check_finite(train_loss, s.params) : "";
    bool diverged = ranks_.root_decides(!bad.empty(), "the divergence check");
    const bool out_of_time = flags_.max_seconds > 0 &&
                             ranks_.root_decides(seconds_since(t0_) + train_s > flags_.max_seconds,
                                                 "the --max-seconds check");
    const bool last = s.round == rounds || out_of_time;
    if (!diverged && (s.round % flags_.eval_every == 0 || last) &&
        !record_evaluation(task, s, row, progress)) {
      diverged = true;
      bad = "the evaluation's loss is " + number_text(row.test_loss);
    }
    row.elapsed_s = s.elapsed_before + seconds_since(t0_);
    s.history.push_back(row);
    if (diverged) {
      result.diverged = true;
      result.diverged_round = s.round;
      result.divergence = bad;
      outputs.save_metrics(s.history, true);
      // The checkpoint kept is the last finite state: the round before.
      const int64_t kept = s.round - 1;
      const bool on_disk = kept == s.start_round && flags_.resume;
      if (!on_disk && result.checkpoint_round != kept) {
        std::vector<MetricsRow> finite_rows(s.history.begin(), s.history.end() - 1);
        outputs.save_checkpoint(kept, last_params, last_state, finite_rows, result);
      }
      if (on_disk) result.checkpoint_round = kept;
      progress.update(s.round, rounds, train_loss, figure(), row.elapsed_s,
                      seconds_since(loop_start) / static_cast<double>(s.round - s.start_round));
      break;
    }
    if (row.evaluated()) outputs.save_metrics(s.history, false);
    if (s.round % flags_.checkpoint_every == 0 || last)
      outputs.save_checkpoint(s.round, s.params, s.state, s.history, result);
    last_round_s = seconds_since(round_start);
    progress.update(s.round, rounds, train_loss, figure(), row.elapsed_s,
                    seconds_since(loop_start) / static_cast<double>(s.round - s.start_round));
    if (out_of_time && s.round != rounds) {
      result.stopped_early = true;
      break;
    }
  }
  // A stop decided before a round: the last round's outputs may not be written yet.
  if (result.stopped_early && !s.history.empty() && s.history.back().round == s.round) {
    MetricsRow& row = s.history.back();
    if (!row.evaluated() && record_evaluation(task, s, row, progress))
      outputs.save_metrics(s.history, false);
    if (result.checkpoint_round != s.round)
      outputs.save_checkpoint(s.round, s.params, s.state, s.history, result);
  }
  progress.finish();
  result.seconds = seconds_since(t0_);
  // What the last progress line and metrics.csv said, so the summary agrees with them.
  result.elapsed =
      s.round > s.start_round ? s.history.back().elapsed_s : s.elapsed_before + result.seconds;
  return result;
}

RunOutcome outcome(const LoopResult& r, const TrainState& s, const Ranks& ranks) {
  RunOutcome o;
  o.rounds_done = s.round;
  o.stopped_early = r.stopped_early;
  o.diverged = r.diverged;
  o.seconds = r.elapsed;
  o.ranks = ranks.size();
  return o;
}

std::string elapsed_text(const LoopResult& r, int64_t start_round) {
  char text[96];
  if (start_round > 0)
    std::snprintf(text, sizeof text, "%.1f s (%.1f s in this process, resumed at round %lld)",
                  r.elapsed, r.seconds, static_cast<long long>(start_round));
  else
    std::snprintf(text, sizeof text, "%.1f s", r.elapsed);
  return text;
}

bool nothing_done(const RunOutcome& o, int64_t start_round) {
  return o.rounds_done == start_round && !o.stopped_early && !o.diverged;
}

std::string nothing_to_do(const std::string& command, const RunOutcome& o, int64_t rounds,
                          const std::string& last) {
  return command + ": nothing to do: the checkpoint is at round " + std::to_string(o.rounds_done) +
         ", --rounds is " + std::to_string(rounds) + "; " + last + "\n";
}

std::string stop_note(const LoopResult& r) {
  return r.stopped_early ? " (stopped by --max-seconds; continue with --resume)" : "";
}

std::string divergence_message(const std::string& command, const RunFlags& flags,
                               const LoopResult& r, const std::string& hint) {
  std::string m = command + ": diverged at round " + std::to_string(r.diverged_round) + ": " +
                  r.divergence + " (" + hint + "); metrics of rounds 1-" +
                  std::to_string(r.diverged_round) + " in " + join(flags.out_dir, kMetricsCsvFile);
  if (r.checkpoint_round > 0)
    m += "; the checkpoint of round " + std::to_string(r.checkpoint_round) + " kept";
  else if (r.checkpoint_round == 0)
    m += "; the checkpoint holds the initial model";
  return m;
}

}  // namespace drx::tool::training
