#pragma once
// Mixed precision, as jmp and Flax give it: a Policy says which dtype
// parameters (and so optimiser state and checkpoints) are kept in, which dtype
// products compute in, and which dtype activations, losses and statistics are
// returned in. Policy::bf16() is the mixed-precision training policy of
// PyTorch's torch.autocast(dtype=bfloat16) on CPU: parameters f32; every
// product takes bf16 operands (each parameter cast once per step) and
// accumulates in f32 into an f32 result; biases, residual sums, LayerNorm,
// softmax statistics, losses and reductions in f32. Gradients reach the f32
// parameters through the casts, so optimisers see f32.
#include <string>

#include "drx/array/dtype.h"
#include "drx/core/value.h"
#include "drx/ops/ops.h"
#include "drx/trace/tree.h"

namespace drx::nn {

struct Policy {
  DType param = DType::f32;    // parameters, optimiser state, checkpoints
  DType compute = DType::f32;  // product operands
  DType output = DType::f32;   // product results, activations, losses

  // Everything in one dtype (f32 or f64): products as written.
  static Policy full(DType d = DType::f32);
  // Parameters f32, products on bf16 operands with f32 accumulation and results.
  static Policy bf16();
  // "f32", "f64" (full) or "bf16"; throws drx::Error naming the choices otherwise.
  static Policy named(const std::string& name);
  // "f32", "f64", "bf16", or param/compute/output for another policy.
  std::string name() const;
  bool operator==(const Policy& o) const = default;

  // x in the compute dtype (floating values only; others as they are).
  Value to_compute(const Value& x) const;
  // Every floating leaf of a tree of Values in the compute dtype: the cast of
  // each parameter, made once where the tree is cast (once per step).
  Tree to_compute(const Tree& t) const;
  // x in the output dtype (floating values only).
  Value to_output(const Value& x) const;
};

// A product under `policy`: operands in its compute dtype, the result in its
// output dtype (accumulated in f32 when the operands are bf16).
Value matmul(const Value& a, const Value& b, const Policy& policy);
Value dot_general(const Value& lhs, const Value& rhs, DotDims dims, const Policy& policy);

}  // namespace drx::nn
