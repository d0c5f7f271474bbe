#pragma once
// Private to drx/export: sharding annotations of placed values, as JAX writes
// them with Shardy (sdy.mesh, #sdy.sharding, sdy.sharding_constraint) or, for
// older XLA, as GSPMD mhlo.sharding strings.
#include <optional>
#include <string>

#include "drx/core/lowering.h"
#include "drx/exec/mesh.h"

namespace drx {

class ShardingWriter {
 public:
  ShardingWriter(const Mesh& mesh, bool gspmd) : mesh_(mesh), gspmd_(gspmd) {}

  // The module-level mesh declaration ("" without mesh axes, and for GSPMD).
  std::string mesh_declaration(bool generic) const;
  // "{sdy.sharding = ...}" or "{mhlo.sharding = ...}" for a function
  // argument or result of type t; "" without mesh axes.
  std::string argument_attributes(const Type& t) const;
  // The sharding value of a value of type t: its outermost placement axis
  // split over the mesh axis of that name (if any), every other dimension
  // replicated; nullopt without mesh axes.
  std::optional<std::string> value_sharding(const Type& t) const;
  // Emits a sharding constraint on `value` (of type t) and returns its result.
  std::string constrain(StableHloEmitter& em, const std::string& value, const Type& t) const;

 private:
  // The mesh axis (its index) that splits t's leading dimension, if any.
  std::optional<size_t> split_axis(const Type& t) const;
  std::string sdy_dims(const Type& t) const;  // [{"clients"}, {}]
  std::string gspmd(const Type& t) const;     // {devices=[4,1]<=[4]} or {replicated}

  Mesh mesh_;
  bool gspmd_;
};

}  // namespace drx
