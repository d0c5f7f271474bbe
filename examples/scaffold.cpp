// SCAFFOLD: a cohort of 8 of 16 clients per round, with control variates held
// by the server per client (read with drx::take, written with drx::scatter).
// Prints the population's mean loss per round and its gap to the least possible
// loss, which SCAFFOLD closes despite the clients' heterogeneity; fails if the
// gap does not shrink a thousandfold.
#include <cstdio>
#include <random>

#include "scaffold_lib.h"

int main() {
  // A program of its own: drx may keep OpenBLAS on one thread and split products itself.
  drx::set_blas_thread_control(true);
  scaffold::Config c;
  algos::Data d = algos::make_data(c.data);
  auto round = drx::jit(scaffold::round_program(c));
  auto loss = drx::jit(algos::loss_program(c.data.clients));
  drx::Array w(drx::f64, {c.data.dim}), cv(drx::f64, {c.data.dim});
  drx::Array c_all(drx::f64, {c.data.clients, c.data.dim});
  std::mt19937 rng(c.cohort_seed);
  const double optimum = algos::optimal_loss(d);
  const double start = loss(w, d.x, d.y, d.mask).item<double>() - optimum;
  std::printf("SCAFFOLD: cohorts of %lld of %lld clients, K = %d local steps\n",
              static_cast<long long>(c.cohort), static_cast<long long>(c.data.clients),
              c.local_steps);
  std::printf("%5s  %12s  %10s  %s\n%5d  %12.6f  %10.3e\n", "round", "loss", "gap", "cohort", 0,
              start + optimum, start);
  double last = start;
  for (int r = 1; r <= c.rounds; ++r) {
    drx::Array cohort = algos::sample_cohort(rng, c.data.clients, c.cohort);
    std::vector<drx::Array> next = round(w, cv, c_all, cohort, d.x, d.y, d.mask);
    w = next[0], cv = next[1], c_all = next[2];
    last = loss(w, d.x, d.y, d.mask).item<double>() - optimum;
    std::printf("%5d  %12.6f  %10.3e  %s\n", r, last + optimum, last, cohort.str().c_str());
  }
  if (!(last < 1e-3 * start)) {
    std::printf("FAILED: the gap to the least loss did not shrink a thousandfold\n");
    return 1;
  }
}
