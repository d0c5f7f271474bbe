#include <algorithm>

#include "drx/core/primitive.h"

namespace drx {

std::vector<Type> Primitive::infer_types(const std::vector<Type>& ins, const Params& params) const {
  std::vector<Type> outs = infer(ins, params);
  if (placement_aware()) return outs;
  const Type* placed = nullptr;
  const Type* unplaced = nullptr;
  for (const Type& t : ins) {
    if (t.placement.empty()) {
      unplaced = &t;
      continue;
    }
    if (placed && t.placement != placed->placement)
      throw TypeError(name() + ": operands are placed at different placements (" + placed->str() +
                      " and " + t.str() + "); move values between placements explicitly");
    placed = &t;
  }
  if (!placed) {
    for (Type& t : outs) t.placement.clear();
    return outs;
  }
  if (unplaced)
    throw TypeError(name() + ": mixes a placed operand (" + placed->str() +
                    ") with an unplaced one (" + unplaced->str() +
                    "); broadcast the unplaced value to '" + placed->placement +
                    "' first (drx::broadcast)");
  // Every placement level keeps its leading axis: a nested value has several.
  const int64_t depth = placement_depth(placed->placement);
  const Shape lead(placed->shape.begin(), placed->shape.begin() + depth);
  for (Type& t : outs) {
    if (t.ndim() < depth || !std::equal(lead.begin(), lead.end(), t.shape.begin()))
      throw TypeError(name() + " on values placed at '" + placed->placement +
                      "' must keep the leading (placement) " +
                      (depth == 1 ? "axis of size " : "axes of sizes ") +
                      shape_str(lead).substr(1, shape_str(lead).size() - 2) + ", but gives " +
                      t.str() +
                      "; leave a placement with drx::reduce_sum/reduce_mean, or work per client "
                      "inside drx::map_fn");
    t.placement = placed->placement;
  }
  return outs;
}

}  // namespace drx
