#pragma once
// A decoder-only transformer language model (GPT-2's architecture): token and learned position
// embeddings, `layers` pre-LayerNorm blocks of causal multi-head self-attention and a GELU MLP,
// a final LayerNorm, and logits from the token embedding (tied output). Parameters are a Tree;
// the blocks' parameters are stacked along a leading layer axis so the blocks run as one scan
// (traced and compiled once, whatever the depth). Every derivative comes from drx's AD.
#include <cstdint>

#include "drx/array/array.h"
#include "drx/core/value.h"
#include "drx/nn/precision.h"
#include "drx/trace/tree.h"

namespace drx::nn {

struct TransformerConfig {
  int64_t vocab = 256;   // token ids in [0, vocab)
  int64_t context = 64;  // the longest input, T (the rows of the position embedding)
  int64_t layers = 2;
  int64_t width = 64;  // d, the residual stream
  int64_t heads = 4;   // d % heads == 0
  int64_t mlp = 0;     // the MLP's hidden width; 0: 4 d
  double ln_eps = 1e-5;
  bool scan_layers = true;  // false: the blocks unrolled (one copy per layer in the program)
  // Precision (drx/nn/precision.h). Policy::bf16(): f32 parameters, each weight matrix and the
  // embedding cast to bf16 once per call, every product on bf16 operands with f32 accumulation
  // and results; the residual stream, LayerNorm, softmax, GELU and the loss in f32 (GELU's
  // output is rounded to bf16 once, for the product it feeds). A policy with compute == param
  // (the default) computes in the parameters' dtype, as written.
  Policy policy;

  int64_t mlp_width() const { return mlp > 0 ? mlp : 4 * width; }
  int64_t head_width() const { return width / heads; }
  // Throws drx::Error naming the field for a non-positive size or width % heads != 0.
  void check() const;
  // The number of parameters (the tied embedding counted once).
  int64_t parameters() const;
};

// GPT-2's initialisation, seeded: every weight matrix and both embeddings N(0, 0.02^2), the two
// projections into the residual stream (attention output, MLP output) N(0, (0.02/sqrt(2L))^2),
// biases 0, LayerNorm gains 1 and biases 0. The tree (keys sorted):
//   {"blocks": {"attn_b" [L,d], "attn_w" [L,d,d], "fc_b" [L,m], "fc_w" [L,d,m],
//               "ln1_b" [L,d], "ln1_g" [L,d], "ln2_b" [L,d], "ln2_g" [L,d],
//               "out_b" [L,d], "out_w" [L,m,d], "qkv_b" [L,3d], "qkv_w" [L,d,3d]},
//    "lnf_b" [d], "lnf_g" [d], "wpe" [T,d], "wte" [V,d]}
// qkv_w's columns are q, then k, then v; head h owns columns [h dh, (h+1) dh) of each.
Tree transformer_init(const TransformerConfig& c, uint64_t seed, DType dtype = DType::f32);

// Causal multi-head self-attention of q, k, v [B, t, d] with `heads` heads: per head
// softmax(q k^T / sqrt(dh) with key j > query i masked to -inf) v, in q's dtype with the row
// maximum subtracted; heads concatenated back to [B, t, d].
Value causal_attention(const Value& q, const Value& k, const Value& v, int64_t heads);
// The same with both products under `policy` (bf16 operands, f32 scores and softmax), in the
// policy's output dtype.
Value causal_attention(const Value& q, const Value& k, const Value& v, int64_t heads,
                       const Policy& policy);

// Logits [B, t, vocab] for integer ids [B, t], t <= context. params: as transformer_init
// makes them (Arrays become constants), in one floating dtype.
Value transformer_logits(const TransformerConfig& c, const Tree& params, const Value& ids);

// The mean next-token cross-entropy (nats) of windows [B, t + 1]: inputs window[:, :t],
// targets window[:, 1:].
Value transformer_loss(const TransformerConfig& c, const Tree& params, const Value& windows);

}  // namespace drx::nn
