// ML composites built from public ops only, so every transformation already
// knows them: logsumexp and log_softmax; and softmax's checks before its
// primitive (drx/ops/softmax.cpp).
#include <cmath>
#include <limits>

#include "drx/core/primitive.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_nn_helpers);

namespace drx {
namespace {

void require_floating(const char* op, const Value& x) {
  if (!is_floating(x.dtype()))
    throw TypeError(std::string(op) + ": operand " + x.type().str() +
                    " is not floating point; convert it first with astype(x, f32)");
}

// Errors should name the op the user called, not the max inside it.
int64_t check_axis(const char* op, const Value& x, int64_t axis) {
  if (axis < -x.ndim() || axis >= x.ndim())
    throw TypeError(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for " +
                    x.type().str() + " (expected -" + std::to_string(x.ndim()) + " <= axis < " +
                    std::to_string(x.ndim()) + ")");
  return axis;
}

}  // namespace

namespace detail {

// The max over `axes` (kept as size-1 dims) used to shift exponents into a safe
// range. It is a constant to differentiation: the shift cancels analytically,
// and treating it as constant avoids the max's tie-splitting derivative. A
// non-finite max (a slice of all -inf) is replaced by 0 so that slice gives
// log(0) = -inf instead of (-inf) - (-inf) = NaN.
Value stable_shift(const Value& x, const std::vector<int64_t>& axes) {
  Value m = max(x, axes, /*keepdims=*/true);
  Value finite = less(abs(m), scalar_like(m, std::numeric_limits<double>::infinity()));
  return stop_gradient(where(finite, m, scalar_like(m, 0.0)));
}

Value softmax_composite(const Value& x, int64_t axis) {
  Value e = exp(x - stable_shift(x, {axis}));
  return e / sum(e, {axis}, /*keepdims=*/true);
}

}  // namespace detail

using detail::stable_shift;

DRX_PUBLIC_OP("logsumexp", "(x: Value, axes: vector<int64>, keepdims: bool = false) -> Value",
              "log(sum(exp(x))) over axes, computed stably.");
Value logsumexp(const Value& x, const std::vector<int64_t>& axes, bool keepdims) {
  require_floating("logsumexp", x);
  Value m = stable_shift(x, axes);
  Value s = sum(exp(x - m), axes, keepdims);
  const Shape out_shape = s.shape();
  return log(s) + (keepdims ? m : reshape(m, out_shape));
}

DRX_PUBLIC_OP("softmax", "(x: Value, axis: int64 = -1) -> Value",
              "exp(x) / sum(exp(x)) along axis, computed stably.");
Value softmax(const Value& x, int64_t axis) {
  require_floating("softmax", x);
  check_axis("softmax", x, axis);
  return emit1(prims::softmax(), {x}, Params{{"axis", normalize_axis(axis, x.ndim(), "softmax")}});
}

DRX_PUBLIC_OP("log_softmax", "(x: Value, axis: int64 = -1) -> Value",
              "x - logsumexp(x) along axis.");
Value log_softmax(const Value& x, int64_t axis) {
  require_floating("log_softmax", x);
  check_axis("log_softmax", x, axis);
  Value shifted = x - stable_shift(x, {axis});
  return shifted - log(sum(exp(shifted), {axis}, /*keepdims=*/true));
}

}  // namespace drx
