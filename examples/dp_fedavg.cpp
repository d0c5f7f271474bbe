// DP-FedAvg: Poisson-sampled clients, clipped updates, Gaussian noise on the
// sum, a fixed denominator; epsilon from the RDP accountant. Runs on a mesh of
// 4 devices and checks the result is bitwise that of one (each client draws
// its participation from its own stream), and that the loss falls.
#include <cstdio>

#include "dp_fedavg_lib.h"

int main() {
  // A program of its own: drx may keep OpenBLAS on one thread and split products itself.
  drx::set_blas_thread_control(true);
  dpfedavg::Config c;
  algos::Data d = algos::make_data(c.data);
  auto round = drx::jit(dpfedavg::round_program(c), drx::Mesh({{"clients", 4}}));
  auto on_one = drx::jit(dpfedavg::round_program(c));
  auto loss = drx::jit(algos::loss_program(c.data.clients));
  drx::Array w(drx::f64, {c.data.dim});
  const double start = loss(w, d.x, d.y, d.mask).item<double>();
  std::printf("DP-FedAvg: %lld clients, q = %g, clip %g, noise multiplier %g\n",
              static_cast<long long>(c.data.clients), c.q, c.clip, c.noise);
  std::printf("%5s  %12s  %10s\n%5d  %12.6f  %10s\n", "round", "loss", "epsilon", 0, start, "0");
  bool bitwise = true;
  double last = start;
  for (int r = 0; r < c.rounds; ++r) {
    const drx::Array key = dpfedavg::round_key(c, r);
    drx::Array next = round(w, key, d.x, d.y, d.mask);
    bitwise = bitwise && next.bitwise_equal(on_one(w, key, d.x, d.y, d.mask));
    w = next;
    last = loss(w, d.x, d.y, d.mask).item<double>();
    std::printf("%5d  %12.6f  %10.4g\n", r + 1, last, dpfedavg::epsilon(c, r + 1));
  }
  std::printf("(epsilon at delta = %g); 4 devices vs 1: %s\n", c.delta,
              bitwise ? "bitwise equal" : "DIFFERENT");
  if (!bitwise || !(last < 0.5 * start)) {
    std::printf("FAILED: %s\n", bitwise ? "the loss did not fall below half its start"
                                        : "the mesh changed the result");
    return 1;
  }
}
