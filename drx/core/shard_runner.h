#pragma once
// The sharding and communication seam between a program's placements and
// whatever runs them. Kernels over a placement (map_fn, reduce_*, the chunked
// reduce-of-map) see only this interface: the thread mesh (drx/exec) runs
// every shard in this process; an MPI executor (drx/dist) will run the shards
// of its rank and gather the others' partial reductions, in shard order, so
// the canonical reduction tree — and with it every result bit — is the same.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace drx {

class ShardRunner {
 public:
  virtual ~ShardRunner() = default;

  // The clients of a placement of `clients` form this many contiguous shards;
  // shard s holds clients [begin(s), begin(s + 1)).
  virtual int64_t shards(int64_t clients) const = 0;
  int64_t begin(int64_t shard, int64_t clients) const { return clients * shard / shards(clients); }

  // Runs fn(shard, first client, end client) for the shards this process
  // holds, in parallel, and returns when all have run (rethrowing the first
  // error).
  virtual void run(int64_t clients,
                   const std::function<void(int64_t, int64_t, int64_t)>& fn) const = 0;

  // After run(): makes every shard's partial result available here, in shard
  // order. In one process they already are (the default does nothing); across
  // processes this is an all-gather of the serialised partials.
  virtual void gather(std::vector<std::vector<std::byte>>& partials_by_shard) const {
    (void)partials_by_shard;
  }
};

}  // namespace drx
