#pragma once
// The map_fn primitive's parameters as one typed view (see
// drx/transforms/scan_params.h): read with MapFnParams::of, built with
// to_params; each key is spelled once, in map_fn_params.cpp.
#include <memory>
#include <string>

#include "drx/ir/params.h"
#include "drx/ir/program.h"

namespace drx {

struct MapFnParams {
  // The per-client program: one input per operand (a client's row), one
  // output per result.
  std::shared_ptr<const Program> body;
  // The placement mapped over (its axis leads every operand and result).
  std::string placement;

  // Throws drx::TypeError naming map_fn and the key for a missing, mistyped
  // or unknown parameter.
  static MapFnParams of(const Params& p);
  // Also throws when `e` is not a map_fn equation.
  static MapFnParams of(const Eqn& e);
  Params to_params() const;
  // This map_fn over the same placement with another body.
  MapFnParams with_body(std::shared_ptr<const Program> b) const {
    return {std::move(b), placement};
  }
};

}  // namespace drx
