// The public elementwise ops: numpy-style broadcasting and dtype checks in
// front of the primitives, plus the composites (square, relu) and operators.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "drx/ops/elementwise_kernels.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_elementwise_ops);

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
DRX_PUBLIC_OP("neg", "(x: Value) -> Value", "Elementwise negation.");
DRX_UNARY(neg)
DRX_PUBLIC_OP("exp", "(x: Value) -> Value", "Elementwise exponential.");
DRX_UNARY(exp)
DRX_PUBLIC_OP("log", "(x: Value) -> Value", "Elementwise natural logarithm.");
DRX_UNARY(log)
DRX_PUBLIC_OP("log1p", "(x: Value) -> Value", "Elementwise log(1 + x), accurate near 0.");
DRX_UNARY(log1p)
DRX_PUBLIC_OP("tanh", "(x: Value) -> Value", "Elementwise hyperbolic tangent.");
DRX_UNARY(tanh)
DRX_PUBLIC_OP("logistic", "(x: Value) -> Value", "Elementwise logistic sigmoid 1 / (1 + exp(-x)).");
DRX_UNARY(logistic)
DRX_PUBLIC_OP("sqrt", "(x: Value) -> Value", "Elementwise square root.");
DRX_UNARY(sqrt)
DRX_PUBLIC_OP("rsqrt", "(x: Value) -> Value", "Elementwise reciprocal square root.");
DRX_UNARY(rsqrt)
DRX_PUBLIC_OP("abs", "(x: Value) -> Value", "Elementwise absolute value.");
DRX_UNARY(abs)
DRX_PUBLIC_OP("sign", "(x: Value) -> Value", "Elementwise sign: -1, 0 or 1.");
DRX_UNARY(sign)
DRX_PUBLIC_OP("sin", "(x: Value) -> Value", "Elementwise sine.");
DRX_UNARY(sin)
DRX_PUBLIC_OP("cos", "(x: Value) -> Value", "Elementwise cosine.");
DRX_UNARY(cos)
DRX_PUBLIC_OP("erf", "(x: Value) -> Value", "Elementwise error function.");
DRX_UNARY(erf)
DRX_PUBLIC_OP("erf_inv", "(x: Value) -> Value",
              "Elementwise inverse of erf on (-1, 1); +-inf at +-1.");
DRX_UNARY(erf_inv)
DRX_PUBLIC_OP("cbrt", "(x: Value) -> Value", "Elementwise real cube root.");
DRX_UNARY(cbrt)
DRX_PUBLIC_OP("expm1", "(x: Value) -> Value", "Elementwise exp(x) - 1, accurate near 0.");
DRX_UNARY(expm1)
DRX_PUBLIC_OP("round_away", "(x: Value) -> Value",
              "Round to nearest, halves away from zero (floating point; derivative zero).");
DRX_UNARY(round_away)
DRX_PUBLIC_OP("floor", "(x: Value) -> Value", "Round down (floating point; derivative zero).");
DRX_UNARY(floor)
DRX_PUBLIC_OP("ceil", "(x: Value) -> Value", "Round up (floating point; derivative zero).");
DRX_UNARY(ceil)
DRX_PUBLIC_OP("round", "(x: Value) -> Value",
              "Round to nearest, halves to even, as jnp.round (floating point; derivative zero).");
DRX_UNARY(round)
DRX_PUBLIC_OP("stop_gradient", "(x: Value) -> Value", "Identity whose derivative is zero.");
DRX_UNARY(stop_gradient)
#undef DRX_UNARY

DRX_PUBLIC_OP("bitwise_not", "(x: Value) -> Value",
              "Elementwise bitwise not (logical not on bool).");
Value bitwise_not(const Value& x) { return emit1(prims::bitwise_not(), {x}); }

#define DRX_BINARY(fn) \
  Value fn(const Value& a, const Value& b) { return binary(prims::fn(), a, b); }
DRX_PUBLIC_OP("add", "(a: Value, b: Value) -> Value",
              "Elementwise a + b, broadcasting numpy-style.");
DRX_BINARY(add)
DRX_PUBLIC_OP("sub", "(a: Value, b: Value) -> Value",
              "Elementwise a - b, broadcasting numpy-style.");
DRX_BINARY(sub)
DRX_PUBLIC_OP("mul", "(a: Value, b: Value) -> Value",
              "Elementwise a * b, broadcasting numpy-style.");
DRX_BINARY(mul)
DRX_PUBLIC_OP("div", "(a: Value, b: Value) -> Value",
              "Elementwise a / b, broadcasting numpy-style.");
DRX_BINARY(div)
DRX_PUBLIC_OP("pow", "(a: Value, b: Value) -> Value | (a: Value, b: double) -> Value",
              "Elementwise a to the power b.");
DRX_BINARY(pow)
DRX_PUBLIC_OP("maximum", "(a: Value, b: Value) -> Value | (a: Value, b: double) -> Value",
              "Elementwise maximum.");
DRX_BINARY(maximum)
DRX_PUBLIC_OP("minimum", "(a: Value, b: Value) -> Value | (a: Value, b: double) -> Value",
              "Elementwise minimum.");
