#pragma once
// What the training commands (drx fedavg, drx lm) set up for a run and undo after it: drx's
// thread count and a mesh of devices along "clients".
#include <cstdint>
#include <optional>
#include <vector>

#include "drx/core/mesh.h"
#include "drx/exec/thread_pool.h"

namespace drx::tool::training {

// How many shards (map_fn clients) an evaluation splits its examples into: a fixed number,
// not the thread count, because the shards' sums are added in a tree over shards and a
// different split rounds differently. So the held-out numbers of a run are the same on one
// process, on MPI ranks (rank 0 evaluates with its share of the cores) and under any
// --threads; with more devices than that the shards follow the devices.
constexpr int64_t kEvalShards = 16;
inline int64_t eval_shards(int64_t devices) {
  return devices > kEvalShards ? devices : kEvalShards;
}

// Sets drx's thread count (n > 0; 0 keeps it) and restores it afterwards.
class ThreadsScope {
 public:
  explicit ThreadsScope(int64_t n) : saved_(num_threads()) {
    if (n > 0) set_num_threads(static_cast<int>(n));
  }
  ~ThreadsScope() {
    if (num_threads() != saved_) set_num_threads(saved_);
  }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int saved_;
};

// Spreads the clients over `devices` devices for as long as it lives.
class DevicesScope {
 public:
  explicit DevicesScope(int64_t devices) {
    if (devices <= 1) return;
    mesh_.emplace(std::vector<Mesh::Axis>{{"clients", static_cast<int>(devices)}});
    scope_.emplace(*mesh_);
  }

 private:
  std::optional<Mesh> mesh_;
  std::optional<MeshScope> scope_;
};

}  // namespace drx::tool::training
