// FedProx: FedAvg with a proximal term in the clients' objective and the
// server's mean weighted by the clients' example counts. Prints the clients'
// mean loss per round; fails if it does not fall.
#include <cstdio>

#include "fedprox_lib.h"

int main() {
  // A program of its own: drx may keep OpenBLAS on one thread and split products itself.
  drx::set_blas_thread_control(true);
  fedprox::Config c;
  algos::Data d = algos::make_data(c.data);
  auto round = drx::jit(fedprox::round_program(c));
  auto loss = drx::jit(algos::loss_program(c.data.clients));
  drx::Array w(drx::f64, {c.data.dim});
  const double start = loss(w, d.x, d.y, d.mask).item<double>();
  std::printf("FedProx: %lld clients, K = %d local steps, mu = %g\n",
              static_cast<long long>(c.data.clients), c.local_steps, c.mu);
  std::printf("least possible loss %.6f\n", algos::optimal_loss(d));
  std::printf("%5s  %12s\n%5d  %12.6f\n", "round", "loss", 0, start);
  double last = start;
  bool falling = true;
  for (int r = 1; r <= c.rounds; ++r) {
    w = round(w, d.x, d.y, d.mask);
    const double l = loss(w, d.x, d.y, d.mask).item<double>();
    std::printf("%5d  %12.6f\n", r, l);
    falling = falling && l < last;
    last = l;
  }
  if (!falling || !(last < 0.5 * start)) {
    std::printf("FAILED: the loss did not fall every round to below half its start\n");
    return 1;
  }
}
