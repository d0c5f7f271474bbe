#pragma once
// The placements a drx::program declares, visible while its function runs.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace drx {

using Placements = std::vector<std::pair<std::string, int64_t>>;

// Declares placements for its lifetime (nested programs see the union).
class PlacementScope {
 public:
  explicit PlacementScope(const Placements& placements);
  ~PlacementScope();
  PlacementScope(const PlacementScope&) = delete;
  PlacementScope& operator=(const PlacementScope&) = delete;
};

// Marks the tracing of a map_fn body, where placements may not be used yet.
class MapBodyScope {
 public:
  MapBodyScope();
  ~MapBodyScope();
  MapBodyScope(const MapBodyScope&) = delete;
  MapBodyScope& operator=(const MapBodyScope&) = delete;
};

// All placements declared by enclosing programs.
const Placements& declared_placements();
// Throws unless a building block `op` may be used here: inside a program and
// not inside a map_fn body.
void require_program_scope(const std::string& op);
// The size of a declared placement; throws naming `op` if undeclared.
int64_t placement_size(const std::string& name, const std::string& op);
// The single declared placement (for broadcast without a name).
std::string default_placement(const std::string& op);

}  // namespace drx
