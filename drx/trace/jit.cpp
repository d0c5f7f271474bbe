#include "drx/trace/jit.h"

#include "drx/ops/ops.h"
#include "drx/ops/primitive.h"
#include "drx/trace/trace.h"
#include "drx/transforms/simplify.h"

namespace drx {

void throw_arity(const char* what, size_t expected, size_t got) {
  throw Error(std::string(what) + ": called with " + std::to_string(got) + " argument" +
              (got == 1 ? "" : "s") + ", expected " + std::to_string(expected));
}

namespace {
// A leaf given as an Array inside a trace becomes a constant.
Value leaf_value(const Tree& leaf) {
  return leaf.kind() == Tree::Kind::array ? constant(leaf.array()) : leaf.value();
}

std::vector<Value> output_values(const Tree& out) {
  std::vector<Value> vs;
  for (const Tree& l : tree_leaves(out)) vs.push_back(leaf_value(l));
  return vs;
}
}  // namespace

Program trace(const TreeFn& fn, const std::vector<Type>& in_types, const std::string& name) {
  TraceScope scope;
  std::vector<Tree> args;
  for (const Type& t : in_types) args.emplace_back(scope.add_input(t));
  Program p = scope.finish(output_values(fn(args)));
  p.name = name;
  return p;
}

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
  const Entry* entry = nullptr;
  if (auto it = entries_.find(key); it != entries_.end()) entry = &it->second;
  if (!entry) {
    ++trace_count_;
    TraceScope scope;
    std::vector<Tree> inputs;
    for (const Array& a : arrays) inputs.emplace_back(scope.add_input(Type(a.dtype(), a.shape())));
    Tree in_values = tree_unflatten(in, inputs);
    Tree out = fn_(in_values.children());
    Program p = scope.finish(output_values(out));
    p.name = "jit";
    entry = &entries_.emplace(key, Entry{key, simplify(p), out}).first->second;
  }
  last_ = entry;
  std::vector<Array> results = interpret(entry->program, arrays);
  std::vector<Tree> out_leaves(results.begin(), results.end());
  return tree_unflatten(entry->out_structure, out_leaves);
}

}  // namespace drx
