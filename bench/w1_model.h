#pragma once
// The model of workload W1 (issue 5), shared by the benchmarks: a 784-H-H-10
// ReLU MLP with softmax cross-entropy, parameters {w1, b1, w2, b2, w3, b3}.
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "drx/drx.h"

namespace w1 {

constexpr int64_t kIn = 784, kClasses = 10;
constexpr double kLearningRate = 0.05;

inline const char* kLayerKeys[3][2] = {{"w1", "b1"}, {"w2", "b2"}, {"w3", "b3"}};

inline drx::Value loss(const drx::Tree& p, const drx::Value& x, const drx::Value& labels) {
  drx::Value h = drx::relu(drx::matmul(x, p["w1"].value()) + p["b1"].value());
  h = drx::relu(drx::matmul(h, p["w2"].value()) + p["b2"].value());
  drx::Value logits = drx::matmul(h, p["w3"].value()) + p["b3"].value();
  return -drx::mean(drx::sum(drx::log_softmax(logits, -1) * drx::one_hot(labels, kClasses), {1}));
}

// The peer's scheme: He-normal weights, zero biases.
inline drx::Tree init_params(int64_t hidden, std::mt19937_64& rng) {
  const int64_t dims[4] = {kIn, hidden, hidden, kClasses};
  std::vector<std::pair<std::string, drx::Tree>> items;
  for (int l = 0; l < 3; ++l) {
    drx::Array w(drx::f32, {dims[l], dims[l + 1]});
    std::normal_distribution<float> normal(0.0f, std::sqrt(2.0f / static_cast<float>(dims[l])));
    for (int64_t i = 0; i < w.size(); ++i) w.data<float>()[i] = normal(rng);
    items.emplace_back(kLayerKeys[l][0], drx::Tree(w));
    items.emplace_back(kLayerKeys[l][1], drx::Tree(drx::Array(drx::f32, {dims[l + 1]})));
  }
  return drx::Tree::dict(std::move(items));
}

// One SGD step on a batch.
inline drx::Tree sgd_step(const drx::Tree& p, const drx::Value& xb, const drx::Value& yb) {
  drx::Tree grads = drx::grad(loss)(p, xb, yb);
  return drx::tree_map(
      [](const drx::Value& w, const drx::Value& dw) { return w - kLearningRate * dw; }, p, grads);
}

// `steps` local SGD steps on x [steps * batch, 784], y [steps * batch]; step s on rows
// [s * batch, (s + 1) * batch). Unrolled at trace time: the program grows with the steps.
inline drx::Tree local_train_unrolled(drx::Tree p, const drx::Value& x, const drx::Value& y,
                                      int64_t steps, int64_t batch) {
  for (int64_t s = 0; s < steps; ++s)
    p = sgd_step(p, drx::slice(x, {s * batch, 0}, {(s + 1) * batch, kIn}),
                 drx::slice(y, {s * batch}, {(s + 1) * batch}));
  return p;
}

// The same steps as one scan: the step is traced once.
inline drx::Tree local_train_scan(const drx::Tree& p, const drx::Value& x, const drx::Value& y,
                                  int64_t steps, int64_t batch,
                                  const drx::ScanOptions& options = {}) {
  drx::Tree per_step = drx::Tree::list({drx::Tree(drx::reshape(x, {steps, batch, kIn})),
                                        drx::Tree(drx::reshape(y, {steps, batch}))});
  auto step = [](const drx::Tree& c, const drx::Tree& b) -> std::pair<drx::Tree, drx::Tree> {
    return {sgd_step(c, b[0].value(), b[1].value()), drx::Tree()};
  };
  return drx::scan(step, p, per_step, options).first;
}

// The peer's count: 3 x (the forward pass's multiply-adds x 2) per example.
inline double round_flops(int64_t cohort, int64_t steps, int64_t batch, int64_t hidden) {
  return static_cast<double>(cohort * steps * batch) * 2.0 *
         static_cast<double>(kIn * hidden + hidden * hidden + hidden * kClasses) * 3.0;
}

}  // namespace w1
