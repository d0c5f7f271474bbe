// Hierarchical FedAvg with nested placements: 8 clients inside each of 4 edge
// groups. Each server round, every group runs its own FedAvg rounds among its
// clients, and the server averages the groups. The program also returns the
// gradient of the loss after the round with respect to the server model and
// to the clients' learning rate: federated AD through both levels.
//
// The groups are split across 4 devices of a mesh; the example checks that the
// results are bitwise those of one device, and exits non-zero otherwise.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "hierarchical_fedavg_lib.h"

int main() {
  // A program of its own: drx may keep OpenBLAS on one thread and split products itself.
  drx::set_blas_thread_control(true);
  const auto start = std::chrono::steady_clock::now();
  hfl::Config config;
  hfl::Data data = hfl::make_data(config);
  auto on_groups = drx::jit(hfl::round_fn(config), drx::Mesh({{"groups", 4}}));
  auto on_one = drx::jit(hfl::round_fn(config), drx::Mesh({{"groups", 1}}));
  std::printf(
      "%lld groups x %lld clients x %lld examples of dimension %lld; %d edge rounds of "
      "%d local steps per server round\n",
      static_cast<long long>(config.groups), static_cast<long long>(config.clients),
      static_cast<long long>(config.examples), static_cast<long long>(config.dim),
      config.edge_rounds, config.local_steps);
  std::printf("%5s  %12s  %12s  %12s\n", "round", "loss", "|dL/dw|", "dL/dlr");
  drx::Array w = drx::zeros({config.dim}, drx::f64);
  const drx::Array lr = drx::Array::scalar(config.client_lr);
  double first_loss = 0, last_loss = 0;
  bool bitwise = true;
  for (int r = 1; r <= config.rounds; ++r) {
    std::vector<drx::Array> out = on_groups(w, lr, data.x, data.y);
    std::vector<drx::Array> single = on_one(w, lr, data.x, data.y);
    for (size_t k = 0; k < out.size(); ++k) bitwise = bitwise && out[k].bitwise_equal(single[k]);
    double norm = 0;
    for (int64_t j = 0; j < config.dim; ++j) norm += std::pow(out[2].element_as_double(j), 2);
    last_loss = out[1].item<double>();
    if (r == 1) first_loss = last_loss;
    std::printf("%5d  %12.6f  %12.6f  %12.6f\n", r, last_loss, std::sqrt(norm),
                out[3].item<double>());
    w = out[0];
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("4 devices vs 1: %s; %.1f ms\n", bitwise ? "bitwise equal" : "DIFFERENT", ms);
  return bitwise && last_loss < first_loss ? 0 : 1;
}
