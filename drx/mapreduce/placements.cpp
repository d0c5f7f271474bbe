#include "drx/mapreduce/placements.h"

#include "drx/array/error.h"

namespace drx {

namespace {
thread_local Placements active;
thread_local std::vector<size_t> scope_starts;
thread_local int map_body_depth = 0;

std::string names() {
  std::string s;
  for (const auto& [n, size] : active) s += (s.empty() ? "" : ", ") + n + "=" + std::to_string(size);
  return s;
}
}  // namespace

PlacementScope::PlacementScope(const Placements& placements) {
  if (placements.empty()) throw Error("program: declare at least one placement, e.g. {{\"clients\", 8}}");
  for (size_t i = 0; i < placements.size(); ++i) {
    const auto& [name, size] = placements[i];
    if (name.empty()) throw Error("program: a placement needs a name");
    if (size < 1)
      throw Error("program: placement '" + name + "' has size " + std::to_string(size) +
                  " (expected at least 1)");
    for (size_t j = 0; j < i; ++j)
      if (placements[j].first == name) throw Error("program: placement '" + name + "' declared twice");
    for (const auto& [n2, s2] : active)
      if (n2 == name && s2 != size)
        throw Error("program: placement '" + name + "' declared with size " +
                    std::to_string(size) + " inside a program where it has size " +
                    std::to_string(s2));
  }
  if (map_body_depth > 0)
    throw Error("program: declaring placements inside a map_fn body (nested placements) is not "
                "supported yet");
  scope_starts.push_back(active.size());
  active.insert(active.end(), placements.begin(), placements.end());
}

PlacementScope::~PlacementScope() {
  active.resize(scope_starts.back());
  scope_starts.pop_back();
}

MapBodyScope::MapBodyScope() { ++map_body_depth; }
MapBodyScope::~MapBodyScope() { --map_body_depth; }

const Placements& declared_placements() { return active; }

void require_program_scope(const std::string& op) {
  if (map_body_depth > 0)
    throw Error(op + ": used inside a map_fn body; nesting one placement inside another's map_fn "
                     "is not supported yet (work on the per-client values directly)");
  if (active.empty())
    throw Error(op + ": called outside a drx::program; declare placements with "
                     "drx::program({{\"clients\", n}}, f)");
}

int64_t placement_size(const std::string& name, const std::string& op) {
  for (const auto& [n, size] : active)
    if (n == name) return size;
  throw Error(op + ": placement '" + name + "' is not declared (declared: " + names() + ")");
}

std::string default_placement(const std::string& op) {
  require_program_scope(op);
  std::string first = active.front().first;
  for (const auto& [n, size] : active)
    if (n != first)
      throw Error(op + ": several placements are declared (" + names() +
                  "); name one, e.g. " + op + "(x, \"" + first + "\")");
  return first;
}

}  // namespace drx
