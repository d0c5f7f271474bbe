#pragma once
// The rules of a one-operand primitive whose result carries no derivative
// (bit reinterpretation, predicates) and that acts on each batch element on
// its own, so vmap passes the batch axis straight through.
#include "drx/core/primitive.h"

namespace drx {

class NoDerivativeUnary : public Primitive {
 public:
  using Primitive::Primitive;
  MaybeValues jvp(const Values&, const MaybeValues&, const Values&, const Params&) const override {
    return {std::nullopt};
  }
  MaybeValues vjp(const Values&, const Values&, const MaybeValues&, const Params&) const override {
    return {std::nullopt};
  }
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t,
                            const Params& params) const override {
    return {{emit1(*this, {ins[0].value}, params), ins[0].batched}};
  }
};

}  // namespace drx
