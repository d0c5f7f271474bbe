#include "drx/privacy/accountant.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>

#include "drx/array/error.h"

namespace drx::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- argument checks ------------------------------------------------------------------

std::string str(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

[[noreturn]] void fail(const std::string& fn, const std::string& what) {
  throw Error(fn + ": " + what);
}

void check_orders(const std::string& fn, const std::vector<double>& orders) {
  if (orders.empty()) fail(fn, "no RDP orders, expected at least one order > 1");
  for (size_t i = 0; i < orders.size(); ++i)
    if (!(orders[i] > 1))  // also rejects NaN
      fail(fn, "order[" + std::to_string(i) + "] = " + str(orders[i]) + ", expected > 1");
}

void check_noise(const std::string& fn, double z) {
  if (!(z >= 0) || std::isinf(z))
    fail(fn, "noise multiplier = " + str(z) + ", expected a finite value >= 0");
}

void check_cohort(const std::string& fn, int64_t cohort, int64_t population) {
  if (population < 1) fail(fn, "population = " + std::to_string(population) + ", expected >= 1");
  if (cohort < 0 || cohort > population)
    fail(fn, "cohort size = " + std::to_string(cohort) +
                 ", expected 0 <= cohort size <= " + "population = " + std::to_string(population));
}

// ---- log-space arithmetic ---------------------------------------------------------------
// Sums of many terms of very different sizes (binomial weights times exp(k^2/(2 z^2))) are
// kept as logs; -inf is the log of 0.

template <class T>
T log_add(T a, T b) {
  if (a < b) std::swap(a, b);
  if (b == -std::numeric_limits<T>::infinity()) return a;
  return a + std::log1p(std::exp(b - a));
}

// log(e^a - e^b) for a >= b.
template <class T>
T log_sub(T a, T b) {
  if (b == -std::numeric_limits<T>::infinity()) return a;
  if (b >= a) return -std::numeric_limits<T>::infinity();
  return a + std::log1p(-std::exp(b - a));
}

// log(1 + e^x), accurate both when e^x is tiny and when it is huge.
double log1p_exp(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

// log(e^x - 1) for x > 0.
double log_expm1(double x) {
  return x > 30 ? x + std::log1p(-std::exp(-x)) : std::log(std::expm1(x));
}

// log |C(a, k)| for real a >= 0 and integer k >= 0 (lgamma is log |Gamma|).
double log_abs_binomial(double a, double k) {
  return std::lgamma(a + 1) - std::lgamma(k + 1) - std::lgamma(a - k + 1);
}

// C(a, k) < 0 for non-integer a: the factors a, a-1, ..., a-k+1 include k-1-floor(a)
// negative ones.
bool binomial_negative(double a, int64_t k) {
  int64_t negatives = k - 1 - static_cast<int64_t>(std::floor(a));
  return negatives > 0 && negatives % 2 == 1;
}

// log(erfc(x) / 2). erfc underflows near x = 26.5; past x = 20 the asymptotic series
// erfc(x) = exp(-x^2) / (x sqrt(pi)) * (1 - 1/(2x^2) + 3/(4x^4) - ...) is exact to double
// precision after a few terms.
double log_half_erfc(double x) {
  if (x < 20) return std::log(0.5 * std::erfc(x));
  const double inv2x2 = 1 / (2 * x * x);
  double term = 1, series = 0;
  for (int n = 1; n <= 8; ++n) {
    term *= -(2 * n - 1) * inv2x2;
    series += term;
  }
  return -x * x - std::log(x) - 0.5 * std::log(std::numbers::pi) + std::log1p(series) -
         std::log(2.0);
}

// ---- Poisson subsampling (Mironov, Talwar, Zhang 2019, Sec. 3.3) ------------------------
// RDP(alpha) = log(A_alpha) / (alpha - 1), A_alpha = E_{x ~ N(0, z^2)}[((1-q) + q r(x))^alpha]
// with r(x) = exp((2x - 1) / (2 z^2)) the likelihood ratio of N(1, z^2) to N(0, z^2).

// Integer alpha: A = sum_k C(alpha,k) (1-q)^(alpha-k) q^k exp((k^2-k)/(2z^2)). The binomial
// weights sum to 1, so A - 1 = sum_k weight_k * expm1((k^2-k)/(2z^2)) with nonnegative terms;
// summing that and taking log1p keeps full relative precision when A is 1 + 1e-12.
double log_a_integer(double q, double z, int64_t alpha) {
  const double log_q = std::log(q), log_1mq = std::log1p(-q), inv = 1 / (2 * z * z);
  const double a = static_cast<double>(alpha);
  double log_a_minus_1 = -kInf;
  for (int64_t k = 2; k <= alpha; ++k) {
    const double kd = static_cast<double>(k);
    const double log_weight = log_abs_binomial(a, kd) + kd * log_q + (a - kd) * log_1mq;
    log_a_minus_1 = log_add(log_a_minus_1, log_weight + log_expm1((kd * kd - kd) * inv));
  }
  return log1p_exp(log_a_minus_1);
}

// Fractional alpha: split the integral at z0, where q r(z0) = 1 - q, and expand the binomial
// (1-q + q r)^alpha on each side in its convergent direction:
//   A = sum_k C(alpha,k) [ q^k (1-q)^(alpha-k) exp((k^2-k)/(2z^2)) erfc((k-z0)/(sqrt2 z))/2
//                        + q^(alpha-k) (1-q)^k exp((j^2-j)/(2z^2)) erfc((z0-j)/(sqrt2 z))/2 ],
// j = alpha - k. C(alpha,k) alternates in sign once k > alpha, and both parts of term k share
// that sign, so positive and negative terms are summed apart (in log space) and subtracted
// once. Past k > alpha the series alternates with decreasing terms, so stopping when a term
// is 1e-13 of the sum bounds the error by that.
constexpr int64_t kMaxFractionalTerms = 1000000;

double log_a_fractional(double q, double z, double alpha) {
  const double log_q = std::log(q), log_1mq = std::log1p(-q), inv = 1 / (2 * z * z);
  const double z0 = z * z * (log_1mq - log_q) + 0.5;
  const double scale = std::sqrt(2.0) * z;
  double log_pos = -kInf, log_neg = -kInf;
  double last0 = kInf, last1 = kInf;
  for (int64_t k = 0; k < kMaxFractionalTerms; ++k) {
    const double kd = static_cast<double>(k), j = alpha - kd;
    const double log_c = log_abs_binomial(alpha, kd);
    const double s0 =
        log_c + kd * log_q + j * log_1mq + (kd * kd - kd) * inv + log_half_erfc((kd - z0) / scale);
    const double s1 =
        log_c + j * log_q + kd * log_1mq + (j * j - j) * inv + log_half_erfc((z0 - j) / scale);
    const double term = log_add(s0, s1);
    if (binomial_negative(alpha, k))
      log_neg = log_add(log_neg, term);
    else
      log_pos = log_add(log_pos, term);
    if (kd > alpha && s0 < last0 && s1 < last1 && std::max(s0, s1) < log_pos - 30)
      return log_sub(log_pos, log_neg);
    last0 = s0;
    last1 = s1;
  }
  return kInf;  // not converged; the caller falls back to a bound
}

// The fractional series' rounding error in log A, generously (a few ulps per significant term).
// Adding it keeps the result an upper bound when log A itself is as small as 1e-20.
constexpr double kFractionalSlack = 1e-13;

// log A_alpha is convex in alpha (Hölder), so the chord between the exactly computed integer
// neighbours bounds it from above (log A_1 = 0).
double log_a_chord(double q, double z, double alpha) {
  const double lo = std::floor(alpha), t = alpha - lo;
  const double log_a_lo = lo > 1 ? log_a_integer(q, z, static_cast<int64_t>(lo)) : 0.0;
  const double log_a_hi = log_a_integer(q, z, static_cast<int64_t>(lo) + 1);
  return (1 - t) * log_a_lo + t * log_a_hi;
}

double rdp_poisson_one(double q, double z, double alpha) {
  if (q == 0) return 0;
  if (z == 0 || std::isinf(alpha)) return kInf;
  const double gaussian = alpha / (2 * z * z);
  if (q == 1) return gaussian;
  double log_a;
  if (alpha == std::floor(alpha) && alpha < 9.0e15)
    log_a = log_a_integer(q, z, static_cast<int64_t>(alpha));
  else  // the series where it is accurate, the chord where A is within rounding of 1
    log_a = std::min(log_a_fractional(q, z, alpha) + kFractionalSlack, log_a_chord(q, z, alpha));
  // Never above the unsampled Gaussian: the subsampled output is a mixture of the Gaussian's
  // outputs on neighbouring and on equal datasets (joint convexity of exp((alpha-1) D_alpha)).
  return std::min(gaussian, log_a / (alpha - 1));
}

// ---- fixed-size sampling without replacement (Wang, Balle, Kasiviswanathan 2019) --------
// With eps(a) = a / (2 z^2) the Gaussian's RDP, the bound on (alpha-1) RDP(alpha) at an integer
// alpha >= 2 is log(1 + sum_{j=2}^{alpha} q^j C(alpha,j) T_j), where
//   T_2 = min(4 (e^{eps(2)} - 1), 2 e^{eps(2)}),
//   T_j = 2 e^{(j-1) eps(j)}                                        (Theorem 9), or
//   T_j = min(4 sqrt(D_{2 floor(j/2)} D_{2 ceil(j/2)}), 2 e^{(j-1) eps(j)})   (Theorem 27),
// D_k = sum_i C(k,i) (-1)^(k-i) e^{(i-1) eps(i)} the k-th forward difference at 0 of
// e^{(a-1) eps(a)}, i.e. E[(r - 1)^k] for the Gaussian's likelihood ratio r.

// Forward differences beyond this order cost O(order^2) and never beat the general term
// there (D_k is then dominated by its last term e^{(k-1) eps(k)}); larger j use Theorem 9.
constexpr int64_t kMaxForwardDifference = 1025;

// log of an upper bound on D_k for k = 0..max_k. The alternating sum cancels badly when z is
// large (D_k is then tiny next to its terms), so it is evaluated in long double with a bound on
// the rounding error added: the result is never below the true D_k, which keeps the RDP bound
// sound where the cancellation leaves no correct digits.
std::vector<double> log_forward_differences(double z, int64_t max_k) {
  using L = long double;
  const L inv = 1 / (2 * static_cast<L>(z) * static_cast<L>(z));
  std::vector<L> log_factorial(static_cast<size_t>(max_k) + 1, 0);
  for (int64_t i = 1; i <= max_k; ++i)
    log_factorial[static_cast<size_t>(i)] =
        log_factorial[static_cast<size_t>(i - 1)] + std::log(static_cast<L>(i));
  std::vector<double> out(static_cast<size_t>(max_k) + 1);
  for (int64_t k = 0; k <= max_k; ++k) {
    L log_pos = -std::numeric_limits<L>::infinity(), log_neg = log_pos, largest = 1;
    for (int64_t i = 0; i <= k; ++i) {
      const L id = static_cast<L>(i);
      const L t = log_factorial[static_cast<size_t>(k)] - log_factorial[static_cast<size_t>(i)] -
                  log_factorial[static_cast<size_t>(k - i)] + (id * id - id) * inv;
      largest = std::max(largest, std::abs(t));
      if ((k - i) % 2 == 0)
        log_pos = log_add(log_pos, t);
      else
        log_neg = log_add(log_neg, t);
    }
    // Each term carries a relative error of a few ulps of its log's magnitude, accumulated
    // over k+1 terms; 64 (k+1) eps |log|max bounds it generously.
    const L rel = 64 * static_cast<L>(k + 1) * std::numeric_limits<L>::epsilon() * largest;
    const L log_err = log_pos + std::log(rel);
    out[static_cast<size_t>(k)] = static_cast<double>(log_add(log_sub(log_pos, log_neg), log_err));
  }
  return out;
}

// Bound on log A = (alpha - 1) RDP(alpha) at integer alpha >= 2.
double log_a_fixed_size(double q, double z, int64_t alpha, FixedSizeBound bound,
                        const std::vector<double>& log_d) {
  const double log_q = std::log(q), inv = 1 / (2 * z * z);
  const double a = static_cast<double>(alpha);
  const double eps2 = 2 * inv;
  double log_sum = 2 * log_q + log_abs_binomial(a, 2) +
                   std::min(std::log(4.0) + log_expm1(eps2), std::log(2.0) + eps2);
  for (int64_t j = 3; j <= alpha; ++j) {
    const double jd = static_cast<double>(j);
    double log_t = std::log(2.0) + (jd - 1) * jd * inv;
    if (bound == FixedSizeBound::gaussian_theorem27 && j < static_cast<int64_t>(log_d.size()) - 1) {
      const double lo = log_d[static_cast<size_t>(2 * (j / 2))];
      const double hi = log_d[static_cast<size_t>(2 * ((j + 1) / 2))];
      log_t = std::min(log_t, std::log(4.0) + 0.5 * (lo + hi));
    }
    log_sum = log_add(log_sum, jd * log_q + log_abs_binomial(a, jd) + log_t);
  }
  return log1p_exp(log_sum);
}

}  // namespace

const std::vector<double>& default_rdp_orders() {
  static const std::vector<double> orders = [] {
    std::vector<double> o = {1.25, 1.5, 1.75, 2, 2.25, 2.5, 3, 3.5, 4, 4.5};
    for (int a = 5; a <= 63; ++a) o.push_back(a);
    for (double a : {128.0, 256.0, 512.0}) o.push_back(a);
    return o;
  }();
  return orders;
}

std::vector<double> rdp_poisson_gaussian(double q, double noise_multiplier,
                                         const std::vector<double>& orders) {
  const std::string fn = "rdp_poisson_gaussian";
  if (!(q >= 0 && q <= 1)) fail(fn, "sampling rate q = " + str(q) + ", expected 0 <= q <= 1");
  check_noise(fn, noise_multiplier);
  check_orders(fn, orders);
  std::vector<double> rdp;
  rdp.reserve(orders.size());
  for (double alpha : orders) rdp.push_back(rdp_poisson_one(q, noise_multiplier, alpha));
  return rdp;
}

std::vector<double> rdp_fixed_size_gaussian(int64_t cohort_size, int64_t population,
                                            double noise_multiplier,
                                            const std::vector<double>& orders,
                                            FixedSizeBound bound) {
  const std::string fn = "rdp_fixed_size_gaussian";
  check_cohort(fn, cohort_size, population);
  check_noise(fn, noise_multiplier);
  check_orders(fn, orders);
  const double z = noise_multiplier;
  const double q = static_cast<double>(cohort_size) / static_cast<double>(population);
  std::vector<double> rdp(orders.size(), 0.0);
  if (cohort_size == 0) return rdp;
  // The unsampled Gaussian's RDP; also an upper bound on every subsampled value.
  for (size_t i = 0; i < orders.size(); ++i) rdp[i] = z == 0 ? kInf : orders[i] / (2 * z * z);
  if (z == 0 || cohort_size == population) return rdp;

  double max_integer = 2;
  for (double alpha : orders)
    if (std::isfinite(alpha)) max_integer = std::max(max_integer, std::ceil(alpha));
  std::vector<double> log_d;
  if (bound == FixedSizeBound::gaussian_theorem27)
    log_d = log_forward_differences(
        z, std::min<int64_t>(static_cast<int64_t>(max_integer) + 1, kMaxForwardDifference));
  // (alpha - 1) RDP at integer alpha: the bound, capped by the unsampled Gaussian's.
  auto cgf = [&](double alpha) {
    if (alpha == 1) return 0.0;
    const double capped = (alpha - 1) * alpha / (2 * z * z);
    return std::min(capped, log_a_fixed_size(q, z, static_cast<int64_t>(alpha), bound, log_d));
  };
  for (size_t i = 0; i < orders.size(); ++i) {
    const double alpha = orders[i];
    if (std::isinf(alpha)) continue;  // stays +inf
    const double lo = std::floor(alpha), hi = std::ceil(alpha), t = alpha - lo;
    const double k = lo == hi ? cgf(alpha) : (1 - t) * cgf(lo) + t * cgf(hi);
    rdp[i] = std::min(rdp[i], k / (alpha - 1));
  }
  return rdp;
}

EpsilonAtOrder epsilon_from_rdp(const std::vector<double>& orders, const std::vector<double>& rdp,
                                double delta, RdpConversion conversion) {
  const std::string fn = "epsilon_from_rdp";
  check_orders(fn, orders);
  if (rdp.size() != orders.size())
    fail(fn, std::to_string(rdp.size()) + " RDP values for " + std::to_string(orders.size()) +
                 " orders, expected one per order");
  if (!(delta > 0 && delta < 1)) fail(fn, "delta = " + str(delta) + ", expected 0 < delta < 1");
  for (size_t i = 0; i < rdp.size(); ++i)
    if (!(rdp[i] >= 0))
      fail(fn, "rdp[" + std::to_string(i) + "] = " + str(rdp[i]) + ", expected >= 0");

  EpsilonAtOrder best{kInf, orders[0]};
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i], r = rdp[i];
    double eps;
    if (r == 0)
      eps = 0;
    else if (std::isinf(r) || std::isinf(a))
      eps = r;  // order +inf is pure DP: eps = rdp
    else if (conversion == RdpConversion::balle2020)
      eps = r + std::log1p(-1 / a) - (std::log(delta) + std::log(a)) / (a - 1);
    else
      eps = r - std::log(delta) / (a - 1);
    if (eps < best.epsilon) best = {eps, a};
  }
  best.epsilon = std::max(0.0, best.epsilon);
  return best;
}

