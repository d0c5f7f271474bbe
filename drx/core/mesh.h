#pragma once
// Devices for placed values, logically: a mesh names axes of devices (for the
// CPU executor, each device is a worker thread of a pool the executor keeps). A placement whose
// name is a mesh axis is split into contiguous shards of clients, one per device along that axis
// (uneven cohorts give shards that differ by one client); unplaced values are replicated (on one
// host, every device reads the same bytes).
//
// A jitted program runs on the mesh given to jit(f, mesh), else on the one of
// the innermost MeshScope on the calling thread, else on the default mesh: one
// device, on which the executor may still run independent clients on the
// threads of drx::num_threads(). Results never depend on the mesh: every
// reduction over a placement follows one binary tree over client indices.
//
// An axis may also span processes (drx/dist builds such meshes over MPI):
// each process then holds the axis' devices of its own, runs a contiguous
// range of the clients on them, and the ProcessGroup combines the partial
// reductions in the same tree.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace drx {

class ProcessGroup;
class Program;

class Mesh {
 public:
  using Axis = std::pair<std::string, int>;

  // The default mesh: one device, no named axes.
  Mesh();
  // e.g. Mesh({{"clients", 4}}). Throws drx::Error for an empty or repeated
  // axis name, or a size outside [1, 1024].
  explicit Mesh(std::vector<Axis> axes);
  // A mesh whose axis `process_axis` (one of `axes`) spans the processes of
  // `group`: every process has that axis' size in devices, so the axis has
  // group->size() times as many in all.
  Mesh(std::vector<Axis> axes, std::string process_axis, std::shared_ptr<const ProcessGroup> group);

  const std::vector<Axis>& axes() const;
  // Devices along `axis`; 1 when the mesh has no such axis.
  int axis_size(const std::string& axis) const;
  bool has_axis(const std::string& axis) const;
  // All devices (the product of the axis sizes).
  int devices() const;
  // "{clients: 4}"; "{}" for the default mesh; "{clients: 2 x 3 processes}"
  // for an axis of 2 devices in each of 3 processes.
  std::string str() const;

  // The processes `axis` spans, or nullptr when its devices are all here.
  const ProcessGroup* processes(const std::string& axis) const;
  // The processes any axis spans (nullptr for a mesh of this process only).
  const ProcessGroup* process_group() const;
  // This mesh without its process group: what each client's work (a map_fn
  // body, run by one process) runs on.
  Mesh in_process() const;
  // Every process's devices as one mesh: the process axis has its size times
  // the processes (what an exported program's sharding names).
  Mesh global() const;
  // Same axes, the same process axis and the same process group (by identity:
  // two groups of one size are different processes). Not the printed form,
  // which does not name the group.
  bool operator==(const Mesh& other) const;
  // A cache key that tells meshes apart as operator== does.
  std::string key() const;

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

// A mesh given for a program must mean something: throws drx::Error, naming
// `op`, when `mesh` has axes and none of them names a placement of `program`
// (a misspelt axis would otherwise run or export unsharded without a word),
// with the closest placement name as a suggestion. Axes beyond the
// placements are allowed (model axes). An ambient MeshScope is not checked:
// it simply does not apply to a program without its placements.
void check_mesh_names_placements(const Program& program, const Mesh& mesh, const std::string& op);

// A mesh axis with more devices than its placement has values.
struct IdleMeshAxis {
  std::string axis;
  int devices = 0;
  int64_t size = 0;
};
// The axes of `mesh` that split a placement of `program` of fewer values
// than the axis has devices (jit runs them with idle devices; an export
// would place only padding there).
std::vector<IdleMeshAxis> idle_mesh_axes(const Program& program, const Mesh& mesh);

}  // namespace drx
