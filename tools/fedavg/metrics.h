#pragma once
// Per-round metrics of a FedAvg run and their two renderings: a CSV table and an SVG plot.
#include <cstdint>
#include <string>
#include <vector>

namespace drx::tool::fedavg {

struct MetricsRow {
  int64_t round = 0;         // 1-based: the row describes the state after this round
  double train_loss = 0;     // weighted mean of the cohort's local training loss
  double test_loss = 0;      // NaN on rounds without an evaluation
  double test_accuracy = 0;  // NaN on rounds without an evaluation
  double elapsed_s = 0;      // wall-clock seconds since the run started (summed over resumes)
  bool evaluated() const;
};

// "round,train_loss,test_loss,test_accuracy,elapsed_s" then one line per row; the test
// columns are empty on rounds without an evaluation.
std::string metrics_csv(const std::vector<MetricsRow>& rows);

// A standalone SVG document with two panels sharing the round axis: test accuracy (top) and
// training loss (bottom), each a <polyline>. Valid XML; `title` is escaped.
std::string metrics_svg(const std::vector<MetricsRow>& rows, const std::string& title);

}  // namespace drx::tool::fedavg
