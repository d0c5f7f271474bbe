#pragma once
// Small neural-network building blocks on traced Values: dense layers, a ReLU
// MLP whose parameters are a Tree, seeded initialisers, and the classification
// losses and metrics used by federated training (masked for padded batches).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "drx/array/array.h"
#include "drx/core/value.h"
#include "drx/nn/precision.h"
#include "drx/trace/tree.h"

namespace drx::nn {

enum class Init { glorot_uniform, he_normal, lecun_normal, zeros };

// An array of `shape` drawn from `init`:
//   glorot_uniform  U(-l, l), l = sqrt(6 / (fan_in + fan_out))
//   he_normal       N(0, 2 / fan_in)   (plain normal, as PyTorch's kaiming_normal_)
//   lecun_normal    N(0, 1 / fan_in)
//   zeros
// Seeded and platform-independent: the bits come from std::mt19937_64 (fully specified by the
// standard) turned into doubles and normals by our own code (Box-Muller), not by the
// implementation-defined std::*_distribution. dtype must be floating-point; fans must be
// positive for the random initialisers. Throws drx::Error otherwise.
Array init_array(Init init, const Shape& shape, int64_t fan_in, int64_t fan_out, uint64_t seed,
                 DType dtype = DType::f32);

// N(0, stddev^2) samples of `shape` (f32 or f64), seeded and platform-independent as init_array.
Array normal_array(const Shape& shape, double stddev, uint64_t seed, DType dtype = DType::f32);

// A seed for stream `stream` (a layer, a leaf) of a model seeded with `seed`: decorrelated from
// the others (SplitMix64 of both).
uint64_t derive_init_seed(uint64_t seed, uint64_t stream);

// MLP parameters as a Tree of Arrays: dict {"layer0": {"b": [out], "w": [in, out]}, ...} for
// sizes = {in, hidden..., out}. Layer keys are zero-padded when there are more than 10 layers, so
// sorted key order is layer order. Weights from weight_init (each layer its own stream derived
// from seed), biases zero.
Tree mlp_init(const std::vector<int64_t>& sizes, uint64_t seed, Init weight_init = Init::he_normal,
              DType dtype = DType::f32);

// x @ w + b.
Value dense(const Value& x, const Value& w, const Value& b);
// x @ w + b under `policy`: the product of x and w in its compute dtype, into its output dtype,
// plus b in the output dtype.
Value dense(const Value& x, const Value& w, const Value& b, const Policy& policy);
// (x - mean) / sqrt(var + eps) * scale + bias over the last axis (population
// variance, as torch.nn.LayerNorm and flax); scale and bias have the last
// axis's size.
Value layer_norm(const Value& x, const Value& scale, const Value& bias, double eps = 1e-5);
// Rows `ids` (an integer array of any shape) of `table` [vocabulary, dim]:
// the result is ids.shape + [dim]. Its gradient scatters into the table.
Value embedding(const Value& table, const Value& ids);
// Dense layers in key order with ReLU between them; returns the logits (no final activation).
// params: a Tree of Values as made by mlp_init (Arrays become constants).
Value mlp_apply(const Tree& params, const Value& x);
// mlp_apply under `policy`: each layer's product in its compute dtype (the weights cast once).
Value mlp_apply(const Tree& params, const Value& x, const Policy& policy);

// A 2-D convolution layer in flax's layout: x [N, H, W, C], w [kh, kw, C / groups, O], b [O]
// -> [N, H', W', O]; padding "SAME" (H' = ceil(H / stride)), "VALID" or (low, high) pairs;
// empty strides are 1s.
Value conv2d(const Value& x, const Value& w, const Value& b, const std::vector<int64_t>& strides,
             const std::string& padding, int64_t feature_group_count = 1);
// conv2d under `policy`: the convolution on compute-dtype operands into the output dtype (bf16
// operands accumulate in f32), plus b in the output dtype.
Value conv2d(const Value& x, const Value& w, const Value& b, const std::vector<int64_t>& strides,
             const std::string& padding, const Policy& policy, int64_t feature_group_count = 1);

// McMahan et al.'s CNN (2017) for images [H, W, C]: conv0 5x5 C->32 SAME + bias, ReLU, 2x2
// max pool (stride 2, VALID); conv1 5x5 32->64 likewise; flatten (h, w, c) to
// (H/4) * (W/4) * 64 features (3136 for 28x28); dense0 -> 512, ReLU; dense1 -> classes (logits).
// Parameters as a Tree of Arrays: dict {"conv0": {"b": [32], "w": [5, 5, C, 32]},
// "conv1": {"b": [64], "w": [5, 5, 32, 64]}, "dense0": {"b": [512], "w": [3136, 512]},
// "dense1": {"b": [classes], "w": [512, classes]}}. Weights He-normal, N(0, 2 / fan_in) with
// fan_in = 5 * 5 * C_in for the convolutions, each layer its own stream derived from seed as
// mlp_init's; biases zero. Throws drx::Error for images under 4x4 or no channel or class.
Tree cnn_init(int64_t height, int64_t width, int64_t channels, int64_t classes, uint64_t seed,
              DType dtype = DType::f32);
// The CNN's logits [B, classes] for x: images [B, H, W, C], or rows [B, H * W * C] of square
// images (as drx fedavg feeds its 784 pixels), reshaped to [B, H, H, C]. params: a Tree of
// Values or Arrays as cnn_init makes (any widths whose shapes agree); a tree of another
// structure or shapes is a drx::Error naming the layer and the shapes.
Value cnn_apply(const Tree& params, const Value& x);
// cnn_apply under `policy`: convolutions and dense products on compute-dtype operands into the
// output dtype (conv2d's and dense's policy overloads); ReLU and pooling in the output dtype.
Value cnn_apply(const Tree& params, const Value& x, const Policy& policy);

// A classifier as the federated round and evaluation take it (optim::RoundSpec::model,
// optim::evaluate_fn): `apply` gives logits [n, classes] for params and input rows x [n, ...]
// under a precision policy (the round passes its RoundSpec's policy, or the params' dtype
// throughout, Policy{dt, dt, dt}, where that policy computes in its parameters' dtype).
// `name` names the model in messages.
struct Model {
  std::string name;
  std::function<Value(const Tree& params, const Value& x, const Policy& policy)> apply;

