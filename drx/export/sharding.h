#pragma once
// Private to drx/export: sharding annotations of placed values, as JAX writes
// them with Shardy (sdy.mesh, #sdy.sharding, sdy.sharding_constraint) or, for
// older XLA, as GSPMD mhlo.sharding strings.
#include <string>
#include <vector>

#include "drx/core/lowering.h"
#include "drx/core/mesh.h"

namespace drx {

class ShardingWriter {
 public:
  // Per dimension of a value: the mesh axis that splits it, "" for none.
  using DimAxes = std::vector<std::string>;

  ShardingWriter(const Mesh& mesh, bool gspmd) : mesh_(mesh), gspmd_(gspmd) {}

  bool active() const { return !mesh_.axes().empty(); }
  bool has_axis(const std::string& name) const { return mesh_.has_axis(name); }
  // The module-level mesh declaration ("" without mesh axes, and for GSPMD).
  std::string mesh_declaration(bool generic) const;
  // The axes of a value of type t outside any map_fn body: the dimension of
  // each level of its placement split by the mesh axis of that name.
  DimAxes placement_axes(const Type& t) const;
  // "{sdy.sharding = ...}" or "{mhlo.sharding = ...}" for a function
  // argument or result of type t, fully specified as JAX's in/out shardings
  // are; "" without mesh axes.
  std::string argument_attributes(const Type& t) const;
  // Emits a sharding constraint on `value` (of type t): `axes` on their
  // dimensions, every other dimension open (Shardy {?}; GSPMD
  // unspecified_dims), so propagation may still shard the model's own
  // dimensions. Returns the constraint's result.
  std::string constrain(StableHloEmitter& em, const std::string& value, const Type& t,
                        const DimAxes& axes) const;

 private:
  std::string sdy(const DimAxes& axes,
                  bool open) const;              // #sdy.sharding<@mesh, [{"clients"}, {?}]>
  std::string gspmd(const DimAxes& axes) const;  // {devices=[4,1]<=[4]} or {replicated}

  Mesh mesh_;
  bool gspmd_;
};

}  // namespace drx
