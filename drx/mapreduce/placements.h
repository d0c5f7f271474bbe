#pragma once
// The placements a drx::program declares, and the map_fn bodies being traced,
// visible while its function runs.
//
// Placements nest where they are used: inside the body of a map_fn over
// `groups`, each group's values are unplaced and every other declared
// placement (say `clients`) may be broadcast to, mapped over and reduced
// from, per group. Outside, such a value has the placement path
// "groups.clients" (drx/ir/type.h). At top level the declared placements are
// independent siblings.
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

// Marks the tracing of the body of a map_fn over `placement`.
class MapBodyScope {
 public:
  explicit MapBodyScope(const std::string& placement);
  ~MapBodyScope();
  MapBodyScope(const MapBodyScope&) = delete;
  MapBodyScope& operator=(const MapBodyScope&) = delete;
};

// All placements declared by enclosing programs.
const Placements& declared_placements();
// The placements whose map_fn bodies enclose the current trace, outermost
// first ("groups", then "clients" inside a map_fn over clients in a group).
const std::vector<std::string>& mapped_placements();
// Throws unless a building block `op` may be used here: inside a program.
void require_program_scope(const std::string& op);
// The size of a declared placement that `op` may use here; throws naming
// `op` if it is undeclared or mapped by an enclosing map_fn body.
int64_t placement_size(const std::string& name, const std::string& op);
// The single placement `op` may use here (for broadcast without a name).
std::string default_placement(const std::string& op);
// "clients=8, groups=4": the declared placements, for messages.
std::string declared_text();

}  // namespace drx
