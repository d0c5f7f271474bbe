#pragma once
// The `drx fedavg` training loop: data, partition, rounds, evaluation, outputs, checkpoints.
#include <cstdint>
#include <iosfwd>
#include <string>

#include "tools/fedavg/options.h"
#include "tools/training/run_outcome.h"

namespace drx::tool::fedavg {

struct RunSummary : training::RunOutcome {
  double test_accuracy = 0;  // of the last evaluation (NaN if none)
  double test_loss = 0;
  double epsilon = 0;               // DP runs: epsilon of the rounds done at --dp-delta (else NaN)
  double bytes_sent_per_round = 0;  // the most any process sent to the others, a round run
  double model_bytes = 0;           // of the params
  double seconds_communicating_per_round = 0;  // rank 0's, waiting for the others included
};

// Trains as `o` says. Progress goes to `progress` (redrawn in place when `terminal`), the
// final summary line to `out`. Throws drx::Error for a missing or damaged dataset (before
// any output file is created), an unusable checkpoint under --resume, or a failed write. A
// run that diverges stops at that round (tools/training/run_loop.h) and says so.
RunSummary run_fedavg(const Options& o, std::ostream& out, std::ostream& progress, bool terminal);

// The local steps for a cohort that needs `need` steps to finish its epochs, where no client
// of the population ever needs more than `most`: `need` rounded up to three significant bits
// (so a run with clients of many sizes compiles only a few round programs), at most `most`.
int64_t bucket_steps(int64_t need, int64_t most);

}  // namespace drx::tool::fedavg
