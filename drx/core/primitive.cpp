#include "drx/core/primitive.h"

#include "drx/array/half.h"

namespace drx {
namespace {

// Where evaluate() has to widen: a storage-format (bf16, f16, narrow integer)
// operand or parameter, and no sub-program (whose equations see the narrow
// values themselves).
bool needs_widening(const std::vector<Array>& ins, const Params& params) {
  bool narrow = false;
  for (const Array& a : ins) narrow = narrow || is_storage_format(a.dtype());
  for (const auto& [key, attr] : params.items()) {
    if (std::holds_alternative<std::shared_ptr<const Program>>(attr)) return false;
    if (const DType* d = std::get_if<DType>(&attr)) narrow = narrow || is_storage_format(*d);
    if (const Array* a = std::get_if<Array>(&attr))
      narrow = narrow || is_storage_format(a->dtype());
  }
  return narrow;
}

Array widened(const Array& a) {
  return is_storage_format(a.dtype()) ? convert_array(a, compute_dtype(a.dtype())) : a;
}

}  // namespace

std::vector<Array> Primitive::evaluate(const std::vector<Array>& ins, const Params& params) const {
  if (computes_half_precision() || !needs_widening(ins, params)) return eval(ins, params);
  std::vector<Type> in_types;
  for (const Array& a : ins) in_types.emplace_back(a.dtype(), a.shape());
  const std::vector<Type> out_types = infer(in_types, params);
  std::vector<Array> wide;
  wide.reserve(ins.size());
  for (const Array& a : ins) wide.push_back(widened(a));
  Params wide_params;
  for (const auto& [key, attr] : params.items()) {
    if (const DType* d = std::get_if<DType>(&attr); d && is_storage_format(*d))
      wide_params.set(key, compute_dtype(*d));
    else if (const Array* a = std::get_if<Array>(&attr); a && is_storage_format(a->dtype()))
      wide_params.set(key, widened(*a));
    else
      wide_params.set(key, attr);
  }
  std::vector<Array> outs = eval(wide, wide_params);
  for (size_t k = 0; k < outs.size() && k < out_types.size(); ++k)
    if (is_storage_format(out_types[k].dtype))  // rounded (bf16, f16) or wrapped (i2 ... u4)
      outs[k] = convert_array(outs[k], out_types[k].dtype);
  return outs;
}

std::string types_str(const std::vector<Type>& ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s;
}

void check_arity(const std::string& op, const std::vector<Type>& ins, size_t n) {
  if (ins.size() != n)
    throw TypeError(op + ": expected " + std::to_string(n) + " operand(s), got " +
                    std::to_string(ins.size()) + " (" + types_str(ins) + ")");
}

MaybeValues Primitive::jvp(const Values&, const MaybeValues&, const Values&, const Params&) const {
  throw Error(name_ + ": forward-mode differentiation (jvp) is not defined for this primitive");
}
MaybeValues Primitive::vjp(const Values&, const Values&, const MaybeValues&, const Params&) const {
  throw Error(name_ + ": reverse-mode differentiation (vjp) is not defined for this primitive");
}
std::optional<std::pair<Values, MaybeValues>> Primitive::joint_jvp(const Values&,
                                                                   const MaybeValues&,
                                                                   const Params&) const {
  return std::nullopt;
}
std::optional<VjpForward> Primitive::vjp_forward(const Values&, const std::vector<bool>&,
                                                 const Params&) const {
  return std::nullopt;
}
MaybeValues Primitive::vjp_backward(const Values&, const VjpForward&, const MaybeValues&,
                                    const Params&) const {
  throw Error("internal: " + name_ + " has a vjp_forward but no vjp_backward");
}
std::vector<Batched> Primitive::vmap(const std::vector<Batched>&, int64_t, const Params&) const {
  throw Error(name_ + ": batching (vmap) is not defined for this primitive");
}

std::optional<size_t> Primitive::identity_operand(const std::vector<std::optional<double>>&,
                                                  const Params&) const {
  return std::nullopt;
}
void Primitive::lower(StableHloEmitter&, const Params&) const {
  throw Error(name_ + ": no StableHLO lowering is defined for this primitive yet");
}

}  // namespace drx
