#pragma once
// drx programs as StableHLO: an MLIR module whose public @main is the
// program, every equation lowered by its primitive's own rule
// (Primitive::lower, through the seam of drx/core/lowering.h). The module
// reads back with drx::from_stablehlo (drx/stablehlo/import.h).
#include <string>

#include "drx/core/mesh.h"
#include "drx/ir/program.h"

namespace drx {

struct StableHloOptions {
  // MLIR's generic op form throughout ("stablehlo.add"(%a, %b) : ...), which
  // tools without the StableHLO dialect (mlir-opt) parse; otherwise the
  // pretty form JAX prints, where drx knows it, generic elsewhere.
  bool generic = false;
  // Sharding as GSPMD mhlo.sharding strings instead of Shardy (sdy.*).
  bool gspmd = false;
  // Reductions over a placement as one stablehlo.reduce (the order XLA
  // picks) instead of drx's canonical tree over client indices.
  bool single_reduce = false;
  // The module's name; default "jit_" + the program's name.
  std::string module_name;
  // A mesh axis with more devices than its placement has values is an error
  // (those devices would hold only padding) unless this is set.
  bool allow_idle_devices = false;
};

// Throws drx::Error naming the equation for a primitive without a lowering;
// for a mesh with axes none of which names a placement of the program (see
// check_mesh_names_placements, drx/exec/mesh.h); and for a mesh axis larger
// than its placement unless options.allow_idle_devices. Dead code is removed
// (simplify) before lowering; arguments are named %arg0, %arg1, ...
std::string to_stablehlo(const Program& program, const Mesh& mesh = Mesh(),
                         const StableHloOptions& options = {});

}  // namespace drx
