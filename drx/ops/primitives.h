#pragma once
// The primitive objects of drx/ops that other code recognises or emits
// directly: rewrites (simplification, fusion) and backends compare an
// equation's primitive with these objects, never with a name string.
// Elementwise primitives that nothing singles out are reached only through
// the registry and what they state about themselves (Primitive::scalar_kernel).
#include "drx/core/primitive.h"

namespace drx::prims {

// elementwise
const Primitive& add();
const Primitive& sub();
const Primitive& mul();
const Primitive& select();
const Primitive& convert();
const Primitive& stop_gradient();
// linear algebra
const Primitive& dot_general();
// shape
const Primitive& reshape();
const Primitive& transpose();
const Primitive& broadcast_in_dim();
const Primitive& concatenate();
const Primitive& slice();
// indexing
const Primitive& take();
const Primitive& scatter_add();
const Primitive& threefry2x32();
const Primitive& bitcast_convert();
const Primitive& pad();
const Primitive& is_finite();
const Primitive& reverse();
const Primitive& dynamic_slice();
const Primitive& dynamic_update_slice();
const Primitive& scatter();
// sorting, arg reductions, running sums
const Primitive& sort();
const Primitive& top_k();
const Primitive& argmax();
const Primitive& argmin();
const Primitive& cumsum();
const Primitive& softmax();
// constants
const Primitive& constant();
const Primitive& iota();
// placements
const Primitive& place();

}  // namespace drx::prims

namespace drx::detail {
// The max over `axes` (kept as size-1 dims) that softmax-like composites
// subtract before exp, a constant to differentiation (drx/ops/nn_helpers.cpp).
Value stable_shift(const Value& x, const std::vector<int64_t>& axes);
// softmax as public ops: exp(x - shift) / sum(exp(x - shift)); the lowering
// of the softmax primitive, and its reference in tests.
Value softmax_composite(const Value& x, int64_t axis);
}  // namespace drx::detail
