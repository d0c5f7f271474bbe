#pragma once
// Devices for placed values: a mesh names axes of CPU devices, each device a
// worker thread. A placement whose name is a mesh axis is split into
// contiguous shards of clients, one per device along that axis (uneven
// cohorts give shards that differ by one client); unplaced values are
// replicated (on one host, every device reads the same bytes).
//
// A jitted program runs on the mesh given to jit(f, mesh), else on the one of
// the innermost MeshScope on the calling thread, else on the default mesh: one
// device, on which the executor may still run independent clients on the
// threads of drx::num_threads(). Results never depend on the mesh: every
// reduction over a placement follows one binary tree over client indices.
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace drx {

namespace exec {
class ThreadPool;
}

class Mesh {
 public:
  using Axis = std::pair<std::string, int>;

  // The default mesh: one device, no named axes.
  Mesh();
  // e.g. Mesh({{"clients", 4}}). Throws drx::Error for an empty or repeated
  // axis name, or a size outside [1, 1024].
  explicit Mesh(std::vector<Axis> axes);

  const std::vector<Axis>& axes() const;
  // Devices along `axis`; 1 when the mesh has no such axis.
  int axis_size(const std::string& axis) const;
  bool has_axis(const std::string& axis) const;
  // All devices (the product of the axis sizes).
  int devices() const;
  // "{clients: 4}"; "{}" for the default mesh.
  std::string str() const;
  bool operator==(const Mesh& other) const { return str() == other.str(); }

  // For drx/exec: the worker threads of the devices along `axis` (created on
  // first use, shared by copies of this mesh).
  exec::ThreadPool& device_threads(const std::string& axis) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Makes `mesh` the calling thread's default for jit calls until destroyed.
class MeshScope {
 public:
  explicit MeshScope(const Mesh& mesh);
  ~MeshScope();
  MeshScope(const MeshScope&) = delete;
  MeshScope& operator=(const MeshScope&) = delete;
};

// The innermost MeshScope's mesh on this thread, else the default mesh.
Mesh current_mesh();

}  // namespace drx
