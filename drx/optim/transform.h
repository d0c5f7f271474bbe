#pragma once
// Composable gradient transformations in the optax style.
//
// A GradientTransformation is a pair of functions on drx::Trees:
//   init(params) -> state
//   update(grads, state, params) -> {updates, new state}
// Updates are what you ADD to the parameters (apply_updates): sgd's update is -lr * g. Both run
// inside any traced function: client side in a map_fn body, server side on pseudo-gradients,
// in a scan or fori_loop body (the state is an ordinary carry; its step count is an i32 scalar
// leaf), under jit, grad and vmap. init also works on Trees of Arrays (host state for a
// checkpoint or a first call); update traces, so call it inside jit or a program (Array leaves
// given to it become constants).
//
// Conventions shared by every transformation here:
//  - grads, params and the moment trees of a state have one structure, leaves of one dtype
//    and shape each, floating-point; a mismatch throws drx::Error naming the transformation
//    and both structures (or the leaf and both types).
//  - A state is a dict of named parts ({"count", "mu", "nu"}, ...), the empty list for a
//    transformation without state, or for a chain the list of its parts' states; a state
//    made by another transformation is refused.
//  - params are read only by transformations that need them (add_decayed_weights); pass the
//    current params anyway, so that every transformation can check them.
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "drx/optim/schedules.h"
#include "drx/trace/tree.h"

namespace drx::optim {

struct GradientTransformation {
  using InitFn = std::function<Tree(const Tree& params)>;
  using UpdateFn = std::function<std::pair<Tree, Tree>(const Tree& grads, const Tree& state,
                                                       const Tree& params)>;
  InitFn init;
  UpdateFn update;
  std::string name;  // for messages: "adam", "chain(clip_by_global_norm, sgd)"
};

// A learning rate: a constant (finite, >= 0) or a Schedule of the step count.
class LearningRate {
 public:
  LearningRate(double value) : value_(value) {}                        // NOLINT: lr = 0.1
  LearningRate(Schedule schedule) : schedule_(std::move(schedule)) {}  // NOLINT
  // Any callable of the count (a lambda) is a schedule too.
  template <class F>
  requires std::is_invocable_r_v<Value, const F&, const Value&> LearningRate(F schedule)
      : schedule_(std::move(schedule)) {}  // NOLINT
  bool is_schedule() const { return static_cast<bool>(schedule_); }
  double value() const { return value_; }  // the constant (when not a schedule)
  const Schedule& schedule() const { return schedule_; }

 private:
  double value_ = 0.0;
  Schedule schedule_;
};

// Updates = grads; no state.
GradientTransformation identity();
// Updates = factor * grads; no state.
GradientTransformation scale(double factor);
// Updates = schedule(count) * grads; state {"count"}.
GradientTransformation scale_by_schedule(Schedule schedule);
// Updates = -lr * grads (a schedule: -lr(count) * grads with state {"count"}, else no state).
// Throws for a negative or non-finite constant.
GradientTransformation scale_by_learning_rate(const LearningRate& lr);
// Momentum: t = grads + decay * t; updates = t, or grads + decay * t with Nesterov.
// State {"trace"}.
GradientTransformation trace(double decay, bool nesterov = false);
// Updates = grads + weight_decay * params (decoupled weight decay, as in AdamW); no state.
GradientTransformation add_decayed_weights(double weight_decay);
// Rescales grads to global L2 norm max_norm when their norm is max_norm or more:
// updates = norm < max_norm ? grads : grads / norm * max_norm. No state.
GradientTransformation clip_by_global_norm(double max_norm);

// The transformations applied in order, each to the previous one's updates; the state is the
// list of their states.
GradientTransformation chain(std::vector<GradientTransformation> parts);
template <class... T>
GradientTransformation chain(GradientTransformation first, T... rest) {
  return chain(std::vector<GradientTransformation>{std::move(first), std::move(rest)...});
}

// params + updates (same structure, dtypes and shapes), on Values or on host Arrays.
Tree apply_updates(const Tree& params, const Tree& updates);

}  // namespace drx::optim
