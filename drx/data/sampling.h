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

// Poisson sampling (DP-FedAvg's): every client joins `round` independently with probability q,
// a function of (seed, round) only; ascending ids. Throws drx::Error unless 0 <= q <= 1.
std::vector<int64_t> sample_poisson_cohort(int64_t num_clients, double q, uint64_t seed,
                                           int64_t round);

// The padded cohort size that a Poisson cohort of mean m = q N exceeds with probability
// below 1e-12 (Chernoff: m + 8 sqrt(m) + 30), at most N.
int64_t poisson_cohort_capacity(int64_t num_clients, double q);

}  // namespace drx::data