  static Model mlp();  // mlp_apply: the default
  static Model cnn();  // cnn_apply
  // "mlp" or "cnn"; anything else throws drx::Error listing the choices.
  static Model named(const std::string& name);
};

// Batch normalisation over every axis but the last (features), as flax's BatchNorm: with
// `training`, x is normalised by its own mean and (population) variance and the running
// statistics move towards them, running = momentum * running + (1 - momentum) * batch; without,
// x is normalised by the running statistics, which come back unchanged. The statistics are
// explicit state: pass what the last call returned.
struct BatchNormStats {
  Value mean, var;  // [features] each, x's dtype
};
struct BatchNormOutput {
  Value y;
  BatchNormStats stats;  // the running statistics after this call
};
BatchNormOutput batch_norm(const Value& x, const Value& scale, const Value& bias,
                           const BatchNormStats& running, bool training, double momentum = 0.99,
                           double eps = 1e-5);
// Running statistics to start from: mean 0, variance 1.
BatchNormStats batch_norm_stats(int64_t features, DType dtype = DType::f32);

// Group normalisation (Wu & He), as flax's GroupNorm: x [N, ..., C] with C split into
// num_groups groups; each example's group is normalised by its mean and population variance
// over the spatial axes and the group's features; scale and bias [C].
Value group_norm(const Value& x, int64_t num_groups, const Value& scale, const Value& bias,
                 double eps = 1e-5);

// Per-example softmax cross-entropy, logits [n, classes], integer labels (i32/i64) [n] -> [n].
Value softmax_cross_entropy(const Value& logits, const Value& labels);
// Elementwise -labels log(sigmoid(logits)) - (1 - labels) log(1 - sigmoid(logits)),
// computed stably as softplus(logits) - labels * logits (optax's
// sigmoid_binary_cross_entropy); labels are probabilities of logits' dtype
// and shape (they broadcast).
Value sigmoid_binary_cross_entropy(const Value& logits, const Value& labels);
// sum(mask * ce) / max(sum(mask), 1): the mean over real examples (mask 1) of a padded batch; a
// fully masked batch gives 0 and a zero gradient. mask [n] of any numeric dtype.
Value masked_mean_loss(const Value& logits, const Value& labels, const Value& mask);
// 1 where the first index of the largest logit equals the label, else 0; [n] in logits' dtype.
Value correct(const Value& logits, const Value& labels);
// mean(correct(logits, labels)).
Value accuracy(const Value& logits, const Value& labels);

}  // namespace drx::nn
