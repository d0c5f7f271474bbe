#include "drx/core/primitive.h"

namespace drx {

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
