#pragma once
// Private to drx/exec: the in-process ShardRunner (drx/core/shard_runner.h)
// over a mesh's device threads.
#include <cstdint>
#include <functional>
#include <string>

#include "drx/core/shard_runner.h"
#include "drx/exec/mesh.h"

namespace drx::exec {

// The clients of `placement` in contiguous shards, in client order: one per
// device when the placement is an axis of the mesh (shard d of D holds clients
// [n d / D, n (d + 1) / D), so uneven cohorts differ by one client), else
// blocks for the threads of drx::num_threads().
class Sharding : public ShardRunner {
 public:
  Sharding(const Mesh& mesh, const std::string& placement);

  int64_t shards(int64_t clients) const override;
  // Runs fn(shard, first client, end client) for every shard, in parallel,
  // and returns when all have run (rethrowing the first error).
  void run(int64_t clients,
           const std::function<void(int64_t, int64_t, int64_t)>& fn) const override;

 private:
  Mesh mesh_;
  std::string axis_;  // empty: the default thread pool
};

}  // namespace drx::exec
