#pragma once
// The sharding and communication seam between a program's placements and
// whatever runs them. Kernels over a placement (map_fn, reduce_*, the chunked
// reduce-of-map) see only this interface: the thread mesh (drx/exec) runs
// every shard in this process; on a mesh axis that spans processes
// (drx/core/process_group.h, drx/dist) a process runs the shards of its own
// clients and its ProcessGroup combines the partial reductions in the
// canonical tree, so every result bit is the same.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "drx/core/row_reducer.h"

namespace drx {

class ShardRunner {
 public:
  virtual ~ShardRunner() = default;

  // The clients of a placement of `clients` that this process runs:
  // [first, end) (all of them unless the placement spans processes).
  virtual std::pair<int64_t, int64_t> local_clients(int64_t clients) const { return {0, clients}; }
  // This process's clients form this many contiguous shards.
  virtual int64_t shards(int64_t clients) const = 0;

  // Runs fn(shard, first client, end client) for the shards this process
  // holds, in parallel, and returns when all have run (rethrowing the first
  // error). Client indices are global.
  virtual void run(int64_t clients,
                   const std::function<void(int64_t, int64_t, int64_t)>& fn) const = 0;

  // After run(): `local` reduces this process's clients (its shards pushed in
  // order); writes the reduction over all clients to out. `op` names the
  // operation for errors.
  virtual void reduce(const RowReducer& local, void* out, const std::string& op) const {
    (void)op;
    local.finish(out);
  }
};

}  // namespace drx
