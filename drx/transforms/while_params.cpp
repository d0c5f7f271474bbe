#include "drx/transforms/while_params.h"

#include <string>

#include "drx/core/primitive.h"
#include "drx/ir/param_view.h"
#include "drx/transforms/loops.h"

namespace drx {
namespace {
namespace key {
constexpr const char* cond = "cond";
constexpr const char* body = "body";
constexpr const char* num_cond_consts = "num_cond_consts";
constexpr const char* num_body_consts = "num_body_consts";
}  // namespace key
const std::string kOp = "while_loop";
}  // namespace

WhileParams WhileParams::of(const Params& p) {
  namespace pv = param_view;
  pv::only_keys(p, kOp, {key::cond, key::body, key::num_cond_consts, key::num_body_consts});
  WhileParams w;
  w.cond = pv::program(p, key::cond, kOp);
  w.body = pv::program(p, key::body, kOp);
  w.num_cond_consts = pv::count(p, key::num_cond_consts, kOp);
  w.num_body_consts = pv::count(p, key::num_body_consts, kOp);
  if (w.ncc() > w.cond->inputs.size() || w.nbc() > w.body->inputs.size())
    throw TypeError("while_loop: num_cond_consts " + std::to_string(w.num_cond_consts) +
                    " and num_body_consts " + std::to_string(w.num_body_consts) +
                    " do not fit the cond @" + w.cond->name + " and body @" + w.body->name);
  return w;
}

WhileParams WhileParams::of(const Eqn& e) {
  return of(param_view::params_of(e, prims::while_loop()));
}

Params WhileParams::to_params() const {
  return Params{{key::cond, cond},
                {key::body, body},
                {key::num_cond_consts, num_cond_consts},
                {key::num_body_consts, num_body_consts}};
}

}  // namespace drx
