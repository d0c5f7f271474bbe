// `place`: retypes a value as placed at a placement (or unplaced again). It is
// how program arguments enter a placement and how numbers meet placed values.
#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_place);

namespace drx {
namespace {

class PlacePrim : public Primitive {
 public:
  PlacePrim() : Primitive("place") {}
  // Placement is drx's typing; the values are the same tensor.
  void lower(StableHloEmitter& em, const Params&) const override {
    em.set_results({em.operand(0)});
  }
  bool placement_aware() const override { return true; }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    if (ins.size() != 1)
      throw TypeError("place: takes one operand, got " + std::to_string(ins.size()));
    const std::string& target = p.get_string("placement", name());
    Type t = ins[0];
    if (!target.empty() && !t.placement.empty())
      throw TypeError("place: operand " + t.str() + " is already placed; unplace it first");
    if (target.empty() && t.placement.empty())
      throw TypeError("place: operand " + t.str() + " is not placed, so it cannot be unplaced");
    if (!target.empty() && t.shape.empty())
      throw TypeError("place: a scalar (" + t.str() + ") has no leading axis to place at '" +
                      target + "'");
    if (std::string problem = placement_path_problem(target); !problem.empty())
      throw TypeError("place: " + problem);
    if (t.ndim() < placement_depth(target))
      throw TypeError("place: " + t.str() + " has fewer axes than the " +
                      std::to_string(placement_depth(target)) + " levels of placement '" + target +
                      "' (one leading axis per level)");
    t.placement = target;
    return {t};
  }
  std::vector<Array> eval(const std::vector<Array>& ins, const Params&) const override {
    return {ins[0]};
  }
  MaybeValues jvp(const Values&, const MaybeValues& t, const Values&,
                  const Params& p) const override {
    return {place(*t[0], p.get_string("placement", name()))};
  }
  MaybeValues vjp(const Values& primals, const Values&, const MaybeValues& ct,
                  const Params&) const override {
    return {place(*ct[0], primals[0].type().placement)};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& p) const override {
    // Unplaced values carry the batch at axis 0, placed ones after their
    // placement axes (drx/core/primitive.h).
    Value v = ins[0].value;
    const std::string& target = p.get_string("placement", name());
    if (!target.empty()) return {{place(move_axis(v, 0, placement_depth(target)), target), true}};
    return {{move_axis(place(v, ""), placement_depth(v.type().placement), 0), true}};
  }
};

}  // namespace

namespace prims {
const Primitive& place() {
  static const PlacePrim p;
  return p;
}
}  // namespace prims

DRX_PRIMITIVE_FAMILY(placement_cast) { registry.add(prims::place()); }

DRX_PUBLIC_OP("place", "(x: Value, placement: string) -> Value",
              "Retypes x as placed at placement (\"\": unplaced); no data moves.");
Value place(const Value& x, const std::string& placement) {
  const Primitive& p = prims::place();
  if (x.type().placement == placement) return x;
  return emit1(p, {x}, Params{{"placement", placement}});
}

}  // namespace drx
