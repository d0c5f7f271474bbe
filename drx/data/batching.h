#pragma once
// Fixed-shape batches for a cohort of clients of different sizes, exact through masking.
//
// Every client in a cohort gets the same [steps, batch_size] grid of example indices, so one
// program (map_fn over clients, a loop over steps) runs the whole cohort. Grid slots that do
// not hold a real example have index 0 (a valid row, so gathers stay in range) and mask 0.
// A masked mean loss, sum(mask * loss) / max(sum(mask), 1) per step, then equals the plain
// mean over that step's real examples, and a step whose mask is all zero has zero gradient.
//
// Step semantics (per client k with n_k examples, batch size B):
//   - the client walks its own data in epochs; each epoch is a fresh permutation of its
//     examples, seeded by (seed, round, client id), so a client's batches do not depend on
//     which other clients are in the cohort;
//   - an epoch is ceil(n_k / B) steps: full batches, then one partial batch for the remainder
//     (masked, never filled from the next epoch), so every epoch uses each example exactly once;
//   - step s is batch s % ceil(n_k / B) of epoch s / ceil(n_k / B); the client runs all `steps`
//     steps, cycling through further epochs, unless max_epochs > 0 stops it after that many
//     epochs, after which its steps are fully masked;
//   - an empty client has every step fully masked.
// For FedAvg's "E local epochs" use max_epochs = E and steps = steps_for_epochs(...): then
// every client processes each of its examples exactly E times.
//
// Note for optimisers: a fully masked step gives a zero gradient, which leaves plain SGD
// unchanged but would still move momentum; an exact optimiser skips steps with sum(mask) == 0.
#include <cstdint>
#include <vector>

#include "drx/array/array.h"
#include "drx/data/partition.h"

namespace drx::data {

struct BatchOptions {
  int64_t steps = 1;  // grid steps per client (the padded common count)
  int64_t batch_size = 32;
  int64_t max_epochs = 0;  // 0: no limit, clients cycle through their data for all steps
  uint64_t seed = 0;
  int64_t round = 0;
};

struct CohortBatches {
  Array idx;    // i32[cohort, steps, batch_size]: example indices, 0 in padded slots
  Array mask;   // f32[cohort, steps, batch_size]: 1 for a real example, 0 for padding
  Array sizes;  // f32[cohort]: each client's number of examples n_k (the FedAvg weight)
};

// Batches for clients[cohort[0]], clients[cohort[1]], ... in cohort order. Throws drx::Error for
// a client id out of range, steps < 0, batch_size < 1, max_epochs < 0, round < 0, an example
// index outside [0, 2^31), or a grid of more than 2^31 slots.
CohortBatches cohort_batches(const Partition& clients, const std::vector<int64_t>& cohort,
                             const BatchOptions& options);

// The steps that let the cohort's largest client finish `epochs` epochs:
// epochs * max_k ceil(n_k / batch_size) (0 for an empty cohort or empty clients).
int64_t steps_for_epochs(const Partition& clients, const std::vector<int64_t>& cohort,
                         int64_t epochs, int64_t batch_size);

// Evaluation batches: [0, num_examples) in order, cut into num_shards contiguous shards of
// near-equal size (e.g. one per device or map_fn slot), each shard one pass in batches of
// batch_size. Every example appears in exactly one unmasked slot; sizes are the shard sizes.
CohortBatches eval_batches(int64_t num_examples, int64_t num_shards, int64_t batch_size);

}  // namespace drx::data
