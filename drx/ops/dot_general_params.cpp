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
constexpr const char* preferred_element_type = "preferred_element_type";
}  // namespace key
const std::string kOp = "dot_general";
}  // namespace

DotGeneralParams DotGeneralParams::of(const Params& p) {
  param_view::only_keys(p, kOp,
                        {key::lhs_contracting, key::rhs_contracting, key::lhs_batch, key::rhs_batch,
                         key::preferred_element_type});
  DotGeneralParams d{p.get_ints(key::lhs_contracting, kOp), p.get_ints(key::rhs_contracting, kOp),
                     p.get_ints(key::lhs_batch, kOp), p.get_ints(key::rhs_batch, kOp)};
  if (p.has(key::preferred_element_type))
    d.preferred_element_type = p.get_dtype(key::preferred_element_type, kOp);
  return d;
}

DotGeneralParams DotGeneralParams::of(const Eqn& e) {
  return of(param_view::params_of(e, prims::dot_general()));
}

Params DotGeneralParams::to_params() const {
  Params p{{key::lhs_contracting, lhs_contracting},
           {key::rhs_contracting, rhs_contracting},
           {key::lhs_batch, lhs_batch},
           {key::rhs_batch, rhs_batch}};
  if (preferred_element_type) p.set(key::preferred_element_type, *preferred_element_type);
  return p;
}

}  // namespace drx
