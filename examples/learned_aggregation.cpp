// Learned aggregation weights: per-client logits on the server, trained by the
// hypergradient of a validation loss through a whole FedAvg round. Two of the
// eight clients have corrupted labels. Prints the validation loss with learned
// and with uniform weights, and the weights; fails unless the learned weights
// give the lower validation loss and the corrupted clients the lowest weights.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "learned_aggregation_lib.h"

int main() {
  // A program of its own: drx may keep OpenBLAS on one thread and split products itself.
  drx::set_blas_thread_control(true);
  learned_agg::Config c;
  algos::Data d = algos::make_data(c.data);
  auto value_and_hypergrad = drx::jit(drx::value_and_grad(learned_agg::hyper_objective(c), 1));
  auto objective = drx::jit(learned_agg::hyper_objective(c));
  auto round = drx::jit(learned_agg::round_program(c));
  drx::Array w(drx::f64, {c.data.dim}), w_uniform = w;
  // Arrays share their buffers when copied: each step makes new logits.
  drx::Array logits(drx::f64, {c.data.clients}), zeros(drx::f64, {c.data.clients});
  std::printf("learned aggregation: %lld clients, the first %lld corrupted\n",
              static_cast<long long>(c.data.clients), static_cast<long long>(c.data.corrupted));
  std::printf("%5s  %13s  %13s  %s\n", "round", "val (learned)", "val (uniform)", "weights");
  double learned = 0, uniform = 0;
  for (int r = 1; r <= c.rounds; ++r) {
    auto [value, hypergrad] = value_and_hypergrad(w, logits, d.x, d.y, d.mask, d.x_val, d.y_val);
    w = round(w, logits, d.x, d.y, d.mask, d.x_val, d.y_val);
    learned = value.item<double>();
    uniform = objective(w_uniform, zeros, d.x, d.y, d.mask, d.x_val, d.y_val).item<double>();
    w_uniform = round(w_uniform, zeros, d.x, d.y, d.mask, d.x_val, d.y_val);
    std::vector<double> next = logits.to_vector<double>();
    for (size_t k = 0; k < next.size(); ++k) next[k] -= c.hyper_lr * hypergrad.data<double>()[k];
    logits = drx::Array::from_vector(next, logits.shape());
    std::printf("%5d  %13.6f  %13.6f ", r, learned, uniform);
    for (double a : learned_agg::weights_of(logits)) std::printf(" %.3f", a);
    std::printf("\n");
  }
  std::vector<double> a = learned_agg::weights_of(logits);
  const auto corrupted_end = a.begin() + c.data.corrupted;
  const double worst_corrupted = *std::max_element(a.begin(), corrupted_end);
  const double least_clean = *std::min_element(corrupted_end, a.end());
  if (!(learned < uniform) || !(worst_corrupted < least_clean)) {
    std::printf(
        "FAILED: learned weights should lower the validation loss and the corrupted "
        "clients' weights\n");
    return 1;
  }
}
