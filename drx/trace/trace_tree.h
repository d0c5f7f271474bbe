#pragma once
#include <vector>

#include "drx/core/trace.h"
#include "drx/trace/function.h"

namespace drx {

// Leaves of a tree as Values of the current trace (Array leaves become constants).
Values leaf_values(const Tree& t);

struct TracedFn {
  Program program;
  Values captured;     // enclosing-trace Values for the trailing inputs
  Tree out_structure;  // the function's result, for tree_unflatten
};
// Traces f on fresh inputs: arguments shaped like `args` (structure only),
// with one input of `leaf_types[i]` per leaf.
TracedFn trace_tree_fn(const TreeFn& f, const std::vector<Tree>& args,
                       const std::vector<Type>& leaf_types, const std::string& name = "main",
                       const std::string& closed_for = "");
std::vector<Type> leaf_types(const std::vector<Tree>& args);
// Rebuilds trees from flat Values.
Tree unflatten_values(const Tree& structure, const Values& leaves);

}  // namespace drx
