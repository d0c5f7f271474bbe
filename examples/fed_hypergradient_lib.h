#pragma once
// Federated hypergradient descent on the server learning rate of FedAvg.
// Shared by examples/fed_hypergradient.cpp and tests/examples_test.cpp so that
// the test checks exactly the computation the example runs.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "drx/drx.h"

namespace fedhg {

struct Config {
  int64_t clients = 8;
  int64_t examples = 16;  // per client
  int64_t dim = 5;
  int local_steps = 3;      // K local SGD steps per round
  double client_lr = 0.05;  // fixed: the hyperparameter tuned here is the server's
  double eta0 = 0.3;        // initial server learning rate
  double beta = 0.5;        // hyper learning rate
  double eta_min = 0.0, eta_max = 4.0;
  double client_shift = 0.3;  // spread of the client-specific true weights
  double noise = 0.05;
  uint32_t seed = 7;
};

// Client data, placed at "clients" by the programs below: x f64[clients,
// examples, dim], y f64[clients, examples].
struct Data {
  drx::Array x, y;
};

// Heterogeneous linear regression: client c has true weights w* + shift_c, so no
// single w fits all clients and the averaged local updates disagree.
inline Data make_data(const Config& c) {
  std::mt19937 rng(c.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> w_true(static_cast<size_t>(c.dim));
  for (double& v : w_true) v = normal(rng);
  drx::Array x(drx::f64, {c.clients, c.examples, c.dim});
  drx::Array y(drx::f64, {c.clients, c.examples});
  double* xp = x.data<double>();
  double* yp = y.data<double>();
  for (int64_t k = 0; k < c.clients; ++k) {
    std::vector<double> wk = w_true;
    for (double& v : wk) v += c.client_shift * normal(rng);
    for (int64_t i = 0; i < c.examples; ++i) {
      double dot = 0;
      for (int64_t j = 0; j < c.dim; ++j) {
        double v = normal(rng);
        xp[(k * c.examples + i) * c.dim + j] = v;
        dot += v * wk[static_cast<size_t>(j)];
      }
      yp[k * c.examples + i] = dot + c.noise * normal(rng);
    }
  }
  return {x, y};
}

// One client's mean squared error; w f64[dim], x f64[examples, dim], y f64[examples].
inline drx::Value client_loss(drx::Value w, drx::Value x, drx::Value y) {
  return drx::mean(drx::square(drx::matmul(x, w) - y));
}

// Inside a program: the FedAvg round. Clients start from the broadcast server
// weights, take K SGD steps, and send back delta = w - w_local (a pseudo-
// gradient); the server steps w - eta * mean(delta).
inline drx::Value fedavg_round(const Config& c, drx::Value w, drx::Value eta, drx::Value x,
                               drx::Value y) {
  const int steps = c.local_steps;
  const double lr = c.client_lr;
  drx::Value deltas = drx::map_fn(
      [steps, lr](drx::Value w0, drx::Value xi, drx::Value yi) {
        auto g = drx::grad(client_loss, 0);
        // K local steps as one loop in the program (traced once, differentiated as a scan).
        drx::Value wi = drx::fori_loop(
                            0, steps,
                            [&](const drx::Value&, const drx::Tree& w) {
                              return drx::Tree(w.value() - lr * g(w.value(), xi, yi));
                            },
                            drx::Tree(w0))
                            .value();
        return w0 - wi;
      },
      drx::broadcast(w), x, y);
  return w - eta * drx::reduce_mean(deltas);
}

// Inside a program: the training loss averaged over clients.
inline drx::Value average_loss(drx::Value w, drx::Value x, drx::Value y) {
  return drx::reduce_mean(drx::map_fn(client_loss, drx::broadcast(w), x, y));
}

// Arguments of every program: (w, eta, x, y); w and eta on the server.
inline std::vector<std::string> in_placements() { return {"", "", "clients", "clients"}; }

// w_{t+1} = round(w_t, eta).
inline auto round_program(const Config& c) {
  return drx::program(
      {{"clients", c.clients}},
      [c](drx::Value w, drx::Value eta, drx::Value x, drx::Value y) {
        return fedavg_round(c, w, eta, x, y);
      },
      in_placements());
}

// The hyper-objective L(eta): average training loss after one round at eta.
inline auto hyper_objective(const Config& c) {
  return drx::program(
      {{"clients", c.clients}},
      [c](drx::Value w, drx::Value eta, drx::Value x, drx::Value y) {
        return average_loss(fedavg_round(c, w, eta, x, y), x, y);
      },
      in_placements());
}

// The average training loss at w; arguments (w, x, y).
inline auto loss_program(const Config& c) {
  return drx::program(
      {{"clients", c.clients}},
      [](drx::Value w, drx::Value x, drx::Value y) { return average_loss(w, x, y); },
      {"", "clients", "clients"});
}

struct Step {
  int round;
  double eta;        // the server learning rate this round used
  double loss;       // average training loss after the round
  double hypergrad;  // dL/deta at this round's eta
};

// Hypergradient descent: each outer iteration evaluates L(eta) and dL/deta at
// the current w, advances w by one round at that eta (so `loss` is the loss of
// the new w), then moves eta against the hypergradient, clipped.
class Trainer {
 public:
  explicit Trainer(const Config& c)
      : c_(c),
        data_(make_data(c)),
        w_(drx::Array(drx::f64, {c.dim})),
        eta_(c.eta0),
        value_and_hypergrad_(drx::jit(drx::value_and_grad(hyper_objective(c), 1))),
        round_(drx::jit(round_program(c))),
        loss_(drx::jit(loss_program(c))) {}

  double loss() const { return loss_(w_, data_.x, data_.y).item<double>(); }
  double eta() const { return eta_; }
  const drx::Array& w() const { return w_; }
  const Data& data() const { return data_; }

  Step step() {
    drx::Array eta = drx::Array::scalar(eta_);
    auto [value, hypergrad] = value_and_hypergrad_(w_, eta, data_.x, data_.y);
    Step s{++round_index_, eta_, value.item<double>(), hypergrad.item<double>()};
    w_ = round_(w_, eta, data_.x, data_.y);
    eta_ = std::clamp(eta_ - c_.beta * s.hypergrad, c_.eta_min, c_.eta_max);
    return s;
  }

 private:
  using Fn4 = drx::Value(drx::Value, drx::Value, drx::Value, drx::Value);
  Config c_;
  Data data_;
  drx::Array w_;
  double eta_;
  drx::Jitted<std::pair<drx::Value, drx::Value>(drx::Value, drx::Value, drx::Value, drx::Value)>
      value_and_hypergrad_;
  drx::Jitted<Fn4> round_;
  drx::Jitted<drx::Value(drx::Value, drx::Value, drx::Value)> loss_;
  int round_index_ = 0;
};

}  // namespace fedhg
