#pragma once
// The while_loop primitive's parameters as one typed view (see
// scan_params.h): read with WhileParams::of, built with to_params; each key
// is spelled once, in while_params.cpp.
#include <cstdint>
#include <memory>

#include "drx/ir/params.h"
#include "drx/ir/program.h"

namespace drx {

struct WhileParams {
  std::shared_ptr<const Program> cond, body;
  int64_t num_cond_consts = 0, num_body_consts = 0;
  size_t ncc() const { return static_cast<size_t>(num_cond_consts); }
  size_t nbc() const { return static_cast<size_t>(num_body_consts); }
  size_t nh() const { return body->outputs.size(); }

  // Throws drx::TypeError naming while_loop and the key for a missing,
  // mistyped, negative or unknown parameter, or counts that do not fit the
  // cond and body programs.
  static WhileParams of(const Params& p);
  // Also throws when `e` is not a while_loop equation.
  static WhileParams of(const Eqn& e);
  Params to_params() const;
};

}  // namespace drx
