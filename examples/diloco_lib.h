#pragma once
// DiLoCo (Douillard et al. 2023, "DiLoCo: Distributed Low-Communication
// Training of Language Models"): each worker runs H inner steps of AdamW from
// the server's w, keeping its own AdamW state from round to round (placed at
// "clients"); the outer pseudo-gradient is w - mean_i(w_i), and the server
// applies SGD with Nesterov momentum to it:
//   inner: H times  w_i, s_i = adamw(grad f_i(w_i), s_i)
//   outer: g = w - mean_i w_i;  b = g + mu b;  w -= outer_lr * (g + mu b)
// Shared by examples/diloco.cpp and tests/algorithms_test.cpp.
#include "algorithms_common.h"

namespace diloco {

struct Config {
  // Workers with nearly i.i.d. shards, as in the paper.
  algos::DataConfig data{.clients = 4, .examples = 32, .min_examples = 32, .client_shift = 0.1};
  int inner_steps = 10;  // H
  double inner_lr = 0.02, b1 = 0.9, b2 = 0.999, eps = 1e-8, weight_decay = 1e-4;
  // The paper's outer Nesterov SGD has lr 0.7 and momentum 0.9 (for language
  // models); momentum 0.5 suits this small quadratic problem better.
  double outer_lr = 0.7, outer_momentum = 0.5;
  int rounds = 12;
};

inline drx::optim::GradientTransformation inner_optimizer(const Config& c) {
  return drx::optim::adamw(c.inner_lr, c.b1, c.b2, c.eps, c.weight_decay);
}
inline drx::optim::GradientTransformation outer_optimizer(const Config& c) {
  return drx::optim::sgd(c.outer_lr, c.outer_momentum, /*nesterov=*/true);
}

// Inside a program: one outer step. w f64[dim] and outer_state on the server,
// inner_states (the workers' AdamW states) at "clients". Returns
// [w, outer_state, inner_states] after the step.
inline drx::Tree outer_step(const Config& c, drx::Value w, const drx::Tree& outer_state,
                            const drx::Tree& inner_states, drx::Value x, drx::Value y,
                            drx::Value mask) {
  auto worker = [&c](drx::Value w0, drx::Tree s0, drx::Value xi, drx::Value yi, drx::Value mi) {
    drx::optim::GradientTransformation inner = inner_optimizer(c);
    auto step = [&](const drx::Value&, const drx::Tree& ps) {  // ps = [w_i, s_i]
      drx::Tree g = drx::grad(algos::client_loss)(ps[0].value(), xi, yi, mi);
      auto [updates, s] = inner.update(g, ps[1], ps[0]);
      return drx::Tree::list({drx::optim::apply_updates(ps[0], updates), s});
    };
    return drx::fori_loop(0, c.inner_steps, step, drx::Tree::list({w0, s0}));
  };
  drx::Tree out = drx::map_fn(worker, drx::broadcast(w), inner_states, x, y, mask);
  drx::Value pseudo_grad = w - drx::reduce_mean(out[0].value());
  auto [updates, next_outer] = outer_optimizer(c).update(pseudo_grad, outer_state, w);
  return drx::Tree::list({drx::optim::apply_updates(w, updates), next_outer, out[1]});
}

// (w, outer_state, inner_states, x, y, mask) -> [w, outer_state, inner_states].
inline auto outer_step_program(const Config& c) {
  return drx::program(
      {{"clients", c.data.clients}},
      [c](drx::Value w, drx::Tree outer_state, drx::Tree inner_states, drx::Value x, drx::Value y,
          drx::Value mask) { return outer_step(c, w, outer_state, inner_states, x, y, mask); },
      {"", "", "clients", "clients", "clients", "clients"});
}

// (w) -> every worker's fresh AdamW state, placed at "clients".
inline auto inner_init_program(const Config& c) {
  return drx::program({{"clients", c.data.clients}},
                      [c](drx::Value w) { return drx::broadcast(inner_optimizer(c).init(w)); },
                      {""});
}

}  // namespace diloco
