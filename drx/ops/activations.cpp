// Activations and clipping as compositions of primitives, written so that
// they are stable for large |x| and their derivatives come out right at the
// kinks (through maximum's tie rule, as in JAX).
#include <cmath>

#include "drx/ops/ops.h"

namespace drx {

Value sigmoid(const Value& x) { return logistic(x); }

// max(x, 0) + log1p(exp(-|x|)): no overflow for large x, and the derivative
// at 0 is 1/2 (maximum's tie) + 0 (abs' at 0) = sigmoid(0).
Value softplus(const Value& x) { return maximum(x, 0.0) + log1p(exp(-abs(x))); }

Value log_sigmoid(const Value& x) { return -softplus(-x); }

Value gelu(const Value& x, bool approximate) {
  if (approximate) {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + erf(x * M_SQRT1_2));
}

Value clip(const Value& x, const Value& lo, const Value& hi) { return minimum(maximum(x, lo), hi); }

Value clip(const Value& x, double lo, double hi) {
  if (!(lo <= hi))
    throw Error("clip: lower bound " + std::to_string(lo) + " exceeds upper bound " +
                std::to_string(hi));
  return minimum(maximum(x, lo), hi);
}

}  // namespace drx
