#pragma once
// What a training run records after each round: what its metrics files show and what its
// checkpoint carries so that a resumed run reports the whole history.
#include <cmath>
#include <cstdint>
#include <limits>

namespace drx::data {

struct RoundRecord {
  int64_t round = 0;         // 1-based: the record describes the state after this round
  double train_loss = 0;     // weighted mean of the cohort's local training loss
  double test_loss = 0;      // NaN on rounds without an evaluation
  double test_accuracy = 0;  // NaN on rounds without an evaluation
  double elapsed_s = 0;      // wall-clock seconds since the run started (summed over resumes)
  // DP runs: the (epsilon, delta) guarantee after this round, on evaluated rounds; NaN
  // otherwise. Not checkpointed: it is a function of the round and the DP settings.
  double epsilon = std::numeric_limits<double>::quiet_NaN();
  bool evaluated() const { return !std::isnan(test_loss); }  // a test loss was recorded
};

}  // namespace drx::data