RdpAccountant::RdpAccountant(Sampling sampling, int64_t cohort_size, int64_t population,
                             double noise_multiplier, std::vector<double> orders)
    : sampling_(sampling),
      cohort_size_(cohort_size),
      population_(population),
      noise_multiplier_(noise_multiplier),
      orders_(std::move(orders)) {
  const std::string fn = "RdpAccountant";
  check_cohort(fn, cohort_size, population);
  check_noise(fn, noise_multiplier);
  check_orders(fn, orders_);
  rdp_per_step_ = sampling == Sampling::poisson
                      ? rdp_poisson_gaussian(sampling_rate(), noise_multiplier, orders_)
                      : rdp_fixed_size_gaussian(cohort_size, population, noise_multiplier, orders_);
}

double RdpAccountant::sampling_rate() const {
  return static_cast<double>(cohort_size_) / static_cast<double>(population_);
}

void RdpAccountant::step(int64_t count) {
  if (count < 0)
    fail("RdpAccountant::step", "count = " + std::to_string(count) + ", expected >= 0");
  steps_ += count;
}

std::vector<double> RdpAccountant::rdp() const {
  std::vector<double> total(rdp_per_step_.size(), 0.0);
  if (steps_ == 0) return total;  // 0 * inf would be NaN
  for (size_t i = 0; i < total.size(); ++i)
    total[i] = rdp_per_step_[i] * static_cast<double>(steps_);
  return total;
}

EpsilonAtOrder RdpAccountant::epsilon(double delta, RdpConversion conversion) const {
  if (!(delta > 0 && delta < 1))
    fail("RdpAccountant::epsilon", "delta = " + str(delta) + ", expected 0 < delta < 1");
  return epsilon_from_rdp(orders_, rdp(), delta, conversion);
}

}  // namespace drx::privacy
