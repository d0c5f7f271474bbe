#include "drx/exec/mesh.h"

#include <map>
#include <mutex>

#include "drx/array/error.h"
#include "drx/core/process_group.h"
#include "drx/exec/thread_pool.h"

namespace drx {

struct Mesh::State {
  std::vector<Axis> axes;
  std::string process_axis;
  std::shared_ptr<const ProcessGroup> group;
  std::mutex mu;
  std::map<std::string, std::unique_ptr<exec::ThreadPool>> threads;
};

Mesh::Mesh() : state_(std::make_shared<State>()) {}

Mesh::Mesh(std::vector<Axis> axes, std::string process_axis,
           std::shared_ptr<const ProcessGroup> group)
    : Mesh(std::move(axes)) {
  if (!group) throw Error("Mesh: axis '" + process_axis + "' spans no process group (null)");
  if (!has_axis(process_axis))
    throw Error("Mesh: the process axis '" + process_axis + "' is not an axis of " + str());
  state_->process_axis = std::move(process_axis);
  state_->group = std::move(group);
}

Mesh::Mesh(std::vector<Axis> axes) : state_(std::make_shared<State>()) {
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto& [name, size] = axes[i];
    if (name.empty()) throw Error("Mesh: axis " + std::to_string(i) + " has an empty name");
    if (size < 1 || size > 1024)
      throw Error("Mesh: axis '" + name + "' has " + std::to_string(size) +
                  " devices (expected 1 to 1024)");
    for (size_t j = 0; j < i; ++j)
      if (axes[j].first == name) throw Error("Mesh: axis '" + name + "' is named twice");
  }
  state_->axes = std::move(axes);
}

const std::vector<Mesh::Axis>& Mesh::axes() const { return state_->axes; }

int Mesh::axis_size(const std::string& axis) const {
  for (const auto& [name, size] : state_->axes)
    if (name == axis) return size;
  return 1;
}

bool Mesh::has_axis(const std::string& axis) const {
  for (const auto& a : state_->axes)
    if (a.first == axis) return true;
  return false;
}

int Mesh::devices() const {
  int n = 1;
  for (const auto& a : state_->axes) n *= a.second;
  return n;
}

std::string Mesh::str() const {
  std::string s = "{";
  for (size_t i = 0; i < state_->axes.size(); ++i) {
    const auto& [name, size] = state_->axes[i];
    s += (i ? ", " : "") + name + ": " + std::to_string(size);
    if (state_->group && name == state_->process_axis)
      s += " x " + std::to_string(state_->group->size()) + " processes";
  }
  return s + "}";
}

const ProcessGroup* Mesh::processes(const std::string& axis) const {
  return state_->group && axis == state_->process_axis ? state_->group.get() : nullptr;
}

const ProcessGroup* Mesh::process_group() const { return state_->group.get(); }

Mesh Mesh::in_process() const { return state_->group ? Mesh(state_->axes) : *this; }

Mesh Mesh::global() const {
  if (!state_->group) return *this;
  std::vector<Axis> axes = state_->axes;
  for (Axis& a : axes)
    if (a.first == state_->process_axis) a.second *= state_->group->size();
  return Mesh(std::move(axes));
}

exec::ThreadPool& Mesh::device_threads(const std::string& axis) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::unique_ptr<exec::ThreadPool>& pool = state_->threads[axis];
  if (!pool) pool = std::make_unique<exec::ThreadPool>(axis_size(axis));
  return *pool;
}

namespace {
// The meshes of the live MeshScopes on this thread, innermost last.
thread_local std::vector<Mesh> scoped;
}  // namespace

MeshScope::MeshScope(const Mesh& mesh) { scoped.push_back(mesh); }

MeshScope::~MeshScope() { scoped.pop_back(); }

Mesh current_mesh() { return scoped.empty() ? Mesh() : scoped.back(); }

}  // namespace drx
