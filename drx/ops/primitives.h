#pragma once
// The primitive objects of drx/ops that other code recognises or emits
// directly: rewrites (simplification, fusion) and backends compare an
// equation's primitive with these objects, never with a name string.
// The public ops reach their primitives here too, never through a name.
#include "drx/core/primitive.h"

namespace drx::prims {

// elementwise: unary
const Primitive& neg();
const Primitive& exp();
const Primitive& log();
const Primitive& log1p();
const Primitive& tanh();
const Primitive& logistic();
const Primitive& sqrt();
const Primitive& rsqrt();
const Primitive& abs();
const Primitive& sign();
const Primitive& sin();
const Primitive& cos();
const Primitive& erf();
const Primitive& erf_inv();
const Primitive& gelu();       // exact form: 0.5 x (1 + erf(x / sqrt 2))
const Primitive& gelu_grad();  // its derivative
// gelu and gelu_grad of the same f32 values in one pass, sharing erf and exp: each result
// bitwise its primitive's (for fused kernels computing both).
void gelu_and_grad(const float* x, float* gelu, float* grad, int64_t n);
const Primitive& cbrt();
const Primitive& expm1();
const Primitive& round_away();
const Primitive& floor();
const Primitive& ceil();
const Primitive& round();
// elementwise: binary
const Primitive& add();
const Primitive& sub();
const Primitive& mul();
const Primitive& div();
const Primitive& pow();
const Primitive& maximum();
const Primitive& minimum();
const Primitive& remainder();
const Primitive& atan2();
// elementwise: comparisons
const Primitive& less();
const Primitive& less_equal();
const Primitive& greater();
const Primitive& greater_equal();
const Primitive& equal();
const Primitive& not_equal();
// elementwise: the rest
const Primitive& select();
const Primitive& convert();
const Primitive& stop_gradient();
// bitwise (logical on bool) and shifts
const Primitive& bitwise_and();
const Primitive& bitwise_or();
const Primitive& bitwise_xor();
const Primitive& bitwise_not();
const Primitive& shift_left();
const Primitive& shift_right_logical();
const Primitive& shift_right_arithmetic();
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
// (y, r): LayerNorm's normalisation over the last axis (f32, f64), bitwise the composite.
const Primitive& layer_norm_normalize();
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
// {(x - mean(x)) * r, r} with r = rsqrt(mean((x - mean(x))^2) + eps) over the last axis
// (kept as size 1), as one layer_norm_normalize equation; f32 or f64 x.
Values layer_norm_normalize(const Value& x, double eps);
}  // namespace drx::detail
