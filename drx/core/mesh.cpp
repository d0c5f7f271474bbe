#include "drx/core/mesh.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "drx/array/error.h"
#include "drx/core/process_group.h"
#include "drx/ir/program.h"

namespace drx {

struct Mesh::State {
  std::vector<Axis> axes;
  std::string process_axis;
  std::shared_ptr<const ProcessGroup> group;
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

bool Mesh::operator==(const Mesh& other) const {
  return state_->axes == other.state_->axes && state_->process_axis == other.state_->process_axis &&
         state_->group == other.state_->group;
}

std::string Mesh::key() const {
  // The group's address names it: a cache entry holds its mesh, so the group
  // outlives the entry and its address is not reused meanwhile.
  if (!state_->group) return str();
  return str() + "@" + std::to_string(reinterpret_cast<uintptr_t>(state_->group.get()));
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

namespace {
// The meshes of the live MeshScopes on this thread, innermost last.
thread_local std::vector<Mesh> scoped;
}  // namespace

MeshScope::MeshScope(const Mesh& mesh) { scoped.push_back(mesh); }

MeshScope::~MeshScope() { scoped.pop_back(); }

Mesh current_mesh() { return scoped.empty() ? Mesh() : scoped.back(); }

}  // namespace drx

namespace drx {
namespace {

// Each placement of p and its size: the declared ones, and every level of
// the placed values' types (programs traced without a declaration).
std::map<std::string, int64_t> placement_sizes(const Program& p) {
  std::map<std::string, int64_t> sizes(p.placements.begin(), p.placements.end());
  for (const Type& t : p.var_types) {
    std::string rest = t.placement;
    for (size_t d = 0; !rest.empty() && d < t.shape.size(); ++d) {
      sizes.emplace(outer_placement(rest), t.shape[d]);
      rest = inner_placement(rest);
    }
  }
  return sizes;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

void check_mesh_names_placements(const Program& program, const Mesh& mesh, const std::string& op) {
  if (mesh.axes().empty()) return;
  const std::map<std::string, int64_t> sizes = placement_sizes(program);
  for (const auto& axis : mesh.axes())
    if (sizes.count(axis.first)) return;
  std::string names;
  for (const auto& [name, size] : sizes)
    names += (names.empty() ? "" : ", ") + name + " (" + std::to_string(size) + ")";
  std::string msg =
      op + ": mesh " + mesh.str() + " names no placement of the program @" + program.name + " (" +
      (names.empty() ? std::string("it has no placements") : "its placements: " + names) +
      "); a mesh axis splits the placement of its name";
  // The closest placement to any axis, if close enough to be a misspelling.
  std::string best_axis, best_name;
  size_t best = SIZE_MAX;
  for (const auto& axis : mesh.axes())
    for (const auto& [name, size] : sizes)
      if (const size_t d = edit_distance(axis.first, name); d < best) {
        best = d, best_axis = axis.first, best_name = name;
      }
  if (best != SIZE_MAX && best <= std::max<size_t>(2, best_name.size() / 3))
    msg += ". Did you mean '" + best_name + "' for mesh axis '" + best_axis + "'?";
  throw Error(msg);
}

std::vector<IdleMeshAxis> idle_mesh_axes(const Program& program, const Mesh& mesh) {
  std::vector<IdleMeshAxis> idle;
  const std::map<std::string, int64_t> sizes = placement_sizes(program);
  for (const auto& [axis, devices] : mesh.axes())
    if (auto it = sizes.find(axis); it != sizes.end() && devices > it->second)
      idle.push_back({axis, devices, it->second});
  return idle;
}

}  // namespace drx
