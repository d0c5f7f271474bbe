#include "drx/nn/transformer.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "drx/nn/nn.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/transforms/loops.h"

DRX_PUBLIC_OPS_FILE(nn_transformer);

namespace drx::nn {

namespace {

constexpr double kInitStddev = 0.02;  // GPT-2

// The blocks' leaves, in the order transformer_init draws them.
const char* const kBlockLeaves[] = {"attn_b", "attn_w", "fc_b",  "fc_w",  "ln1_b", "ln1_g",
                                    "ln2_b",  "ln2_g",  "out_b", "out_w", "qkv_b", "qkv_w"};

Value leaf_value(const Tree& t, const std::string& path) {
  if (t.kind() == Tree::Kind::array) return constant(t.array());
  if (t.kind() != Tree::Kind::value)
    throw Error("transformer: params." + path + " must be a leaf, got " + t.structure());
  return t.value();
}

Value param(const Tree& params, const std::string& key, const std::string& where = "") {
  if (params.kind() != Tree::Kind::dict || !params.contains(key))
    throw Error("transformer: params" + (where.empty() ? "" : "." + where) + " has no '" + key +
                "' (make them with transformer_init), got " + params.structure());
  return leaf_value(params[key], (where.empty() ? "" : where + ".") + key);
}

void check_shape(const Value& v, const Shape& expected, DType dtype, const std::string& path) {
  if (v.shape() != expected || v.dtype() != dtype || !v.type().placement.empty())
    throw Error("transformer: params." + path + " is " + v.type().str() + ", expected " +
                std::string(dtype_name(dtype)) + shape_str(expected) +
                " for this configuration (unplaced)");
}

// One block's parameters (the layer axis removed), or all blocks' (stacked).
struct Block {
  Value ln1_g, ln1_b, qkv_w, qkv_b, attn_w, attn_b, ln2_g, ln2_b, fc_w, fc_b, out_w, out_b;
  static Block from(const std::vector<Value>& v) {  // in kBlockLeaves order
    return {v[5], v[4], v[11], v[10], v[1], v[0], v[7], v[6], v[3], v[2], v[9], v[8]};
  }
};

bool mixed(const TransformerConfig& c) { return c.policy.compute != c.policy.param; }

// x + attention(LN1(x)), then + MLP(LN2(x)). Mixed precision: the weight matrices arrive in
// the compute dtype already (cast once per call), products run under the policy.
Value block_forward(const TransformerConfig& c, const Block& p, const Value& x) {
  const int64_t d = c.width;
  Value a = layer_norm(x, p.ln1_g, p.ln1_b, c.ln_eps);
  if (!mixed(c)) {
    Value qkv = dense(a, p.qkv_w, p.qkv_b);  // [B, t, 3d]
    const Shape& s = qkv.shape();
    auto part = [&](int64_t i) { return slice(qkv, {0, 0, i * d}, {s[0], s[1], (i + 1) * d}); };
    Value h = x + dense(causal_attention(part(0), part(1), part(2), c.heads), p.attn_w, p.attn_b);
    Value m = layer_norm(h, p.ln2_g, p.ln2_b, c.ln_eps);
    return h + dense(gelu(dense(m, p.fc_w, p.fc_b)), p.out_w, p.out_b);
  }
  const Policy& pol = c.policy;
  // One cast of q, k and v together, before the heads are split.
  Value qkv = pol.to_compute(dense(a, p.qkv_w, p.qkv_b, pol));
  const Shape& s = qkv.shape();
  auto part = [&](int64_t i) { return slice(qkv, {0, 0, i * d}, {s[0], s[1], (i + 1) * d}); };
  Value attended = causal_attention(part(0), part(1), part(2), c.heads, pol);
  Value h = x + dense(attended, p.attn_w, p.attn_b, pol);
  Value m = layer_norm(h, p.ln2_g, p.ln2_b, c.ln_eps);
  return h + dense(pol.to_compute(gelu(dense(m, p.fc_w, p.fc_b, pol))), p.out_w, p.out_b, pol);
}

// The policy's compute dtype for the weight matrices of the blocks (indices into
// kBlockLeaves): cast once, before the layers' scan.
bool is_block_matrix(size_t leaf) {
  const std::string name = kBlockLeaves[leaf];
  return name == "attn_w" || name == "fc_w" || name == "out_w" || name == "qkv_w";
}

}  // namespace

void TransformerConfig::check() const {
  auto positive = [](int64_t v, const char* name) {
    if (v <= 0)
      throw Error(std::string("transformer: ") + name + " must be positive, got " +
                  std::to_string(v));
  };
  positive(vocab, "vocab");
  positive(context, "context");
  positive(layers, "layers");
  positive(width, "width");
  positive(heads, "heads");
  if (mlp < 0) throw Error("transformer: mlp must be positive (or 0 for 4 x width)");
  if (width % heads != 0)
    throw Error("transformer: width " + std::to_string(width) + " is not a multiple of heads " +
                std::to_string(heads));
  if (!(ln_eps >= 0)) throw Error("transformer: ln_eps must not be negative");
}

int64_t TransformerConfig::parameters() const {
  const int64_t d = width, m = mlp_width();
  const int64_t block = 4 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * m + m) + (m * d + d);
  return vocab * d + context * d + layers * block + 2 * d;
}