DRX_BINARY(minimum)
DRX_PUBLIC_OP("less", "(a: Value, b: Value) -> Value (bool)", "Elementwise a < b.");
DRX_BINARY(less)
DRX_PUBLIC_OP("less_equal", "(a: Value, b: Value) -> Value (bool)", "Elementwise a <= b.");
DRX_BINARY(less_equal)
DRX_PUBLIC_OP("greater", "(a: Value, b: Value) -> Value (bool)", "Elementwise a > b.");
DRX_BINARY(greater)
DRX_PUBLIC_OP("greater_equal", "(a: Value, b: Value) -> Value (bool)", "Elementwise a >= b.");
DRX_BINARY(greater_equal)
DRX_PUBLIC_OP("equal", "(a: Value, b: Value) -> Value (bool)", "Elementwise a == b.");
DRX_BINARY(equal)
DRX_PUBLIC_OP("not_equal", "(a: Value, b: Value) -> Value (bool)", "Elementwise a != b.");
DRX_BINARY(not_equal)
DRX_PUBLIC_OP("remainder", "(a: Value, b: Value) -> Value",
              "Elementwise a - b * trunc(a / b) (the dividend's sign, as C++ fmod and %).");
DRX_BINARY(remainder)
DRX_PUBLIC_OP("atan2", "(a: Value, b: Value) -> Value",
              "Elementwise angle of (b, a), in (-pi, pi].");
DRX_BINARY(atan2)
DRX_PUBLIC_OP("shift_left", "(a: Value, b: Value) -> Value",
              "Elementwise a << b; amounts of the bit width or more give 0.");
DRX_BINARY(shift_left)
DRX_PUBLIC_OP("shift_right_logical", "(a: Value, b: Value) -> Value",
              "Elementwise logical a >> b; amounts of the bit width or more give 0.");
DRX_BINARY(shift_right_logical)
DRX_PUBLIC_OP("shift_right_arithmetic", "(a: Value, b: Value) -> Value",
              "Elementwise arithmetic a >> b; large amounts give the sign bit everywhere.");
DRX_BINARY(shift_right_arithmetic)
#undef DRX_BINARY

DRX_PUBLIC_OP("bitwise_and", "(a: Value, b: Value) -> Value",
              "Elementwise bitwise and (logical and on bool).");
Value bitwise_and(const Value& a, const Value& b) { return binary(prims::bitwise_and(), a, b); }
DRX_PUBLIC_OP("bitwise_or", "(a: Value, b: Value) -> Value",
              "Elementwise bitwise or (logical or on bool).");
Value bitwise_or(const Value& a, const Value& b) { return binary(prims::bitwise_or(), a, b); }
DRX_PUBLIC_OP("bitwise_xor", "(a: Value, b: Value) -> Value",
              "Elementwise bitwise xor (logical xor on bool).");
Value bitwise_xor(const Value& a, const Value& b) { return binary(prims::bitwise_xor(), a, b); }

Value pow(const Value& a, double b) { return pow(a, number_like("pow", a, b)); }
Value maximum(const Value& a, double b) { return maximum(a, number_like("maximum", a, b)); }
Value minimum(const Value& a, double b) { return minimum(a, number_like("minimum", a, b)); }

DRX_PUBLIC_OP("square", "(x: Value) -> Value", "Elementwise x * x.");
Value square(const Value& x) { return mul(x, x); }

DRX_PUBLIC_OP("relu", "(x: Value) -> Value", "Elementwise max(x, 0).");
// Not maximum(x, 0): that splits the gradient at x == 0 in half (max's tie
// rule), while JAX and PyTorch give relu'(0) = 0. This form keeps NaN too.
Value relu(const Value& x) {
  Value zero = full_like(x, 0.0);
  return where(less_equal(x, zero), zero, x);
}

DRX_PUBLIC_OP("where", "(cond: Value (bool), a: Value, b: Value) -> Value",
              "cond ? a : b elementwise, with broadcasting.");
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

DRX_PUBLIC_OP("astype", "(x: Value, dtype: DType) -> Value",
              "x converted to dtype (floats saturate into integers, NaN becomes 0).");
Value astype(const Value& x, DType dtype) {
  const Primitive& p = prims::convert();
  if (x.dtype() == dtype) return x;
  return emit1(p, {x}, Params{{"dtype", dtype}});
}

DRX_PUBLIC_OP("operator+",
              "(a: Value, b: Value) -> Value | (a: Value, b: double) -> Value | (a: double, b: "
              "Value) -> Value",
              "add; a number takes the Value's dtype.");
Value operator+(const Value& a, const Value& b) { return add(a, b); }
DRX_PUBLIC_OP("operator-",
              "(a: Value) -> Value | (a: Value, b: Value) -> Value | (a: Value, b: double) -> "
              "Value | (a: double, b: Value) -> Value",
              "neg or sub; a number takes the Value's dtype.");
Value operator-(const Value& a, const Value& b) { return sub(a, b); }
DRX_PUBLIC_OP("operator*",
              "(a: Value, b: Value) -> Value | (a: Value, b: double) -> Value | (a: double, b: "
              "Value) -> Value",
              "mul; a number takes the Value's dtype.");
Value operator*(const Value& a, const Value& b) { return mul(a, b); }
DRX_PUBLIC_OP("operator/",
              "(a: Value, b: Value) -> Value | (a: Value, b: double) -> Value | (a: double, b: "
              "Value) -> Value",
              "div; a number takes the Value's dtype.");
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
