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

// The peer's count: 3 x (the forward pass's multiply-adds x 2) per example.
inline double round_flops(int64_t cohort, int64_t steps, int64_t batch, int64_t hidden) {
  return static_cast<double>(cohort * steps * batch) * 2.0 *
         static_cast<double>(kIn * hidden + hidden * hidden + hidden * kClasses) * 3.0;
}

}  // namespace w1
