#pragma once
// The `drx lm` training loop: corpus, rounds, held-out evaluation, outputs, checkpoints.
#include <cstdint>
#include <iosfwd>

#include "tools/lm/options.h"
#include "tools/training/run_outcome.h"

namespace drx::tool::lm {

struct RunSummary : training::RunOutcome {
  double heldout_bpb = 0;        // the last evaluation's held-out loss, bits per byte
  double train_bpb = 0;          // the last round's training loss
  double unigram_bpb = 0;        // baselines on the evaluated held-out bytes: their own unigram
  double bigram_bpb = 0;         // entropy, and a bigram model of the training text (add-0.5)
  double seconds_per_round = 0;  // median over this process's rounds (evaluation excluded)
  int64_t page_faults_per_round = 0;  // median minor page faults of those rounds (this process)
  int64_t parameters = 0;
  double tokens_per_round = 0;
  double flops_6nt = 0;    // 6 x parameters x tokens per round
  double flops_exact = 0;  // of the round program's dot_generals and convolutions
};

// Trains as `o` says; progress to `progress`, the summary line to `out`. Throws drx::Error for
// a missing or damaged corpus (before any output exists), an unusable checkpoint under --resume,
// or a failed write.
RunSummary run_lm(const Options& o, std::ostream& out, std::ostream& progress, bool terminal);

}  // namespace drx::tool::lm
