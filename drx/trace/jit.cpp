#include "drx/trace/jit.h"

#include "drx/exec/executable.h"
#include "drx/ops/ops.h"
#include "drx/ops/primitive.h"
#include "drx/trace/trace_tree.h"
#include "drx/transforms/simplify.h"

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
}  // namespace detail

std::vector<Array> run(const Program& program, const std::vector<Array>& args) {
  if (args.size() != program.inputs.size())
    throw Error("run @" + program.name + ": " + std::to_string(args.size()) +
                " arguments given, the program takes " + std::to_string(program.inputs.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const Type& t = program.type_of(program.inputs[i]);
    if (t.dtype != args[i].dtype() || t.shape != args[i].shape())
      throw Error("run @" + program.name + ": argument " + std::to_string(i) + " is " +
                  std::string(dtype_name(args[i].dtype())) + shape_str(args[i].shape()) +
                  ", the program expects " + t.str());
  }
  return interpret(program, args);
}

const Program& JitCache::last_program() const {
  if (!last_) throw Error("jit: no program has been compiled yet");
  return last_->program;
}

Tree JitCache::call(const std::vector<Tree>& args) {
  Tree in = Tree::list(args);
  std::vector<Tree> leaves = tree_leaves(in);
  std::vector<Array> arrays;
  std::string key = in.structure();
  for (const Tree& l : leaves) {
    arrays.push_back(l.array());
    key += ";" + std::string(dtype_name(arrays.back().dtype())) + shape_str(arrays.back().shape());
  }
  const Mesh mesh = mesh_ ? *mesh_ : current_mesh();
  key += "|mesh" + mesh.str();
  const Entry* entry = nullptr;
  if (auto it = entries_.find(key); it != entries_.end()) entry = &it->second;
  if (!entry) {
    ++trace_count_;
    std::vector<Type> types;
    for (const Array& a : arrays) types.emplace_back(a.dtype(), a.shape());
    TracedFn t = trace_tree_fn(fn_, args, types, "jit");
    Program p = std::move(t.program);
    Tree out = std::move(t.out_structure);
    Program simplified = simplify(p);
    auto executable = std::make_shared<const Executable>(simplified, mesh);
    entry = &entries_.emplace(key, Entry{key, std::move(simplified), out, std::move(executable)})
                 .first->second;
  }
  last_ = entry;
  std::vector<Array> results = entry->executable->run(arrays);
  std::vector<Tree> out_leaves(results.begin(), results.end());
  return tree_unflatten(entry->out_structure, out_leaves);
}

}  // namespace drx
