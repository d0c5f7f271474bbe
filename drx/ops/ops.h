#pragma once
// The public op functions on traced Values. Each builds on one or more
// primitives (drx/ops/*.cpp); composites are written in terms of them.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "drx/array/array.h"
#include "drx/core/value.h"

namespace drx {

// ---- constants ---------------------------------------------------------
Value constant(const Array& value);
// A scalar of `dtype` broadcast to `shape`.
Value fill(const Shape& shape, double value, DType dtype);
// x's type (placement included), every element `value`.
Value full_like(const Value& x, double value);
Value zeros_like(const Value& x);
Value ones_like(const Value& x);
// [0, 1, ..., n-1]
Value arange(int64_t n, DType dtype = DType::i32);
// iota along `dimension` of an array of `shape`.
Value iota(const Shape& shape, int64_t dimension, DType dtype = DType::i32);

// ---- random bits (drx::random builds on these) ----------------------------
// The Threefry-2x32 block function (20 rounds, Random123; JAX's threefry2x32)
// elementwise on u32 key words k0, k1 and counter words x0, x1 of one shape.
std::pair<Value, Value> threefry2x32(const Value& k0, const Value& k1, const Value& x0,
                                     const Value& x1);
// x's bytes read as `dtype` (same element size, not bool): f32 <-> u32/i32.
Value bitcast_convert(const Value& x, DType dtype);

// ---- elementwise -------------------------------------------------------
Value neg(const Value& x);
Value exp(const Value& x);
Value log(const Value& x);
Value log1p(const Value& x);
Value tanh(const Value& x);
Value logistic(const Value& x);
Value sqrt(const Value& x);
Value rsqrt(const Value& x);
Value abs(const Value& x);
Value sign(const Value& x);
Value sin(const Value& x);
Value cos(const Value& x);
Value erf(const Value& x);
Value erf_inv(const Value& x);  // the inverse of erf on (-1, 1); +-inf at +-1
Value square(const Value& x);
Value relu(const Value& x);
// Rounding (floating point only; derivative zero): round is half to even, as
// jnp.round.
Value cbrt(const Value& x);   // the real cube root
Value expm1(const Value& x);  // exp(x) - 1, accurate near 0
Value round_away(
    const Value& x);  // to nearest, halves away from zero (StableHLO's round_nearest_afz)
Value is_finite(const Value& x);  // bool: neither inf nor NaN
Value floor(const Value& x);
Value ceil(const Value& x);
Value round(const Value& x);
// Activations, numerically stable for large |x|.
Value sigmoid(const Value& x);      // = logistic
Value softplus(const Value& x);     // log(1 + exp(x))
Value log_sigmoid(const Value& x);  // log(sigmoid(x)) = -softplus(-x)
// 0.5 x (1 + erf(x / sqrt 2)); approximate: the tanh form of Hendrycks and
// Gimpel, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as jax.nn.gelu.
Value gelu(const Value& x, bool approximate = false);
// min(max(x, lo), hi), elementwise; lo and hi broadcast against x.
Value clip(const Value& x, const Value& lo, const Value& hi);
Value clip(const Value& x, double lo, double hi);

// Bitwise operations on the integer dtypes (i32, i64, u32, u8) and, for
// and/or/xor/not, bool (the logical operations). Shifts read the amount as
// unsigned: shifting by the bit width or more (or by a negative amount)
// gives 0, or the sign bit everywhere for shift_right_arithmetic.
Value bitwise_and(const Value& a, const Value& b);
Value bitwise_or(const Value& a, const Value& b);
Value bitwise_xor(const Value& a, const Value& b);
Value bitwise_not(const Value& x);
Value shift_left(const Value& a, const Value& b);
Value shift_right_logical(const Value& a, const Value& b);
Value shift_right_arithmetic(const Value& a, const Value& b);

// Binary ops broadcast numpy-style; both operands must have the same dtype
// (a plain number takes the Value's dtype).
Value add(const Value& a, const Value& b);
Value sub(const Value& a, const Value& b);
Value mul(const Value& a, const Value& b);
Value div(const Value& a, const Value& b);
Value pow(const Value& a, const Value& b);
Value maximum(const Value& a, const Value& b);
Value minimum(const Value& a, const Value& b);
// a - b * trunc(a / b): the sign of the dividend, as stablehlo.remainder and
// C++'s fmod and % (integer remainder by zero is an error).
Value remainder(const Value& a, const Value& b);
Value atan2(const Value& a, const Value& b);  // the angle of (b, a), in (-pi, pi]
Value pow(const Value& a, double b);
Value maximum(const Value& a, double b);
Value minimum(const Value& a, double b);

Value less(const Value& a, const Value& b);
Value less_equal(const Value& a, const Value& b);
Value greater(const Value& a, const Value& b);
Value greater_equal(const Value& a, const Value& b);
Value equal(const Value& a, const Value& b);
Value not_equal(const Value& a, const Value& b);

// cond ? a : b, elementwise, with broadcasting; cond must be bool.
Value where(const Value& cond, const Value& a, const Value& b);
Value astype(const Value& x, DType dtype);
// Identity whose derivative is zero.
Value stop_gradient(const Value& x);

Value operator+(const Value& a, const Value& b);
Value operator-(const Value& a, const Value& b);
Value operator*(const Value& a, const Value& b);
Value operator/(const Value& a, const Value& b);
Value operator-(const Value& a);
Value operator+(const Value& a, double b);
Value operator-(const Value& a, double b);
Value operator*(const Value& a, double b);
Value operator/(const Value& a, double b);
Value operator+(double a, const Value& b);
Value operator-(double a, const Value& b);
Value operator*(double a, const Value& b);
Value operator/(double a, const Value& b);

// A scalar constant of x's dtype (for a placed x, one of x's shape, placed like x).
Value scalar_like(const Value& x, double v);
// Retypes x (leading axis of the placement's size) as placed at `placement`;
// the empty placement makes a placed value unplaced again. No data moves.
Value place(const Value& x, const std::string& placement);

// ---- reductions (negative axes allowed; no axes = all) -----------------
Value sum(const Value& x);
Value sum(const Value& x, const std::vector<int64_t>& axes, bool keepdims = false);
Value mean(const Value& x);
Value mean(const Value& x, const std::vector<int64_t>& axes, bool keepdims = false);
// The product; its derivatives are exact where x has zeros (a tree of multiplications).
Value prod(const Value& x);
Value prod(const Value& x, const std::vector<int64_t>& axes, bool keepdims = false);
// Variance and standard deviation (floating point), dividing by n - ddof.
Value var(const Value& x, const std::vector<int64_t>& axes = {}, bool keepdims = false,
          int64_t ddof = 0);
Value std(const Value& x, const std::vector<int64_t>& axes = {}, bool keepdims = false,
          int64_t ddof = 0);
Value max(const Value& x);
Value max(const Value& x, const std::vector<int64_t>& axes, bool keepdims = false);
Value min(const Value& x);
Value min(const Value& x, const std::vector<int64_t>& axes, bool keepdims = false);

// ---- linear algebra ----------------------------------------------------
struct DotDims {
  std::vector<int64_t> lhs_contracting, rhs_contracting, lhs_batch, rhs_batch;
  // The result's element type, where not the operands': f32 from bf16 (or
  // f16) operands, accumulated in f32 and rounded once (JAX's
  // preferred_element_type). Unset: the operands' type.
  std::optional<DType> preferred_element_type = std::nullopt;
};
// Output dims: batch dims, then lhs free dims, then rhs free dims.
Value dot_general(const Value& lhs, const Value& rhs, const DotDims& dims);
// Einstein summation with NumPy's subscripts ("ij,jk->ik", "...ij,...jk->...ik", or implicit
// output: the labels used once, sorted): sums, dot_generals left to right, a transpose.
// drx::Error naming the subscripts for a mismatch of terms, labels, sizes or '...', and for a
// label repeated within one operand (a diagonal).
Value einsum(const std::string& subscripts, const std::vector<Value>& operands);
// 2-D matrix product, or batched over equal leading dims; a 1-D operand is a
// vector (as numpy.matmul).
Value matmul(const Value& a, const Value& b);
// The same with the result in preferred_element_type (f32 from bf16 operands).
Value matmul(const Value& a, const Value& b, DType preferred_element_type);

// ---- shape -------------------------------------------------------------
Value reshape(const Value& x, const Shape& shape);
Value transpose(const Value& x, const std::vector<int64_t>& perm);
// Moves axis `from` of x to position `to` (x itself when they are equal).
Value move_axis(const Value& x, int64_t from, int64_t to);
// numpy-style broadcast of x to `shape`.
Value broadcast_to(const Value& x, const Shape& shape);
// The primitive form: operand dim i becomes output dim dims[i].
Value broadcast_in_dim(const Value& x, const Shape& shape, const std::vector<int64_t>& dims);
Value expand_dims(const Value& x, int64_t axis);
Value squeeze(const Value& x, int64_t axis);
Value concatenate(const std::vector<Value>& xs, int64_t axis);
Value slice(const Value& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& stops);
// StableHLO's pad: interior[d] copies of `value` (a scalar of x's dtype) between neighbours
// along axis d, then low[d] before and high[d] after (negative: crop).
Value pad(const Value& x, const Value& value, const std::vector<int64_t>& low,
          const std::vector<int64_t>& high, const std::vector<int64_t>& interior);
Value pad(const Value& x, double value, const std::vector<int64_t>& low,
          const std::vector<int64_t>& high);
// x with the listed axes flipped (negative axes count from the end).
Value reverse(const Value& x, const std::vector<int64_t>& dims);
// StableHLO's dynamic_slice: sizes[d] elements from start[d] (integer scalars), each start
// clamped to [0, x.shape[d] - sizes[d]].
Value dynamic_slice(const Value& x, const std::vector<Value>& start,
                    const std::vector<int64_t>& sizes);
// x with `update` written at start (clamped to [0, x.shape[d] - update.shape[d]]).
Value dynamic_update_slice(const Value& x, const Value& update, const std::vector<Value>& start);

// ---- indexing ----------------------------------------------------------
// Gathers x along `axis` at integer `indices`: result shape is
// x.shape[:axis] + indices.shape + x.shape[axis+1:].
Value take(const Value& x, const Value& indices, int64_t axis = 0);
// The transpose of take: adds `updates` into x at `indices` along `axis`.
Value scatter_add(const Value& x, const Value& indices, const Value& updates, int64_t axis = 0);
// x with `updates` written at `indices` along `axis` (numpy's x.at[i].set(u));
// updates have the shape take(x, indices, axis) gives. Where an index repeats,
// the last update in index order (row-major over the indices) wins, and only
// it gets a gradient. Indices as take's: -n <= i < n, else a run-time drx::Error.
Value scatter(const Value& x, const Value& indices, const Value& updates, int64_t axis = 0);
// x.at[indices] along `axis`: at(x, i).get() is take, .set(u) scatter, .add(u) scatter_add.
struct IndexedUpdate {
  Value x, indices;
  int64_t axis = 0;
  Value get() const;
  Value set(const Value& updates) const;
  Value add(const Value& updates) const;
};
IndexedUpdate at(const Value& x, const Value& indices, int64_t axis = 0);
Value one_hot(const Value& labels, int64_t n, DType dtype = DType::f32);

// ---- sorting, arg reductions, running sums ------------------------------
// Order as jnp: NaN sorts after every number (last ascending, first
// descending and in top_k); -0.0 ties with 0.0; sorts are stable, so equal
// elements keep their order (lower index first) in either direction.
// Indices are i32. Negative axes count from the end.
Value sort(const Value& x, int64_t axis = -1, bool descending = false);
// The positions that sort x along `axis`: sort(x) is x gathered at them along the axis.
Value argsort(const Value& x, int64_t axis = -1, bool descending = false);
// The k largest elements along the last axis, largest first (as jax.lax.top_k);
// ties give the lower index first. Requires 0 <= k <= x.shape[-1].
struct TopK {
  Value values;   // x.shape[:-1] + [k], x's dtype
  Value indices;  // the same shape, i32 positions along the last axis
};
TopK top_k(const Value& x, int64_t k);
// The first position of the largest (smallest) element along `axis`, as i32;
// the first NaN's if there is one (as jnp). The axis must not be empty.
Value argmax(const Value& x, int64_t axis, bool keepdims = false);
Value argmin(const Value& x, int64_t axis, bool keepdims = false);
// Running sums along `axis` (from its end when `reverse`); the last equals sum over the axis.
Value cumsum(const Value& x, int64_t axis, bool reverse = false);

// ---- ML helpers --------------------------------------------------------
Value logsumexp(const Value& x, const std::vector<int64_t>& axes, bool keepdims = false);
Value softmax(const Value& x, int64_t axis = -1);
Value log_softmax(const Value& x, int64_t axis = -1);

}  // namespace drx
