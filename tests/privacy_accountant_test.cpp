// The RDP accountant (drx/privacy/accountant.h) against published values (TF Privacy's
// tutorial table and test suites, each cited where it is used) and against references written
// here independently of the library: the binomial sum evaluated naively, the defining integral
// evaluated by quadrature, and Wang et al.'s bounds written term by term.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "drx/privacy/accountant.h"
#include "test_util.h"

namespace {

using drx::privacy::default_rdp_orders;
using drx::privacy::epsilon_from_rdp;
using drx::privacy::EpsilonAtOrder;
using drx::privacy::FixedSizeBound;
using drx::privacy::rdp_fixed_size_gaussian;
using drx::privacy::rdp_poisson_gaussian;
using drx::privacy::RdpAccountant;
using drx::privacy::RdpConversion;
using drx::privacy::Sampling;
using drx::testing::expect_error;

constexpr double kInf = std::numeric_limits<double>::infinity();

// |got - want| <= rel * |want|, with a message naming both.
::testing::AssertionResult RelNear(double got, double want, double rel) {
  if (std::abs(got - want) <= rel * std::abs(want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << got << ", want " << want << " (relative error "
         << std::abs(got - want) / std::abs(want) << " > " << rel << ")";
}

std::vector<double> scaled(std::vector<double> v, double factor) {
  for (double& x : v) x *= factor;
  return v;
}

// The orders of TF Privacy's 2019 MNIST tutorial (tutorials/mnist_dpsgd_tutorial.py,
// compute_epsilon): 1.1, 1.2, ..., 10.9, then 12..63.
std::vector<double> tutorial_orders() {
  std::vector<double> orders;
  for (int x = 1; x < 100; ++x) orders.push_back(1 + x / 10.0);
  for (int a = 12; a < 64; ++a) orders.push_back(a);
  return orders;
}

// ---- published values ---------------------------------------------------------------------

// https://github.com/tensorflow/privacy/blob/master/tutorials/README.md, "Select Parameters"
// table (and "Expected Output"): DP-SGD on MNIST, batch 256 of 60000 (q = 256/60000), 234 steps
// an epoch (60000 // 256), delta = 1e-5, epsilon from RDP with the classic Mironov 2017
// conversion over tutorial_orders() (that tutorial's compute_epsilon / get_privacy_spent).
TEST(PrivacyAccountantPublished, TfPrivacyMnistTutorialTable) {
  struct Row {
    double noise;
    int epochs;
    double epsilon;  // as published, 2 decimals
  };
  const Row rows[] = {
      {1.12, 60, 2.92},  // table row 1 (the default setting); also "after 60 epochs ... 2.92"
      {0.6, 30, 9.74},   // table row 2
      {1.2, 10, 1.20},   // table row 3
      {1.12, 1, 1.00},   // "Expected Output": "after 1 epochs ... epsilon is: 1.00"
      {1.12, 2, 1.04},   // "Expected Output": "after 2 epochs ... epsilon is: 1.04"
  };
  for (const Row& r : rows) {
    RdpAccountant acct(Sampling::poisson, 256, 60000, r.noise, tutorial_orders());
    acct.step(int64_t{r.epochs} * 234);
    EpsilonAtOrder e = acct.epsilon(1e-5, RdpConversion::mironov2017);
    EXPECT_TRUE(RelNear(e.epsilon, r.epsilon, 0.01))
        << "noise " << r.noise << ", " << r.epochs << " epochs";
  }
}

// tensorflow/privacy, tensorflow_privacy/privacy/analysis/compute_dp_sgd_privacy_test.py,
// test_compute_dp_sgd_privacy (Test0..Test2): q = batch/n, ceil(epochs n / batch) steps, the
// orders of compute_dp_sgd_privacy_lib.py (= default_rdp_orders()), the Balle et al. 2020
// conversion; the expected optimal orders are published too.
TEST(PrivacyAccountantPublished, TfPrivacyComputeDpSgdPrivacy) {
  struct Row {
    int64_t n, batch;
    double noise, epochs, delta, epsilon, order;
  };
  const Row rows[] = {
      {60000, 150, 1.3, 15, 1e-5, 0.7242234026109595, 19.0},
      {100000, 100, 1.0, 30, 1e-7, 1.4154988495444842, 13.0},
      {100000000, 1024, 0.1, 10, 1e-7, 5907982.3113978775, 1.25},
  };
  for (const Row& r : rows) {
    RdpAccountant acct(Sampling::poisson, r.batch, r.n, r.noise);
    acct.step(static_cast<int64_t>(
        std::ceil(r.epochs * static_cast<double>(r.n) / static_cast<double>(r.batch))));
    EpsilonAtOrder e = acct.epsilon(r.delta);
    EXPECT_TRUE(RelNear(e.epsilon, r.epsilon, 0.01)) << "n " << r.n;
    EXPECT_EQ(e.order, r.order) << "n " << r.n;
  }
}

// tensorflow/privacy, tensorflow_privacy/privacy/analysis/rdp_privacy_accountant_test.py,
// test_compute_rdp_poisson_sampled_gaussian: q = 0.01, noise 2.5, 50 steps. (dp_accounting's
// copy of this test now expects 6.7058e-4 at order 1.5: its fractional series adds every term's
// absolute value, an upper bound; the signed series, 6.5007e-4, is the exact value, which
// PoissonFractionalOrdersMatchQuadrature checks independently.)
TEST(PrivacyAccountantPublished, TfPrivacyPoissonRdpValues) {
  const std::vector<double> orders = {1.5, 2.5, 5, 50, 100, kInf};
  const std::vector<double> want = {6.5007e-04, 1.0854e-03, 2.1808e-03, 2.3846e-02, 1.6742e+02};
  std::vector<double> got = scaled(rdp_poisson_gaussian(0.01, 2.5, orders), 50);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(RelNear(got[i], want[i], 1e-3)) << "order " << orders[i];
  EXPECT_EQ(got[5], kInf);
}

// tensorflow/privacy, tensorflow_privacy/privacy/analysis/rdp_accountant_test.py,
// test_compute_rdp_scalar: compute_rdp(q=0.1, noise 2, 10 steps, order 5) = 0.07737.
TEST(PrivacyAccountantPublished, TfPrivacyPoissonScalar) {
  EXPECT_TRUE(RelNear(rdp_poisson_gaussian(0.1, 2, {5})[0] * 10, 0.07737, 1e-4));
}

// tensorflow/privacy, tensorflow_privacy/privacy/analysis/rdp_accountant_test.py (commit
// 09270afe), test_compute_rdp_sequence_without_replacement: sampling without replacement with
// q = 0.01, noise 2.5, 50 steps (Wang et al. 2019's bound, Theorem 27). q = 600/60000 here.
TEST(PrivacyAccountantPublished, TfPrivacyFixedSizeRdpValues) {
  const std::vector<double> orders = {1.001, 1.5, 2.5, 5, 50, 100, 256, 512, 1024, kInf};
  const std::vector<double> want = {0.003470,   0.003470,   0.004638,   0.0087633, 0.098474,
                                    167.766388, 792.838516, 1817.35871, 3865.55029};
  std::vector<double> got = scaled(rdp_fixed_size_gaussian(600, 60000, 2.5, orders), 50);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(RelNear(got[i], want[i], 0.01)) << "order " << orders[i];
  EXPECT_EQ(got[9], kInf);
}

// tensorflow/privacy rdp_accountant_test.py, test_check_composition: two mechanisms composed
// (q 1e-4, noise 0.4, 40000 steps, then q 0.1, noise 2, 100 steps), delta 1e-5, "the old RDP ->
// approx DP conversion" (Mironov 2017): eps = 8.509656 at order 2.5.
TEST(PrivacyAccountantPublished, TfPrivacyCompositionMironovConversion) {
  const std::vector<double> orders = {1.25, 1.5, 1.75, 2.,  2.5, 3.,  4.,  5.,  6.,  7.,  8.,
                                      10.,  12., 14.,  16., 20., 24., 28., 32., 64., 256.};
  std::vector<double> a = scaled(rdp_poisson_gaussian(1e-4, 0.4, orders), 40000);
  std::vector<double> b = scaled(rdp_poisson_gaussian(0.1, 2, orders), 100);
  std::vector<double> total(orders.size());
  for (size_t i = 0; i < orders.size(); ++i) total[i] = a[i] + b[i];
  EpsilonAtOrder e = epsilon_from_rdp(orders, total, 1e-5, RdpConversion::mironov2017);
  EXPECT_TRUE(RelNear(e.epsilon, 8.509656, 1e-5));
  EXPECT_EQ(e.order, 2.5);
  // The improved conversion is never worse (TF Privacy's test asserts <= 8.509656 for it).
  EXPECT_LE(epsilon_from_rdp(orders, total, 1e-5).epsilon, 8.509656);
}

// google/differential-privacy, python/dp_accounting/.../rdp_privacy_accountant_test.py:
// test_compute_epsilon_delta_pure_dp (constant RDP 1.1 on orders 2..32, delta 1e-5 -> eps
// 1.32783806176 at order 32) and test_compute_epsilon_delta_gaussian (no sampling, noise
// 4.530877117, orders 1.001..99.999 -> exactly (1, 1e-6)-DP), both with the improved conversion.
TEST(PrivacyAccountantPublished, DpAccountingConversion) {
  std::vector<double> orders;
  for (int a = 2; a <= 32; ++a) orders.push_back(a);
  EpsilonAtOrder pure = epsilon_from_rdp(orders, std::vector<double>(orders.size(), 1.1), 1e-5);
  EXPECT_NEAR(pure.epsilon, 1.32783806176, 1e-9);
  EXPECT_EQ(pure.order, 32);

  std::vector<double> fine;
  for (int i = 1000; i < 100000; ++i) fine.push_back(0.001 * i);
  fine.erase(fine.begin());  // order 1.0 is not an RDP order here
  EpsilonAtOrder g = epsilon_from_rdp(fine, rdp_poisson_gaussian(1, 4.530877117, fine), 1e-6);
  EXPECT_NEAR(g.epsilon, 1.0, 1e-6);
}

// ---- independent numeric checks -------------------------------------------------------------

// A_alpha = sum_k C(alpha,k) (1-q)^(alpha-k) q^k exp((k^2-k)/(2 z^2)), summed directly.
long double naive_binomial_a(double q, double z, int alpha) {
  long double sum = 0, binom = 1;
  for (int k = 0; k <= alpha; ++k) {
    sum += binom * std::pow(1.0L - q, alpha - k) * std::pow(static_cast<long double>(q), k) *
           std::exp(static_cast<long double>(k * k - k) / (2.0L * z * z));
    binom = binom * (alpha - k) / (k + 1);
  }
  return sum;
}

// A_alpha = E_{x ~ N(0, z^2)}[((1-q) + q exp((2x-1)/(2 z^2)))^alpha] by composite Simpson on a
// range covering the integrand's mass (its peak moves to about x = alpha for large tilts).
long double quadrature_a(double q, double z, double alpha) {
  const long double lo = -14.0L * z, hi = alpha + 14.0L * z + 2;
  const int n = 20000;  // even
  const long double h = (hi - lo) / n, pi = 3.14159265358979323846264338327950288L;
  auto f = [&](long double x) {
    const long double density = std::exp(-x * x / (2.0L * z * z)) / (z * std::sqrt(2 * pi));
    const long double ratio = (1 - q) + q * std::exp((2 * x - 1) / (2.0L * z * z));
    return density * std::pow(ratio, static_cast<long double>(alpha));
  };
  long double sum = f(lo) + f(hi);
  for (int i = 1; i < n; ++i) sum += f(lo + i * h) * (i % 2 ? 4 : 2);
  return sum * h / 3;
}

TEST(PrivacyAccountant, NoSamplingIsTheGaussiansRdp) {
  const std::vector<double>& orders = default_rdp_orders();
  for (double z : {0.5, 1.0, 3.7}) {
    std::vector<double> poisson = rdp_poisson_gaussian(1.0, z, orders);
    std::vector<double> fixed = rdp_fixed_size_gaussian(100, 100, z, orders);
    for (size_t i = 0; i < orders.size(); ++i) {
      EXPECT_EQ(poisson[i], orders[i] / (2 * z * z));
      EXPECT_EQ(fixed[i], orders[i] / (2 * z * z));
    }
  }
}

TEST(PrivacyAccountant, NoSamplesAndNoNoise) {
  std::vector<double> orders = {1.5, 2, 7.25, 64};
  for (double v : rdp_poisson_gaussian(0, 1.0, orders)) EXPECT_EQ(v, 0);
  for (double v : rdp_poisson_gaussian(0, 0.0, orders)) EXPECT_EQ(v, 0);
  for (double v : rdp_fixed_size_gaussian(0, 10, 1.0, orders)) EXPECT_EQ(v, 0);
  for (double v : rdp_poisson_gaussian(0.1, 0.0, orders)) EXPECT_EQ(v, kInf);
  for (double v : rdp_fixed_size_gaussian(1, 10, 0.0, orders)) EXPECT_EQ(v, kInf);
  RdpAccountant silent(Sampling::poisson, 0, 1000, 1.0);
  silent.step(1000);
  EXPECT_EQ(silent.epsilon(1e-5).epsilon, 0);
  RdpAccountant open(Sampling::fixed_size, 10, 1000, 0.0);
  open.step();
  EXPECT_EQ(open.epsilon(1e-5).epsilon, kInf);
}

TEST(PrivacyAccountant, PoissonIntegerOrdersMatchTheBinomialSum) {
  for (double q : {0.001, 0.01, 0.1, 0.5, 0.9})
    for (double z : {0.7, 1.0, 3.0})
      for (int alpha = 2; alpha <= 12; ++alpha) {
        const double want =
            static_cast<double>(std::log(naive_binomial_a(q, z, alpha))) / (alpha - 1);
        const double got = rdp_poisson_gaussian(q, z, {static_cast<double>(alpha)})[0];
        EXPECT_TRUE(RelNear(got, want, 1e-9)) << "q " << q << " z " << z << " alpha " << alpha;
      }
}

TEST(PrivacyAccountant, PoissonFractionalOrdersMatchQuadrature) {
  struct Case {
    double q, z, alpha;
  };
  const Case cases[] = {{0.01, 2.5, 1.5}, {0.01, 2.5, 2.5},  {0.1, 1.0, 1.25}, {0.1, 1.0, 3.5},
                        {0.5, 1.5, 2.75}, {0.9, 2.0, 1.75},  {0.2, 0.8, 4.5},  {0.05, 5.0, 7.3},
                        {0.3, 1.0, 2.0},  {0.001, 1.0, 6.5}, {0.7, 3.0, 10.5}};
  for (const Case& c : cases) {
    const double want =
        static_cast<double>(std::log(quadrature_a(c.q, c.z, c.alpha))) / (c.alpha - 1);
    const double got = rdp_poisson_gaussian(c.q, c.z, {c.alpha})[0];
    EXPECT_TRUE(RelNear(got, want, 1e-6)) << "q " << c.q << " z " << c.z << " alpha " << c.alpha;
  }
}

// Rényi divergence is nondecreasing in the order, so a fractional order lies between its
// integer neighbours, and the whole default list is monotone; the values stay finite for
// extreme but valid arguments.
TEST(PrivacyAccountant, PoissonMonotoneInOrder) {
  const std::vector<double>& orders = default_rdp_orders();
  for (double q : {1e-6, 1e-3, 0.05, 0.5, 0.99})
    for (double z : {0.3, 0.8, 1.1, 4.0, 50.0}) {
      std::vector<double> rdp = rdp_poisson_gaussian(q, z, orders);
      for (size_t i = 0; i < rdp.size(); ++i) {
        EXPECT_TRUE(std::isfinite(rdp[i]) && rdp[i] >= 0) << q << " " << z << " " << orders[i];
        if (i > 0) {
          // Fractional orders carry an absolute slack of 1e-13 / (alpha - 1) <= 4e-13 (the
          // series' rounding bound), visible only where the RDP itself is ~1e-12.
          EXPECT_LE(rdp[i - 1], rdp[i] * (1 + 1e-9) + 4e-13) << q << " " << z << " " << orders[i];
        }
      }
    }
  std::vector<double> r = rdp_poisson_gaussian(0.05, 1.0, {2, 2.5, 3});
  EXPECT_LT(r[0], r[1]);
  EXPECT_LT(r[1], r[2]);
}

TEST(PrivacyAccountant, MonotoneInSamplingAndNoise) {
  const std::vector<double> orders = {1.5, 2, 3.5, 8, 32, 256};
  for (size_t i = 0; i < orders.size(); ++i) {
    double last = 0;
    for (double q : {1e-4, 1e-3, 0.01, 0.1, 0.5, 0.9, 1.0}) {
      double v = rdp_poisson_gaussian(q, 1.3, orders)[i];
      EXPECT_GE(v, last) << "poisson q " << q << " order " << orders[i];
      last = v;
    }
    last = 0;
    for (int64_t m : {1, 10, 100, 500, 900, 1000}) {
      double v = rdp_fixed_size_gaussian(m, 1000, 1.3, orders)[i];
      EXPECT_GE(v, last) << "fixed m " << m << " order " << orders[i];
      last = v;
    }
    last = kInf;
    for (double z : {0.3, 0.6, 1.0, 2.0, 8.0}) {
      double p = rdp_poisson_gaussian(0.02, z, orders)[i];
      double f = rdp_fixed_size_gaussian(20, 1000, z, orders)[i];
      EXPECT_LE(p, last) << "z " << z << " order " << orders[i];
      EXPECT_LE(f, rdp_fixed_size_gaussian(20, 1000, z / 2, orders)[i]);
      last = p;
    }
  }
}

// Wang et al.'s bounds written out term by term (long double, small alpha, no cancellation at
// these noise levels): Theorem 9 with eps(inf) = inf, and the Gaussian's Theorem 27.
long double d_forward(double z, int k) {  // sum_i C(k,i) (-1)^(k-i) e^{(i-1) i / (2 z^2)}
  long double sum = 0, binom = 1;
  for (int i = 0; i <= k; ++i) {
    sum += ((k - i) % 2 ? -1 : 1) * binom * std::exp((i - 1.0L) * i / (2.0L * z * z));
    binom = binom * (k - i) / (i + 1);
  }
  return sum;
}

double wang_bound(double q, double z, int alpha, bool theorem27) {
  auto eps = [&](long double a) { return a / (2.0L * z * z); };
  auto choose = [](int n, int k) {
    long double c = 1;
    for (int i = 0; i < k; ++i) c = c * (n - i) / (i + 1);
    return c;
  };
  long double sum =
      1 + q * q * choose(alpha, 2) * std::min(4 * (std::exp(eps(2)) - 1), 2 * std::exp(eps(2)));
  for (int j = 3; j <= alpha; ++j) {
    long double t = 2 * std::exp((j - 1) * eps(j));
    if (theorem27)
      t = std::min(t, 4 * std::sqrt(d_forward(z, 2 * (j / 2)) * d_forward(z, 2 * ((j + 1) / 2))));
    sum += std::pow(static_cast<long double>(q), j) * choose(alpha, j) * t;
  }
  return static_cast<double>(std::log(sum)) / (alpha - 1);
}

TEST(PrivacyAccountant, FixedSizeMatchesWangEtAlTermByTerm) {
  for (double q : {0.01, 0.1, 0.3})
    for (double z : {0.8, 1.5, 4.0})
      for (int alpha = 2; alpha <= 10; ++alpha) {
        const int64_t n = 1000, m = static_cast<int64_t>(q * n);
        const double a = alpha, gauss = a / (2 * z * z);
        const double t9 =
            rdp_fixed_size_gaussian(m, n, z, {a}, FixedSizeBound::general_theorem9)[0];
        const double t27 = rdp_fixed_size_gaussian(m, n, z, {a})[0];
        EXPECT_TRUE(RelNear(t9, std::min(gauss, wang_bound(q, z, alpha, false)), 1e-9))
            << "q " << q << " z " << z << " alpha " << alpha;
        EXPECT_TRUE(RelNear(t27, std::min(gauss, wang_bound(q, z, alpha, true)), 1e-9))
            << "q " << q << " z " << z << " alpha " << alpha;
        EXPECT_LE(t27, t9);
      }
}

// Fractional orders interpolate (alpha - 1) RDP linearly between the integer neighbours.
TEST(PrivacyAccountant, FixedSizeFractionalOrdersInterpolate) {
  std::vector<double> r = rdp_fixed_size_gaussian(50, 1000, 1.2, {3, 3.25, 4, 1.5, 2});
  EXPECT_NEAR(r[1] * 2.25, 0.75 * r[0] * 2 + 0.25 * r[2] * 3, 1e-12);
  EXPECT_NEAR(r[3], r[4], 1e-15);  // (1, 2): between K(1) = 0 and K(2), RDP = RDP(2)
  EXPECT_LE(r[0], r[1]);
  EXPECT_LE(r[1], r[2]);
}

// Large noise makes the forward differences cancel to nothing in floating point; the bound must
// stay finite, positive, and no larger than the general Theorem 9.
TEST(PrivacyAccountant, FixedSizeStableAtLargeNoise) {
  const std::vector<double>& orders = default_rdp_orders();
  for (double z : {10.0, 100.0}) {
    std::vector<double> t27 = rdp_fixed_size_gaussian(10, 1000, z, orders);
    std::vector<double> t9 =
        rdp_fixed_size_gaussian(10, 1000, z, orders, FixedSizeBound::general_theorem9);
    for (size_t i = 0; i < orders.size(); ++i) {
      EXPECT_TRUE(std::isfinite(t27[i]) && t27[i] > 0) << z << " " << orders[i];
      EXPECT_LE(t27[i], t9[i]);
    }
  }
}

TEST(PrivacyAccountant, CompositionIsAdditive) {
  for (Sampling s : {Sampling::poisson, Sampling::fixed_size}) {
    RdpAccountant acct(s, 64, 10000, 1.1);
    acct.step(2);
    acct.step(3);
    acct.step(0);
    EXPECT_EQ(acct.steps(), 5);
    std::vector<double> one = s == Sampling::poisson
                                  ? rdp_poisson_gaussian(64.0 / 10000, 1.1, default_rdp_orders())
                                  : rdp_fixed_size_gaussian(64, 10000, 1.1, default_rdp_orders());
    std::vector<double> total = acct.rdp();
    for (size_t i = 0; i < one.size(); ++i) EXPECT_NEAR(total[i], 5 * one[i], 1e-12 * total[i]);
    EpsilonAtOrder e = acct.epsilon(1e-6);
    EpsilonAtOrder want = epsilon_from_rdp(default_rdp_orders(), scaled(one, 5), 1e-6);
    EXPECT_NEAR(e.epsilon, want.epsilon, 1e-12 * want.epsilon);
    EXPECT_EQ(e.order, want.order);
  }
  RdpAccountant fresh(Sampling::poisson, 64, 10000, 1.1);
  EXPECT_EQ(fresh.epsilon(1e-5).epsilon, 0);
}

TEST(PrivacyAccountant, EpsilonFallsWithDeltaAndGrowsWithSteps) {
  RdpAccountant acct(Sampling::poisson, 100, 50000, 1.0);
  acct.step(1000);
  for (RdpConversion c : {RdpConversion::balle2020, RdpConversion::mironov2017}) {
    double last = kInf;
    for (double delta : {1e-12, 1e-9, 1e-6, 1e-3, 1e-2}) {
      double e = acct.epsilon(delta, c).epsilon;
      EXPECT_LT(e, last) << "delta " << delta;
      last = e;
    }
  }
  double previous = 0;
  for (int i = 0; i < 5; ++i) {
    acct.step(2000);
    double e = acct.epsilon(1e-5).epsilon;
    EXPECT_GT(e, previous);
    previous = e;
  }
}

// The two conversions by hand at one order, and the improved one never above the classic.
TEST(PrivacyAccountant, ConversionsByHand) {
  const double a = 8, r = 0.7, delta = 1e-5;
  EXPECT_NEAR(epsilon_from_rdp({a}, {r}, delta, RdpConversion::mironov2017).epsilon,
              r + std::log(1 / delta) / (a - 1), 1e-14);
  EXPECT_NEAR(epsilon_from_rdp({a}, {r}, delta).epsilon,
              r + std::log((a - 1) / a) - (std::log(delta) + std::log(a)) / (a - 1), 1e-14);
  EXPECT_EQ(epsilon_from_rdp({a, kInf}, {kInf, 0.3}, delta).epsilon, 0.3);  // pure DP order
  for (double q : {0.001, 0.01, 0.2}) {
    std::vector<double> rdp = scaled(rdp_poisson_gaussian(q, 0.9, default_rdp_orders()), 500);
    EXPECT_LE(
        epsilon_from_rdp(default_rdp_orders(), rdp, 1e-5).epsilon,
        epsilon_from_rdp(default_rdp_orders(), rdp, 1e-5, RdpConversion::mironov2017).epsilon);
  }
}

TEST(PrivacyAccountant, DefaultOrders) {
  const std::vector<double>& o = default_rdp_orders();
  ASSERT_EQ(o.size(), 72u);
  EXPECT_EQ(std::vector<double>(o.begin(), o.begin() + 11),
            (std::vector<double>{1.25, 1.5, 1.75, 2, 2.25, 2.5, 3, 3.5, 4, 4.5, 5}));
  EXPECT_EQ(o[68], 63);
  EXPECT_EQ(std::vector<double>(o.end() - 3, o.end()), (std::vector<double>{128, 256, 512}));
}

// ---- errors -------------------------------------------------------------------------------

TEST(PrivacyAccountant, BadInputsThrowNamedErrors) {
  const std::vector<double> orders = {2, 3};
  expect_error([] { rdp_poisson_gaussian(1.5, 1, {2}); },
               {"rdp_poisson_gaussian: sampling rate q = 1.5, expected 0 <= q <= 1"});
  expect_error([] { rdp_poisson_gaussian(-0.1, 1, {2}); }, {"rdp_poisson_gaussian", "q = -0.1"});
  expect_error([] { rdp_poisson_gaussian(std::nan(""), 1, {2}); },
               {"rdp_poisson_gaussian", "q = nan"});
  expect_error([] { rdp_poisson_gaussian(0.1, -1, {2}); },
               {"rdp_poisson_gaussian: noise multiplier = -1, expected a finite value >= 0"});
  expect_error([] { rdp_poisson_gaussian(0.1, 1, {}); },
               {"rdp_poisson_gaussian: no RDP orders", "expected at least one order > 1"});
  expect_error(
      [] {
        rdp_poisson_gaussian(0.1, 1, {2, 1});
      },
      {"rdp_poisson_gaussian: order[1] = 1, expected > 1"});
  expect_error([] { rdp_poisson_gaussian(0.1, 1, {0.5}); }, {"order[0] = 0.5, expected > 1"});

  expect_error([] { rdp_fixed_size_gaussian(11, 10, 1, {2}); },
               {"rdp_fixed_size_gaussian: cohort size = 11, expected 0 <= cohort size <= "
                "population = 10"});
  expect_error([] { rdp_fixed_size_gaussian(-1, 10, 1, {2}); },
               {"rdp_fixed_size_gaussian", "cohort size = -1"});
  expect_error([] { rdp_fixed_size_gaussian(0, 0, 1, {2}); },
               {"rdp_fixed_size_gaussian: population = 0, expected >= 1"});
  expect_error([] { rdp_fixed_size_gaussian(1, 10, -2, {2}); },
               {"rdp_fixed_size_gaussian: noise multiplier = -2"});
  expect_error([] { rdp_fixed_size_gaussian(1, 10, 1, {1.0}); },
               {"rdp_fixed_size_gaussian: order[0] = 1, expected > 1"});

  expect_error(
      [&] {
        epsilon_from_rdp(orders, {0.1, 0.2}, 0);
      },
      {"epsilon_from_rdp: delta = 0, expected 0 < delta < 1"});
  expect_error([&] { epsilon_from_rdp(orders, {0.1, 0.2}, 1); }, {"epsilon_from_rdp: delta = 1"});
  expect_error([&] { epsilon_from_rdp(orders, {0.1}, 1e-5); },
               {"epsilon_from_rdp: 1 RDP values for 2 orders, expected one per order"});
  expect_error([] { epsilon_from_rdp({}, {}, 1e-5); }, {"epsilon_from_rdp: no RDP orders"});
  expect_error(
      [] {
        epsilon_from_rdp({1, 2}, {0.1, 0.2}, 1e-5);
      },
      {"epsilon_from_rdp: order[0] = 1, expected > 1"});
  expect_error(
      [&] {
        epsilon_from_rdp(orders, {0.1, -0.2}, 1e-5);
      },
      {"epsilon_from_rdp: rdp[1] = -0.2, expected >= 0"});

  expect_error([] { RdpAccountant(Sampling::poisson, 300, 200, 1.0); },
               {"RdpAccountant: cohort size = 300, expected 0 <= cohort size <= population = 200"});
  expect_error([] { RdpAccountant(Sampling::fixed_size, 1, 0, 1.0); },
               {"RdpAccountant: population = 0, expected >= 1"});
  expect_error([] { RdpAccountant(Sampling::poisson, 1, 10, -0.5); },
               {"RdpAccountant: noise multiplier = -0.5"});
  expect_error([] { RdpAccountant(Sampling::poisson, 1, 10, 1.0, {}); },
               {"RdpAccountant: no RDP orders"});
  expect_error(
      [] {
        RdpAccountant(Sampling::poisson, 1, 10, 1.0, {3, 0.9});
      },
      {"RdpAccountant: order[1] = 0.9, expected > 1"});
  RdpAccountant acct(Sampling::poisson, 1, 10, 1.0);
  expect_error([&] { acct.step(-1); }, {"RdpAccountant::step: count = -1, expected >= 0"});
  expect_error([&] { acct.epsilon(2.0); },
               {"RdpAccountant::epsilon: delta = 2, expected 0 < delta < 1"});
}

}  // namespace
