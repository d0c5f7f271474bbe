#pragma once
// A Rényi-differential-privacy (RDP) accountant for DP-SGD / DP-FedAvg: each step samples a
// cohort and adds Gaussian noise of std `noise_multiplier * clip` to the clipped sum.
//
// RDP composes by addition (Mironov 2017, Prop. 1), so the accountant keeps the RDP of one
// step at each order and multiplies by the number of steps; epsilon for a delta is the best
// conversion over the orders. All logs are natural logs.
//
// Two samplings, two neighbouring relations (pick the one your guarantee is stated in):
// - Sampling::poisson: every client (example) joins a round independently with probability
//   q = cohort / population. Neighbouring datasets differ by ADDING OR REMOVING one client;
//   the bound is exact (Mironov, Talwar, Zhang 2019, "Rényi Differential Privacy of the
//   Sampled Gaussian Mechanism", Sec. 3.3).
// - Sampling::fixed_size: a cohort of exactly m out of n is drawn without replacement.
//   Neighbouring datasets have the same size n and differ by REPLACING one client (n is
//   public); the noise multiplier is relative to the replace-one L2 sensitivity (for a sum of
//   vectors clipped to norm C that is 2C, not C). The bound is Wang, Balle, Kasiviswanathan
//   2019, "Subsampled Rényi Differential Privacy and Analytical Moments Accountant".
//
// Every invalid argument throws drx::Error naming the function, the value and what was
// expected.
#include <cstdint>
#include <vector>

namespace drx::privacy {

// The RDP orders used by default: 1.25, 1.5, 1.75, 2, 2.25, 2.5, 3, 3.5, 4, 4.5, the integers
// 5..63, 128, 256, 512 (72 orders) — the list TF Privacy's compute_dp_sgd_privacy uses.
const std::vector<double>& default_rdp_orders();

// RDP at each order of ONE step of the Poisson-subsampled Gaussian mechanism with sampling
// rate q and noise multiplier z (noise std / L2 sensitivity), add/remove-one neighbours.
// Integer orders: the exact binomial sum; fractional orders: the two-series expression of
// Mironov, Talwar, Zhang 2019 Sec. 3.3 (where A_alpha is within rounding of 1, the chord of the
// convex log A_alpha between the integer neighbours, an upper bound); both in log space.
// q = 0 -> 0; q = 1 -> alpha/(2 z^2); z = 0 (and q > 0) -> +inf; order +inf -> +inf (q > 0).
// Orders must be > 1.
std::vector<double> rdp_poisson_gaussian(double q, double noise_multiplier,
                                         const std::vector<double>& orders);

// Which bound of Wang, Balle, Kasiviswanathan 2019 (arXiv:1808.00087v4) rdp_fixed_size_gaussian
// evaluates at integer orders.
enum class FixedSizeBound {
  // Their strengthened bound for the Gaussian mechanism (Theorem 27, appendix): the j-th term
  // is the smaller of 4 q^j C(alpha,j) sqrt(D_{2 floor(j/2)} D_{2 ceil(j/2)}) (D_k: k-th forward
  // difference of exp((a-1) eps(a)) at a = 0) and the general term. TF Privacy and
  // dp_accounting evaluate this one.
  gaussian_theorem27,
  // Their general bound (Theorem 9) with eps(inf) = inf: j-th term 2 q^j C(alpha,j)
  // exp((j-1) eps(j)).
  general_theorem9,
};

// RDP at each order of ONE step of drawing a cohort of `cohort_size` out of `population`
// without replacement and running the Gaussian mechanism on it, replace-one neighbours, with
// q = cohort_size / population and the Gaussian's RDP eps(alpha) = alpha / (2 z^2).
// Fractional orders interpolate (alpha - 1) * RDP linearly between the neighbouring integers
// (their Corollary 10; that function is convex). Every value is also capped at alpha/(2 z^2),
// the unsampled Gaussian's RDP (a mixture is no less private than its worst component).
// cohort 0 -> 0; cohort = population -> alpha/(2 z^2); z = 0 (cohort > 0) -> +inf.
std::vector<double> rdp_fixed_size_gaussian(
    int64_t cohort_size, int64_t population, double noise_multiplier,
    const std::vector<double>& orders, FixedSizeBound bound = FixedSizeBound::gaussian_theorem27);

struct EpsilonAtOrder {
  double epsilon;
  double order;  // the order at which the minimum is attained
};

// RDP -> (epsilon, delta)-DP conversions, minimised over the orders.
enum class RdpConversion {
  // Balle et al. 2020 ("Hypothesis Testing Interpretations and Rényi Differential Privacy") /
  // Canonne, Kamath, Steinke 2020 (arXiv:2004.00010, Prop. 12): eps = rdp + log((alpha-1)/alpha)
  // - (log delta + log alpha) / (alpha-1). TF Privacy and Opacus use it today. The default.
  balle2020,
  // Mironov 2017, Prop. 3: eps = rdp + log(1/delta)/(alpha-1). Older published tables use it.
  mironov2017,
};

// The smallest epsilon over the orders for `delta` in (0, 1) from per-order RDP totals
// (rdp[i] >= 0, +inf allowed). Order +inf: eps = rdp (pure DP). An order with rdp exactly 0
// gives epsilon 0 (the two output distributions are equal). Epsilon is clamped at 0.
EpsilonAtOrder epsilon_from_rdp(const std::vector<double>& orders, const std::vector<double>& rdp,
                                double delta, RdpConversion conversion = RdpConversion::balle2020);

enum class Sampling { poisson, fixed_size };

// Accumulates identical steps of one subsampled Gaussian mechanism.
class RdpAccountant {
 public:
  // poisson: q = expected cohort / population; fixed_size: a cohort of exactly cohort_size
  // out of population (see the header comment for the two neighbouring relations).
  RdpAccountant(Sampling sampling, int64_t cohort_size, int64_t population, double noise_multiplier,
                std::vector<double> orders = default_rdp_orders());

  // Records `count` (>= 0) more steps.
  void step(int64_t count = 1);
  int64_t steps() const { return steps_; }

  // The (epsilon, order) after steps() steps; 0 before the first step.
  EpsilonAtOrder epsilon(double delta, RdpConversion conversion = RdpConversion::balle2020) const;

  Sampling sampling() const { return sampling_; }
  double sampling_rate() const;  // cohort_size / population
  double noise_multiplier() const { return noise_multiplier_; }
  const std::vector<double>& orders() const { return orders_; }
  // RDP of one step at each order, and the total after steps() steps.
  const std::vector<double>& rdp_per_step() const { return rdp_per_step_; }
  std::vector<double> rdp() const;

 private:
  Sampling sampling_;
  int64_t cohort_size_;
  int64_t population_;
  double noise_multiplier_;
  std::vector<double> orders_;
  std::vector<double> rdp_per_step_;
  int64_t steps_ = 0;
};

}  // namespace drx::privacy
