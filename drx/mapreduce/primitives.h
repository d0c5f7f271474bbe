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
