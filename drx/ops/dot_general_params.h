#pragma once
// The dot_general primitive's parameters as one typed view (see
// drx/transforms/scan_params.h): read with DotGeneralParams::of, built with
// to_params; each key is spelled once, in dot_general_params.cpp.
#include <cstdint>
#include <optional>
#include <vector>

#include "drx/ir/params.h"
#include "drx/ir/program.h"

namespace drx {

struct DotGeneralParams {
  // Pairs: lhs_contracting[i] contracts with rhs_contracting[i], and
  // lhs_batch[i] is batched with rhs_batch[i]. Non-negative dims.
  std::vector<int64_t> lhs_contracting, rhs_contracting, lhs_batch, rhs_batch;
  // The result's element type where it is not the operands' (JAX's
  // preferred_element_type): f32 from bf16 operands, accumulated in f32 and
  // rounded once. Absent from the params when unset.
  std::optional<DType> preferred_element_type = std::nullopt;

  // Throws drx::TypeError naming dot_general and the key for a missing,
  // mistyped or unknown parameter (ranges are checked against the operands'
  // types by the primitive's infer).
  static DotGeneralParams of(const Params& p);
  // Also throws when `e` is not a dot_general equation.
  static DotGeneralParams of(const Eqn& e);
  Params to_params() const;
};

}  // namespace drx
