#include "drx/transforms/scan_params.h"

#include <string>

#include "drx/core/primitive.h"
#include "drx/ir/param_view.h"
#include "drx/transforms/loops.h"
#include "drx/transforms/simplify.h"

namespace drx {
namespace {
namespace key {
constexpr const char* body = "body";
constexpr const char* length = "length";
constexpr const char* num_consts = "num_consts";
constexpr const char* num_carry = "num_carry";
constexpr const char* reverse = "reverse";
constexpr const char* remat = "remat";
constexpr const char* checkpoint_every = "checkpoint_every";
}  // namespace key
const std::string kOp = "scan";
}  // namespace

ScanParams ScanParams::of(const Params& p) {
  namespace pv = param_view;
  pv::only_keys(p, kOp,
                {key::body, key::length, key::num_consts, key::num_carry, key::reverse, key::remat,
                 key::checkpoint_every});
  ScanParams s;
  s.body = pv::program(p, key::body, kOp);
  s.length = pv::count(p, key::length, kOp);
  s.num_consts = pv::count(p, key::num_consts, kOp);
  s.num_carry = pv::count(p, key::num_carry, kOp);
  s.reverse = pv::flag(p, key::reverse, kOp);
  s.remat = pv::flag(p, key::remat, kOp);
  s.checkpoint_every = pv::count(p, key::checkpoint_every, kOp);
  if (s.nc() + s.nh() > s.body->inputs.size() || s.nh() > s.body->outputs.size())
    throw TypeError("scan: num_consts " + std::to_string(s.num_consts) + " and num_carry " +
                    std::to_string(s.num_carry) + " do not fit a body @" + s.body->name + " of " +
                    std::to_string(s.body->inputs.size()) + " inputs and " +
                    std::to_string(s.body->outputs.size()) + " outputs");
  return s;
}

ScanParams ScanParams::of(const Eqn& e) { return of(param_view::params_of(e, prims::scan())); }

Params ScanParams::to_params() const {
  return Params{{key::body, body},
                {key::length, length},
                {key::num_consts, num_consts},
                {key::num_carry, num_carry},
                {key::reverse, int64_t{reverse}},
                {key::remat, int64_t{remat}},
                {key::checkpoint_every, checkpoint_every}};
}

ScanParams ScanParams::with_body(Program b, int64_t consts, int64_t carry) const {
  ScanParams s = *this;
  s.body = std::make_shared<const Program>(simplify(b));
  s.num_consts = consts;
  s.num_carry = carry;
  return s;
}

}  // namespace drx
