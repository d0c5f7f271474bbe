#pragma once
// Shared by the gradient transformations' sources (not part of the public API): argument
// checks with messages naming the transformation, the step counter, and leafwise helpers.
#include <functional>
#include <string>
#include <vector>

#include "drx/core/value.h"
#include "drx/optim/transform.h"
#include "drx/trace/tree.h"

namespace drx::optim::detail {

// Throws drx::Error unless lo <= v (< hi if hi_open, else <= hi) and v is finite, e.g.
// "adam: b1 must be in [0, 1), got 1.5".
void check_range(const std::string& op, const char* name, double v, double lo, double hi,
                 bool hi_open);
// v finite.
void check_finite(const std::string& op, const char* name, double v);
// v finite and >= 0.
void check_non_negative(const std::string& op, const char* name, double v);
// v finite and > 0.
void check_positive(const std::string& op, const char* name, double v);

// Throws unless `t` has `like`'s structure and each leaf `like`'s dtype and shape; `what` and
// `like_what` name the two trees in the message ("state.mu", "grads").
void check_matches(const std::string& op, const char* what, const Tree& t, const char* like_what,
                   const Tree& like);
// Throws unless grads' leaves are floating-point.
void check_grads(const std::string& op, const Tree& grads);
// Throws unless state is a dict with exactly `keys` (sorted); names the expected layout.
void check_state_keys(const std::string& op, const Tree& state,
                      const std::vector<std::string>& keys);
// Throws unless state is the empty list (a transformation without state).
void check_empty_state(const std::string& op, const Tree& state);

// Params as Values (Array leaves become constants), checked to be unplaced floating-point
// leaves of one dtype, which is stored in *dtype; throws drx::Error naming `op` otherwise.
Tree param_values(const Tree& params, const char* op, DType* dtype);

// The step counter: an i32 scalar 0, an Array if every leaf of `params` is an Array (init on
// host trees), else a Value.
Tree zero_count(const Tree& params);
// count + 1, saturating at the i32 maximum (a counter that wraps would restart a schedule).
Value increment(const Value& count);
// A count leaf as a Value, checked to be an i32 scalar.
Value count_of(const std::string& op, const Tree& state);

// schedule(count), checked to be an unplaced floating-point scalar.
Value scheduled(const std::string& op, const std::function<Value(const Value&)>& schedule,
                const Value& count);
// v converted to dtype (no op when it already has it).
Value in_dtype(const Value& v, DType dtype);

// decay * moment + (1 - decay) * g (order 1) or * square(g) (order 2), leaf by leaf.
Tree ema(const Tree& g, const Tree& moment, double decay, int order);
// moment / (1 - decay^count) per leaf, count an i32 scalar (Adam's bias correction).
Tree bias_corrected(const Tree& moment, double decay, const Value& count);

// An optimizer made of `tx` under `name`: its update first checks that the grads are
// floating-point and, when params has leaves, that params match the grads.
GradientTransformation optimizer(std::string name, GradientTransformation tx);

}  // namespace drx::optim::detail
