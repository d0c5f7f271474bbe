// The named optimizers: chains of a scaling step and the learning rate, as optax defines them.
#include "drx/optim/optimizers.h"

#include "drx/ops/op_table.h"
#include "drx/optim/tx_support.h"

DRX_PUBLIC_OPS_FILE(optim_optimizers);

namespace drx::optim {

namespace {

// -lr * updates; the learning rate is checked under the optimizer's name.
GradientTransformation learning_rate(const std::string& op, const LearningRate& lr) {
  if (!lr.is_schedule()) detail::check_non_negative(op, "the learning rate", lr.value());
  return scale_by_learning_rate(lr);
}

}  // namespace

DRX_PUBLIC_OP(
    "optim::sgd",
    "(lr: LearningRate, momentum: double = 0, nesterov: bool = false) -> GradientTransformation",
    "Stochastic gradient descent, optionally with (Nesterov) momentum.");
GradientTransformation sgd(const LearningRate& lr, double momentum, bool nesterov) {
  const std::string op = "sgd";
  detail::check_non_negative(op, "momentum", momentum);
  // Without momentum there is no buffer at all (and no state for a constant lr).
  if (momentum == 0.0) return detail::optimizer(op, learning_rate(op, lr));
  return detail::optimizer(op, chain(trace(momentum, nesterov), learning_rate(op, lr)));
}

DRX_PUBLIC_OP("optim::adam",
              "(lr: LearningRate, b1: double = 0.9, b2: double = 0.999, eps: double = 1e-8) -> "
              "GradientTransformation",
              "Adam (optax's equations and defaults).");
GradientTransformation adam(const LearningRate& lr, double b1, double b2, double eps) {
  return detail::optimizer("adam", chain(scale_by_adam(b1, b2, eps), learning_rate("adam", lr)));
}

DRX_PUBLIC_OP("optim::adamw",
              "(lr: LearningRate, b1: double = 0.9, b2: double = 0.999, eps: double = 1e-8, "
              "weight_decay: double = 1e-4) -> GradientTransformation",
              "Adam with decoupled weight decay.");
GradientTransformation adamw(const LearningRate& lr, double b1, double b2, double eps,
                             double weight_decay) {
  return detail::optimizer("adamw",
                           chain(scale_by_adam(b1, b2, eps), add_decayed_weights(weight_decay),
                                 learning_rate("adamw", lr)));
}

DRX_PUBLIC_OP("optim::adagrad",
              "(lr: LearningRate, initial_accumulator_value: double = 0.1, eps: double = 1e-7) -> "
              "GradientTransformation",
              "Adagrad (optax's equations and defaults).");
GradientTransformation adagrad(const LearningRate& lr, double initial_accumulator_value,
                               double eps) {
  return detail::optimizer(
      "adagrad", chain(scale_by_rss(initial_accumulator_value, eps), learning_rate("adagrad", lr)));
}

DRX_PUBLIC_OP("optim::rmsprop",
              "(lr: LearningRate, decay: double = 0.9, eps: double = 1e-8, options: RmspropOptions "
              "= {}) -> GradientTransformation",
              "RMSprop, optionally centred and with momentum.");
GradientTransformation rmsprop(const LearningRate& lr, double decay, double eps,
                               const RmspropOptions& o) {
  const std::string op = "rmsprop";
  detail::check_non_negative(op, "momentum", o.momentum);
  std::vector<GradientTransformation> parts = {
      o.centered ? scale_by_stddev(decay, eps, o.initial_scale, o.eps_in_sqrt)
                 : scale_by_rms(decay, eps, o.initial_scale, o.eps_in_sqrt),
      learning_rate(op, lr)};
  // Momentum accumulates the scaled steps (after the learning rate), as optax and PyTorch do.
  if (o.momentum != 0.0) parts.push_back(trace(o.momentum, o.nesterov));
  return detail::optimizer(op, chain(std::move(parts)));
}

DRX_PUBLIC_OP("optim::yogi",
              "(lr: LearningRate, b1: double = 0.9, b2: double = 0.999, eps: double = 1e-3) -> "
              "GradientTransformation",
              "Yogi (optax's equations and defaults).");
GradientTransformation yogi(const LearningRate& lr, double b1, double b2, double eps) {
  return detail::optimizer("yogi", chain(scale_by_yogi(b1, b2, eps), learning_rate("yogi", lr)));
}

}  // namespace drx::optim
