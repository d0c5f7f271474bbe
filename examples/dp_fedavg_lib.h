#pragma once
// DP-FedAvg (McMahan et al. 2018, "Learning Differentially Private Recurrent
// Language Models"): every client of the population joins a round
// independently with probability q (Poisson sampling, drawn by the client from
// its own stream: fold_in(key, client_index())), runs K local SGD steps,
// clips its update to L2 norm C; the server adds N(0, (z C)^2) to the sum of
// the clipped updates of the participants and divides by the EXPECTED cohort
// size q N. drx::privacy::RdpAccountant turns (q, z, rounds) into epsilon.
// Shared by examples/dp_fedavg.cpp and tests/algorithms_test.cpp.
#include "algorithms_common.h"

namespace dpfedavg {

struct Config {
  algos::DataConfig data{.clients = 32, .min_examples = 8};
  double q = 0.25;     // sampling rate: the expected cohort is q N = 8
  double clip = 0.5;   // C
  double noise = 1.0;  // z
  int local_steps = 5;
  double lr = 0.05;
  int rounds = 15;
  double delta = 1e-3;  // of the reported (epsilon, delta); below 1 / population (32)
  int64_t seed = 0;     // of the round keys
};

// Inside a program: one DP-FedAvg round from the server's w with this round's key.
inline drx::Value round(const Config& c, drx::Value w, drx::Value key, drx::Value x, drx::Value y,
                        drx::Value mask) {
  namespace rnd = drx::random;
  auto [sample_key, noise_key] = rnd::split2(key);
  auto client = [&](drx::Value w0, drx::Value k, drx::Value xi, drx::Value yi, drx::Value mi) {
    drx::Value joins = rnd::bernoulli(rnd::fold_in(k, drx::client_index()), c.q, {});
    auto step = [&](const drx::Value&, const drx::Tree& v) {
      return drx::Tree(v.value() - c.lr * drx::grad(algos::client_loss)(v.value(), xi, yi, mi));
    };
    drx::Value v = drx::fori_loop(0, c.local_steps, step, drx::Tree(w0)).value();
    drx::Value clipped =
        drx::privacy::clip_by_l2_norm(drx::Tree(v - w0), drx::fill({}, c.clip, drx::f64))
            .update.value();
    return drx::astype(joins, drx::f64) * clipped;
  };
  drx::Value sum = drx::reduce_sum(
      drx::map_fn(client, drx::broadcast(w), drx::broadcast(sample_key), x, y, mask));
  const double expected = c.q * static_cast<double>(c.data.clients);
  drx::Tree mean = drx::privacy::noisy_mean(drx::Tree(sum), noise_key, c.noise,
                                            drx::fill({}, c.clip, drx::f64), expected);
  return w + mean.value();
}

// (w, key, x, y, mask) -> the server's w after one round.
inline auto round_program(const Config& c) {
  return drx::program({{"clients", c.data.clients}},
                      [c](drx::Value w, drx::Value key, drx::Value x, drx::Value y,
                          drx::Value mask) { return round(c, w, key, x, y, mask); },
                      {"", "", "clients", "clients", "clients"});
}

// The key of round r (0-based).
inline drx::Array round_key(const Config& c, int r) {
  return drx::random::fold_in(drx::random::key(c.seed), r);
}

// epsilon after `rounds` rounds (Poisson sampling, add/remove-one clients).
inline double epsilon(const Config& c, int rounds) {
  drx::privacy::RdpAccountant a(drx::privacy::Sampling::poisson,
                                static_cast<int64_t>(c.q * static_cast<double>(c.data.clients)),
                                c.data.clients, c.noise);
  a.step(rounds);
  return a.epsilon(c.delta).epsilon;
}

}  // namespace dpfedavg
