#include "drx/jit/jit.h"

#include "drx/core/primitive.h"
#include "drx/exec/executable.h"
#include "drx/ops/ops.h"
#include "drx/trace/trace_tree.h"
#include "drx/transforms/simplify.h"

namespace drx {

const Program& JitCache::last_program() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!last_) throw Error("jit: no program has been compiled yet");
  return last_->program;
}

int JitCache::trace_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return trace_count_;
}

size_t JitCache::cache_size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
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
  std::unique_lock<std::mutex> lock(mutex_);
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
  lock.unlock();
  std::vector<Array> results = entry->executable->run(arrays);
  std::vector<Tree> out_leaves(results.begin(), results.end());
  return tree_unflatten(entry->out_structure, out_leaves);
}

}  // namespace drx
