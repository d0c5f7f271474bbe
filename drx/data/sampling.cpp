#include "drx/data/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include "drx/array/error.h"

namespace drx::data {
namespace {

// SplitMix64's finaliser: a bijection that scatters nearby inputs (round 3 vs round 4).
uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t derive_seed(uint64_t seed, uint64_t stream, uint64_t substream) {
  return mix(mix(mix(seed) ^ stream) ^ substream);
}

std::vector<int64_t> sample_cohort(int64_t num_clients, int64_t cohort_size, uint64_t seed,
                                   int64_t round) {
  if (num_clients < 0 || cohort_size < 0 || cohort_size > num_clients)
    throw Error("sample_cohort: cannot choose " + std::to_string(cohort_size) + " of " +
                std::to_string(num_clients) + " clients (need 0 <= cohort <= clients)");
  if (round < 0) throw Error("sample_cohort: round " + std::to_string(round) + " is negative");
  std::mt19937_64 rng(derive_seed(seed, static_cast<uint64_t>(round), 0xc0401ULL));
  std::vector<int64_t> ids(static_cast<size_t>(num_clients));
  std::iota(ids.begin(), ids.end(), 0);
  // Partial Fisher-Yates: the first cohort_size slots are a uniform sample without replacement.
  for (int64_t i = 0; i < cohort_size; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, num_clients - 1);
    std::swap(ids[static_cast<size_t>(i)], ids[static_cast<size_t>(pick(rng))]);
  }
  ids.resize(static_cast<size_t>(cohort_size));
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<int64_t> sample_poisson_cohort(int64_t num_clients, double q, uint64_t seed,
                                           int64_t round) {
  if (num_clients < 0 || !(q >= 0 && q <= 1))
    throw Error("sample_poisson_cohort: sampling rate q = " + std::to_string(q) + " of " +
                std::to_string(num_clients) + " clients (need 0 <= q <= 1, clients >= 0)");
  if (round < 0)
    throw Error("sample_poisson_cohort: round " + std::to_string(round) + " is negative");
  std::mt19937_64 rng(derive_seed(seed, static_cast<uint64_t>(round), 0x9015504ULL));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int64_t> ids;
  for (int64_t c = 0; c < num_clients; ++c)
    if (u(rng) < q) ids.push_back(c);
  return ids;
}

int64_t poisson_cohort_capacity(int64_t num_clients, double q) {
  const double m = q * static_cast<double>(num_clients);
  return std::min<int64_t>(num_clients, static_cast<int64_t>(std::ceil(m + 8 * std::sqrt(m) + 30)));
}

}  // namespace drx::data
