// Federated hypergradient descent: tunes FedAvg's server learning rate eta by
// differentiating the training loss after a round with respect to eta, through
// the broadcast, the clients' local SGD steps and the server average.
#include <chrono>
#include <cstdio>

#include "fed_hypergradient_lib.h"

int main() {
  // A program of its own: drx may keep OpenBLAS on one thread and split products itself.
  drx::set_blas_thread_control(true);
  const auto start = std::chrono::steady_clock::now();
  fedhg::Config config;
  fedhg::Trainer trainer(config);
  const int rounds = 10;
  std::printf("%d clients x %lld examples of dimension %lld, K = %d local SGD steps\n",
              static_cast<int>(config.clients), static_cast<long long>(config.examples),
              static_cast<long long>(config.dim), config.local_steps);
  std::printf("%5s  %8s  %12s  %12s\n", "round", "eta", "loss", "dL/deta");
  std::printf("%5d  %8s  %12.6f  %12s\n", 0, "", trainer.loss(), "");
  for (int r = 0; r < rounds; ++r) {
    fedhg::Step s = trainer.step();
    std::printf("%5d  %8.4f  %12.6f  %12.6f\n", s.round, s.eta, s.loss, s.hypergrad);
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("final eta %.4f, %.1f ms\n", trainer.eta(), ms);
}
