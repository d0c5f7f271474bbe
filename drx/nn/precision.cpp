#include "drx/nn/precision.h"

#include "drx/array/error.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/trace/tree_math.h"

DRX_PUBLIC_OPS_FILE(nn_precision);

namespace drx::nn {

Policy Policy::full(DType d) {
  if (d != DType::f32 && d != DType::f64)
    throw Error("Policy::full: dtype must be f32 or f64, got " + std::string(dtype_name(d)));
  return Policy{d, d, d};
}

Policy Policy::bf16() { return Policy{DType::f32, DType::bf16, DType::f32}; }

Policy Policy::named(const std::string& name) {
  if (name == "f32") return full(DType::f32);
  if (name == "f64") return full(DType::f64);
  if (name == "bf16") return bf16();
  throw Error("precision policy '" + name +
              "' is not known (expected f32, f64, or bf16: f32 parameters with bf16 products)");
}

std::string Policy::name() const {
  if (*this == full(DType::f32)) return "f32";
  if (*this == full(DType::f64)) return "f64";
  if (*this == bf16()) return "bf16";
  return std::string(dtype_name(param)) + "/" + std::string(dtype_name(compute)) + "/" +
         std::string(dtype_name(output));
}

Value Policy::to_compute(const Value& x) const {
  return is_floating(x.dtype()) && x.dtype() != compute ? astype(x, compute) : x;
}

Tree Policy::to_compute(const Tree& t) const {
  return tree_map([this](const Value& v) { return to_compute(v); }, tree_values(t));
}

Value Policy::to_output(const Value& x) const {
  return is_floating(x.dtype()) && x.dtype() != output ? astype(x, output) : x;
}

DRX_PUBLIC_OP("nn::matmul", "(a: Value, b: Value, policy: Policy) -> Value",
              "Matrix product under a precision policy (bf16 operands, f32 results).");
Value matmul(const Value& a, const Value& b, const Policy& policy) {
  return policy.to_output(drx::matmul(policy.to_compute(a), policy.to_compute(b), policy.output));
}

DRX_PUBLIC_OP("nn::dot_general", "(lhs: Value, rhs: Value, dims: DotDims, policy: Policy) -> Value",
              "dot_general under a precision policy (bf16 operands, f32 results).");
Value dot_general(const Value& lhs, const Value& rhs, DotDims dims, const Policy& policy) {
  dims.preferred_element_type = policy.output;
  return policy.to_output(
      drx::dot_general(policy.to_compute(lhs), policy.to_compute(rhs), std::move(dims)));
}

}  // namespace drx::nn
