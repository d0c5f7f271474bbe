#pragma once
// The user's names for a MapReduce form's inputs and outputs: the argument
// names and tree paths of the traced function ("params/dense0/w", "x",
// "loss") instead of the SSA names of simplify(program) ("v3", "c5").
//
// A name is one or more segments joined by '/'; a segment is letters, digits,
// '_', '-' and '.', not starting with '.'. Plans store a value NAME as
// NAME.npy, so a '/' is a subfolder (whoever writes the file creates it).
// "client_index" and the SSA forms "v<digits>" and "c<digits>" are reserved
// for the form's own values.
#include <string>
#include <vector>

#include "drx/export/mapreduce_form.h"
#include "drx/trace/program_of.h"
#include "drx/trace/tree.h"

namespace drx {

// The names of t's leaves in tree_leaves order: prefix, then a segment per
// level, a dict's key or a list's index ("params/dense0/w", "xs/0"); a lone
// leaf is `prefix` itself. drx::Error naming the path for a key that is not a
// valid segment.
std::vector<std::string> tree_leaf_names(const Tree& t, const std::string& prefix);

// The names of a program traced on `args` that returned `result` (structure
// only is read). Argument i's leaves are under arg_names[i], or "arg<i>"
// when arg_names is empty. A dict result's leaves are its paths ("loss",
// "params/w"); any other result's are under "out" ("out", "out/0").
FormNames form_names(const std::vector<Tree>& args, const Tree& result,
                     const std::vector<std::string>& arg_names = {});

// drx::Error naming `op` unless `name` is a valid, unreserved name.
void check_form_name(const std::string& name, const std::string& op);

// A program traced as drx::trace(fn, examples...) traces it, with its names.
struct NamedProgram {
  Program program;
  FormNames names;
};
NamedProgram trace_named(const TreeFn& fn, const std::vector<Tree>& examples,
                         const std::vector<std::string>& arg_names = {});
//   auto [program, names] = drx::trace_named(round, {"params", "x"}, params, x);
//   MapReduceForm form = drx::mapreduce_form(program, names);
template <class F, TraceExample... E>
NamedProgram trace_named(F f, const std::vector<std::string>& arg_names, const E&... examples) {
  return trace_named(erase(std::move(f)), std::vector<Tree>{to_tree(examples)...}, arg_names);
}

}  // namespace drx
