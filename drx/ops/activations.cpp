// Activations and clipping as compositions of primitives, written so that
// they are stable for large |x| and their derivatives come out right at the
// kinks (through maximum's tie rule, as in JAX).
#include <cmath>

#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(ops_activations);

namespace drx {

DRX_PUBLIC_OP("sigmoid", "(x: Value) -> Value",
              "Logistic sigmoid (= logistic), stable for large |x|.");
Value sigmoid(const Value& x) { return logistic(x); }

DRX_PUBLIC_OP("softplus", "(x: Value) -> Value", "log(1 + exp(x)), stable for large |x|.");
// max(x, 0) + log1p(exp(-|x|)): no overflow for large x, and the derivative
// at 0 is 1/2 (maximum's tie) + 0 (abs' at 0) = sigmoid(0).
Value softplus(const Value& x) { return maximum(x, 0.0) + log1p(exp(-abs(x))); }

DRX_PUBLIC_OP("log_sigmoid", "(x: Value) -> Value", "log(sigmoid(x)) = -softplus(-x).");
Value log_sigmoid(const Value& x) { return -softplus(-x); }

DRX_PUBLIC_OP("gelu", "(x: Value, approximate: bool = false) -> Value",
              "Gaussian error linear unit (exact erf form, or the tanh approximation).");
Value gelu(const Value& x, bool approximate) {
  if (approximate) {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
  }
  return emit1(prims::gelu(), {x});
}

DRX_PUBLIC_OP(
    "clip",
    "(x: Value, lo: Value, hi: Value) -> Value | (x: Value, lo: double, hi: double) -> Value",
    "min(max(x, lo), hi) elementwise; lo and hi broadcast against x.");
Value clip(const Value& x, const Value& lo, const Value& hi) { return minimum(maximum(x, lo), hi); }

Value clip(const Value& x, double lo, double hi) {
  if (!(lo <= hi))
    throw Error("clip: lower bound " + std::to_string(lo) + " exceeds upper bound " +
                std::to_string(hi));
  return minimum(maximum(x, lo), hi);
}

}  // namespace drx
