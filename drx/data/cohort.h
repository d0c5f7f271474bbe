#pragma once
// A round's cohort in the fixed number of slots a compiled round program has: Poisson sampling
// (DP-FedAvg's) draws a random number of clients, so the program is compiled for a padded
// capacity and the slots past the sampled clients are padding that must not count.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "drx/array/array.h"

namespace drx::data {

enum class CohortSampling {
  fixed_size,  // exactly `cohort` distinct clients (sample_cohort)
  poisson,     // each client with probability cohort / clients (sample_poisson_cohort)
};

// The slots of the round program: `cohort` for fixed-size sampling, the padded capacity
// poisson_cohort_capacity(clients, cohort / clients) for Poisson sampling.
int64_t cohort_slots(CohortSampling sampling, int64_t clients, int64_t cohort);

struct PaddedCohort {
  // cohort_slots() client ids: the sampled ones (ascending), then padding that repeats the first
  // sampled client (client 0 when none was sampled), so that every slot names a real client.
  std::vector<int64_t> slots;
  int64_t real = 0;  // how many leading slots hold sampled clients
};

// `round`'s cohort from the sampler of `sampling` (seed and round as sample_cohort /
// sample_poisson_cohort take them), padded to cohort_slots(sampling, clients, cohort).
PaddedCohort sample_padded_cohort(CohortSampling sampling, int64_t clients, int64_t cohort,
                                  uint64_t seed, int64_t round);

// `sampled` padded to `slots` as sample_padded_cohort pads. Throws drx::Error naming round + 1
// (the round as a run counts it) when more clients were sampled than there are slots (for
// poisson_cohort_capacity a probability below 1e-12 per round).
PaddedCohort pad_cohort(std::vector<int64_t> sampled, int64_t slots, int64_t round);

// DP-FedAvg's participation for the slots [first, end) of a cohort whose first `real` slots
// are sampled clients: weights f32[end - first], 1 for a sampled client and 0 for padding (the
// clients are weighed uniformly), and every padding slot's row of `mask` (f32[end - first, ...],
// 1 for a real example) set to 0, so a padding slot trains on nothing. Throws drx::Error for a
// mask that is not f32 with end - first rows, or 0 <= first <= end not holding.
Array dp_participation(int64_t real, int64_t first, int64_t end, Array& mask);

}  // namespace drx::data
