#pragma once
// Hierarchical FedAvg (HierFAVG, Liu et al. 2020) with nested placements: the
// server sends its model to edge groups; each group runs `edge_rounds` rounds
// of FedAvg among its own clients (K local gradient steps each, then the
// group's mean); the server averages the groups' models. Clients are placed
// inside groups, so the whole round is one program whose derivative is again
// a two-level MapReduce program.
//
// Shared by examples/hierarchical_fedavg.cpp and
// tests/nested_placements_test.cpp, so that the test checks exactly the
// computation the example runs.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "drx/drx.h"

namespace hfl {

struct Config {
  int64_t groups = 4;
  int64_t clients = 8;    // in each group
  int64_t examples = 12;  // per client
  int64_t dim = 5;
  int local_steps = 3;  // K gradient steps per client per edge round
  int edge_rounds = 2;  // FedAvg rounds inside each group per server round
  double client_lr = 0.05;
  double group_shift = 0.6;   // spread of the groups' true weights
  double client_shift = 0.2;  // spread of the clients' within a group
  double noise = 0.05;
  int rounds = 8;  // server rounds the example runs
  uint32_t seed = 5;
};

// x [groups, clients, examples, dim], y [groups, clients, examples]: placed at
// "groups.clients" by the programs below.
struct Data {
  drx::Array x, y;
};

// Heterogeneous linear regression: client (g, c) has true weights
// w* + shift_g + shift_gc, so groups disagree more than clients within a group.
inline Data make_data(const Config& c, drx::DType dtype = drx::f64) {
  std::mt19937 rng(c.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> w_true(static_cast<size_t>(c.dim));
  for (double& v : w_true) v = normal(rng);
  drx::Array x(drx::f64, {c.groups, c.clients, c.examples, c.dim});
  drx::Array y(drx::f64, {c.groups, c.clients, c.examples});
  double* xp = x.data<double>();
  double* yp = y.data<double>();
  for (int64_t g = 0; g < c.groups; ++g) {
    std::vector<double> wg = w_true;
    for (double& v : wg) v += c.group_shift * normal(rng);
    for (int64_t k = 0; k < c.clients; ++k) {
      std::vector<double> wk = wg;
      for (double& v : wk) v += c.client_shift * normal(rng);
      const int64_t client = g * c.clients + k;
      for (int64_t i = 0; i < c.examples; ++i) {
        double dot = 0;
        for (int64_t j = 0; j < c.dim; ++j) {
          double v = normal(rng);
          xp[(client * c.examples + i) * c.dim + j] = v;
          dot += v * wk[static_cast<size_t>(j)];
        }
        yp[client * c.examples + i] = dot + c.noise * normal(rng);
      }
    }
  }
  return {drx::convert_array(x, dtype), drx::convert_array(y, dtype)};
}

inline drx::Placements placements(const Config& c) {
  return {{"groups", c.groups}, {"clients", c.clients}};
}

// ---- the computation, per level ------------------------------------------------
inline drx::Value client_loss(drx::Value w, drx::Value x, drx::Value y) {
  return drx::mean(drx::square(drx::matmul(x, w) - y));
}

// One client: K full-batch gradient steps from w with learning rate lr.
inline drx::Value local_sgd(const Config& c, drx::Value w, drx::Value lr, drx::Value x,
                            drx::Value y) {
  auto step = [&](const drx::Value&, const drx::Tree& carry) {
    drx::Value v = carry.value();
    return drx::Tree(v - lr * drx::grad(client_loss)(v, x, y));
  };
  return drx::fori_loop(0, c.local_steps, step, drx::Tree(w)).value();
}

// One group, inside a map_fn over groups: its FedAvg rounds among its clients
// (x, y are placed at "clients": this group's clients).
inline drx::Value group_fedavg(const Config& c, drx::Value w, drx::Value lr, drx::Value x,
                               drx::Value y) {
  auto edge_round = [&](const drx::Value&, const drx::Tree& carry) {
    drx::Value local =
        drx::map_fn([&](drx::Value wi, drx::Value lri, drx::Value xi,
                        drx::Value yi) { return local_sgd(c, wi, lri, xi, yi); },
                    drx::broadcast(carry.value(), "clients"), drx::broadcast(lr, "clients"), x, y);
    return drx::Tree(drx::reduce_mean(local));
  };
  return drx::fori_loop(0, c.edge_rounds, edge_round, drx::Tree(w)).value();
}

// One server round: every group's FedAvg from w, then the mean of the groups.
inline drx::Value server_round(const Config& c, drx::Value w, drx::Value lr, drx::Value x,
                               drx::Value y) {
  drx::Value group_models =
      drx::map_fn([&](drx::Value wg, drx::Value lrg, drx::Value xg,
                      drx::Value yg) { return group_fedavg(c, wg, lrg, xg, yg); },
                  drx::broadcast(w, "groups"), drx::broadcast(lr, "groups"), x, y);
  return drx::reduce_mean(group_models);
}

// The mean over groups of the mean over their clients of the client loss.
inline drx::Value global_loss(drx::Value w, drx::Value x, drx::Value y) {
  drx::Value per_group = drx::map_fn(
      [](drx::Value wg, drx::Value xg, drx::Value yg) {
        return drx::reduce_mean(drx::map_fn(client_loss, drx::broadcast(wg, "clients"), xg, yg));
      },
      drx::broadcast(w, "groups"), x, y);
  return drx::reduce_mean(per_group);
}

// `rounds` server rounds from w, as one loop in the program.
inline drx::Value server_rounds(const Config& c, drx::Value w, drx::Value lr, drx::Value x,
                                drx::Value y, int rounds) {
  auto one = [&](const drx::Value&, const drx::Tree& carry) {
    return drx::Tree(server_round(c, carry.value(), lr, x, y));
  };
  return drx::fori_loop(0, rounds, one, drx::Tree(w)).value();
}

// (w f[dim], lr f[], x, y) -> (w after `rounds` server rounds, the global loss
// there, and its gradients with respect to w and to the clients' learning
// rate lr).
inline auto round_fn(const Config& c, int rounds = 1) {
  return drx::program(placements(c),
                      [c, rounds](drx::Value w, drx::Value lr, drx::Value x,
                                  drx::Value y) -> std::vector<drx::Value> {
                        auto loss_after = [&](drx::Value v, drx::Value r) {
                          return global_loss(server_rounds(c, v, r, x, y, rounds), x, y);
                        };
                        std::vector<drx::Value> grads = drx::grad(loss_after, {0, 1})(w, lr);
                        drx::Value next = server_rounds(c, w, lr, x, y, rounds);
                        return {next, global_loss(next, x, y), grads[0], grads[1]};
                      },
                      {"", "", "groups.clients", "groups.clients"});
}

inline std::vector<drx::Type> round_types(const Config& c, drx::DType dtype = drx::f64) {
  using drx::Type;
  return {Type(dtype, {c.dim}), Type(dtype, {}),
          Type(dtype, {c.groups, c.clients, c.examples, c.dim}),
          Type(dtype, {c.groups, c.clients, c.examples})};
}

inline drx::Program round_program(const Config& c, drx::DType dtype = drx::f64, int rounds = 1) {
  return drx::trace(round_fn(c, rounds), round_types(c, dtype));
}

}  // namespace hfl
