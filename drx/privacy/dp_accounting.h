#pragma once
// DP-FedAvg's privacy accounting convention: which neighbouring relation, and so which noise
// multiplier, the RDP accountant is given for each way of sampling a round's cohort.
//
// The round adds Gaussian noise of std z C to the sum of the cohort's updates, each clipped to
// L2 norm C (optim::DpSpec::noise_multiplier is z).
// - Sampling::poisson: every client joins a round independently with probability
//   q = cohort / clients. Neighbours ADD OR REMOVE one client, under which the clipped sum has
//   L2 sensitivity C: the accountant's multiplier is z itself.
// - Sampling::fixed_size: exactly `cohort` of `clients` without replacement. The population size
//   is public, so neighbours REPLACE one client (the only relation the fixed-size bound of Wang,
//   Balle, Kasiviswanathan 2019 covers); swapping one clipped update for another moves the sum
//   by up to 2C, so relative to that sensitivity the noise is z / 2 and the accountant gets z / 2.
// Every round is the same mechanism, so RDP composes by multiplying one round's by the rounds.
#include <cstdint>
#include <vector>

#include "drx/privacy/accountant.h"

namespace drx::privacy {

class DpFedAvgAccounting {
 public:
  // `cohort` of `clients` per round (the expected cohort for Poisson sampling), noise std
  // noise_multiplier * clip on the clipped sum. Throws drx::Error (from RdpAccountant) for
  // arguments it refuses: a cohort outside [0, clients], a negative noise multiplier.
  DpFedAvgAccounting(Sampling sampling, int64_t cohort, int64_t clients, double noise_multiplier);

  // epsilon of (epsilon, delta)-DP after `rounds` rounds (Balle et al. 2020's conversion, the
  // best over the default orders); 0 for 0 rounds. Throws drx::Error for rounds < 0 or a delta
  // outside (0, 1).
  double epsilon(int64_t rounds, double delta) const;

  Sampling sampling() const { return sampling_; }
  // The multiplier the RDP accountant is given: z for Poisson, z / 2 for fixed-size sampling.
  double accounted_noise_multiplier() const { return accounted_; }
  const std::vector<double>& orders() const { return orders_; }
  const std::vector<double>& rdp_per_round() const { return per_round_; }

 private:
  Sampling sampling_;
  double accounted_;
  std::vector<double> orders_, per_round_;
};

}  // namespace drx::privacy
