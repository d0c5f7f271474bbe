#pragma once
// Seeded randomness for federated rounds: derived seeds and per-round cohort sampling.
#include <cstdint>
#include <vector>

namespace drx::data {

// A seed for one stream (e.g. one round, one client) that depends on every argument, so that
// streams never share state and any one can be regenerated alone (resume, one client).
uint64_t derive_seed(uint64_t seed, uint64_t stream, uint64_t substream = 0);

// The clients taking part in `round`: `cohort_size` distinct ids from [0, num_clients), in
// ascending order, a function of (seed, round) only. Throws drx::Error unless
// 0 <= cohort_size <= num_clients and round >= 0.
std::vector<int64_t> sample_cohort(int64_t num_clients, int64_t cohort_size, uint64_t seed,
                                   int64_t round);

}  // namespace drx::data