DRX_PUBLIC_OP("nn::transformer_init",
              "(c: TransformerConfig, seed: uint64, dtype: DType = f32) -> Tree",
              "GPT-2 decoder-only transformer parameters.");
Tree transformer_init(const TransformerConfig& c, uint64_t seed, DType dtype) {
  c.check();
  if (dtype != DType::f32 && dtype != DType::f64)
    throw Error("transformer_init: dtype must be f32 or f64, got " +
                std::string(dtype_name(dtype)));
  const int64_t L = c.layers, d = c.width, m = c.mlp_width();
  const double residual = kInitStddev / std::sqrt(2.0 * static_cast<double>(L));
  uint64_t stream = 0;
  auto normal = [&](const Shape& shape, double stddev) {
    return Tree(normal_array(shape, stddev, derive_init_seed(seed, stream++), dtype));
  };
  auto fill_with = [&](const Shape& shape, double value) {
    Array a(dtype, shape);
    for (int64_t i = 0; i < a.size(); ++i)
      dtype == DType::f64 ? void(a.data<double>()[i] = value)
                          : void(a.data<float>()[i] = static_cast<float>(value));
    return Tree(a);
  };
  Tree blocks = Tree::dict({{"attn_b", fill_with({L, d}, 0)},
                            {"attn_w", normal({L, d, d}, residual)},
                            {"fc_b", fill_with({L, m}, 0)},
                            {"fc_w", normal({L, d, m}, kInitStddev)},
                            {"ln1_b", fill_with({L, d}, 0)},
                            {"ln1_g", fill_with({L, d}, 1)},
                            {"ln2_b", fill_with({L, d}, 0)},
                            {"ln2_g", fill_with({L, d}, 1)},
                            {"out_b", fill_with({L, d}, 0)},
                            {"out_w", normal({L, m, d}, residual)},
                            {"qkv_b", fill_with({L, 3 * d}, 0)},
                            {"qkv_w", normal({L, d, 3 * d}, kInitStddev)}});
  return Tree::dict({{"blocks", blocks},
                     {"lnf_b", fill_with({d}, 0)},
                     {"lnf_g", fill_with({d}, 1)},
                     {"wpe", normal({c.context, d}, kInitStddev)},
                     {"wte", normal({c.vocab, d}, kInitStddev)}});
}

namespace {

// Without a policy the products compute in q's dtype; with one, on its compute dtype into its
// output dtype (the scores, and so the softmax, in f32 under Policy::bf16()).
Value attention(const Value& q, const Value& k, const Value& v, int64_t heads,
                const Policy* policy) {
  if (q.ndim() != 3 || k.type() != q.type() || v.type() != q.type() || !is_floating(q.dtype()) ||
      heads <= 0 || q.shape()[2] % heads != 0)
    throw TypeError(
        "causal_attention: expected floating q, k, v of one type [B, t, d] with d a "
        "multiple of heads " +
        std::to_string(heads) + ", got q " + q.type().str() + ", k " + k.type().str() + ", v " +
        v.type().str());
  const int64_t B = q.shape()[0], t = q.shape()[1], d = q.shape()[2], dh = d / heads;
  auto split_heads = [&](const Value& x) {  // [B, t, d] -> [B, H, t, dh]
    return transpose(reshape(x, {B, t, heads, dh}), {0, 2, 1, 3});
  };
  // q is scaled before the product: t dh multiplications rather than t^2.
  Value qh = split_heads(q * (1.0 / std::sqrt(static_cast<double>(dh))));
  Value kh = split_heads(k), vh = split_heads(v);
  auto product = [&](const Value& a, const Value& b, DotDims dims) {
    return policy ? nn::dot_general(a, b, std::move(dims), *policy)
                  : drx::dot_general(a, b, std::move(dims));
  };
  // scores [B, H, t_query, t_key]
  Value scores = product(qh, kh, {{3}, {3}, {0, 1}, {0, 1}});
  // The mask is a constant of the program (key j <= query i), not recomputed per call.
  Array causal(DType::bool_, {t, t});
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < t; ++j) causal.data<uint8_t>()[i * t + j] = j <= i;
  scores = where(broadcast_to(constant(causal), scores.shape()), scores,
                 full_like(scores, -std::numeric_limits<double>::infinity()));
  Value weights = softmax(scores, -1);
  Value out = product(weights, vh, {{3}, {2}, {0, 1}, {0, 1}});  // [B, H, t, dh]
  return reshape(transpose(out, {0, 2, 1, 3}), {B, t, d});
}

}  // namespace

DRX_PUBLIC_OP("nn::causal_attention",
              "(q: Value, k: Value, v: Value, heads: int64) -> Value | "
              "(q: Value, k: Value, v: Value, heads: int64, policy: Policy) -> Value",
              "Multi-head causal self-attention (under a precision policy: bf16 products, f32 "
              "softmax).");
