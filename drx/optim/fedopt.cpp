// The adaptive server optimizers of Reddi et al. 2021 (FedAdagrad, FedYogi, FedAdam) as
// GradientTransformations of the pseudo-gradient; equations in optimizers.h.
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/optim/optimizers.h"
#include "drx/optim/tx_support.h"
#include "drx/trace/tree_math.h"

DRX_PUBLIC_OPS_FILE(optim_fedopt);

namespace drx::optim {

namespace {

// v_t from v_{t-1} and g^2: the one line in which the three algorithms differ.
using SecondMoment = std::function<Value(const Value& v, const Value& g2)>;

GradientTransformation reddi(const std::string& op, const LearningRate& lr, double b1, double tau,
                             double initial_v, SecondMoment second_moment) {
  if (!lr.is_schedule()) detail::check_non_negative(op, "the learning rate", lr.value());
  detail::check_range(op, "b1", b1, 0.0, 1.0, true);
  detail::check_non_negative(op, "tau", tau);
  detail::check_non_negative(op, "initial_v", initial_v);
  const bool scheduled = lr.is_schedule();
  const std::vector<std::string> keys =
      scheduled ? std::vector<std::string>{"count", "m", "v"} : std::vector<std::string>{"m", "v"};
  GradientTransformation t;
  t.name = op;
  t.init = [=](const Tree& params) {
    std::vector<std::pair<std::string, Tree>> parts = {{"m", tree_zeros_like(params)},
                                                       {"v", tree_full_like(params, initial_v)}};
    if (scheduled) parts.emplace_back("count", detail::zero_count(params));
    return Tree::dict(std::move(parts));
  };
  t.update = [=](const Tree& grads, const Tree& state, const Tree&) -> std::pair<Tree, Tree> {
    detail::check_state_keys(op, state, keys);
    detail::check_matches(op, "state[\"m\"]", state["m"], "grads", grads);
    detail::check_matches(op, "state[\"v\"]", state["v"], "grads", grads);
    Tree g = tree_values(grads);
    Tree m = detail::ema(g, tree_values(state["m"]), b1, 1);
    Tree v =
        tree_map([&](const Value& gi, const Value& vi) { return second_moment(vi, square(gi)); }, g,
                 tree_values(state["v"]));
    Value count, neg_lr;
    if (scheduled) {
      count = detail::count_of(op, state);
      neg_lr = -detail::scheduled(op, lr.schedule(), count);
    }
    // (-lr * m) / (sqrt(v) + tau): the learning rate multiplies m before the division, as
    // x + lr * m / (sqrt(v) + tau) reads in the paper (and as drx's FedAdam has rounded).
    Tree u = tree_map(
        [&](const Value& mi, const Value& vi) {
          Value step = scheduled ? detail::in_dtype(neg_lr, mi.dtype()) * mi : -lr.value() * mi;
          return step / (sqrt(vi) + tau);
        },
        m, v);
    std::vector<std::pair<std::string, Tree>> next = {{"m", m}, {"v", v}};
    if (scheduled) next.emplace_back("count", Tree(detail::increment(count)));
    return {u, Tree::dict(std::move(next))};
  };
  return detail::optimizer(op, t);
}

}  // namespace

DRX_PUBLIC_OP("optim::fedadam",
              "(lr: LearningRate, b1: double = 0.9, b2: double = 0.99, tau: double = 1e-3, "
              "initial_v: double = 0) -> GradientTransformation",
              "Server Adam on pseudo-gradients (Reddi et al. 2021).");
GradientTransformation fedadam(const LearningRate& lr, double b1, double b2, double tau,
                               double initial_v) {
  detail::check_range("fedadam", "b2", b2, 0.0, 1.0, true);
  return reddi("fedadam", lr, b1, tau, initial_v,
               [b2](const Value& v, const Value& g2) { return b2 * v + (1.0 - b2) * g2; });
}

DRX_PUBLIC_OP("optim::fedyogi",
              "(lr: LearningRate, b1: double = 0.9, b2: double = 0.99, tau: double = 1e-3, "
              "initial_v: double = 0) -> GradientTransformation",
              "Server Yogi on pseudo-gradients (Reddi et al. 2021).");
GradientTransformation fedyogi(const LearningRate& lr, double b1, double b2, double tau,
                               double initial_v) {
  detail::check_range("fedyogi", "b2", b2, 0.0, 1.0, true);
  return reddi("fedyogi", lr, b1, tau, initial_v, [b2](const Value& v, const Value& g2) {
    return v - (1.0 - b2) * sign(v - g2) * g2;
  });
}

DRX_PUBLIC_OP("optim::fedadagrad",
              "(lr: LearningRate, b1: double = 0.9, tau: double = 1e-3, initial_v: double = 0) -> "
              "GradientTransformation",
              "Server Adagrad on pseudo-gradients (Reddi et al. 2021).");
GradientTransformation fedadagrad(const LearningRate& lr, double b1, double tau, double initial_v) {
  return reddi("fedadagrad", lr, b1, tau, initial_v,
               [](const Value& v, const Value& g2) { return v + g2; });
}

}  // namespace drx::optim
