#pragma once
// Control flow: cond(pred, true_fn, false_fn, operands) runs only the chosen
// branch (in the interpreter and the compiled executor), e.g. to skip a local
// training step whose batch is empty. Both branches take the operand tree and
// return trees of the same structure and types. The branches are sub-programs
// of one `cond` equation; values they use from outside become operands.
// Differentiable to any order (the chosen branch's derivative); under vmap a
// batched predicate evaluates both branches and selects per example.
#include <functional>

#include "drx/core/value.h"
#include "drx/trace/tree.h"

namespace drx {

using BranchFn = std::function<Tree(const Tree&)>;

// pred: a bool scalar. Throws drx::Error when the branches' results differ in
// structure or types.
Tree cond(const Value& pred, const BranchFn& true_fn, const BranchFn& false_fn,
          const Tree& operands);

class Primitive;
namespace prims {
// The cond primitive object, for the executor's kernel binding.
const Primitive& cond();
}  // namespace prims

}  // namespace drx
