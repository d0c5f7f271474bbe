#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "drx/exec/mesh.h"
#include "drx/ir/program.h"
#include "drx/trace/function.h"
#include "drx/trace/program_of.h"

namespace drx {

class Executable;

// The compile cache behind jit: one compiled program per input signature and
// mesh. Without a mesh of its own, a call runs on current_mesh(). Safe to call
// from several threads at once: a signature is traced and compiled once (the
// first caller does it while others wait), and compiled programs run
// concurrently, each call in its own workspace.
class JitCache {
 public:
  explicit JitCache(TreeFn fn, std::optional<Mesh> mesh = std::nullopt)
      : fn_(std::move(fn)), mesh_(std::move(mesh)) {}
  // Arguments and result as trees of Arrays.
  Tree call(const std::vector<Tree>& args);
  int trace_count() const;
  size_t cache_size() const;
  // The compiled program for the most recent call (for inspection).
  const Program& last_program() const;

 private:
  struct Entry {
    std::string key;
    Program program;
    Tree out_structure;
    std::shared_ptr<const Executable> executable;  // program, compiled (drx/exec)
    std::string signature;  // fingerprints of the key and the program, compared across processes
  };
  TreeFn fn_;
  std::optional<Mesh> mesh_;
  // Guards entries_, last_ and trace_count_. Entries are never removed and
  // unordered_map nodes do not move, so an Entry found under the lock can be
  // used after it is released.
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  const Entry* last_ = nullptr;
  int trace_count_ = 0;
};

// A compiled function over concrete Arrays (Value -> Array, std::vector<Value>
// -> std::vector<Array>, Tree -> Tree of Arrays).
template <class Sig>
class Jitted;
template <class R, class... A>
class Jitted<R(A...)> {
 public:
  explicit Jitted(TreeFn fn, std::optional<Mesh> mesh = std::nullopt)
      : cache_(std::make_shared<JitCache>(std::move(fn), std::move(mesh))) {}
  concrete_t<R> operator()(const concrete_t<A>&... args) const {
    return from_tree<concrete_t<R>>(cache_->call({to_tree(args)...}));
  }
  // Dynamic form: the number of arguments is checked at run time.
  Tree call(const std::vector<Tree>& args) const {
    if (args.size() != sizeof...(A)) throw_arity("jit", sizeof...(A), args.size());
    return cache_->call(args);
  }
  int trace_count() const { return cache_->trace_count(); }
  size_t cache_size() const { return cache_->cache_size(); }
  const Program& last_program() const { return cache_->last_program(); }

 private:
  std::shared_ptr<JitCache> cache_;
};

namespace detail {
template <class R, class... A>
using JittedOf = Jitted<R(A...)>;
}  // namespace detail

template <class F>
auto jit(F f) {
  using S = Signature<F>;
  using J = typename S::template apply<detail::JittedOf>;
  return J(erase(std::move(f)));
}
// Compiled for `mesh`: placements named after its axes are split across its devices.
template <class F>
auto jit(F f, const Mesh& mesh) {
  using S = Signature<F>;
  using J = typename S::template apply<detail::JittedOf>;
  return J(erase(std::move(f)), mesh);
}
// Compiled for `mesh` where one is given, else as jit(f).
template <class F>
auto jit(F f, const std::optional<Mesh>& mesh) {
  using S = Signature<F>;
  using J = typename S::template apply<detail::JittedOf>;
  return J(erase(std::move(f)), mesh);
}

}  // namespace drx
