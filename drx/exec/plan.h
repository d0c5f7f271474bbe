#pragma once
// Private to drx/exec: the compiled form of a Program and the per-call frame
// its kernels read and write.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "drx/array/array.h"
#include "drx/exec/executable.h"
#include "drx/exec/profile.h"
#include "drx/ir/program.h"

namespace drx::exec {

// Where a variable's bytes live during a call.
enum class Storage : uint8_t {
  input,     // the caller's argument (never written)
  constant,  // computed at compile time (never written)
  pooled,    // a workspace buffer, reused once every reader has run
  output,    // a program result: a fresh Array per call, or the caller's buffer
  dynamic,   // an Array returned by a fallback kernel
  view,      // the bytes of another variable (reshape, place, stop_gradient)
};

struct VarInfo {
  DType dtype = DType::f32;
  Shape shape;
  size_t nbytes = 0;
  Storage storage = Storage::dynamic;  // also for variables no equation defines
  int buffer = -1;                     // pooled: index into the workspace's buffers
};

struct Plan;

// Per-call state: one pointer (and, where one exists, the Array behind it) per
// variable. Kernels read operands through in() and get result storage from out().
struct Frame {
  const Plan* plan = nullptr;
  void** ptr = nullptr;
  std::optional<Array>* hold = nullptr;
  bool raw_io = false;  // inputs and outputs are raw caller buffers

  const void* in(int v) const { return ptr[v]; }
  template <class T>
  const T* in(int v) const {
    return static_cast<const T*>(ptr[v]);
  }
  void* out(int v);
  template <class T>
  T* out(int v) {
    return static_cast<T*>(out(v));
  }
  // An Array with v's value, for kernels that need one (copies if v has none).
  Array array(int v) const;
  // Stores a fallback kernel's result for v.
  void set_result(int v, Array a, const std::vector<int>& operands);
};

// What a kernel spends its time on, for exec::profile's "by kind" table.
enum class KernelKind : uint8_t { gemm, elementwise, reduction, copy, interpreted, other };
const char* kernel_kind_name(KernelKind kind);

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(Frame& f) const = 0;
  virtual KernelKind kind() const { return KernelKind::other; }
  // The BLAS product one run makes, for exec::profile's roofline; none for other kernels.
  virtual std::optional<profile::ProductShape> product() const { return std::nullopt; }
  // Gives back the pages of what the kernel keeps between calls (Executable::release_idle_memory).
  virtual void release_idle_memory() const {}
};

// How a kernel's results may share memory with its operands.
enum class Alias : uint8_t {
  none,         // results need their own buffers
  elementwise,  // out[i] depends only on operand elements i: may reuse a dying operand
  first,        // result 0 may reuse the buffer of the first variable read, if it dies
  view,         // result 0 is operand 0's bytes under another type
};

struct KernelSpec {
  std::unique_ptr<Kernel> kernel;
  Alias alias = Alias::none;
  // The variables the kernel reads, when not the equation's operands (a kernel
  // that reads through a broadcast or replaces an earlier equation).
  std::optional<std::vector<int>> reads;
  size_t view_offset = 0;  // Alias::view: where the result starts in the operand, in bytes
};

// What kernel selection sees of the program being compiled.
struct CompileContext {
  const Program& program;
  const std::vector<VarInfo>& vars;
  std::vector<int> producer;  // the equation defining each variable, or -1
  std::vector<int> uses;      // operand slots reading each variable, plus program outputs
  const Mesh& mesh;           // the devices placed values are split across
  // Sub-programs (cond branches, map_fn bodies) compile with the same mesh and options.
  const CompileOptions& options;

  const VarInfo& var(int v) const { return vars[static_cast<size_t>(v)]; }
  // The equation defining v, or nullptr for inputs.
  const Eqn* producer_of(int v) const {
    int i = producer[static_cast<size_t>(v)];
    return i < 0 ? nullptr : &program.eqns[static_cast<size_t>(i)];
  }
};

