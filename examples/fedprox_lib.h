#pragma once
// FedProx (Li et al. 2020, "Federated Optimization in Heterogeneous Networks"):
// FedAvg whose clients minimise their loss plus the proximal term
// (mu/2) ||w - w_server||^2, which keeps heterogeneous clients' local models
// near the server's. The server takes the mean of the clients' models weighted
// by their example counts. Shared by examples/fedprox.cpp and
// tests/algorithms_test.cpp.
#include "algorithms_common.h"

namespace fedprox {

struct Config {
  algos::DataConfig data{.min_examples = 4};  // clients hold 4..16 examples
  int local_steps = 5;                        // K local SGD steps per round
  double lr = 0.05;
  double mu = 0.1;  // proximal strength; 0 is FedAvg
  int rounds = 10;
};

// Inside a program: one FedProx round from the server's w.
inline drx::Value round(const Config& c, drx::Value w, drx::Value x, drx::Value y,
                        drx::Value mask) {
  auto prox_loss = [mu = c.mu](drx::Value v, drx::Value w0, drx::Value xi, drx::Value yi,
                               drx::Value mi) {
    return algos::client_loss(v, xi, yi, mi) + 0.5 * mu * drx::sum(drx::square(v - w0));
  };
  auto client = [&](drx::Value w0, drx::Value xi, drx::Value yi, drx::Value mi) {
    auto step = [&](const drx::Value&, const drx::Tree& v) {
      return drx::Tree(v.value() - c.lr * drx::grad(prox_loss)(v.value(), w0, xi, yi, mi));
    };
    return drx::fori_loop(0, c.local_steps, step, drx::Tree(w0)).value();
  };
  drx::Value local = drx::map_fn(client, drx::broadcast(w), x, y, mask);
  drx::Value counts = drx::map_fn([](drx::Value mi) { return drx::sum(mi); }, mask);
  return drx::reduce_weighted_mean(local, counts);
}

// (w, x, y, mask) -> the server's w after one round.
inline auto round_program(const Config& c) {
  return drx::program({{"clients", c.data.clients}},
                      [c](drx::Value w, drx::Value x, drx::Value y, drx::Value mask) {
                        return round(c, w, x, y, mask);
                      },
                      {"", "clients", "clients", "clients"});
}

}  // namespace fedprox
