#include "drx/trace/program_of.h"

#include "drx/core/trace.h"
#include "drx/trace/trace_tree.h"

namespace drx {

void throw_arity(const char* what, size_t expected, size_t got) {
  throw Error(std::string(what) + ": called with " + std::to_string(got) + " argument" +
              (got == 1 ? "" : "s") + ", expected " + std::to_string(expected));
}

Program trace(const TreeFn& fn, const std::vector<Type>& in_types, const std::string& name) {
  TraceScope scope;
  std::vector<Tree> args;
  for (const Type& t : in_types) args.emplace_back(scope.add_input(t));
  Program p = scope.finish(leaf_values(fn(args)));
  p.name = name;
  return p;
}

namespace detail {
Program trace_with_list_tail(const TreeFn& fn, size_t fixed, const std::vector<Type>& in_types,
                             const std::string& name) {
  if (in_types.size() < fixed)
    throw Error("trace: " + std::to_string(in_types.size()) + " input type" +
                (in_types.size() == 1 ? "" : "s") + " given, the function takes " +
                std::to_string(fixed) + " argument" + (fixed == 1 ? "" : "s") +
                " before its std::vector<Value> argument");
  TraceScope scope;
  std::vector<Tree> args, tail;
  for (size_t i = 0; i < in_types.size(); ++i)
    (i < fixed ? args : tail).emplace_back(scope.add_input(in_types[i]));
  args.push_back(Tree::list(std::move(tail)));
  Program p = scope.finish(leaf_values(fn(args)));
  p.name = name;
  return p;
}

Program trace_examples(const TreeFn& fn, const std::vector<Tree>& examples,
                       const std::string& name) {
  TraceScope scope;
  std::vector<Tree> inputs;
  for (const Type& t : leaf_types(examples)) inputs.emplace_back(scope.add_input(t));
  Tree args = tree_unflatten(Tree::list(examples), inputs);
  Program p = scope.finish(leaf_values(fn(args.children())));
  p.name = name;
  return p;
}
}  // namespace detail

}  // namespace drx
