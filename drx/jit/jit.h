#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "drx/core/mesh.h"
#include "drx/exec/executable.h"
#include "drx/ir/program.h"
#include "drx/trace/function.h"
#include "drx/trace/program_of.h"

namespace drx {

// How jit compiles: the compile() options it passes, and the mesh.
struct JitOptions {
  // Placements named after its axes are split across its devices; without
  // one, each call runs on current_mesh().
  std::optional<Mesh> mesh;
  std::string backend = "cpu";
  Precision precision = Precision::highest;
};

namespace detail {
// Asks the jit (or export) whose function is being traced on this thread to compile for
// `mesh`, as DrJAX's broadcast and map_fn take mesh= (the Python layer's keyword). A
// drx::Error naming `op` when that jit was given another mesh, or an earlier request in its
// trace named another; traced with nothing to compile (make_program), it does nothing.
void request_mesh(const Mesh& mesh, const std::string& op);

// Collects the mesh requests of the traces it encloses on this thread (jit opens one for each
// trace; an exporter tracing a program opens its own); restores the enclosing collector.
class MeshRequestScope {
 public:
  // given: the mesh the caller was itself given (a request for another is an error), or null.
  explicit MeshRequestScope(const std::optional<Mesh>* given = nullptr);
  ~MeshRequestScope();
  MeshRequestScope(const MeshRequestScope&) = delete;
  MeshRequestScope& operator=(const MeshRequestScope&) = delete;
  const std::optional<Mesh>& requested() const { return requested_; }

 private:
  friend void request_mesh(const Mesh& mesh, const std::string& op);
  const std::optional<Mesh>* given_;
  std::optional<Mesh> requested_;
  std::string requested_by_;
  MeshRequestScope* enclosing_;
};
}  // namespace detail

// How a jit call waits while another thread traces the same signature: the
// hook receives the blocking wait and must call it once. An embedding layer
// that holds a lock of its own across calls (Python's GIL) releases it around
// the wait, or the tracing thread, needing that lock to run user code, would
// never finish. Empty (the default): wait plainly. Process-wide.
using JitWaitHook = std::function<void(const std::function<void()>& wait)>;
void set_jit_wait_hook(JitWaitHook hook);

// The compile cache behind jit: one traced program per input signature, and
// for calls on Arrays one compiled program per signature and mesh.
//
// Called on Arrays, it runs the compiled program. Called on traced Values
// (inside grad, vmap, map_fn or another function being traced), it inlines
// its program into that trace, as JAX does, so jit composes with every
// transformation.
//
// Safe to call from several threads at once. User code is traced and
// compiled outside the cache's lock: each signature is traced once, by the
// first caller, while later callers of that signature wait (through the
// JitWaitHook) and callers of other signatures proceed. A trace that fails
// wakes its waiters with its error and leaves no entry, so the next call
// retries; a trace that calls the function again on its own signature (on
// its own thread) is a drx::Error, not a deadlock.
class JitCache {
 public:
  explicit JitCache(TreeFn fn, JitOptions options = {});
  // Arguments and result as trees of Arrays, or of Values inside a trace.
  Tree call(const std::vector<Tree>& args);
  // Traces of user code so far (one per signature, unless a trace failed or
  // captured values of an enclosing trace, which cannot be reused).
  int trace_count() const;
  size_t cache_size() const;
  // The compiled program for the most recent call on Arrays (for inspection).
  const Program& last_program() const;

 private:
  struct Entry;
  struct Slot;
  Tree call_compiled(const std::vector<Tree>& args);
  Tree call_inline(const std::vector<Tree>& args);
  // The entry for `key`, made by `make` on this thread if no other thread is
  // making it; `make` runs without the lock.
  std::shared_ptr<const Entry> entry_for(const std::string& key,
                                         const std::function<std::shared_ptr<Entry>()>& make);

  TreeFn fn_;
  JitOptions options_;
  // Guards entries_, last_ and trace_count_; signalled when a trace ends.
  mutable std::mutex mutex_;
  std::condition_variable traced_;
  std::unordered_map<std::string, std::shared_ptr<Slot>> entries_;
  std::shared_ptr<const Entry> last_;
  int trace_count_ = 0;
};

// A compiled function: on concrete Arrays (Value -> Array, std::vector<Value>
// -> std::vector<Array>, Tree -> Tree of Arrays) it runs the compiled program;
// on traced Values it inlines its program (so grad(jit(f)) and vmap(jit(f))
// work as in JAX).
template <class Sig>
class Jitted;
template <class R, class... A>
class Jitted<R(A...)> {
 public:
  explicit Jitted(TreeFn fn, JitOptions options = {})
      : cache_(std::make_shared<JitCache>(std::move(fn), std::move(options))) {}
  concrete_t<R> operator()(const concrete_t<A>&... args) const {
    return from_tree<concrete_t<R>>(cache_->call({to_tree(args)...}));
  }
  // On traced Values (a signature over Trees takes the overload above, which
  // inlines as well when the trees hold Values).
  R operator()(const A&... args) const requires(!(std::is_same_v<A, concrete_t<A>> && ...)) {
    return from_tree<R>(cache_->call({to_tree(args)...}));
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

// A jitted function is a function of Values too: transformations take it as
// they take f (its two call operators hide the signature from Signature<F>).
template <class R, class... A>
struct Signature<Jitted<R(A...)>> : SignatureOf<R, A...> {};
template <class R, class... A>
TreeFn erase(const Jitted<R(A...)>& f) {
  return [f](const std::vector<Tree>& args) { return f.call(args); };
}

namespace detail {
template <class R, class... A>
using JittedOf = Jitted<R(A...)>;
}  // namespace detail

template <class F>
auto jit(F f, JitOptions options) {
  using S = Signature<F>;
  using J = typename S::template apply<detail::JittedOf>;
  return J(erase(std::move(f)), std::move(options));
}
template <class F>
auto jit(F f) {
  return jit(std::move(f), JitOptions{});
}
// Compiled for `mesh`: placements named after its axes are split across its devices.
template <class F>
auto jit(F f, const Mesh& mesh) {
  return jit(std::move(f), JitOptions{mesh});
}
// Compiled for `mesh` where one is given, else as jit(f).
template <class F>
auto jit(F f, const std::optional<Mesh>& mesh) {
  return jit(std::move(f), JitOptions{mesh});
}

}  // namespace drx
