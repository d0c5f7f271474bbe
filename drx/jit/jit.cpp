#include "drx/jit/jit.h"

#include "drx/core/primitive.h"
#include "drx/core/process_group.h"
#include "drx/core/program_text.h"
#include "drx/exec/executable.h"
#include "drx/ops/ops.h"
#include "drx/trace/trace_tree.h"
#include "drx/transforms/simplify.h"

namespace drx {

namespace {

// FNV-1a: the same on every process, unlike std::hash.
uint64_t fingerprint(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex(uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = digits[v & 15];
  return s;
}

}  // namespace

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
  // What every process of the mesh must agree on (check_same) names the mesh
  // by its text; the cache key also tells process groups apart.
  const std::string shared_key = key + "|mesh" + mesh.str();
  key += "|mesh" + mesh.key();
  std::unique_lock<std::mutex> lock(mutex_);
  const Entry* entry = nullptr;
  if (auto it = entries_.find(key); it != entries_.end()) entry = &it->second;
  if (!entry) {
    ++trace_count_;
    std::vector<Type> types;
    for (const Array& a : arrays) types.emplace_back(a.dtype(), a.shape());
    TracedFn t = trace_tree_fn(fn_, args, types, "jit");
    Program p = std::move(t.program);
    // Only a mesh given to jit itself: an ambient MeshScope simply does not
    // apply to a program without its placements.
    if (mesh_) check_mesh_names_placements(p, *mesh_, "jit");
    Tree out = std::move(t.out_structure);
    Program simplified = simplify(p);
    auto executable = std::make_shared<const Executable>(simplified, mesh);
    const std::string signature =
        hex(fingerprint(shared_key)) + hex(fingerprint(to_string(simplified)));
    entry =
        &entries_
             .emplace(key, Entry{key, std::move(simplified), out, std::move(executable), signature})
             .first->second;
  }
  last_ = entry;
  lock.unlock();
  // Every process must run the same program on the same global argument
  // types, or their collectives would pair up wrongly; checked every call, as
  // a process may meet a new signature while the others reuse a cached one.
  if (const ProcessGroup* group = mesh.process_group())
    group->check_same("the jitted program and its argument types", entry->signature);
  std::vector<Array> results = entry->executable->run(arrays);
  std::vector<Tree> out_leaves(results.begin(), results.end());
  return tree_unflatten(entry->out_structure, out_leaves);
}

}  // namespace drx
