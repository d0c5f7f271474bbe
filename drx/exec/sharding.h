#pragma once
// Private to drx/exec: the ShardRunner (drx/core/shard_runner.h) over a
// mesh's device threads and, for an axis that spans processes, its
// ProcessGroup.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "drx/core/mesh.h"
#include "drx/core/shard_runner.h"

namespace drx::exec {

// The clients of `placement` in contiguous shards, in client order: one per
// device when the placement is an axis of the mesh (shard d of D holds clients
// [n d / D, n (d + 1) / D), so uneven cohorts differ by one client), else
// blocks for the threads of drx::num_threads(). When the axis spans
// processes, this process's range of clients is split over its devices.
class Sharding : public ShardRunner {
 public:
  Sharding(const Mesh& mesh, const std::string& placement);

  std::pair<int64_t, int64_t> local_clients(int64_t clients) const override;
  int64_t shards(int64_t clients) const override;
  void run(int64_t clients,
           const std::function<void(int64_t, int64_t, int64_t)>& fn) const override;
  void reduce(const RowReducer& local, void* out, const std::string& op) const override;

  // Whether other processes run some of the clients.
  bool spans_processes() const { return group_ != nullptr; }

 private:
  Mesh mesh_;
  std::string axis_;  // empty: the default thread pool
  const ProcessGroup* group_ = nullptr;
};

}  // namespace drx::exec
