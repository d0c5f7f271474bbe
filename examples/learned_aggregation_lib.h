#pragma once
// Learned aggregation weights by hypergradient: the server keeps one logit per
// client; a FedAvg round aggregates the clients' models with the weights
// softmax(logits) over the clients (drx::placement_softmax), and the logits are
// trained by drx::grad of a server-side validation loss after the round —
// federated AD through the broadcast, the clients' local steps and the
// weighted aggregate. Clients whose labels are corrupted pull the model away
// from the validation data, so their weights fall.
// Shared by examples/learned_aggregation.cpp and tests/algorithms_test.cpp.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "algorithms_common.h"

namespace learned_agg {

struct Config {
  algos::DataConfig data{.clients = 8, .client_shift = 0.2, .corrupted = 2};
  int local_steps = 5;
  double lr = 0.05;
  double hyper_lr = 2.0;  // gradient step on the logits
  int rounds = 12;
};

// Inside a program: one round from w with aggregation logits f64[clients] (on
// the server); returns the new server model sum_i softmax(logits)_i w_i.
inline drx::Value round(const Config& c, drx::Value w, drx::Value logits, drx::Value x,
                        drx::Value y, drx::Value mask) {
  auto client = [&c](drx::Value w0, drx::Value xi, drx::Value yi, drx::Value mi) {
    auto step = [&](const drx::Value&, const drx::Tree& v) {
      return drx::Tree(v.value() - c.lr * drx::grad(algos::client_loss)(v.value(), xi, yi, mi));
    };
    return drx::fori_loop(0, c.local_steps, step, drx::Tree(w0)).value();
  };
  drx::Value local = drx::map_fn(client, drx::broadcast(w), x, y, mask);
  drx::Value weights = drx::placement_softmax(drx::place(logits, "clients"));
  return drx::reduce_sum(
      drx::map_fn([](drx::Value a, drx::Value wi) { return a * wi; }, weights, local));
}

inline drx::Value validation_loss(drx::Value w, drx::Value x_val, drx::Value y_val) {
  return drx::mean(drx::square(drx::matmul(x_val, w) - y_val));
}

// Arguments of both programs: (w, logits, x, y, mask, x_val, y_val).
inline std::vector<std::string> in_placements() {
  return {"", "", "clients", "clients", "clients", "", ""};
}

// The hyper-objective: the validation loss after one round.
// drx::value_and_grad(hyper_objective(c), 1) is its hypergradient in the logits.
inline auto hyper_objective(const Config& c) {
  return drx::program(
      {{"clients", c.data.clients}},
      [c](drx::Value w, drx::Value logits, drx::Value x, drx::Value y, drx::Value mask,
          drx::Value x_val, drx::Value y_val) {
        return validation_loss(round(c, w, logits, x, y, mask), x_val, y_val);
      },
      in_placements());
}

// The server model after one round.
inline auto round_program(const Config& c) {
  return drx::program(
      {{"clients", c.data.clients}},
      [c](drx::Value w, drx::Value logits, drx::Value x, drx::Value y, drx::Value mask, drx::Value,
          drx::Value) { return round(c, w, logits, x, y, mask); },
      in_placements());
}

// Softmax on the host, in f64: the aggregation weights of `logits`.
inline std::vector<double> weights_of(const drx::Array& logits) {
  std::vector<double> w(static_cast<size_t>(logits.size()));
  const double* l = logits.data<double>();
  const double m = *std::max_element(l, l + logits.size());
  double z = 0;
  for (size_t i = 0; i < w.size(); ++i) z += (w[i] = std::exp(l[i] - m));
  for (double& v : w) v /= z;
  return w;
}

}  // namespace learned_agg
