#include "drx/ops/dot_general_params.h"

#include <string>

#include "drx/core/primitive.h"
#include "drx/ir/param_view.h"
#include "drx/ops/primitives.h"

namespace drx {
namespace {
namespace key {
constexpr const char* lhs_contracting = "lhs_contracting";
constexpr const char* rhs_contracting = "rhs_contracting";
constexpr const char* lhs_batch = "lhs_batch";
constexpr const char* rhs_batch = "rhs_batch";
}  // namespace key
const std::string kOp = "dot_general";
}  // namespace

DotGeneralParams DotGeneralParams::of(const Params& p) {
  param_view::only_keys(
      p, kOp, {key::lhs_contracting, key::rhs_contracting, key::lhs_batch, key::rhs_batch});
  return DotGeneralParams{p.get_ints(key::lhs_contracting, kOp),
                          p.get_ints(key::rhs_contracting, kOp), p.get_ints(key::lhs_batch, kOp),
                          p.get_ints(key::rhs_batch, kOp)};
}

DotGeneralParams DotGeneralParams::of(const Eqn& e) {
  return of(param_view::params_of(e, prims::dot_general()));
}

Params DotGeneralParams::to_params() const {
  return Params{{key::lhs_contracting, lhs_contracting},
                {key::rhs_contracting, rhs_contracting},
                {key::lhs_batch, lhs_batch},
                {key::rhs_batch, rhs_batch}};
}

}  // namespace drx
