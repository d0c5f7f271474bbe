#pragma once
// The cond primitive's parameters as one typed view (see scan_params.h):
// read with CondParams::of, built with to_params; each key is spelled once,
// in cond_params.cpp.
#include <array>
#include <memory>

#include "drx/ir/params.h"
#include "drx/ir/program.h"

namespace drx {

struct CondParams {
  // Indexed by the predicate: [0] runs when it is false, [1] when true.
  std::array<std::shared_ptr<const Program>, 2> branches;
  const Program& branch(bool pred) const { return *branches[pred ? 1 : 0]; }

  // Throws drx::TypeError naming cond and the key for a missing, mistyped or
  // unknown parameter.
  static CondParams of(const Params& p);
  // Also throws when `e` is not a cond equation.
  static CondParams of(const Eqn& e);
  Params to_params() const;
};

}  // namespace drx
