#pragma once
#include <any>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "drx/array/array.h"
#include "drx/core/reduction.h"
#include "drx/core/registry.h"
#include "drx/core/scalar_kernel.h"
#include "drx/core/value.h"
#include "drx/ir/program.h"

namespace drx {

class StableHloEmitter;

// A tangent or cotangent; std::nullopt is a symbolic zero (never materialised).
using MaybeValue = std::optional<Value>;
using MaybeValues = std::vector<MaybeValue>;

// What a primitive's own forward pass under reverse mode kept for its
// backward pass (see Primitive::vjp_forward).
struct VjpForward {
  Values outs;     // the equation's results
  std::any saved;  // whatever the primitive's vjp_backward reads
};

// A value inside a vmap rule: `batched` values carry the batch at axis 0, or,
// for placed values, right after their placement axes (axis 1 at clients,
// axis 2 at groups.clients: the placement axes always stay leading; only
// placement-aware primitives see batched placed values).
struct Batched {
  Value value;
  bool batched = false;
};

// One primitive operation: everything every transformation needs, in one class.
// Rules (jvp, vjp, vmap) emit ops into the current trace, so what they produce
// can be differentiated, batched and compiled again.
class Primitive {
 public:
  explicit Primitive(std::string name) : name_(std::move(name)) {}
  virtual ~Primitive() = default;
  Primitive(const Primitive&) = delete;
  Primitive& operator=(const Primitive&) = delete;

  const std::string& name() const { return name_; }

  // Output types for the given input types, or a drx::TypeError naming the op,
  // the types and what was expected.
  virtual std::vector<Type> infer(const std::vector<Type>& ins, const Params& params) const = 0;
  // infer() followed by the placement rule every placement-unaware primitive
  // obeys: placed operands share one placement, are not mixed with unplaced
  // ones, and keep their leading (placement) axis. Use this, not infer().
  std::vector<Type> infer_types(const std::vector<Type>& ins, const Params& params) const;
  // MapReduce primitives (broadcast, map_fn, reduce_*) type placements themselves.
  virtual bool placement_aware() const { return false; }

  // Reference CPU semantics: the test oracle. Inputs have the inferred types.
  // Kernels see no bf16 or f16 unless computes_half_precision(): call
  // evaluate(), which computes those in f32.
  virtual std::vector<Array> eval(const std::vector<Array>& ins, const Params& params) const = 0;
  // eval() with bf16 and f16 computed as XLA's CPU backend computes them:
  // operands, dtype parameters and array parameters of those dtypes are
  // widened to f32 (exactly), the equation runs in f32, and each result the
  // equation types as bf16/f16 is rounded back (to nearest even). Primitives
  // with sub-programs pass their operands through untouched (their bodies'
  // equations round one by one).
  std::vector<Array> evaluate(const std::vector<Array>& ins, const Params& params) const;
  // True where eval() itself handles bf16 and f16 (conversions, bit casts).
  virtual bool computes_half_precision() const { return false; }

  // Forward mode: tangents of the outputs given tangents of the inputs.
  virtual MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values& outs,
                          const Params& params) const;
  // Reverse mode: cotangents of the inputs given cotangents of the outputs.
  virtual MaybeValues vjp(const Values& primals, const Values& outs, const MaybeValues& cotangents,
                          const Params& params) const;
  // Primitives whose jvp recomputes the primal results (loops: one scan of the
  // body's jvp) return both, so the primal equation is not emitted twice.
  // nullopt (the default): the primal equation is emitted and jvp() called.
  virtual std::optional<std::pair<Values, MaybeValues>> joint_jvp(const Values& primals,
                                                                  const MaybeValues& tangents,
                                                                  const Params& params) const;
  // Primitives whose backward pass needs what their forward pass computes
  // inside (a loop's per-iteration residuals) run that forward pass here under
  // reverse mode instead of the plain equation; active[i]: operand i needs a
  // cotangent. vjp_backward then gets what it saved. nullopt (the default):
  // the equation is emitted and vjp() called.
  virtual std::optional<VjpForward> vjp_forward(const Values& primals,
                                                const std::vector<bool>& active,
                                                const Params& params) const;
  virtual MaybeValues vjp_backward(const Values& primals, const VjpForward& forward,
                                   const MaybeValues& cotangents, const Params& params) const;
  // Batching: inputs that are `batched` carry a leading batch axis of `batch_size`.
  virtual std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch_size,
                                    const Params& params) const;

  // True for ops whose outputs do not depend on anything but inputs and params
  // (all of them but random ops); used by CSE and constant folding.
  virtual bool is_pure() const { return true; }

  // ---- what backends and simplification read off a primitive ---------------
  // These let a backend or a rewrite handle a primitive from what it states
  // about itself, never by its name.

  // Elementwise primitives: their scalar function as block loops.
  virtual const ScalarKernel* scalar_kernel() const { return nullptr; }
  // Reductions, over axes or over a placement: which one.
  virtual std::optional<ReduceKind> reduction() const { return std::nullopt; }
  // The operand this equation returns unchanged (x*1, x+0, an identity
  // transpose...), given each operand's value where it is one repeated
  // constant; the caller checks that the operand has the result's type.
  virtual std::optional<size_t> identity_operand(const std::vector<std::optional<double>>& splats,
                                                 const Params& params) const;
  // StableHLO: emits this equation through `emitter` (drx/core/lowering.h).
  // The default throws a drx::Error naming the primitive.
  virtual void lower(StableHloEmitter& emitter, const Params& params) const;

 private:
  std::string name_;
};

// "f32[2], i32[]": types for error messages.
std::string types_str(const std::vector<Type>& ts);
// Throws a TypeError naming `op` unless there are exactly `n` operands.
void check_arity(const std::string& op, const std::vector<Type>& ins, size_t n);

// Appends an equation to the current trace and returns its outputs.
Values emit(const Primitive& prim, const Values& ins, Params params = {});
Value emit1(const Primitive& prim, const Values& ins, Params params = {});

}  // namespace drx
