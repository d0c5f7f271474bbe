#include <string>

#include "drx/nn/layer_params.h"
#include "drx/nn/nn.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitives.h"

DRX_PUBLIC_OPS_FILE(nn_layers);

namespace drx::nn {

namespace {

std::string type_text(const Tree& t) {
  if (t.kind() == Tree::Kind::array)
    return std::string(dtype_name(t.array().dtype())) + shape_str(t.array().shape());
  if (t.kind() == Tree::Kind::value) return t.value().type().str();
  return "a tree of structure " + t.structure();
}

Value leaf(const std::string& op, const Tree& t, const std::string& where) {
  if (t.kind() == Tree::Kind::array) return constant(t.array());
  if (t.kind() != Tree::Kind::value)
    throw Error(op + ": " + where + " must be a leaf (an array), got " + type_text(t));
  return t.value();
}

void check_dense(const Value& x, const Value& w, const Value& b) {
  if (w.ndim() != 2 || b.ndim() != 1 || b.shape()[0] != w.shape()[1] || x.ndim() < 1 ||
      x.shape().back() != w.shape()[0])
    throw TypeError("dense: expected x [..., in], w [in, out], b [out], got x " + x.type().str() +
                    ", w " + w.type().str() + ", b " + b.type().str());
}

// Dense layers in key order with ReLU between them, each made by `layer`.
template <class Layer>
Value apply_layers(const Tree& params, const Value& x, const Layer& layer_fn) {
  if (params.kind() != Tree::Kind::dict || params.size() == 0)
    throw Error("mlp_apply: params must be a non-empty dict of layers (see mlp_init), got " +
                params.structure());
  Value h = x;
  for (size_t l = 0; l < params.size(); ++l) {
    const std::string& key = params.keys()[l];
    const Tree& layer = params.children()[l];
    const LayerParams p = layer_params("mlp_apply", key, layer);
    if (l > 0) h = relu(h);
    h = layer_fn(h, p.w, p.b);
  }
  return h;
}

}  // namespace

LayerParams layer_params(const std::string& op, const std::string& key, const Tree& layer) {
  if (layer.kind() != Tree::Kind::dict || layer.size() != 2 || !layer.contains("w") ||
      !layer.contains("b"))
    throw Error(op + ": layer '" + key + "' must be a dict {b, w}, got " + layer.structure());
  return {leaf(op, layer["w"], key + ".w"), leaf(op, layer["b"], key + ".b")};
}

DRX_PUBLIC_OP("nn::dense",
              "(x: Value, w: Value, b: Value) -> Value | "
              "(x: Value, w: Value, b: Value, policy: Policy) -> Value",
              "x @ w + b (under a precision policy: the product in its compute dtype).");
Value dense(const Value& x, const Value& w, const Value& b) {
  check_dense(x, w, b);
  return matmul(x, w) + b;
}

Value dense(const Value& x, const Value& w, const Value& b, const Policy& policy) {
  check_dense(x, w, b);
  return nn::matmul(x, w, policy) + policy.to_output(b);
}

DRX_PUBLIC_OP("nn::layer_norm",
              "(x: Value, scale: Value, bias: Value, eps: double = 1e-5) -> Value",
              "Layer normalisation over the last axis.");
Value layer_norm(const Value& x, const Value& scale, const Value& bias, double eps) {
  if (x.ndim() < 1 || !is_floating(x.dtype()) || scale.shape() != Shape{x.shape().back()} ||
      bias.shape() != scale.shape() || scale.dtype() != x.dtype() || bias.dtype() != x.dtype())
    throw TypeError(
        "layer_norm: expected floating x [..., d] with scale [d] and bias [d] of its "
        "dtype, got x " +
        x.type().str() + ", scale " + scale.type().str() + ", bias " + bias.type().str());
  if (!(eps >= 0)) throw Error("layer_norm: eps " + std::to_string(eps) + " is negative");
  // f32 and f64 as one primitive (one pass, the composite's bits); other floats as the
  // composite, each op rounding in the dtype.
  if ((x.dtype() == DType::f32 || x.dtype() == DType::f64) && x.shape().back() >= 1)
    return detail::layer_norm_normalize(x, eps)[0] * scale + bias;
  Value centred = x - mean(x, {-1}, true);
  Value var = mean(square(centred), {-1}, true);
  return centred * rsqrt(var + eps) * scale + bias;
}

DRX_PUBLIC_OP("nn::embedding", "(table: Value, ids: Value) -> Value",
              "Rows ids of table: ids.shape + [dim].");
Value embedding(const Value& table, const Value& ids) {
  if (table.ndim() != 2 || !is_integer(ids.dtype()))
    throw TypeError("embedding: expected a table [vocabulary, dim] and integer ids, got table " +
                    table.type().str() + ", ids " + ids.type().str());
  return take(table, ids, 0);
}

DRX_PUBLIC_OP(
    "nn::mlp_apply",
    "(params: Tree, x: Value) -> Value | (params: Tree, x: Value, policy: Policy) -> Value",
    "Dense layers with ReLU between them; returns the logits.");
Value mlp_apply(const Tree& params, const Value& x) {
  return apply_layers(
      params, x, [](const Value& h, const Value& w, const Value& b) { return dense(h, w, b); });
}

Value mlp_apply(const Tree& params, const Value& x, const Policy& policy) {
  return apply_layers(params, x, [&](const Value& h, const Value& w, const Value& b) {
    return dense(h, w, b, policy);
  });
}

}  // namespace drx::nn
