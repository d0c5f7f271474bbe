// DP-FedAvg's accounting convention (drx/privacy/dp_accounting.h): Poisson sampling accounted
// with add/remove neighbours at the noise multiplier z, fixed-size sampling with replace-one
// neighbours at z / 2.
#include "drx/privacy/dp_accounting.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "drx/array/error.h"

namespace drx::privacy {
namespace {

// Balle et al. 2020's conversion written out: the least over the orders of
// rdp + log((a - 1) / a) - (log delta + log a) / (a - 1), clamped at 0.
double balle_epsilon(const std::vector<double>& orders, const std::vector<double>& rdp,
                     double delta) {
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    best =
        std::min(best, rdp[i] + std::log((a - 1) / a) - (std::log(delta) + std::log(a)) / (a - 1));
  }
  return std::max(best, 0.0);
}

// Without sampling (the whole population every round) both mechanisms are the plain Gaussian,
// whose RDP is a / (2 sigma^2) with sigma the multiplier relative to the relation's sensitivity:
// z for add/remove, z / 2 for replace-one.
TEST(DpFedAvgAccounting, FullCohortIsTheGaussianAtTheRelationsSensitivity) {
  const double z = 1.5;
  const DpFedAvgAccounting poisson(Sampling::poisson, 40, 40, z);
  const DpFedAvgAccounting fixed(Sampling::fixed_size, 40, 40, z);
  EXPECT_EQ(poisson.accounted_noise_multiplier(), 1.5);
  EXPECT_EQ(fixed.accounted_noise_multiplier(), 0.75);
  ASSERT_EQ(poisson.orders().size(), 72u);
  for (size_t i = 0; i < poisson.orders().size(); ++i) {
    const double a = poisson.orders()[i];
    EXPECT_NEAR(poisson.rdp_per_round()[i], a / (2 * 1.5 * 1.5), 1e-9 * a) << "order " << a;
    EXPECT_NEAR(fixed.rdp_per_round()[i], a / (2 * 0.75 * 0.75), 1e-9 * a) << "order " << a;
  }
  // After 10 rounds: 10 a / (2 sigma^2), converted by hand.
  std::vector<double> p(poisson.orders().size()), f(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const double a = poisson.orders()[i];
    p[i] = 10 * a / (2 * 1.5 * 1.5);
    f[i] = 10 * a / (2 * 0.75 * 0.75);
  }
  EXPECT_NEAR(poisson.epsilon(10, 1e-5), balle_epsilon(poisson.orders(), p, 1e-5), 1e-9);
  EXPECT_NEAR(fixed.epsilon(10, 1e-5), balle_epsilon(fixed.orders(), f, 1e-5), 1e-9);
  // Halving the multiplier quadruples the RDP: fixed-size sampling costs more epsilon.
  EXPECT_GT(fixed.epsilon(10, 1e-5), poisson.epsilon(10, 1e-5));
}

// A sampled cohort: the convention is the accountant used directly with the relation's
// multiplier, rounds composing by multiplication.
TEST(DpFedAvgAccounting, SampledCohortIsTheAccountantAtTheConventionsMultiplier) {
  for (const auto& [sampling, multiplier] :
       {std::pair{Sampling::poisson, 1.1}, std::pair{Sampling::fixed_size, 1.1 / 2}}) {
    const DpFedAvgAccounting acc(sampling, 10, 1000, 1.1);
    RdpAccountant direct(sampling, 10, 1000, multiplier);
    EXPECT_EQ(acc.rdp_per_round(), direct.rdp_per_step());
    direct.step(250);
    EXPECT_NEAR(acc.epsilon(250, 1e-6), direct.epsilon(1e-6).epsilon, 1e-12);
    EXPECT_EQ(acc.epsilon(0, 1e-6), 0.0);
    // More rounds never cost less.
    EXPECT_LT(acc.epsilon(10, 1e-6), acc.epsilon(100, 1e-6));
  }
}

// Today's PrivacyLedger of tools/fedavg/train.cpp, copied: the library is bitwise it.
double ledger_epsilon(bool fixed, int64_t cohort, int64_t clients, double z, int64_t rounds,
                      double delta) {
  RdpAccountant a(fixed ? Sampling::fixed_size : Sampling::poisson, cohort, clients,
                  fixed ? z / 2 : z);
  std::vector<double> total = a.rdp_per_step();
  for (double& v : total) v *= static_cast<double>(rounds);
  return epsilon_from_rdp(a.orders(), total, delta).epsilon;
}

TEST(DpFedAvgAccounting, BitwiseTheToolsLedger) {
  for (bool fixed : {false, true})
    for (int64_t rounds : {1, 7, 100, 3000}) {
      const DpFedAvgAccounting acc(fixed ? Sampling::fixed_size : Sampling::poisson, 20, 500, 0.9);
      EXPECT_EQ(acc.epsilon(rounds, 1e-5), ledger_epsilon(fixed, 20, 500, 0.9, rounds, 1e-5))
          << (fixed ? "fixed" : "poisson") << " after " << rounds << " rounds";
    }
}

TEST(DpFedAvgAccounting, RefusesWhatTheAccountantRefuses) {
  EXPECT_THROW(DpFedAvgAccounting(Sampling::fixed_size, 11, 10, 1.0), Error);
  const DpFedAvgAccounting acc(Sampling::poisson, 5, 100, 1.0);
  EXPECT_THROW(acc.epsilon(-1, 1e-5), Error);
  EXPECT_THROW(acc.epsilon(5, 0.0), Error);
}

}  // namespace
}  // namespace drx::privacy
