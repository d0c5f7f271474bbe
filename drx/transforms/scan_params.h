#pragma once
// The scan primitive's parameters as one typed view: every layer (the
// primitive's rules, the executor's kernel, the StableHLO lowering, tools)
// reads a scan equation through ScanParams::of and builds one through
// to_params, so each key is spelled once, in scan_params.cpp.
#include <cstdint>
#include <memory>

#include "drx/ir/params.h"
#include "drx/ir/program.h"

namespace drx {

struct ScanParams {
  std::shared_ptr<const Program> body;
  int64_t length = 0, num_consts = 0, num_carry = 0;
  bool reverse = false, remat = false;
  int64_t checkpoint_every = 0;
  size_t nc() const { return static_cast<size_t>(num_consts); }
  size_t nh() const { return static_cast<size_t>(num_carry); }
  // xs and ys, from the body's signature.
  size_t nx() const { return body->inputs.size() - nc() - nh(); }
  size_t ny() const { return body->outputs.size() - nh(); }

  // Throws drx::TypeError naming scan and the key for a missing, mistyped,
  // negative or unknown parameter, or counts that do not fit the body.
  static ScanParams of(const Params& p);
  // Also throws when `e` is not a scan equation.
  static ScanParams of(const Eqn& e);
  Params to_params() const;
  // This scan with another body and the same options.
  ScanParams with_body(Program b, int64_t consts, int64_t carry) const;
};

}  // namespace drx
