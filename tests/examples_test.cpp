// The examples' computations at small size, against plain-loop references.
#include <algorithm>
#include <cmath>
#include <vector>

#include "../examples/fed_hypergradient_lib.h"
#include "test_util.h"

namespace drx::testing {
namespace {

fedhg::Config small_config() {
  fedhg::Config c;
  c.clients = 3;
  c.examples = 6;
  c.dim = 3;
  c.seed = 11;
  return c;
}

// ---- plain-loop reference of the federated computation -----------------------
using Vec = std::vector<double>;

struct Client {
  std::vector<Vec> x;  // examples x dim
  Vec y;
};

std::vector<Client> clients_of(const fedhg::Config& c, const fedhg::Data& d) {
  std::vector<Client> out(static_cast<size_t>(c.clients));
  for (int64_t k = 0; k < c.clients; ++k)
    for (int64_t i = 0; i < c.examples; ++i) {
      Vec row;
      for (int64_t j = 0; j < c.dim; ++j)
        row.push_back(d.x.data<double>()[(k * c.examples + i) * c.dim + j]);
      out[static_cast<size_t>(k)].x.push_back(row);
      out[static_cast<size_t>(k)].y.push_back(d.y.data<double>()[k * c.examples + i]);
    }
  return out;
}

double residual(const Client& cl, const Vec& w, size_t i) {
  double r = -cl.y[i];
  for (size_t j = 0; j < w.size(); ++j) r += cl.x[i][j] * w[j];
  return r;
}

double ref_client_loss(const Client& cl, const Vec& w) {
  double s = 0;
  for (size_t i = 0; i < cl.y.size(); ++i) s += residual(cl, w, i) * residual(cl, w, i);
  return s / static_cast<double>(cl.y.size());
}

// d/dw mean((Xw - y)^2) = (2/n) X^T (Xw - y)
Vec ref_client_grad(const Client& cl, const Vec& w) {
  Vec g(w.size(), 0.0);
  for (size_t i = 0; i < cl.y.size(); ++i) {
    double r = residual(cl, w, i);
    for (size_t j = 0; j < w.size(); ++j)
      g[j] += 2.0 * r * cl.x[i][j] / static_cast<double>(cl.y.size());
  }
  return g;
}

double ref_loss(const std::vector<Client>& cls, const Vec& w) {
  double s = 0;
  for (const Client& cl : cls) s += ref_client_loss(cl, w);
  return s / static_cast<double>(cls.size());
}

Vec ref_mean_delta(const fedhg::Config& c, const std::vector<Client>& cls, const Vec& w) {
  Vec mean(w.size(), 0.0);
  for (const Client& cl : cls) {
    Vec wi = w;
    for (int s = 0; s < c.local_steps; ++s) {
      Vec g = ref_client_grad(cl, wi);
      for (size_t j = 0; j < w.size(); ++j) wi[j] -= c.client_lr * g[j];
    }
    for (size_t j = 0; j < w.size(); ++j)
      mean[j] += (w[j] - wi[j]) / static_cast<double>(cls.size());
  }
  return mean;
}

Vec ref_round(const fedhg::Config& c, const std::vector<Client>& cls, const Vec& w, double eta) {
  Vec d = ref_mean_delta(c, cls, w), out = w;
  for (size_t j = 0; j < w.size(); ++j) out[j] -= eta * d[j];
  return out;
}

Array f64_vec(const Vec& v) { return f64_array(v, {static_cast<int64_t>(v.size())}); }

TEST(Examples, FedHypergradientRoundAndObjectiveMatchPlainLoops) {
  fedhg::Config c = small_config();
  fedhg::Data d = fedhg::make_data(c);
  ASSERT_EQ(d.x.shape(), (Shape{3, 6, 3}));
  ASSERT_EQ(d.y.shape(), (Shape{3, 6}));
  std::vector<Client> cls = clients_of(c, d);
  Vec w = {0.4, -0.2, 0.7};
  const double eta = 0.8;
  Array w1 = jit(fedhg::round_program(c))(f64_vec(w), Array::scalar(eta), d.x, d.y);
  Vec want = ref_round(c, cls, w, eta);
  EXPECT_TRUE(ArrayNear(w1, want, 1e-12, 1e-12));
  double got =
      jit(fedhg::hyper_objective(c))(f64_vec(w), Array::scalar(eta), d.x, d.y).item<double>();
  EXPECT_NEAR(got, ref_loss(cls, want), 1e-12 * ref_loss(cls, want));
  double loss0 = jit(fedhg::loss_program(c))(f64_vec(w), d.x, d.y).item<double>();
  EXPECT_NEAR(loss0, ref_loss(cls, w), 1e-12 * ref_loss(cls, w));
}

TEST(Examples, FedHypergradientAgreesWithFiniteDifferenceAndClosedForm) {
  fedhg::Config c = small_config();
  fedhg::Data d = fedhg::make_data(c);
  std::vector<Client> cls = clients_of(c, d);
  auto objective = jit(fedhg::hyper_objective(c));
  auto value_and_hypergrad = jit(value_and_grad(fedhg::hyper_objective(c), 1));
  for (const Vec& w : {Vec{0, 0, 0}, Vec{0.4, -0.2, 0.7}})
    for (double eta : {0.1, 0.9, 2.5}) {
      auto [value, g] = value_and_hypergrad(f64_vec(w), Array::scalar(eta), d.x, d.y);
      ASSERT_EQ(g.shape(), Shape{});
      ASSERT_EQ(g.dtype(), f64);
      const double h = 1e-4;
      double lp = objective(f64_vec(w), Array::scalar(eta + h), d.x, d.y).item<double>();
      double lm = objective(f64_vec(w), Array::scalar(eta - h), d.x, d.y).item<double>();
      double fd = (lp - lm) / (2 * h);
      EXPECT_NEAR(g.item<double>(), fd, 1e-6 * std::abs(fd)) << "eta " << eta;
      // L(eta) = loss(w - eta m): dL/deta = -<grad loss(w1), m>.
      Vec m = ref_mean_delta(c, cls, w), w1 = ref_round(c, cls, w, eta), grad_w1(w.size(), 0.0);
      for (const Client& cl : cls) {
        Vec gk = ref_client_grad(cl, w1);
        for (size_t j = 0; j < w.size(); ++j) grad_w1[j] += gk[j] / static_cast<double>(cls.size());
      }
      double closed = 0;
      for (size_t j = 0; j < w.size(); ++j) closed -= grad_w1[j] * m[j];
      EXPECT_NEAR(g.item<double>(), closed, 1e-10 * std::abs(closed) + 1e-12) << "eta " << eta;
      EXPECT_NEAR(value.item<double>(), ref_loss(cls, w1), 1e-12 * ref_loss(cls, w1));
    }
}

TEST(Examples, FedHypergradientTrainingLowersLossAndMovesEta) {
  fedhg::Config c = small_config();
  fedhg::Trainer trainer(c);
  std::vector<Client> cls = clients_of(c, trainer.data());
  const double start = trainer.loss();
  EXPECT_NEAR(start, ref_loss(cls, Vec(3, 0.0)), 1e-12 * start);
  // Replays the outer loop with the plain-loop reference alongside.
  Vec w(3, 0.0);
  double eta = c.eta0;
  fedhg::Step last{};
  for (int r = 0; r < 5; ++r) {
    last = trainer.step();
    EXPECT_EQ(last.round, r + 1);
    EXPECT_DOUBLE_EQ(last.eta, eta);
    // L(eta) is quadratic in eta, so a central difference of the reference is exact
    // up to rounding.
    const double h = 1e-4;
    double fd = (ref_loss(cls, ref_round(c, cls, w, eta + h)) -
                 ref_loss(cls, ref_round(c, cls, w, eta - h))) /
                (2 * h);
    EXPECT_NEAR(last.hypergrad, fd, 1e-6 * std::abs(fd) + 1e-10) << "round " << r + 1;
    w = ref_round(c, cls, w, eta);
    EXPECT_NEAR(last.loss, ref_loss(cls, w), 1e-10 * ref_loss(cls, w)) << "round " << r + 1;
    eta = std::clamp(eta - c.beta * last.hypergrad, c.eta_min, c.eta_max);
  }
  EXPECT_LT(last.loss, start);
  EXPECT_NEAR(trainer.loss(), last.loss, 1e-12 * last.loss);
  EXPECT_DOUBLE_EQ(trainer.eta(), eta);
  EXPECT_GT(std::abs(trainer.eta() - c.eta0), 1e-3) << "eta did not move";
  EXPECT_TRUE(ArrayNear(trainer.w(), w, 1e-10, 1e-12));
}

}  // namespace
}  // namespace drx::testing
