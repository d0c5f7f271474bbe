#pragma once
// Program-to-Program transformations. Each is also available as an "emit"
// form that replays the transformed program into the current trace, which is
// how the function-level API (drx/transforms/api.h) composes them.
#include <optional>
#include <vector>

#include "drx/core/primitive.h"
#include "drx/ir/program.h"

namespace drx {

// Forward mode. Inputs: p's inputs, then one tangent per input (same type).
// Outputs: p's outputs, then one tangent per output. Integer and bool values
// carry no tangent (their tangent inputs are ignored, outputs are zeros).
Program jvp_program(const Program& p);
// Forward mode with symbolic-zero inputs: tangent inputs only where
// has_tangent[i]; with tangents_only the outputs are just the tangents.
Program jvp_program(const Program& p, const std::vector<bool>& has_tangent, bool tangents_only);
// Reverse mode. Inputs: p's inputs, then one cotangent per output. Outputs:
// p's outputs, then one cotangent per input (zeros for integer/bool inputs).
Program vjp_program(const Program& p);
// Reverse mode with symbolic zeros: cotangent inputs only where
// has_cotangent[j]; outputs the cotangents of inputs with wrt[i] (zeros where
// none flows), preceded by p's outputs unless cotangents_only.
Program vjp_program(const Program& p, const std::vector<bool>& wrt,
                    const std::vector<bool>& has_cotangent, bool cotangents_only);
// Batching. Inputs flagged in `batched` gain a leading axis of `batch_size`;
// every output gains a leading axis of `batch_size`.
Program vmap_program(const Program& p, const std::vector<bool>& batched, int64_t batch_size);

// ---- emit forms: act on Values of the current trace ----------------------
// Replays p on `primals` and returns its outputs; `out_tangents` receives the
// outputs' tangents (nullopt = zero).
Values jvp_emit(const Program& p, const Values& primals, const MaybeValues& tangents,
                MaybeValues& out_tangents);
// Replays p on `primals`, then pulls `out_cotangents` back; returns the
// cotangent of each input with wrt[i] set (nullopt = zero or not requested).
MaybeValues vjp_emit(const Program& p, const Values& primals, const MaybeValues& out_cotangents,
                     const std::vector<bool>& wrt, Values& outs);
// vjp_emit in its two halves, for rules that run a sub-program's forward pass
// in one place and its backward pass in another (checkpointed loops).
struct VjpTape {
  Values outs;                                     // p's outputs
  std::vector<char> active;                        // per variable: needs a cotangent
  std::vector<Values> eqn_ins, eqn_outs;           // per equation: operands and results
  std::vector<std::optional<VjpForward>> forward;  // per equation: its own forward pass
};
VjpTape vjp_forward_emit(const Program& p, const Values& primals, const std::vector<bool>& wrt);
MaybeValues vjp_backward_emit(const Program& p, const VjpTape& tape,
                              const MaybeValues& out_cotangents, const std::vector<bool>& wrt);
// Replays p with batched inputs (batch at axis 0).
std::vector<Batched> vmap_emit(const Program& p, const std::vector<Batched>& ins,
                               int64_t batch_size);

// v with a leading batch axis of `batch_size` (a broadcast, no copy in the IR).
Value broadcast_batch(const Value& v, int64_t batch_size);

// A tangent or cotangent may flow only through floating-point values.
inline bool carries_derivative(const Type& t) { return is_floating(t.dtype); }

// For the rules of primitives whose operands from `first` on feed sub-programs
// (map_fn, cond): the operands of a body's jvp or vjp program.
struct BodyDerivativeArgs {
  std::vector<bool> with;  // jvp: operand has a tangent; vjp: result has a cotangent
  std::vector<bool> wrt;   // vjp: operand carries a derivative
  Values args;             // every primal, then the non-zero tangents or cotangents
};
BodyDerivativeArgs body_jvp_args(const Values& primals, const MaybeValues& tangents,
                                 size_t first = 0);
BodyDerivativeArgs body_vjp_args(const Values& primals, const MaybeValues& cotangents,
                                 size_t first = 0);
// The tangents a body's jvp program returned, without those of results that
// carry no derivative.
MaybeValues result_tangents(const Values& tangents, const Values& outs);

}  // namespace drx
