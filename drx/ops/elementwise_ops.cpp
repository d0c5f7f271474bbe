// The public elementwise ops: numpy-style broadcasting and dtype checks in
// front of the primitives, plus the composites (square, relu) and operators.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "drx/ops/elementwise_kernels.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

namespace drx {
namespace {

// numpy broadcasting: shapes align on the right; a size-1 (or missing) dim
// stretches to the other's size.
Shape broadcast_shapes(const std::string& op, const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o != 1) {
        std::string all;
        for (size_t j = 0; j < shapes.size(); ++j) all += (j ? " and " : "") + shape_str(shapes[j]);
        throw TypeError(op + ": cannot broadcast shapes " + all +
                        " together (aligned on the right, each dimension must match or be 1)");
      }
      o = d;
    }
  }
  return out;
}

Value broadcast_if_needed(const Value& x, const Shape& shape) {
  return x.shape() == shape ? x : broadcast_to(x, shape);
}

void check_same_dtype(const std::string& op, const Value& a, const Value& b) {
  if (a.dtype() != b.dtype())
    throw TypeError(op + ": operand dtypes differ: " + a.type().str() + " and " + b.type().str() +
                    " (drx does not promote implicitly; convert one with drx::astype)");
}

Value binary(const Primitive& p, const Value& a, const Value& b) {
  check_same_dtype(p.name(), a, b);
  Shape s = broadcast_shapes(p.name(), {a.shape(), b.shape()});
  return emit1(p, {broadcast_if_needed(a, s), broadcast_if_needed(b, s)});
}

std::string number_str(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A plain number takes x's dtype; one that the dtype cannot hold is an error
// rather than a silent truncation (x_i32 * 0.5 would otherwise be x * 0).
Value number_like(const std::string& op, const Value& x, double v) {
  DType dt = x.dtype();
  if (dt == DType::bool_)
    throw TypeError(op + ": cannot combine the bool value " + x.type().str() + " with the number " +
                    number_str(v) + "; convert it first with drx::astype");
  if (is_integer(dt)) {
    // [lo, hi) of the dtype; both bounds are exact doubles (0 or powers of two).
    double lo = 0, hi = 0;
    dispatch_dtype(dt, [&](auto t) {
      using T = decltype(t);
      lo = static_cast<double>(std::numeric_limits<T>::min());
      hi = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
    });
    if (!(std::trunc(v) == v && v >= lo && v < hi))
      throw TypeError(op + ": the number " + number_str(v) +
                      " is not representable in the dtype of " + x.type().str() +
                      "; convert the value first with drx::astype");
  }
  return scalar_like(x, v);
}

}  // namespace

#define DRX_UNARY(fn) \
  Value fn(const Value& x) { return emit1(prims::fn(), {x}); }
DRX_UNARY(neg)
DRX_UNARY(exp)
DRX_UNARY(log)
DRX_UNARY(log1p)
DRX_UNARY(tanh)
DRX_UNARY(logistic)
DRX_UNARY(sqrt)
DRX_UNARY(rsqrt)
DRX_UNARY(abs)
DRX_UNARY(sign)
DRX_UNARY(sin)
DRX_UNARY(cos)
DRX_UNARY(erf)
DRX_UNARY(erf_inv)
DRX_UNARY(cbrt)
DRX_UNARY(expm1)
DRX_UNARY(round_away)
DRX_UNARY(floor)
DRX_UNARY(ceil)
DRX_UNARY(round)
DRX_UNARY(stop_gradient)
#undef DRX_UNARY

Value bitwise_not(const Value& x) { return emit1(prims::bitwise_not(), {x}); }

#define DRX_BINARY(fn) \
  Value fn(const Value& a, const Value& b) { return binary(prims::fn(), a, b); }
DRX_BINARY(add)
DRX_BINARY(sub)
DRX_BINARY(mul)
DRX_BINARY(div)
DRX_BINARY(pow)
DRX_BINARY(maximum)
DRX_BINARY(minimum)
DRX_BINARY(less)
DRX_BINARY(less_equal)
DRX_BINARY(greater)
DRX_BINARY(greater_equal)
DRX_BINARY(equal)
DRX_BINARY(not_equal)
DRX_BINARY(remainder)
DRX_BINARY(atan2)
DRX_BINARY(shift_left)
DRX_BINARY(shift_right_logical)
DRX_BINARY(shift_right_arithmetic)
#undef DRX_BINARY

Value bitwise_and(const Value& a, const Value& b) { return binary(prims::bitwise_and(), a, b); }
Value bitwise_or(const Value& a, const Value& b) { return binary(prims::bitwise_or(), a, b); }
Value bitwise_xor(const Value& a, const Value& b) { return binary(prims::bitwise_xor(), a, b); }

Value pow(const Value& a, double b) { return pow(a, number_like("pow", a, b)); }
Value maximum(const Value& a, double b) { return maximum(a, number_like("maximum", a, b)); }
Value minimum(const Value& a, double b) { return minimum(a, number_like("minimum", a, b)); }

Value square(const Value& x) { return mul(x, x); }

// Not maximum(x, 0): that splits the gradient at x == 0 in half (max's tie
// rule), while JAX and PyTorch give relu'(0) = 0. This form keeps NaN too.
Value relu(const Value& x) {
  Value zero = full_like(x, 0.0);
  return where(less_equal(x, zero), zero, x);
}

Value where(const Value& cond, const Value& a, const Value& b) {
  const Primitive& p = prims::select();
  if (cond.dtype() != DType::bool_)
    throw TypeError("where: the condition must be bool, got " + cond.type().str() +
                    " (compare with drx::less etc. or convert with drx::astype)");
  check_same_dtype("where", a, b);
  Shape s = broadcast_shapes("where", {cond.shape(), a.shape(), b.shape()});
  return emit1(
      p, {broadcast_if_needed(cond, s), broadcast_if_needed(a, s), broadcast_if_needed(b, s)});
}

Value astype(const Value& x, DType dtype) {
  const Primitive& p = prims::convert();
  if (x.dtype() == dtype) return x;
  return emit1(p, {x}, Params{{"dtype", dtype}});
}

Value operator+(const Value& a, const Value& b) { return add(a, b); }
Value operator-(const Value& a, const Value& b) { return sub(a, b); }
Value operator*(const Value& a, const Value& b) { return mul(a, b); }
Value operator/(const Value& a, const Value& b) { return div(a, b); }
Value operator-(const Value& a) { return neg(a); }
Value operator+(const Value& a, double b) { return add(a, number_like("add", a, b)); }
Value operator-(const Value& a, double b) { return sub(a, number_like("sub", a, b)); }
Value operator*(const Value& a, double b) { return mul(a, number_like("mul", a, b)); }
Value operator/(const Value& a, double b) { return div(a, number_like("div", a, b)); }
Value operator+(double a, const Value& b) { return add(number_like("add", b, a), b); }
Value operator-(double a, const Value& b) { return sub(number_like("sub", b, a), b); }
Value operator*(double a, const Value& b) { return mul(number_like("mul", b, a), b); }
Value operator/(double a, const Value& b) { return div(number_like("div", b, a), b); }

}  // namespace drx
