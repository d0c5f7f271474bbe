#pragma once
// Small neural-network building blocks on traced Values: dense layers, a ReLU
// MLP whose parameters are a Tree, seeded initialisers, and the classification
// losses and metrics used by federated training (masked for padded batches).
#include <cstdint>
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
