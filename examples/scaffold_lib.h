#pragma once
// SCAFFOLD (Karimireddy et al. 2020, "Stochastic Controlled Averaging for
// Federated Learning"), option II control variates. The server keeps, besides
// its model w, a control variate c and one variate c_i per client of the whole
// population (c_all f64[population, dim], indexed by client). Each round a
// cohort of clients (i32 indices) reads its rows with drx::take, runs K local
// steps on grad - c_i + c, and the server writes the updated rows back with
// drx::scatter:
//   w_i  = w;  K times: w_i -= lr * (grad f_i(w_i) - c_i + c)
//   c_i+ = c_i - c + (w - w_i) / (K lr)
//   w   += server_lr * mean_i (w_i - w);   c += (cohort / population) mean_i (c_i+ - c_i)
// Shared by examples/scaffold.cpp and tests/algorithms_test.cpp.
#include <vector>

#include "algorithms_common.h"

namespace scaffold {

struct Config {
  algos::DataConfig data{.clients = 16, .client_shift = 0.6};  // the population
  int64_t cohort = 8;                                          // clients per round
  int local_steps = 5;
  double lr = 0.05;
  double server_lr = 1.0;
  int rounds = 12;
  uint32_t cohort_seed = 3;
};

// Inside a program: one round. w, c f64[dim]; c_all f64[population, dim];
// cohort i32[cohort]; x, y, mask: the whole population's data, on the server.
// Returns {w, c, c_all} after the round.
inline std::vector<drx::Value> round(const Config& cfg, drx::Value w, drx::Value c,
                                     drx::Value c_all, drx::Value cohort, drx::Value x,
                                     drx::Value y, drx::Value mask) {
  auto rows = [&](drx::Value v) { return drx::place(drx::take(v, cohort), "clients"); };
  auto client = [K = cfg.local_steps, lr = cfg.lr](drx::Value w0, drx::Value c0, drx::Value ci,
                                                   drx::Value xi, drx::Value yi,
                                                   drx::Value mi) -> std::vector<drx::Value> {
    auto step = [&](const drx::Value&, const drx::Tree& v) {
      drx::Value g = drx::grad(algos::client_loss)(v.value(), xi, yi, mi);
      return drx::Tree(v.value() - lr * (g - ci + c0));
    };
    drx::Value wi = drx::fori_loop(0, K, step, drx::Tree(w0)).value();
    return {wi - w0, ci - c0 + (w0 - wi) / (K * lr)};  // model delta, c_i+
  };
  drx::Value ci = rows(c_all);
  std::vector<drx::Value> out =
      drx::map_fn(client, drx::broadcast(w), drx::broadcast(c), ci, rows(x), rows(y), rows(mask));
  const double fraction = static_cast<double>(cfg.cohort) / static_cast<double>(cfg.data.clients);
  return {w + cfg.server_lr * drx::reduce_mean(out[0]),
          c + fraction * drx::reduce_mean(out[1] - ci),
          drx::scatter(c_all, cohort, drx::place(out[1], ""))};
}

// (w, c, c_all, cohort, x, y, mask) -> {w, c, c_all}.
inline auto round_program(const Config& cfg) {
  return drx::program(
      {{"clients", cfg.cohort}},
      [cfg](drx::Value w, drx::Value c, drx::Value c_all, drx::Value cohort, drx::Value x,
            drx::Value y, drx::Value mask) { return round(cfg, w, c, c_all, cohort, x, y, mask); },
      {"", "", "", "", "", "", ""});
}

}  // namespace scaffold
