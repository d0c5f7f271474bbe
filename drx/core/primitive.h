#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "drx/array/array.h"
#include "drx/ir/program.h"
#include "drx/core/value.h"
#include "drx/core/registry.h"

namespace drx {

// A tangent or cotangent; std::nullopt is a symbolic zero (never materialised).
using MaybeValue = std::optional<Value>;
using MaybeValues = std::vector<MaybeValue>;

// A value inside a vmap rule: `batched` values carry the batch at axis 0, or
// at axis 1 for placed values (the placement axis always stays leading; only
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
  virtual std::vector<Array> eval(const std::vector<Array>& ins, const Params& params) const = 0;

  // Forward mode: tangents of the outputs given tangents of the inputs.
  virtual MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values& outs,
                          const Params& params) const;
  // Reverse mode: cotangents of the inputs given cotangents of the outputs.
  virtual MaybeValues vjp(const Values& primals, const Values& outs, const MaybeValues& cotangents,
                          const Params& params) const;
  // Batching: inputs that are `batched` carry a leading batch axis of `batch_size`.
  virtual std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch_size,
                                    const Params& params) const;

  // True for ops whose outputs do not depend on anything but inputs and params
  // (all of them but random ops); used by CSE and constant folding.
  virtual bool is_pure() const { return true; }

 private:
  std::string name_;
};

// Appends an equation to the current trace and returns its outputs.
Values emit(const Primitive& prim, const Values& ins, Params params = {});
Value emit1(const Primitive& prim, const Values& ins, Params params = {});

}  // namespace drx
