#include "drx/data/cohort.h"

#include <algorithm>

#include "drx/array/error.h"
#include "drx/data/sampling.h"

namespace drx::data {
namespace {

double sampling_rate(int64_t clients, int64_t cohort) {
  return static_cast<double>(cohort) / static_cast<double>(clients);
}

}  // namespace

int64_t cohort_slots(CohortSampling sampling, int64_t clients, int64_t cohort) {
  return sampling == CohortSampling::poisson
             ? poisson_cohort_capacity(clients, sampling_rate(clients, cohort))
             : cohort;
}

PaddedCohort sample_padded_cohort(CohortSampling sampling, int64_t clients, int64_t cohort,
                                  uint64_t seed, int64_t round) {
  std::vector<int64_t> sampled =
      sampling == CohortSampling::poisson
          ? sample_poisson_cohort(clients, sampling_rate(clients, cohort), seed, round)
          : sample_cohort(clients, cohort, seed, round);
  return pad_cohort(std::move(sampled), cohort_slots(sampling, clients, cohort), round);
}

PaddedCohort pad_cohort(std::vector<int64_t> sampled, int64_t slots, int64_t round) {
  const auto real = static_cast<int64_t>(sampled.size());
  // The tool's words (`drx fedavg` prints them as they are).
  if (real > slots)
    throw Error("fedavg: round " + std::to_string(round + 1) + " sampled " + std::to_string(real) +
                " clients, more than the " + std::to_string(slots) +
                " padded slots (a probability below 1e-12 per round)");
  sampled.resize(static_cast<size_t>(slots), sampled.empty() ? 0 : sampled[0]);
  return PaddedCohort{std::move(sampled), real};
}

Array dp_participation(int64_t real, int64_t first, int64_t end, Array& mask) {
  if (first < 0 || end < first)
    throw Error("dp_participation: slots [" + std::to_string(first) + ", " + std::to_string(end) +
                ") are not a range (need 0 <= first <= end)");
  const int64_t rows = end - first;
  if (mask.dtype() != f32 || mask.ndim() < 1 || mask.shape()[0] != rows)
    throw Error("dp_participation: the mask is " + std::string(dtype_name(mask.dtype())) +
                shape_str(mask.shape()) + ", expected f32 with " + std::to_string(rows) +
                " rows (one per slot of [" + std::to_string(first) + ", " + std::to_string(end) +
                "))");
  Array weights(f32, {rows});
  const int64_t per_slot = mask.size() / std::max<int64_t>(rows, 1);
  for (int64_t k = 0; k < rows; ++k) {
    const bool sampled = first + k < real;
    weights.data<float>()[k] = sampled ? 1.0f : 0.0f;
    if (!sampled) std::fill_n(mask.data<float>() + k * per_slot, per_slot, 0.0f);
  }
  return weights;
}

}  // namespace drx::data