// What compile decided for one equation.
struct EqnChoice {
  Alias alias = Alias::none;
  bool fallback = false;
  bool live = true;        // false: computed at compile time, or its results are unused
  std::vector<int> reads;  // the variables its kernel reads
  // The variables its kernel writes, when not the equation's results (a
  // kernel that computes later equations' results in its place).
  std::optional<std::vector<int>> writes;
  size_t view_offset = 0;
  std::vector<int> release;  // filled by plan_buffers: held arrays to drop after it runs
  std::vector<int> discard;  // filled by plan_buffers: large pooled buffers dead after it runs
};

struct Step {
  std::unique_ptr<Kernel> kernel;
  std::vector<int> release;  // non-pooled variables whose last reader this is
  // Pooled buffers (as a variable living in each) no longer read in this call:
  // their pages go back to the system, so that the memory of a call follows
  // its liveness even across nested executables (a loop's stacked carries).
  std::vector<int> discard;
  // The equation, for exec::profile; empty when not profiling (or for sub-program runners).
  std::string label;
  KernelKind kind = KernelKind::other;
};

struct Workspace {
  std::vector<void*> ptr;
  std::vector<std::optional<Array>> hold;
  std::vector<Array> buffers;
};

struct Plan {
  Program program;
  std::vector<VarInfo> vars;
  std::vector<Step> steps;
  std::vector<Array> constants;    // values of the constant variables
  std::vector<int> constant_vars;  // their variables
  std::vector<int> buffer_vars;    // for each pooled buffer, a variable of its type
  std::vector<int> transient;      // variables whose holds are dropped after a call
  std::vector<int> output_first;   // for each program output, its first output index
  // For each program output k, the inputs j whose buffer run_raw may be given as output k's
  // (outs[k] == ins[j]): every read of input j is done by the time output k is written, or
  // is made by the kernel writing it elementwise (plan_buffers). A loop keeps such a carry in
  // one buffer instead of copying it between two each iteration.
  std::vector<std::vector<int>> output_may_overwrite;
  ExecStats stats;

  // Free workspaces; run() borrows one per call.
  mutable std::mutex mu;
  mutable std::vector<std::unique_ptr<Workspace>> spare;

  std::unique_ptr<Workspace> acquire() const;
  void release(std::unique_ptr<Workspace> ws) const;
};

// Pooled buffers at least this large give their pages back to the system once
// dead before a later sub-program runs (Step::discard), and when asked
// (Executable::release_idle_memory).
constexpr size_t kDiscardBytes = size_t{4} << 20;
// The whole pages inside [p, p + nbytes) back to the system; the mapping
// stays, and the next write faults in zeroed pages.
void discard_pages(void* p, size_t nbytes);

// Kernel selection: a fast kernel for this equation, or nullopt (fallback).
std::optional<KernelSpec> select_kernel(const Eqn& e, const CompileContext& cx);
std::unique_ptr<Kernel> fallback_kernel(const Eqn& e);
// Copies nbytes of operand 0 from `offset` into result 0 (a view whose result
// must own its bytes).
std::unique_ptr<Kernel> copy_kernel(const Eqn& e, size_t nbytes, size_t offset = 0);

// Replaces trees of elementwise equations by one fused kernel each (at the
// tree's root; the other members stop being live).
void fuse_elementwise(const CompileContext& cx, std::vector<EqnChoice>& choices,
                      std::vector<std::unique_ptr<Kernel>>& kernels, ExecStats& stats);

// Replaces each map_fn whose results only feed placement reductions by one
// kernel that runs the clients into the reductions' accumulators (the
// reductions stop being live; the map_fn's equation writes their results).
void fuse_map_reduce(const CompileContext& cx, std::vector<EqnChoice>& choices,
                     std::vector<std::unique_ptr<Kernel>>& kernels, ExecStats& stats);

// The variables equation e's kernel writes.
inline const std::vector<int>& written_by(const Eqn& e, const EqnChoice& c) {
  return c.writes ? *c.writes : e.outs;
}

// Assigns storage and buffers to every variable and fills each live
// equation's release list.
void plan_buffers(Plan& plan, std::vector<EqnChoice>& eqns);

}  // namespace drx::exec
