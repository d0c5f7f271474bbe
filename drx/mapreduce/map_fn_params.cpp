#include "drx/mapreduce/map_fn_params.h"

#include "drx/core/primitive.h"
#include "drx/ir/param_view.h"
#include "drx/mapreduce/primitives.h"

namespace drx {
namespace {
namespace key {
constexpr const char* body = "body";
constexpr const char* placement = "placement";
}  // namespace key
const std::string kOp = "map_fn";
}  // namespace

MapFnParams MapFnParams::of(const Params& p) {
  namespace pv = param_view;
  pv::only_keys(p, kOp, {key::body, key::placement});
  return MapFnParams{pv::program(p, key::body, kOp), p.get_string(key::placement, kOp)};
}

MapFnParams MapFnParams::of(const Eqn& e) { return of(param_view::params_of(e, prims::map_fn())); }

Params MapFnParams::to_params() const {
  return Params{{key::placement, placement}, {key::body, body}};
}

}  // namespace drx
