#pragma once
// The forward derivative of a primitive bilinear in its two operands (dot_general,
// conv_general_dilated): p(t_lhs, rhs) + p(lhs, t_rhs), with the same parameters.
#include "drx/core/primitive.h"
#include "drx/ops/ops.h"

namespace drx {

inline MaybeValues bilinear_jvp(const Primitive& p, const Values& primals,
                                const MaybeValues& tangents, const Params& params) {
  if (!is_floating(primals[0].dtype())) return {std::nullopt};
  MaybeValue out;
  if (tangents[0]) out = emit1(p, {*tangents[0], primals[1]}, params);
  if (tangents[1]) {
    Value t = emit1(p, {primals[0], *tangents[1]}, params);
    out = out ? *out + t : t;
  }
  return {out};
}

}  // namespace drx
