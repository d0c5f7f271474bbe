#include "drx/trace/trace_tree.h"

#include "drx/ops/ops.h"

namespace drx {

Values leaf_values(const Tree& t) {
  Values vs;
  for (const Tree& l : tree_leaves(t))
    vs.push_back(l.kind() == Tree::Kind::array ? constant(l.array()) : l.value());
  return vs;
}

std::vector<Type> leaf_types(const std::vector<Tree>& args) {
  std::vector<Type> types;
  for (const Tree& l : tree_leaves(Tree::list(args))) {
    if (l.kind() == Tree::Kind::array)
      types.emplace_back(l.array().dtype(), l.array().shape());
    else
      types.push_back(l.value().type());
  }
  return types;
}

Tree unflatten_values(const Tree& structure, const Values& leaves) {
  return tree_unflatten(structure, std::vector<Tree>(leaves.begin(), leaves.end()));
}

TracedFn trace_tree_fn(const TreeFn& f, const std::vector<Tree>& args,
                       const std::vector<Type>& types, const std::string& name,
                       const std::string& closed_for) {
  Tree structure = Tree::list(args);
  TracedFn r;
  Traced t = trace_function(
      [&](const Values& leaves) {
        Tree in = unflatten_values(structure, leaves);
        r.out_structure = f(in.children());
        return leaf_values(r.out_structure);
      },
      types, name, closed_for);
  r.program = std::move(t.program);
  r.captured = std::move(t.captured);
  return r;
}

}  // namespace drx
