// DiLoCo: workers run H inner AdamW steps (their AdamW states stay with them,
// placed at "clients"); the server applies Nesterov-momentum SGD to the outer
// pseudo-gradient w - mean(w_i). Prints the workers' mean loss per outer step
// and its gap to the least possible loss; fails unless the gap falls below a
// hundredth of its start.
#include <cstdio>

#include "diloco_lib.h"

int main() {
  // A program of its own: drx may keep OpenBLAS on one thread and split products itself.
  drx::set_blas_thread_control(true);
  diloco::Config c;
  algos::Data d = algos::make_data(c.data);
  auto step = drx::jit(diloco::outer_step_program(c));
  auto loss = drx::jit(algos::loss_program(c.data.clients));
  drx::Array w(drx::f64, {c.data.dim});
  drx::Tree outer_state = diloco::outer_optimizer(c).init(w);
  drx::Tree inner_states = drx::jit(diloco::inner_init_program(c))(w);
  const double optimum = algos::optimal_loss(d);
  const double start = loss(w, d.x, d.y, d.mask).item<double>() - optimum;
  std::printf("DiLoCo: %lld workers, H = %d inner AdamW steps, outer Nesterov lr %g momentum %g\n",
              static_cast<long long>(c.data.clients), c.inner_steps, c.outer_lr, c.outer_momentum);
  std::printf("%5s  %12s  %10s\n%5d  %12.6f  %10.3e\n", "outer", "loss", "gap", 0, start + optimum,
              start);
  double last = start;
  for (int r = 1; r <= c.rounds; ++r) {
    drx::Tree next = step(w, outer_state, inner_states, d.x, d.y, d.mask);
    w = next[0].array(), outer_state = next[1], inner_states = next[2];
    last = loss(w, d.x, d.y, d.mask).item<double>() - optimum;
    std::printf("%5d  %12.6f  %10.3e\n", r, last + optimum, last);
  }
  if (!(last < 0.01 * start)) {
    std::printf("FAILED: the gap to the least loss did not fall below a hundredth of its start\n");
    return 1;
  }
}
