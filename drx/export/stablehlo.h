#pragma once
// drx programs as StableHLO: an MLIR module whose public @main is the
// program, every equation lowered by its primitive's own rule
// (Primitive::lower, through the seam of drx/core/lowering.h). The module
// reads back with drx::from_stablehlo (drx/stablehlo/import.h).
#include <string>

#include "drx/exec/mesh.h"
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
};

// Throws drx::Error naming the equation for a primitive without a lowering.
std::string to_stablehlo(const Program& program, const Mesh& mesh = Mesh(),
                         const StableHloOptions& options = {});

}  // namespace drx
