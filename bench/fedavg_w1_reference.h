#pragma once
// A plain-loop float64 FedAvg round for W1 (MLP with ReLU, softmax
// cross-entropy, local SGD, server = mean of client models). It shares no code
// with drx, so `fedavg_w1 --check` can show that the jitted round computes the
// workload the peer computes, not just something of the same cost.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace w1ref {

// Layer l maps dims[l] -> dims[l+1]; w[l] is row-major [dims[l], dims[l+1]].
struct Mlp {
  std::vector<int64_t> dims;
  std::vector<std::vector<double>> w, b;
};

// x: [n, d] row-major; labels: n class ids. One SGD step on the mean loss.
inline void sgd_step(Mlp& m, const float* x, const int32_t* labels, int64_t n, double lr) {
  const size_t layers = m.w.size();
  // acts[l]: the input of layer l (acts[0] = x); pre[l]: layer l's output before ReLU.
  std::vector<std::vector<double>> acts(layers + 1), pre(layers);
  acts[0].assign(x, x + n * m.dims[0]);
  for (size_t l = 0; l < layers; ++l) {
    const int64_t in = m.dims[l], out = m.dims[l + 1];
    pre[l].assign(static_cast<size_t>(n * out), 0.0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < out; ++j) {
        double s = m.b[l][static_cast<size_t>(j)];
        for (int64_t k = 0; k < in; ++k)
          s += acts[l][static_cast<size_t>(r * in + k)] * m.w[l][static_cast<size_t>(k * out + j)];
        pre[l][static_cast<size_t>(r * out + j)] = s;
      }
    acts[l + 1] = pre[l];
    if (l + 1 < layers)
      for (double& v : acts[l + 1]) v = std::max(v, 0.0);
  }
  // d(mean cross-entropy)/d(logits) = (softmax - one_hot) / n.
  const int64_t classes = m.dims.back();
  std::vector<double> delta(static_cast<size_t>(n * classes));
  for (int64_t r = 0; r < n; ++r) {
    const double* z = &pre[layers - 1][static_cast<size_t>(r * classes)];
    double mx = *std::max_element(z, z + classes), total = 0;
    for (int64_t j = 0; j < classes; ++j) total += std::exp(z[j] - mx);
    for (int64_t j = 0; j < classes; ++j)
      delta[static_cast<size_t>(r * classes + j)] =
          (std::exp(z[j] - mx) / total - (labels[r] == j ? 1.0 : 0.0)) / static_cast<double>(n);
  }
  for (size_t l = layers; l-- > 0;) {
    const int64_t in = m.dims[l], out = m.dims[l + 1];
    std::vector<double> gw(static_cast<size_t>(in * out), 0.0), gb(static_cast<size_t>(out), 0.0);
    std::vector<double> below(static_cast<size_t>(n * in), 0.0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < out; ++j) {
        double d = delta[static_cast<size_t>(r * out + j)];
        gb[static_cast<size_t>(j)] += d;
        for (int64_t k = 0; k < in; ++k) {
          gw[static_cast<size_t>(k * out + j)] += acts[l][static_cast<size_t>(r * in + k)] * d;
          below[static_cast<size_t>(r * in + k)] += m.w[l][static_cast<size_t>(k * out + j)] * d;
        }
      }
    if (l > 0)  // through the ReLU of the layer below
      for (size_t i = 0; i < below.size(); ++i)
        if (pre[l - 1][i] <= 0) below[i] = 0;
    for (size_t i = 0; i < gw.size(); ++i) m.w[l][i] -= lr * gw[i];
    for (size_t i = 0; i < gb.size(); ++i) m.b[l][i] -= lr * gb[i];
    delta = std::move(below);
  }
}

// xs: [cohort, steps * batch, dims[0]], ys: [cohort, steps * batch].
inline Mlp fedavg_round(const Mlp& server, const float* xs, const int32_t* ys, int64_t cohort,
                        int64_t steps, int64_t batch, double lr) {
  Mlp mean = server;
  for (auto& v : mean.w) std::fill(v.begin(), v.end(), 0.0);
  for (auto& v : mean.b) std::fill(v.begin(), v.end(), 0.0);
  const int64_t per_client = steps * batch, d = server.dims[0];
  for (int64_t c = 0; c < cohort; ++c) {
    Mlp m = server;
    for (int64_t s = 0; s < steps; ++s) {
      int64_t row = c * per_client + s * batch;
      sgd_step(m, xs + row * d, ys + row, batch, lr);
    }
    for (size_t l = 0; l < m.w.size(); ++l) {
      for (size_t i = 0; i < m.w[l].size(); ++i) mean.w[l][i] += m.w[l][i] / cohort;
      for (size_t i = 0; i < m.b[l].size(); ++i) mean.b[l][i] += m.b[l][i] / cohort;
    }
  }
  return mean;
}

}  // namespace w1ref