Value causal_attention(const Value& q, const Value& k, const Value& v, int64_t heads) {
  return attention(q, k, v, heads, nullptr);
}

Value causal_attention(const Value& q, const Value& k, const Value& v, int64_t heads,
                       const Policy& policy) {
  return attention(q, k, v, heads, &policy);
}

DRX_PUBLIC_OP("nn::transformer_logits", "(c: TransformerConfig, params: Tree, ids: Value) -> Value",
              "The transformer's next-token logits.");
Value transformer_logits(const TransformerConfig& c, const Tree& params, const Value& ids) {
  c.check();
  if (ids.ndim() != 2 || !is_integer(ids.dtype()) || ids.shape()[1] > c.context ||
      ids.shape()[1] == 0)
    throw TypeError("transformer_logits: ids must be integer [batch, t] with 0 < t <= context " +
                    std::to_string(c.context) + ", got " + ids.type().str());
  const int64_t L = c.layers, d = c.width, m = c.mlp_width(), t = ids.shape()[1];
  Value wte = param(params, "wte");
  const DType dtype = wte.dtype();
  if (!is_floating(dtype))
    throw Error("transformer: params.wte must be floating, got " + wte.type().str());
  check_shape(wte, {c.vocab, d}, dtype, "wte");
  Value wpe = param(params, "wpe");
  check_shape(wpe, {c.context, d}, dtype, "wpe");
  Value lnf_g = param(params, "lnf_g"), lnf_b = param(params, "lnf_b");
  check_shape(lnf_g, {d}, dtype, "lnf_g");
  check_shape(lnf_b, {d}, dtype, "lnf_b");
  if (params.kind() != Tree::Kind::dict || !params.contains("blocks"))
    throw Error("transformer: params has no 'blocks' (make them with transformer_init)");
  const Tree& blocks = params["blocks"];
  const std::vector<Shape> block_shapes = {{L, d}, {L, d, d}, {L, m},     {L, d, m},
                                           {L, d}, {L, d},    {L, d},     {L, d},
                                           {L, d}, {L, m, d}, {L, 3 * d}, {L, d, 3 * d}};
  if (mixed(c) && dtype != c.policy.param)
    throw Error("transformer: policy " + c.policy.name() + " keeps parameters in " +
                std::string(dtype_name(c.policy.param)) + ", got params.wte " + wte.type().str());
  std::vector<Value> stacked;
  for (size_t i = 0; i < std::size(kBlockLeaves); ++i) {
    stacked.push_back(param(blocks, kBlockLeaves[i], "blocks"));
    check_shape(stacked.back(), block_shapes[i], dtype, std::string("blocks.") + kBlockLeaves[i]);
    // Each weight matrix in the compute dtype once per call, not once per use.
    if (mixed(c) && is_block_matrix(i)) stacked.back() = c.policy.to_compute(stacked.back());
  }

  Value x = embedding(wte, ids) + slice(wpe, {0, 0}, {t, d});
  if (c.scan_layers) {
    std::vector<Tree> leaves(stacked.begin(), stacked.end());
    Tree xs = Tree::list(std::move(leaves));
    auto body = [&](const Tree& carry, const Tree& layer) -> std::pair<Tree, Tree> {
      std::vector<Value> v;
      for (const Tree& leaf : layer.children()) v.push_back(leaf.value());
      return {Tree(block_forward(c, Block::from(v), carry.value())), Tree::list({})};
    };
    x = scan(body, Tree(x), xs).first.value();
  } else {
    for (int64_t l = 0; l < L; ++l) {
      std::vector<Value> v;
      for (const Value& s : stacked) {
        std::vector<int64_t> lo(s.ndim(), 0), hi = s.shape();
        lo[0] = l, hi[0] = l + 1;
        v.push_back(squeeze(slice(s, lo, hi), 0));
      }
      x = block_forward(c, Block::from(v), x);
    }
  }
  Value h = layer_norm(x, lnf_g, lnf_b, c.ln_eps);
  if (mixed(c)) return nn::dot_general(h, c.policy.to_compute(wte), {{2}, {1}, {}, {}}, c.policy);
  return dot_general(h, wte, {{2}, {1}, {}, {}});  // tied output: h @ wte^T
}

DRX_PUBLIC_OP("nn::transformer_loss",
              "(c: TransformerConfig, params: Tree, windows: Value) -> Value",
              "Mean next-token cross-entropy over windows.");
Value transformer_loss(const TransformerConfig& c, const Tree& params, const Value& windows) {
  if (windows.ndim() != 2 || !is_integer(windows.dtype()) || windows.shape()[1] < 2)
    throw TypeError("transformer_loss: windows must be integer [batch, t + 1] with t >= 1, got " +
                    windows.type().str());
  const int64_t B = windows.shape()[0], t = windows.shape()[1] - 1;
  Value inputs = slice(windows, {0, 0}, {B, t});
  Value targets = slice(windows, {0, 1}, {B, t + 1});
  Value logits = transformer_logits(c, params, inputs);
  return mean(softmax_cross_entropy(reshape(logits, {B * t, c.vocab}), reshape(targets, {B * t})));
}

}  // namespace drx::nn
