#include "drx/privacy/dp_accounting.h"

#include <string>

#include "drx/array/error.h"

namespace drx::privacy {
namespace {

double accounted_multiplier(Sampling sampling, double noise_multiplier) {
  return sampling == Sampling::fixed_size ? noise_multiplier / 2 : noise_multiplier;
}

}  // namespace

DpFedAvgAccounting::DpFedAvgAccounting(Sampling sampling, int64_t cohort, int64_t clients,
                                       double noise_multiplier)
    : sampling_(sampling), accounted_(accounted_multiplier(sampling, noise_multiplier)) {
  const RdpAccountant a(sampling, cohort, clients, accounted_);
  orders_ = a.orders();
  per_round_ = a.rdp_per_step();
}

double DpFedAvgAccounting::epsilon(int64_t rounds, double delta) const {
  if (rounds < 0)
    throw Error("DpFedAvgAccounting::epsilon: rounds = " + std::to_string(rounds) +
                " (expected >= 0)");
  std::vector<double> total = per_round_;
  for (double& v : total) v *= static_cast<double>(rounds);
  return epsilon_from_rdp(orders_, total, delta).epsilon;
}

}  // namespace drx::privacy
