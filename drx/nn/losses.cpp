#include "drx/nn/nn.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"

DRX_PUBLIC_OPS_FILE(nn_losses);

namespace drx::nn {

namespace {
void check_logits_labels(const char* op, const Value& logits, const Value& labels) {
  if (logits.ndim() != 2 || !is_floating(logits.dtype()) || labels.ndim() != 1 ||
      !is_integer(labels.dtype()) || labels.shape()[0] != logits.shape()[0])
    throw TypeError(std::string(op) +
                    ": expected floating logits [n, classes] and integer labels [n], got logits " +
                    logits.type().str() + ", labels " + labels.type().str());
}
}  // namespace

DRX_PUBLIC_OP("nn::sigmoid_binary_cross_entropy", "(logits: Value, labels: Value) -> Value",
              "Elementwise stable sigmoid binary cross-entropy (optax's).");
Value sigmoid_binary_cross_entropy(const Value& logits, const Value& labels) {
  if (!is_floating(logits.dtype()) || labels.dtype() != logits.dtype())
    throw TypeError(
        "sigmoid_binary_cross_entropy: expected floating logits and labels of the "
        "same dtype, got logits " +
        logits.type().str() + ", labels " + labels.type().str());
  return softplus(logits) - labels * logits;
}

DRX_PUBLIC_OP("nn::softmax_cross_entropy", "(logits: Value, labels: Value) -> Value",
              "Per-example softmax cross-entropy with integer labels.");
Value softmax_cross_entropy(const Value& logits, const Value& labels) {
  check_logits_labels("softmax_cross_entropy", logits, labels);
  Value onehot = one_hot(labels, logits.shape()[1], logits.dtype());
  return -sum(log_softmax(logits, -1) * onehot, {1});
}

DRX_PUBLIC_OP("nn::masked_mean_loss", "(logits: Value, labels: Value, mask: Value) -> Value",
              "Mean cross-entropy over the real (mask 1) examples of a padded batch.");
Value masked_mean_loss(const Value& logits, const Value& labels, const Value& mask) {
  check_logits_labels("masked_mean_loss", logits, labels);
  if (mask.shape() != labels.shape())
    throw TypeError("masked_mean_loss: mask " + mask.type().str() +
                    " must have the labels' shape " + labels.type().str());
  Value m = astype(mask, logits.dtype());
  return sum(m * softmax_cross_entropy(logits, labels)) / maximum(sum(m), 1.0);
}

DRX_PUBLIC_OP("nn::correct", "(logits: Value, labels: Value) -> Value",
              "1 where the first largest logit's index equals the label, else 0.");
Value correct(const Value& logits, const Value& labels) {
  check_logits_labels("correct", logits, labels);
  // argmax as the first index attaining the maximum (numpy's tie rule), without an argmax op.
  Value l = stop_gradient(logits);
  const int64_t classes = logits.shape()[1];
  Value at_max = equal(l, max(l, {1}, true));
  Value index = iota(l.shape(), 1, labels.dtype());
  Value none = full_like(index, static_cast<double>(classes));
  Value argmax = min(where(at_max, index, none), {1});
  return astype(equal(argmax, labels), logits.dtype());
}

DRX_PUBLIC_OP("nn::accuracy", "(logits: Value, labels: Value) -> Value",
              "mean(correct(logits, labels)).");
Value accuracy(const Value& logits, const Value& labels) { return mean(correct(logits, labels)); }

}  // namespace drx::nn
