#include "drx/exec/sharding.h"

#include <algorithm>

#include "drx/core/process_group.h"
#include "drx/exec/thread_pool.h"

namespace drx::exec {

Sharding::Sharding(const Mesh& mesh, const std::string& placement) : mesh_(mesh) {
  if (mesh.has_axis(placement)) axis_ = placement;
  group_ = mesh.processes(placement);
}

std::pair<int64_t, int64_t> Sharding::local_clients(int64_t clients) const {
  return group_ ? group_->clients_of(group_->rank(), clients)
                : std::pair<int64_t, int64_t>{0, clients};
}

int64_t Sharding::shards(int64_t clients) const {
  const auto [first, end] = local_clients(clients);
  const int64_t devices = axis_.empty() ? global_pool().size() : mesh_.axis_size(axis_);
  return std::max<int64_t>(1, std::min(end - first, devices));
}

void Sharding::run(int64_t clients,
                   const std::function<void(int64_t, int64_t, int64_t)>& fn) const {
  const auto [first, end] = local_clients(clients);
  const int64_t n = shards(clients);
  auto shard = [&, first = first, end = end](int64_t s) {
    fn(s, first + (end - first) * s / n, first + (end - first) * (s + 1) / n);
  };
  if (n == 1) {
    shard(0);
    return;
  }
  ThreadPool& pool = axis_.empty() ? global_pool() : device_pool(mesh_.axis_size(axis_));
  pool.parallel_for(n, shard);
}

void Sharding::reduce(const RowReducer& local, void* out, const std::string& op) const {
  if (group_)
    group_->reduce(local, out, op);
  else
    local.finish(out);
}

}  // namespace drx::exec
