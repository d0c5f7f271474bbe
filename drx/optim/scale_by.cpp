// The adaptive scaling steps (optax's scale_by_*): moment estimates kept in the state and the
// gradient rescaled by them. The optimizers (optimizers.cpp) chain them with the learning rate.
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/optim/optimizers.h"
#include "drx/optim/tx_support.h"
#include "drx/trace/tree_math.h"

DRX_PUBLIC_OPS_FILE(optim_scale_by);

namespace drx::optim {

namespace {

using detail::check_matches;
using detail::check_state_keys;

// Checks a state's moment trees against the grads (state[key] like grads for every key).
void check_moments(const std::string& op, const Tree& state, const Tree& grads,
                   const std::vector<std::string>& keys) {
  for (const std::string& k : keys) {
    const std::string what = "state[\"" + k + "\"]";
    check_matches(op, what.c_str(), state[k], "grads", grads);
  }
}

// What every scale_by_* update checks first: the state is this
// transformation's (state_keys), the grads are floating point, and each
// moment tree (moment_keys) matches the grads.
void check_update(const std::string& op, const Tree& state, const Tree& grads,
                  const std::vector<std::string>& state_keys,
                  const std::vector<std::string>& moment_keys) {
  check_state_keys(op, state, state_keys);
  detail::check_grads(op, grads);
  check_moments(op, state, grads, moment_keys);
}

// The bias-corrected Adam direction m_hat / (sqrt(v_hat + eps_root) + eps) (adam and yogi).
Tree adam_direction(const Tree& mu, const Tree& nu, double b1, double b2, double eps,
                    double eps_root, const Value& count) {
  Tree mu_hat = detail::bias_corrected(mu, b1, count);
  Tree nu_hat = detail::bias_corrected(nu, b2, count);
  return tree_map(
      [&](const Value& m, const Value& v) {
        return m / (sqrt(eps_root == 0.0 ? v : v + eps_root) + eps);
      },
      mu_hat, nu_hat);
}

}  // namespace

DRX_PUBLIC_OP(
    "optim::scale_by_adam",
    "(b1: double = 0.9, b2: double = 0.999, eps: double = 1e-8, eps_root: double = 0) -> "
    "GradientTransformation",
    "Adam's bias-corrected m_hat / (sqrt(v_hat + eps_root) + eps), before the learning rate.");
GradientTransformation scale_by_adam(double b1, double b2, double eps, double eps_root) {
  const std::string op = "scale_by_adam";
  detail::check_range(op, "b1", b1, 0.0, 1.0, true);
  detail::check_range(op, "b2", b2, 0.0, 1.0, true);
  detail::check_non_negative(op, "eps", eps);
  detail::check_non_negative(op, "eps_root", eps_root);
  GradientTransformation t;
  t.name = op;
  t.init = [](const Tree& params) {
    return Tree::dict({{"count", detail::zero_count(params)},
                       {"mu", tree_zeros_like(params)},
                       {"nu", tree_zeros_like(params)}});
  };
  t.update = [=](const Tree& grads, const Tree& state, const Tree&) -> std::pair<Tree, Tree> {
    check_update(op, state, grads, {"count", "mu", "nu"}, {"mu", "nu"});
    Tree g = tree_values(grads);
    Tree mu = detail::ema(g, tree_values(state["mu"]), b1, 1);
    Tree nu = detail::ema(g, tree_values(state["nu"]), b2, 2);
    Value count = detail::increment(detail::count_of(op, state));
    return {adam_direction(mu, nu, b1, b2, eps, eps_root, count),
            Tree::dict({{"count", Tree(count)}, {"mu", mu}, {"nu", nu}})};
  };
  return t;
}

DRX_PUBLIC_OP(
    "optim::scale_by_rss",
    "(initial_accumulator_value: double = 0.1, eps: double = 1e-7) -> GradientTransformation",
    "Adagrad's g / sqrt(sum of squares + eps), before the learning rate.");
GradientTransformation scale_by_rss(double initial_accumulator_value, double eps) {
  const std::string op = "scale_by_rss";
  detail::check_non_negative(op, "initial_accumulator_value", initial_accumulator_value);
  detail::check_non_negative(op, "eps", eps);
  GradientTransformation t;
  t.name = op;
  t.init = [initial_accumulator_value](const Tree& params) {
    return Tree::dict({{"sum_of_squares", tree_full_like(params, initial_accumulator_value)}});
  };
  t.update = [=](const Tree& grads, const Tree& state, const Tree&) -> std::pair<Tree, Tree> {
    check_update(op, state, grads, {"sum_of_squares"}, {"sum_of_squares"});
    Tree g = tree_values(grads);
    Tree s = tree_map([](const Value& gi, const Value& si) { return square(gi) + si; }, g,
                      tree_values(state["sum_of_squares"]));
    // A coordinate that never saw a gradient (s = 0, eps = 0) stays put instead of 0/0.
    Tree u = tree_map(
        [eps](const Value& gi, const Value& si) {
          return where(greater(si, scalar_like(si, 0.0)), rsqrt(si + eps), zeros_like(si)) * gi;
        },
        g, s);
    return {u, Tree::dict({{"sum_of_squares", s}})};
  };
  return t;
}

namespace {
// g / sqrt(v + eps) or g / (sqrt(v) + eps).
Value rms_scaled(const Value& g, const Value& v, double eps, bool eps_in_sqrt) {
  return eps_in_sqrt ? g * rsqrt(v + eps) : g / (sqrt(v) + eps);
}
}  // namespace

DRX_PUBLIC_OP("optim::scale_by_rms",
              "(decay: double = 0.9, eps: double = 1e-8, initial_scale: double = 0, eps_in_sqrt: "
              "bool = true) -> GradientTransformation",
              "RMSprop's g / sqrt(v + eps), before the learning rate.");
GradientTransformation scale_by_rms(double decay, double eps, double initial_scale,
                                    bool eps_in_sqrt) {
  const std::string op = "scale_by_rms";
  detail::check_range(op, "decay", decay, 0.0, 1.0, false);
  detail::check_non_negative(op, "eps", eps);
  detail::check_non_negative(op, "initial_scale", initial_scale);
  GradientTransformation t;
  t.name = op;
  t.init = [initial_scale](const Tree& params) {
    return Tree::dict({{"nu", tree_full_like(params, initial_scale)}});
  };
  t.update = [=](const Tree& grads, const Tree& state, const Tree&) -> std::pair<Tree, Tree> {
    check_update(op, state, grads, {"nu"}, {"nu"});
    Tree g = tree_values(grads);
    Tree nu = detail::ema(g, tree_values(state["nu"]), decay, 2);
    Tree u = tree_map(
        [&](const Value& gi, const Value& v) { return rms_scaled(gi, v, eps, eps_in_sqrt); }, g,
        nu);
    return {u, Tree::dict({{"nu", nu}})};
  };
  return t;
}

DRX_PUBLIC_OP("optim::scale_by_stddev",
              "(decay: double = 0.9, eps: double = 1e-8, initial_scale: double = 0, eps_in_sqrt: "
              "bool = true) -> GradientTransformation",
              "Centred RMSprop's scaling by the variance estimate v - m^2.");
GradientTransformation scale_by_stddev(double decay, double eps, double initial_scale,
                                       bool eps_in_sqrt) {
  const std::string op = "scale_by_stddev";
  detail::check_range(op, "decay", decay, 0.0, 1.0, false);
  detail::check_non_negative(op, "eps", eps);
  detail::check_non_negative(op, "initial_scale", initial_scale);
  GradientTransformation t;
  t.name = op;
  t.init = [initial_scale](const Tree& params) {
    return Tree::dict(
        {{"mu", tree_zeros_like(params)}, {"nu", tree_full_like(params, initial_scale)}});
  };
  t.update = [=](const Tree& grads, const Tree& state, const Tree&) -> std::pair<Tree, Tree> {
    check_update(op, state, grads, {"mu", "nu"}, {"mu", "nu"});
    Tree g = tree_values(grads);
    Tree mu = detail::ema(g, tree_values(state["mu"]), decay, 1);
    Tree nu = detail::ema(g, tree_values(state["nu"]), decay, 2);
    Tree u = tree_map(
        [&](const std::vector<Value>& l) {
          return rms_scaled(l[0], l[2] - square(l[1]), eps, eps_in_sqrt);
        },
        {g, mu, nu});
    return {u, Tree::dict({{"mu", mu}, {"nu", nu}})};
  };
  return t;
}

DRX_PUBLIC_OP("optim::scale_by_yogi",
              "(b1: double = 0.9, b2: double = 0.999, eps: double = 1e-3, eps_root: double = 0, "
              "initial_accumulator_value: double = 1e-6) -> GradientTransformation",
              "Yogi's bias-corrected scaling, before the learning rate.");
GradientTransformation scale_by_yogi(double b1, double b2, double eps, double eps_root,
                                     double initial_accumulator_value) {
  const std::string op = "scale_by_yogi";
  detail::check_range(op, "b1", b1, 0.0, 1.0, true);
  detail::check_range(op, "b2", b2, 0.0, 1.0, true);
  detail::check_non_negative(op, "eps", eps);
  detail::check_non_negative(op, "eps_root", eps_root);
  detail::check_non_negative(op, "initial_accumulator_value", initial_accumulator_value);
  GradientTransformation t;
  t.name = op;
  t.init = [initial_accumulator_value](const Tree& params) {
    return Tree::dict({{"count", detail::zero_count(params)},
                       {"mu", tree_full_like(params, initial_accumulator_value)},
                       {"nu", tree_full_like(params, initial_accumulator_value)}});
  };
  t.update = [=](const Tree& grads, const Tree& state, const Tree&) -> std::pair<Tree, Tree> {
    check_update(op, state, grads, {"count", "mu", "nu"}, {"mu", "nu"});
    Tree g = tree_values(grads);
    Tree mu = detail::ema(g, tree_values(state["mu"]), b1, 1);
    // Yogi moves v towards g^2 by a step of (1 - b2) g^2 in the direction of the difference.
    Tree nu = tree_map(
        [b2](const Value& gi, const Value& v) {
          Value g2 = square(gi);
          return v - (1.0 - b2) * sign(v - g2) * g2;
        },
        g, tree_values(state["nu"]));
    Value count = detail::increment(detail::count_of(op, state));
    return {adam_direction(mu, nu, b1, b2, eps, eps_root, count),
            Tree::dict({{"count", Tree(count)}, {"mu", mu}, {"nu", nu}})};
  };
  return t;
}

}  // namespace drx::optim
