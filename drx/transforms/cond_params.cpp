#include "drx/transforms/cond_params.h"

#include <string>

#include "drx/core/primitive.h"
#include "drx/ir/param_view.h"
#include "drx/transforms/cond.h"

namespace drx {
namespace {
namespace key {
constexpr const char* false_branch = "false_branch";
constexpr const char* true_branch = "true_branch";
}  // namespace key
const std::string kOp = "cond";
}  // namespace

CondParams CondParams::of(const Params& p) {
  namespace pv = param_view;
  pv::only_keys(p, kOp, {key::false_branch, key::true_branch});
  return CondParams{
      {pv::program(p, key::false_branch, kOp), pv::program(p, key::true_branch, kOp)}};
}

CondParams CondParams::of(const Eqn& e) { return of(param_view::params_of(e, prims::cond())); }

Params CondParams::to_params() const {
  return Params{{key::false_branch, branches[0]}, {key::true_branch, branches[1]}};
}

}  // namespace drx
