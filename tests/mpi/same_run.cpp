// drx_same_run A B: exits 0 when the checkpoints A and B hold the same run,
// bitwise: configuration, rounds, params, server state and every metrics
// column but elapsed_s (the wall clock). Else prints the first difference
// and exits 1. The mpirun tests compare `mpirun -np P drx fedavg` with one
// process this way.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "drx/data/checkpoint.h"

namespace {

using drx::data::Checkpoint;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

std::string first_difference(const Checkpoint& a, const Checkpoint& b) {
  if (a.config != b.config) return "the configurations differ";
  if (a.round != b.round)
    return "rounds " + std::to_string(a.round) + " and " + std::to_string(b.round);
  for (const auto& [name, x, y] :
       {std::tuple{"params", &a.params, &b.params}, std::tuple{"state", &a.state, &b.state}}) {
    const std::vector<drx::Tree> xs = drx::tree_leaves(*x), ys = drx::tree_leaves(*y);
    if (x->structure() != y->structure() || xs.size() != ys.size())
      return std::string(name) + ": different trees";
    for (size_t i = 0; i < xs.size(); ++i)
      if (!xs[i].array().bitwise_equal(ys[i].array()))
        return std::string(name) + ": leaf " + std::to_string(i) + " differs";
  }
  if (a.history.size() != b.history.size()) return "metrics: different row counts";
  for (size_t i = 0; i < a.history.size(); ++i) {
    const auto &r = a.history[i], &s = b.history[i];
    if (r.round != s.round || !same_bits(r.train_loss, s.train_loss) ||
        !same_bits(r.test_loss, s.test_loss) || !same_bits(r.test_accuracy, s.test_accuracy))
      return "metrics row " + std::to_string(i + 1) + " differs";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: drx_same_run CHECKPOINT_A CHECKPOINT_B\n");
    return 2;
  }
  try {
    const std::string d =
        first_difference(drx::data::read_checkpoint(argv[1]), drx::data::read_checkpoint(argv[2]));
    if (!d.empty()) {
      std::fprintf(stderr, "drx_same_run: %s and %s: %s\n", argv[1], argv[2], d.c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "drx_same_run: %s\n", e.what());
    return 2;
  }
  std::printf("same run, bitwise: %s and %s\n", argv[1], argv[2]);
  return 0;
}
