// McMahan et al.'s CNN (2017, "Communication-Efficient Learning of Deep Networks from
// Decentralized Data", the MNIST CNN): two 5x5 convolutions with 2x2 max pooling, a dense
// layer and the logits; and nn::Model, the classifier hook of the federated round.
#include <string>
#include <utility>
#include <vector>

#include "drx/nn/layer_params.h"
#include "drx/nn/nn.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/ops/windows.h"

DRX_PUBLIC_OPS_FILE(nn_cnn);

namespace drx::nn {

namespace {

constexpr int64_t kKernel = 5;
constexpr int64_t kConv0 = 32, kConv1 = 64, kDense0 = 512;
const char* const kLayers[] = {"conv0", "conv1", "dense0", "dense1"};

// The spatial size after a SAME convolution (stride 1) and the 2x2 stride-2 VALID pool.
int64_t pooled(int64_t n) { return n / 2; }

// The four layers of `params`, their structure and shapes checked against each other and x.
std::vector<LayerParams> cnn_layers(const Tree& params) {
  const std::string want =
      "a dict {conv0, conv1, dense0, dense1} of dicts {b, w}, as cnn_init makes";
  if (params.kind() != Tree::Kind::dict || params.size() != 4)
    throw Error("cnn_apply: params must be " + want + ", got " + params.structure());
  std::vector<LayerParams> layers;
  for (size_t l = 0; l < 4; ++l) {
    const std::string name = kLayers[l];
    if (params.keys()[l] != name)
      throw Error("cnn_apply: params must be " + want + ", got keys " + params.structure());
    layers.push_back(layer_params("cnn_apply", name, params.children()[l]));
  }
  auto bad = [&](size_t l, const std::string& expected) {
    throw Error("cnn_apply: layer '" + std::string(kLayers[l]) + "' expects " + expected +
                ", got w " + layers[l].w.type().str() + ", b " + layers[l].b.type().str());
  };
  for (size_t l = 0; l < 4; ++l) {
    const Value& w = layers[l].w;
    const Value& b = layers[l].b;
    const bool conv = l < 2;
    const int64_t rank = conv ? 4 : 2;
    const std::string shape_text =
        conv ? "w [kh, kw, in, out] and b [out]" : "w [in, out] and b [out]";
    if (w.ndim() != rank || b.ndim() != 1 || b.shape()[0] != w.shape().back() ||
        !is_floating(w.dtype()) || b.dtype() != w.dtype())
      bad(l, "floating " + shape_text + " of one dtype");
    // conv1 reads conv0's channels, dense1 dense0's features (dense0's input is checked
    // against the feature map in apply_cnn).
    if (l == 1 || l == 3) {
      const int64_t in = w.shape()[conv ? 2 : 0];
      const int64_t prev_out = layers[l - 1].w.shape().back();
      if (in != prev_out)
        bad(l, "the " + std::to_string(prev_out) + " outputs of layer '" + kLayers[l - 1] +
                   "' as its input (w [" + (conv ? "kh, kw, " : "") + std::to_string(prev_out) +
                   ", out])");
    }
  }
  return layers;
}

// x as NHWC images: [B, H, W, C] as it is, rows [B, H * W * C] of square images reshaped.
Value as_images(const Value& x, int64_t channels) {
  if (x.ndim() == 4) {
    if (x.shape()[3] != channels)
      throw Error("cnn_apply: x " + x.type().str() + " has " + std::to_string(x.shape()[3]) +
                  " channels, but layer 'conv0' (w [kh, kw, " + std::to_string(channels) +
                  ", out]) expects " + std::to_string(channels));
    return x;
  }
  if (x.ndim() != 2)
    throw Error(
        "cnn_apply: x must be images [B, H, W, C] or rows [B, H * W * C] of square images, "
        "got " +
        x.type().str());
  const int64_t features = x.shape()[1];
  int64_t side = 0;
  while ((side + 1) * (side + 1) * channels <= features) ++side;
  if (side == 0 || side * side * channels != features)
    throw Error("cnn_apply: rows x " + x.type().str() + " are not square images of " +
                std::to_string(channels) +
                " channel(s), the input of layer 'conv0'; pass images [B, H, W, C] instead");
  return reshape(x, {x.shape()[0], side, side, channels});
}

// The network, each convolution and dense layer made by `conv` and `dense_fn`.
template <class Conv, class Dense>
Value apply_cnn(const Tree& params, const Value& x, const Conv& conv, const Dense& dense_fn) {
  const std::vector<LayerParams> p = cnn_layers(params);
  Value h = as_images(x, p[0].w.shape()[2]);
  if (!is_floating(h.dtype())) throw Error("cnn_apply: x must be floating, got " + h.type().str());
  for (size_t l = 0; l < 2; ++l)
    h = max_pool(relu(conv(h, p[l].w, p[l].b)), {2, 2}, {2, 2}, "VALID");
  const int64_t flat = h.shape()[1] * h.shape()[2] * h.shape()[3];
  if (p[2].w.shape()[0] != flat)
    throw Error("cnn_apply: layer 'dense0' expects the " + std::to_string(flat) +
                " features of x " + x.type().str() + " after the convolutions (" +
                shape_str(Shape{h.shape()[1], h.shape()[2], h.shape()[3]}) + "), got w " +
                p[2].w.type().str());
  h = reshape(h, {h.shape()[0], flat});
  h = relu(dense_fn(h, p[2].w, p[2].b));
  return dense_fn(h, p[3].w, p[3].b);
}

}  // namespace

DRX_PUBLIC_OP("nn::cnn_init",
              "(height: int64, width: int64, channels: int64, classes: int64, seed: uint64, "
              "dtype: DType = f32) -> Tree",
              "McMahan et al.'s CNN parameters {conv0, conv1, dense0, dense1} as a Tree of "
              "Arrays.");
Tree cnn_init(int64_t height, int64_t width, int64_t channels, int64_t classes, uint64_t seed,
              DType dtype) {
  if (height < 4 || width < 4 || channels < 1 || classes < 1)
    throw Error(
        "cnn_init: expected images of at least 4x4 pixels, at least 1 channel and 1 "
        "class, got " +
        std::to_string(height) + "x" + std::to_string(width) + "x" + std::to_string(channels) +
        " and " + std::to_string(classes) + " classes");
  const int64_t flat = pooled(pooled(height)) * pooled(pooled(width)) * kConv1;
  const std::vector<Shape> shapes = {{kKernel, kKernel, channels, kConv0},
                                     {kKernel, kKernel, kConv0, kConv1},
                                     {flat, kDense0},
                                     {kDense0, classes}};
  std::vector<std::pair<std::string, Tree>> items;
  for (size_t l = 0; l < shapes.size(); ++l) {
    const Shape& s = shapes[l];
    const int64_t out = s.back();
    const int64_t fan_in = s.size() == 4 ? s[0] * s[1] * s[2] : s[0];
    const int64_t fan_out = s.size() == 4 ? s[0] * s[1] * out : out;
    Array w = init_array(Init::he_normal, s, fan_in, fan_out, derive_init_seed(seed, l), dtype);
    Array b = init_array(Init::zeros, {out}, fan_in, fan_out, 0, dtype);
    items.emplace_back(kLayers[l], Tree::dict({{"b", Tree(b)}, {"w", Tree(w)}}));
  }
  return Tree::dict(std::move(items));
}

DRX_PUBLIC_OP(
    "nn::cnn_apply",
    "(params: Tree, x: Value) -> Value | (params: Tree, x: Value, policy: Policy) -> Value",
    "McMahan et al.'s CNN on images or square image rows; returns the logits.");
Value cnn_apply(const Tree& params, const Value& x) {
  return apply_cnn(
      params, x,
      [](const Value& h, const Value& w, const Value& b) {
        return conv2d(h, w, b, {1, 1}, "SAME");
      },
      [](const Value& h, const Value& w, const Value& b) { return dense(h, w, b); });
}

Value cnn_apply(const Tree& params, const Value& x, const Policy& policy) {
  return apply_cnn(
      params, x,
      [&](const Value& h, const Value& w, const Value& b) {
        return conv2d(h, w, b, {1, 1}, "SAME", policy);
      },
      [&](const Value& h, const Value& w, const Value& b) { return dense(h, w, b, policy); });
}

Model Model::mlp() {
  return Model{"mlp", [](const Tree& params, const Value& x, const Policy& policy) {
                 return mlp_apply(params, x, policy);
               }};
}

Model Model::cnn() {
  return Model{"cnn", [](const Tree& params, const Value& x, const Policy& policy) {
                 return cnn_apply(params, x, policy);
               }};
}

Model Model::named(const std::string& name) {
  if (name == "mlp") return mlp();
  if (name == "cnn") return cnn();
  throw Error("model '" + name + "' is not known (expected mlp or cnn)");
}

}  // namespace drx::nn
