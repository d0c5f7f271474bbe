#pragma once
// The MapReduce primitive objects, for the code that recognises or emits
// them directly (the executor's map and reduction kernels).
#include "drx/core/primitive.h"

namespace drx::prims {

const Primitive& broadcast();
const Primitive& map_fn();
const Primitive& reduce_sum();
const Primitive& reduce_max();
const Primitive& reduce_min();

}  // namespace drx::prims

namespace drx {
// The error for reducing a value placed at nested placements (t), with the fix:
// reduce level by level.
std::string nested_reduce_fix(const std::string& op, const Type& t);
}  // namespace drx
