#pragma once
// Per-round metrics of a FedAvg run and their two renderings: a CSV table and an SVG plot.
#include <string>
#include <vector>

#include "drx/data/round_record.h"

namespace drx::tool::fedavg {

// drx::data's record of a round, under the name the tools have always used.
using MetricsRow = data::RoundRecord;

// "round,train_loss,test_loss,test_accuracy,elapsed_s" (and ",epsilon" when a row has one)
// then one line per row; the test and epsilon columns are empty on rounds without an
// evaluation. `diverged`: the last row is the round at which the run diverged; its missing
// figures are written as nan.
std::string metrics_csv(const std::vector<MetricsRow>& rows, bool diverged = false);

// A standalone SVG document with two panels sharing the round axis: test accuracy (top) and
// training loss (bottom), each a <polyline>. Valid XML; `title` is escaped.
std::string metrics_svg(const std::vector<MetricsRow>& rows, const std::string& title);

}  // namespace drx::tool::fedavg
