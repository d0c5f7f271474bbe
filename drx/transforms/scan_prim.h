#pragma once
// Private to drx/transforms: the scan primitive's class. Its rules live in
// scan.cpp (types, semantics, batching) and scan_autodiff.cpp (jvp, vjp).
#include <memory>

#include "drx/core/primitive.h"
#include "drx/transforms/scan_params.h"

namespace drx {

// One slice of a stacked type: the leading (iteration) axis removed.
Type row_type(const Type& t);

// Emits one scan equation; returns the final carry, then the stacked ys.
Values emit_scan(const ScanParams& s, const Values& consts, const Values& carry, const Values& xs);

class ScanPrim : public Primitive {
 public:
  ScanPrim() : Primitive("scan") {}
  // Consts and carries may be placed (a body can map over the clients).
  bool placement_aware() const override { return true; }
  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override;
  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override;
  MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values& outs,
                  const Params& p) const override;
  std::optional<std::pair<Values, MaybeValues>> joint_jvp(const Values& primals,
                                                          const MaybeValues& tangents,
                                                          const Params& p) const override;
  MaybeValues vjp(const Values& primals, const Values& outs, const MaybeValues& cts,
                  const Params& p) const override;
  std::optional<VjpForward> vjp_forward(const Values& primals, const std::vector<bool>& active,
                                        const Params& p) const override;
  MaybeValues vjp_backward(const Values& primals, const VjpForward& forward, const MaybeValues& cts,
                           const Params& p) const override;
  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch_size,
                            const Params& p) const override;
  // A stablehlo.while over a counter, as JAX exports scan.
  void lower(StableHloEmitter& em, const Params& p) const override;
};

}  // namespace drx
