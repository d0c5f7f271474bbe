#pragma once
// The run loop of the training commands (drx fedavg, drx lm): resume from a checkpoint, train
// round after round, evaluate and write the outputs on schedule, stop for --max-seconds or at
// the first round that diverges. The command supplies its rounds and evaluation (RoundTask);
// everything about the run's life is here, once.
//
// Files in --out: checkpoint.bin, metrics.csv and metrics.svg, each replaced atomically; the
// directory is made by the first write, so a run refused before its first round leaves --out
// as it found it. Under MPI rank 0 reads and writes them and decides every stop.
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "drx/data/checkpoint.h"
#include "drx/trace/tree.h"
#include "tools/fedavg/metrics.h"
#include "tools/training/progress.h"
#include "tools/training/ranks.h"
#include "tools/training/run_flags.h"
#include "tools/training/run_outcome.h"

namespace drx::tool::training {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0);

using data::Checkpoint;
using fedavg::MetricsRow;
using Fields = std::vector<std::pair<std::string, std::string>>;

inline constexpr const char* kCheckpointFile = "checkpoint.bin";
inline constexpr const char* kMetricsCsvFile = "metrics.csv";
inline constexpr const char* kMetricsSvgFile = "metrics.svg";

// Where training stands.
struct TrainState {
  Tree params, state;       // Trees of Arrays
  int64_t round = 0;        // rounds completed
  int64_t start_round = 0;  // those completed before this process started
  std::vector<MetricsRow> history;
  double elapsed_before = 0;  // wall clock of the runs before a resume
  MetricsRow last_eval{0, 0, std::numeric_limits<double>::quiet_NaN(),
                       std::numeric_limits<double>::quiet_NaN(), 0};  // the latest evaluated row
};

// A command's rounds and evaluation.
class RoundTask {
 public:
  virtual ~RoundTask() = default;
  // Trains round s.round + 1 on every rank: updates s.params and s.state, advances s.round and
  // returns the round's training loss.
  virtual double train(TrainState& s) = 0;
  // Rank 0 alone: evaluates `params` into row.test_loss and row.test_accuracy.
  virtual void evaluate(const Tree& params, MetricsRow& row) = 0;
  // What progress lines show of an evaluated row (test accuracy; held-out bits per byte).
  virtual double progress_figure(const MetricsRow& row) const = 0;
  // Rank 0, after an evaluation: whatever the command adds to the row (DP: its epsilon).
  virtual void evaluated(MetricsRow&, Progress&) {}
  // The state a checkpoint holds. Every rank calls it (DiLoCo gathers its workers' rows).
  virtual Tree checkpoint_state(const Tree& state) const { return state; }
  // metrics.csv and metrics.svg of `rows`; `diverged`: the last row is the round that diverged
  // (its missing figures are written as nan).
  virtual std::string metrics_csv(const std::vector<MetricsRow>& rows, bool diverged) const = 0;
  virtual std::string metrics_svg(const std::vector<MetricsRow>& rows) const = 0;
};

// How a run ended.
struct LoopResult {
  bool stopped_early = false;  // --max-seconds ended it before --rounds
  bool diverged = false;       // a round's training loss, model or evaluation was not finite
  int64_t diverged_round = 0;
  std::string divergence;             // what was not finite, e.g. "the training loss is nan"
  int64_t checkpoint_round = -1;      // the round checkpoint.bin holds (-1: none written)
  std::vector<double> round_seconds;  // this process's rounds, their evaluations excluded
  // Minor page faults of this process during each of its rounds (training only): memory first
  // touched on the hot path, which should stop after the first round.
  std::vector<int64_t> round_page_faults;
  double seconds = 0;  // this process's wall clock
  double elapsed = 0;  // the run's, summed over resumes (metrics.csv's elapsed_s)
};

// The summary's part every training command shares.
RunOutcome outcome(const LoopResult& r, const TrainState& s, const Ranks& ranks);

class RunLoop {
 public:
  // `fields`: the flags that shape the trajectory (checkpoints record them; --resume refuses
  // a checkpoint whose fields differ). t0: when the process's run started.
  RunLoop(std::string command, const RunFlags& flags, Fields fields, const Ranks& ranks,
          Clock::time_point t0);

  // The checkpoint of --resume (rank 0 reads it and sends it to every rank), or none; refuses
  // to replace an earlier run's checkpoint without --overwrite. Call it before loading data.
  std::optional<Checkpoint> checkpoint_to_resume() const;
  // Continues s (fresh params and state of this configuration) from c, after checking that
  // c's trees have the same structure, dtypes and shapes.
  void restore(const Checkpoint& c, TrainState& s) const;

  // Trains s to --rounds, writing the outputs as the schedule says. Call it once every input
  // has been read: only then does it touch --out (stale temporaries of a killed run are
  // removed; under --resume, metrics.csv is trimmed to the checkpoint's round).
  LoopResult run(RoundTask& task, TrainState& s, Progress& progress);

  const std::string& command() const { return command_; }
  std::string checkpoint_path() const;

 private:
  class Outputs;
  // Rank 0: --resume's checkpoint, or none after refusing to replace an earlier run's.
  std::optional<Checkpoint> read_resume_checkpoint(const std::string& path) const;
  bool record_evaluation(RoundTask& task, TrainState& s, MetricsRow& row, Progress& progress);
  std::string check_finite(double train_loss, const Tree& params) const;

  const std::string command_;
  const RunFlags& flags_;
  const Fields fields_;
  const Ranks& ranks_;
  const Clock::time_point t0_;
};

// The run's wall clock over resumes, as metrics.csv's elapsed_s counts it: "17.0 s", and for a
// resumed run "17.0 s (9.4 s in this process, resumed at round 5)".
std::string elapsed_text(const LoopResult& r, int64_t start_round);
// Whether the run trained nothing (the checkpoint of --resume is at --rounds already).
bool nothing_done(const RunOutcome& o, int64_t start_round);
// "COMMAND: nothing to do: the checkpoint is at round R, --rounds is N; LAST\n".
std::string nothing_to_do(const std::string& command, const RunOutcome& o, int64_t rounds,
                          const std::string& last);
// The summary's tail for how the run ended: " (stopped by --max-seconds; ...)" or "".
std::string stop_note(const LoopResult& r);
// "COMMAND: diverged at round N: WHAT (...); ...": the message of a diverged run.
std::string divergence_message(const std::string& command, const RunFlags& flags,
                               const LoopResult& r, const std::string& hint);

}  // namespace drx::tool::training
