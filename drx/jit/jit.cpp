#include "drx/jit/jit.h"

#include <thread>

#include "drx/core/primitive.h"
#include "drx/core/process_group.h"
#include "drx/core/program_text.h"
#include "drx/core/trace.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/trace/trace_tree.h"
#include "drx/transforms/simplify.h"

DRX_PUBLIC_OPS_FILE(jit_jit);

namespace drx {

DRX_PUBLIC_OP("jit",
              "(f, options: JitOptions = {}) -> Jitted | (f, mesh: Mesh) -> Jitted | "
              "(f, mesh: optional<Mesh>) -> Jitted",
              "f compiled once per input signature and cached; on traced Values it inlines its "
              "program, so it composes with grad, vmap and map_fn.");

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

std::mutex hook_mu;
JitWaitHook& wait_hook() {
  static JitWaitHook hook;
  return hook;
}

// The collector of the trace in progress on this thread (MeshRequestScope).
thread_local detail::MeshRequestScope* mesh_request = nullptr;

bool holds_values(const Tree& t) {
  for (const Tree& leaf : tree_leaves(t))
    if (leaf.kind() == Tree::Kind::value) return true;
  return false;
}

}  // namespace

namespace detail {

MeshRequestScope::MeshRequestScope(const std::optional<Mesh>* given)
    : given_(given), enclosing_(mesh_request) {
  mesh_request = this;
}

MeshRequestScope::~MeshRequestScope() { mesh_request = enclosing_; }

void request_mesh(const Mesh& mesh, const std::string& op) {
  MeshRequestScope* r = mesh_request;
  if (!r) return;  // traced with nothing to compile (make_program)
  if (r->given_ && *r->given_ && !(**r->given_ == mesh))
    throw Error(op + ": mesh " + mesh.str() + " differs from the mesh " + (*r->given_)->str() +
                " given to jit");
  if (r->requested_ && !(*r->requested_ == mesh))
    throw Error(op + ": mesh " + mesh.str() + " differs from the mesh " + r->requested_->str() +
                " that " + r->requested_by_ + " asked for earlier in this program");
  r->requested_ = mesh;
  r->requested_by_ = op;
}

}  // namespace detail

void set_jit_wait_hook(JitWaitHook hook) {
  std::lock_guard<std::mutex> lock(hook_mu);
  wait_hook() = std::move(hook);
}

struct JitCache::Entry {
  Program program;  // compiled: simplified; inlined: as traced
  Tree out_structure;
  Executable executable;  // calls on Arrays only
  std::string signature;  // fingerprints of the key and the program, compared across processes
  Values captured;        // inlined only: enclosing-trace Values of the trailing inputs
  bool reusable = true;   // false when it captured Values of the trace it was made in
  Mesh mesh;              // compiled: the mesh it runs on
  std::optional<Mesh> requested_mesh;  // inlined: the mesh its trace asked for
};

// A signature's place in the cache: being traced by `tracer`, then done (with
// its entry, or the error its trace threw).
struct JitCache::Slot {
  std::thread::id tracer;
  bool done = false;
  std::shared_ptr<const Entry> entry;
  // A failed trace's message. Waiters throw a drx::Error of their own with it rather than
  // rethrow the tracer's exception object: one object caught on several threads at once is
  // shared mutable state (and its reference count is invisible to ThreadSanitizer).
  std::optional<std::string> error;
};

JitCache::JitCache(TreeFn fn, JitOptions options)
    : fn_(std::move(fn)), options_(std::move(options)) {}

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

std::shared_ptr<const JitCache::Entry> JitCache::entry_for(
    const std::string& key, const std::function<std::shared_ptr<Entry>()>& make) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (auto it = entries_.find(key); it != entries_.end(); it = entries_.find(key)) {
    const std::shared_ptr<Slot> slot = it->second;
    if (slot->done) return slot->entry;
    if (slot->tracer == std::this_thread::get_id())
      throw Error("jit: the function calls itself on the argument types it is being traced for (" +
                  key +
                  "); a jitted function cannot enter its own trace: recurse with fori_loop, "
                  "while_loop or scan, or on other argument types");
    lock.unlock();
    const std::function<void()> wait = [&] {
      std::unique_lock<std::mutex> relock(mutex_);
      traced_.wait(relock, [&] { return slot->done; });
    };
    JitWaitHook hook;
    {
      std::lock_guard<std::mutex> hook_lock(hook_mu);
      hook = wait_hook();
    }
    if (hook)
      hook(wait);
    else
      wait();
    lock.lock();
    if (!slot->done)
      throw Error("jit: the wait hook returned before the trace it waited for ended (" + key +
                  "); a JitWaitHook must call the wait it is given");
    if (slot->error) throw Error(*slot->error);
    // Done without a reusable entry: trace again, here.
  }
  auto slot = std::make_shared<Slot>();
  slot->tracer = std::this_thread::get_id();
  entries_.emplace(key, slot);
  ++trace_count_;
  lock.unlock();
  const auto fail = [&](std::string message) {
    lock.lock();
    slot->error = std::move(message);
    slot->done = true;
    entries_.erase(key);
    traced_.notify_all();
  };
  std::shared_ptr<Entry> entry;
  try {
    entry = make();
  } catch (const std::exception& e) {
    fail(e.what());
    throw;
  } catch (...) {
    fail("jit: tracing the function threw an exception that is not a std::exception");
    throw;
  }
  lock.lock();
  slot->done = true;
  if (entry->reusable)
    slot->entry = entry;
  else
    entries_.erase(key);
  traced_.notify_all();
  return entry;
}

