#include "drx/exec/sharding.h"

#include <algorithm>

#include "drx/exec/thread_pool.h"

namespace drx::exec {

Sharding::Sharding(const Mesh& mesh, const std::string& placement) : mesh_(mesh) {
  if (mesh.has_axis(placement)) axis_ = placement;
}

int64_t Sharding::shards(int64_t clients) const {
  const int64_t devices = axis_.empty() ? global_pool().size() : mesh_.axis_size(axis_);
  return std::max<int64_t>(1, std::min(clients, devices));
}

void Sharding::run(int64_t clients,
                   const std::function<void(int64_t, int64_t, int64_t)>& fn) const {
  const int64_t n = shards(clients);
  auto shard = [&](int64_t s) { fn(s, begin(s, clients), begin(s + 1, clients)); };
  if (n == 1) {
    shard(0);
    return;
  }
  ThreadPool& pool = axis_.empty() ? global_pool() : mesh_.device_threads(axis_);
  pool.parallel_for(n, shard);
}

}  // namespace drx::exec
