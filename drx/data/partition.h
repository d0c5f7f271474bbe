#pragma once
// Federated partitions: which examples of a dataset each simulated client holds.
#include <cstdint>
#include <vector>

#include "drx/array/array.h"

namespace drx::data {

// partition[k] = the example indices client k holds, ascending. Every example of the
// dataset is held by exactly one client; clients may differ in size, and may be empty
// (Dirichlet with small alpha) unless asked otherwise.
using Partition = std::vector<std::vector<int64_t>>;

// IID: a seeded shuffle of [0, num_examples) cut into num_clients pieces. With size_sigma == 0
// the sizes differ by at most one; with size_sigma > 0 they are drawn proportional to
// exp(size_sigma * N(0, 1)) (log-normal, as real federated populations), each at least 1.
Partition partition_iid(int64_t num_examples, int64_t num_clients, uint64_t seed,
                        double size_sigma = 0.0);

// Label skew (Hsu et al. 2019): for each class independently, proportions p ~ Dir(alpha, ...,
// alpha) over the clients, and that class's examples, shuffled, are cut in those proportions.
// Small alpha: each client sees few classes; large alpha: close to IID. `labels` is i32[N] or
// i64[N] with non-negative values. Draws are repeated (from the same seeded stream) until
// every client holds at least min_client_size examples; throws drx::Error if 1000 draws fail.
Partition partition_dirichlet(const Array& labels, int64_t num_clients, double alpha, uint64_t seed,
                              int64_t min_client_size = 0);

// Pathological non-IID (McMahan et al. 2017): examples sorted by label (random order within a
// class), cut into num_clients * shards_per_client contiguous shards of near-equal size, and
// each client dealt shards_per_client random shards. Each client then sees at most about
// shards_per_client classes.
Partition partition_shards(const Array& labels, int64_t num_clients, int64_t shards_per_client,
                           uint64_t seed);

}  // namespace drx::data