Tree JitCache::call(const std::vector<Tree>& args) {
  return holds_values(Tree::list(args)) ? call_inline(args) : call_compiled(args);
}

Tree JitCache::call_compiled(const std::vector<Tree>& args) {
  Tree in = Tree::list(args);
  std::vector<Tree> leaves = tree_leaves(in);
  std::vector<Array> arrays;
  std::string key = in.structure();
  for (const Tree& l : leaves) {
    arrays.push_back(l.array());
    key += ";" + std::string(dtype_name(arrays.back().dtype())) + shape_str(arrays.back().shape());
  }
  const Mesh mesh = options_.mesh ? *options_.mesh : current_mesh();
  // What every process of the mesh must agree on (check_same) names the mesh
  // by its text; the cache key also tells process groups apart.
  const std::string shared_key = key + "|mesh" + mesh.str();
  key += "|mesh" + mesh.key();
  std::shared_ptr<const Entry> entry = entry_for(key, [&] {
    std::vector<Type> types;
    for (const Array& a : arrays) types.emplace_back(a.dtype(), a.shape());
    detail::MeshRequestScope requests(&options_.mesh);
    TracedFn t = trace_tree_fn(fn_, args, types, "jit");
    // Only a mesh given to jit itself (or asked for by the program): an ambient MeshScope
    // simply does not apply to a program without its placements.
    const std::optional<Mesh>& chosen = options_.mesh ? options_.mesh : requests.requested();
    if (chosen) check_mesh_names_placements(t.program, *chosen, "jit");
    auto made = std::make_shared<Entry>();
    made->program = simplify(t.program);
    made->out_structure = std::move(t.out_structure);
    made->mesh = chosen ? *chosen : mesh;
    CompileOptions options;
    options.mesh = made->mesh;
    options.backend = options_.backend;
    options.precision = options_.precision;
    made->executable = compile(made->program, options);
    made->signature = hex(fingerprint(shared_key)) + hex(fingerprint(to_string(made->program))) +
                      " " + kernel_fingerprint(made->program);
    return made;
  });
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last_ = entry;
  }
  // Every process must run the same program on the same global argument
  // types, or their collectives would pair up wrongly; checked every call, as
  // a process may meet a new signature while the others reuse a cached one.
  if (const ProcessGroup* group = entry->mesh.process_group())
    group->check_same("the jitted program and its argument types", entry->signature);
  std::vector<Array> results = entry->executable.run(arrays);
  std::vector<Tree> out_leaves(results.begin(), results.end());
  return tree_unflatten(entry->out_structure, out_leaves);
}

Tree JitCache::call_inline(const std::vector<Tree>& args) {
  const Tree in = Tree::list(args);
  const Values values = leaf_values(in);  // Array leaves become constants of the trace
  std::vector<Type> types;
  std::string key = "traced:" + in.structure();
  for (const Value& v : values) {
    types.push_back(v.type());
    key += ";" + v.type().str();
  }
  std::shared_ptr<const Entry> entry = entry_for(key, [&] {
    std::optional<Mesh> requested;
    TracedFn t = [&] {
      detail::MeshRequestScope requests(&options_.mesh);
      TracedFn traced = trace_tree_fn(fn_, args, types, "jit");
      requested = requests.requested();
      return traced;
    }();
    auto made = std::make_shared<Entry>();
    made->program = std::move(t.program);
    made->out_structure = std::move(t.out_structure);
    made->captured = std::move(t.captured);
    made->reusable = made->captured.empty();
    made->requested_mesh = std::move(requested);
    return made;
  });
  // Inlined, its program joins the enclosing jit's, which compiles for its mesh too (also
  // when this entry was traced earlier, for another enclosing trace).
  if (entry->requested_mesh) detail::request_mesh(*entry->requested_mesh, "jit");
  Values operands = values;
  operands.insert(operands.end(), entry->captured.begin(), entry->captured.end());
  return unflatten_values(entry->out_structure, inline_program(entry->program, operands));
}

}  // namespace drx
