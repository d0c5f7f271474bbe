#pragma once
#include <string>
#include <vector>

#include "drx/array/dtype.h"

namespace drx {

// The static type of a value: element type, shape, and (for placed values) the
// placement whose size is the leading axis. An empty placement means the value
// is unplaced ("on the server").
//
// Placements nest: a value placed at clients within groups has the placement
// path "groups.clients" and the groups and clients axes first, outermost
// first: f32[4,8,10]@groups.clients is 10 floats for each of 8 clients in each
// of 4 groups. Inside the body of a map_fn over groups, each group's slice of
// it is f32[8,10]@clients. Placement names therefore never contain '.'.
struct Type {
  DType dtype = DType::f32;
  Shape shape;
  std::string placement;

  Type() = default;
  Type(DType d, Shape s, std::string p = {})
      : dtype(d), shape(std::move(s)), placement(std::move(p)) {}
  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  int64_t size() const { return num_elements(shape); }
  bool operator==(const Type& o) const = default;
  std::string str() const;  // "f32[2,3]", "f32[8,3]@clients", "f32[4,8,3]@groups.clients"
};

// ---- placement paths ("groups.clients") -------------------------------------
// The placements of a path, outermost first; none for the empty path.
std::vector<std::string> placement_levels(const std::string& path);
// How many leading axes the placement path claims (0 = unplaced).
int64_t placement_depth(const std::string& path);
// "groups" for "groups.clients"; the path itself when it has one level.
std::string outer_placement(const std::string& path);
// "clients" for "groups.clients"; "" for a one-level path.
std::string inner_placement(const std::string& path);
// "groups" + "clients" = "groups.clients"; outer alone when inner is empty.
std::string nested_placement(const std::string& outer, const std::string& inner);
// Why `path` is not a placement path ("" when it is): every level is a
// non-empty name, and no level repeats.
std::string placement_path_problem(const std::string& path);

}  // namespace drx
