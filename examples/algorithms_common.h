#pragma once
// What the algorithm examples (fedprox, scaffold, diloco, learned_aggregation)
// share: synthetic heterogeneous linear-regression data and the client loss.
// Each algorithm's own drx code lives in its examples/<name>_lib.h, which the
// example program and tests/algorithms_test.cpp both include, so the tests
// check exactly the computation the examples run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "drx/drx.h"

namespace algos {

struct DataConfig {
  int64_t clients = 8;
  int64_t examples = 16;      // per client, at most (the padded axis)
  int64_t min_examples = 16;  // each client holds between min_examples and examples
  int64_t dim = 5;
  double client_shift = 0.3;  // spread of the client-specific true weights
  double noise = 0.05;
  int64_t corrupted = 0;       // the first `corrupted` clients get labels of pure noise
  double corrupt_scale = 3.0;  // their labels' standard deviation
  int64_t validation = 64;     // clean server-side validation examples (true weights w*)
  uint32_t seed = 7;
};

// x f64[clients, examples, dim], y and mask f64[clients, examples] (mask 1 on a
// client's real examples, 0 on padding); x_val f64[validation, dim], y_val
// f64[validation] on the server.
struct Data {
  drx::Array x, y, mask, x_val, y_val;
};

// Client k has true weights w* + shift_k, so no single w fits every client.
inline Data make_data(const DataConfig& c) {
  std::mt19937 rng(c.seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int64_t> count(c.min_examples, c.examples);
  std::vector<double> w_true(static_cast<size_t>(c.dim));
  for (double& v : w_true) v = normal(rng);
  Data d{drx::Array(drx::f64, {c.clients, c.examples, c.dim}),
         drx::Array(drx::f64, {c.clients, c.examples}),
         drx::Array(drx::f64, {c.clients, c.examples}), drx::Array(drx::f64, {c.validation, c.dim}),
         drx::Array(drx::f64, {c.validation})};
  auto example = [&](const std::vector<double>& w, double* x) {
    double dot = 0;
    for (size_t j = 0; j < w.size(); ++j) dot += (x[j] = normal(rng)) * w[j];
    return dot + c.noise * normal(rng);
  };
  for (int64_t k = 0; k < c.clients; ++k) {
    std::vector<double> wk = w_true;
    for (double& v : wk) v += c.client_shift * normal(rng);
    const int64_t n = count(rng);
    for (int64_t i = 0; i < c.examples; ++i) {
      const int64_t e = k * c.examples + i;
      double label = example(wk, d.x.data<double>() + e * c.dim);
      if (k < c.corrupted) label = c.corrupt_scale * normal(rng);
      d.y.data<double>()[e] = label;
      d.mask.data<double>()[e] = i < n ? 1.0 : 0.0;
    }
  }
  for (int64_t i = 0; i < c.validation; ++i)
    d.y_val.data<double>()[i] = example(w_true, d.x_val.data<double>() + i * c.dim);
  return d;
}

// One client's mean squared error over its real examples; w f64[dim],
// x f64[examples, dim], y and mask f64[examples].
inline drx::Value client_loss(drx::Value w, drx::Value x, drx::Value y, drx::Value mask) {
  return drx::sum(mask * drx::square(drx::matmul(x, w) - y)) / drx::sum(mask);
}

// Inside a program over "clients": the clients' mean loss at the server's w.
inline drx::Value average_loss(drx::Value w, drx::Value x, drx::Value y, drx::Value mask) {
  return drx::reduce_mean(drx::map_fn(client_loss, drx::broadcast(w), x, y, mask));
}

// (w, x, y, mask) -> the clients' mean loss, for `clients` clients.
inline auto loss_program(int64_t clients) {
  return drx::program({{"clients", clients}},
                      [](drx::Value w, drx::Value x, drx::Value y, drx::Value mask) {
                        return average_loss(w, x, y, mask);
                      },
                      {"", "clients", "clients", "clients"});
}

// The least value of the clients' mean loss over w, on the host (the normal
// equations of the weighted least-squares problem, by Gaussian elimination):
// what an algorithm that converges to the population optimum approaches.
inline double optimal_loss(const Data& d) {
  const int64_t n = d.x.shape()[0], e = d.x.shape()[1], dim = d.x.shape()[2];
  std::vector<std::vector<double>> a(static_cast<size_t>(dim),
                                     std::vector<double>(static_cast<size_t>(dim + 1), 0.0));
  for (int64_t k = 0; k < n; ++k) {
    double count = 0;
    for (int64_t i = 0; i < e; ++i) count += d.mask.data<double>()[k * e + i];
    for (int64_t i = 0; i < e; ++i) {
      const double m = d.mask.data<double>()[k * e + i] / count;
      const double* x = d.x.data<double>() + (k * e + i) * dim;
      for (int64_t r = 0; r < dim; ++r) {
        for (int64_t c = 0; c < dim; ++c) a[r][c] += m * x[r] * x[c];
        a[r][dim] += m * x[r] * d.y.data<double>()[k * e + i];
      }
    }
  }
  for (int64_t c = 0; c < dim; ++c) {  // elimination with partial pivoting
    int64_t p = c;
    for (int64_t r = c + 1; r < dim; ++r)
      if (std::abs(a[r][c]) > std::abs(a[p][c])) p = r;
    std::swap(a[c], a[p]);
    for (int64_t r = 0; r < dim; ++r)
      if (r != c) {
        const double f = a[r][c] / a[c][c];
        for (int64_t k = c; k <= dim; ++k) a[r][k] -= f * a[c][k];
      }
  }
  std::vector<double> w(static_cast<size_t>(dim));
  for (int64_t r = 0; r < dim; ++r) w[r] = a[r][dim] / a[r][r];
  double total = 0;
  for (int64_t k = 0; k < n; ++k) {
    double sum = 0, count = 0;
    for (int64_t i = 0; i < e; ++i) {
      const double m = d.mask.data<double>()[k * e + i];
      const double* x = d.x.data<double>() + (k * e + i) * dim;
      double r = -d.y.data<double>()[k * e + i];
      for (int64_t j = 0; j < dim; ++j) r += x[j] * w[j];
      sum += m * r * r;
      count += m;
    }
    total += sum / count;
  }
  return total / static_cast<double>(n);
}

// `k` distinct clients of `n`, drawn uniformly: the cohort as i32[k].
inline drx::Array sample_cohort(std::mt19937& rng, int64_t n, int64_t k) {
  std::vector<int32_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(k));
  return drx::Array::from_vector<int32_t>(all, {k});
}

}  // namespace algos
