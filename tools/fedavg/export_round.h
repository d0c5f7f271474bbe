#pragma once
// `drx fedavg --export-rounds DIR`: each round also written as a batch job, so that the same
// round can be run outside the process, client by client (examples/batch_fedavg.sh,
// examples/dask_fedavg.py), and checked against what drx fedavg computed in process.
#include <string>

#include "drx/data/idx.h"
#include "drx/optim/optim.h"
#include "drx/trace/tree.h"

namespace drx::tool::fedavg {

// Writes round `round` (1-based) under dir/round-<round>:
//   parts/       the MapReduce plan (drx/export/mapreduce_plan.h) of
//                optim::fedavg_round_on_client_data(spec), traced on this round's types, its
//                values named after the round's arguments and results (mapreduce_names.h):
//                inputs params/..., state/... (the trees' paths), x, y, mask, weights;
//                outputs loss, params/..., state/...
//   server/      the server's inputs, NAME.npy (a '/' in NAME is a subfolder)
//   clients/I/   client I's data: client_index.npy and its rows of x (its examples,
//                gathered), y, mask and weights
//   expected/    this round's results in process, NAME.npy
//   carry        lines "NAME NAME", from the second round exported on: the previous round's
//                result NAME is this round's input NAME (the identity since plans name their
//                values; kept for scripts that read it)
// A round's params/... and state/... results are the next round's inputs of the same names.
class RoundExporter {
 public:
  explicit RoundExporter(std::string dir) : dir_(std::move(dir)) {}
  void write(int64_t round, const optim::RoundSpec& spec, const Tree& params, const Tree& state,
             const data::Dataset& train, const Array& idx, const Array& mask, const Array& weights,
             const Tree& result);

 private:
  std::string dir_;
  bool carried_ = false;  // whether a round was written before, whose results this one carries
};

}  // namespace drx::tool::fedavg
