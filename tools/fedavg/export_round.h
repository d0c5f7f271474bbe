#pragma once
// `drx fedavg --export-rounds DIR`: each round also written as a batch job, so that the same
// round can be run outside the process, client by client (examples/batch_fedavg.sh,
// examples/dask_fedavg.py), and checked against what drx fedavg computed in process.
#include <string>
#include <vector>

#include "drx/data/idx.h"
#include "drx/optim/optim.h"
#include "drx/trace/tree.h"

namespace drx::tool::fedavg {

// Writes round `round` (1-based) under dir/round-<round>:
//   parts/       drx split of optim::fedavg_round_on_client_data(spec), traced on this
//                round's types (the files of tools/commands/mapreduce_plan.h)
//   server/      the server's inputs, NAME.npy: the params' and state's leaves
//   clients/I/   client I's data: client_index.npy and its rows of x (its examples,
//                gathered), y, mask and weights
//   expected/    this round's results in process (loss, params, state), NAME.npy
//   carry        lines "PREV NAME": the previous round's result PREV is this round's input NAME
class RoundExporter {
 public:
  explicit RoundExporter(std::string dir) : dir_(std::move(dir)) {}
  void write(int64_t round, const optim::RoundSpec& spec, const Tree& params, const Tree& state,
             const data::Dataset& train, const Array& idx, const Array& mask, const Array& weights,
             const Tree& result);

 private:
  std::string dir_;
  std::vector<std::string> previous_outputs_;
};

}  // namespace drx::tool::fedavg
