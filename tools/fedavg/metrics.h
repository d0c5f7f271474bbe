#pragma once
// Per-round metrics of a FedAvg run and their two renderings: a CSV table and an SVG plot.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace drx::tool::fedavg {

struct MetricsRow {
  int64_t round = 0;         // 1-based: the row describes the state after this round
  double train_loss = 0;     // weighted mean of the cohort's local training loss
  double test_loss = 0;      // NaN on rounds without an evaluation
  double test_accuracy = 0;  // NaN on rounds without an evaluation
  double elapsed_s = 0;      // wall-clock seconds since the run started (summed over resumes)
  // DP runs: the (epsilon, --dp-delta) guarantee after this round, on evaluated rounds;
  // NaN otherwise. Not checkpointed: it is a function of the round and the DP flags.
  double epsilon = std::numeric_limits<double>::quiet_NaN();
  bool evaluated() const;  // a test loss was recorded
};

// "round,train_loss,test_loss,test_accuracy,elapsed_s" (and ",epsilon" when a row has one)
// then one line per row; the test and epsilon columns are empty on rounds without an
// evaluation.
std::string metrics_csv(const std::vector<MetricsRow>& rows);

// A standalone SVG document with two panels sharing the round axis: test accuracy (top) and
// training loss (bottom), each a <polyline>. Valid XML; `title` is escaped.
std::string metrics_svg(const std::vector<MetricsRow>& rows, const std::string& title);

}  // namespace drx::tool::fedavg
