#pragma once
// The one compile seam: compile(program, options) turns a Program into an
// Executable for a backend. "cpu" (the default) is drx's compiled executor: a
// Program turned once into a list of kernels over a static buffer plan, so
// that a call only runs kernels. "interpreter" runs the reference semantics
// equation by equation. jit, `drx run`, the MapReduce form and the benchmarks
// all compile through here; a second backend implements CompiledProgram and
// registers itself with register_backend.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "drx/array/array.h"
#include "drx/core/mesh.h"
#include "drx/ir/program.h"

namespace drx {

namespace exec {
struct Plan;
}  // namespace exec

// What compile() decided, for tests and benchmarks (the cpu backend's counts;
// zeros for a backend that does not report them).
struct ExecStats {
  size_t kernels = 0;       // equations run by a fast kernel
  size_t fallbacks = 0;     // equations run by Primitive::eval
  size_t views = 0;         // equations that only alias their operand
  size_t constants = 0;     // equations evaluated at compile time
  size_t dropped = 0;       // equations absorbed by other kernels, or whose results are unused
  size_t fused = 0;         // elementwise equations run inside another one's fused kernel
  size_t buffers = 0;       // distinct intermediate buffers
  size_t in_place = 0;      // results written over a dying operand
  size_t chunked_maps = 0;  // map_fns run client by client into their reductions' accumulators
  // Chunked map_fns inside the bodies of chunked map_fns (nested placements:
  // clients chunked within each chunked group), at any depth.
  size_t nested_chunked_maps = 0;
};

// How products and other contractions compute. `highest`: in the operands'
// dtype with accumulation in it (f32 products accumulate in f32), exactly as
// written; a backend refuses a policy it cannot honour.
enum class Precision { highest };
const char* precision_name(Precision p);

struct CompileOptions {
  // Placements named after its axes are split across its devices (the
  // default mesh: one device).
  Mesh mesh;
  // "cpu" or "interpreter", or a backend registered with register_backend.
  std::string backend = "cpu";
  Precision precision = Precision::highest;
  // Run simplify() on the program first (jit, `drx run` and the MapReduce
  // form do; a caller that simplified already, or wants the program compiled
  // as it is, leaves it off).
  bool simplify = false;
  // A map_fn whose results only feed reduce_* runs client by client into the
  // reductions' accumulators, so memory does not grow with the clients.
  bool chunk_map_reduce = true;
  // The program is a map_fn body, or runs as one (a client's work, one client at a time): its
  // products are one BLAS call each on the calling thread, as the clients already fill drx's
  // threads; otherwise a product's rows are split in blocks over drx's pool. The two round
  // differently for products over 128 rows, so run a client's work as it runs in its program.
  bool map_body = false;
};

// What a backend compiles a program into. run() may be called from several
// threads at once.
class CompiledProgram {
 public:
  virtual ~CompiledProgram() = default;
  // Runs on arrays of the program's input types; throws drx::Error otherwise.
  virtual std::vector<Array> run(const std::vector<Array>& args) const = 0;
  // The program as compiled (after simplify, when asked for).
  virtual const Program& program() const = 0;
  virtual ExecStats stats() const { return {}; }
  // Gives memory the backend holds between calls back to the system.
  virtual void release_idle_memory() const {}
};

// A compiled program. Copies share the compiled form.
class Executable {
 public:
  Executable() = default;
  // The cpu backend's compiled form of `program` (as compile() with these options).
  explicit Executable(const Program& program, const Mesh& mesh = Mesh(),
                      const CompileOptions& options = {});
  explicit Executable(std::shared_ptr<const CompiledProgram> compiled);

  // Runs on arrays of the program's input types; throws drx::Error otherwise.
  std::vector<Array> run(const std::vector<Array>& args) const;
  // cpu backend only, for the executor's own kernels: runs on raw buffers,
  // ins[i] holds input i (read only), outs[k] receives output k. No checks:
  // map_fn bodies call this once per client.
  void run_raw(const void* const* ins, void* const* outs) const;
  // cpu backend only: whether run_raw may be given one buffer as output k and input j (the
  // output written over the input it replaces: a loop's carry). False for other backends.
  bool output_may_overwrite_input(size_t k, size_t j) const;

  // Gives the pages of large workspace buffers not in use by a call back to the
  // system. Loops do not call it on their bodies: a body's buffers stay resident
  // across iterations and across calls (rounds), since giving them back made
  // every round first-touch them again (442k page faults a round for drx lm at
  // width 512) for a peak 3% lower in one remat benchmark and none elsewhere.
  void release_idle_memory() const;

  const Program& program() const;
  ExecStats stats() const;
  bool valid() const { return compiled_ != nullptr; }
  // The backend's compiled form, for a caller that knows its backend.
  const std::shared_ptr<const CompiledProgram>& compiled() const { return compiled_; }

 private:
  std::shared_ptr<const CompiledProgram> compiled_;
  const exec::Plan* plan_ = nullptr;  // set for the cpu backend (run_raw)
};

// Compiles `program` for options.backend. Throws drx::Error for an unknown
// backend, a precision policy or mesh the backend cannot honour, or a program
// the backend cannot compile.
Executable compile(const Program& program, const CompileOptions& options);
// compile() with `options` but on `mesh`.
Executable compile(const Program& program, const Mesh& mesh = Mesh(),
                   const CompileOptions& options = {});

// What, besides the program, decides the bits the "cpu" backend computes it to, and so what
// the processes of a mesh must agree on: "" for most programs; for one with bf16 products or
// f32 or bf16 convolutions, their kernel (oneDNN's version and instruction set, or drx's own
// loops), as kernels round differently.
std::string kernel_fingerprint(const Program& program);

// A backend: compiles programs (already simplified when options.simplify
// asked for it) into CompiledPrograms.
using Backend =
    std::function<std::shared_ptr<const CompiledProgram>(const Program&, const CompileOptions&)>;
// Makes `backend` available as options.backend == name; throws drx::Error
// when the name is taken (the built-in "cpu" and "interpreter" included).
void register_backend(const std::string& name, Backend backend);
// The backends' names, sorted.
std::vector<std::string> backend_names();

class Primitive;
namespace exec {
// Whether the executor has a kernel of its own for `p` (it may still run an
// equation on Primitive::eval for a dtype or layout its kernel does not cover).
bool has_compiled_kernel(const Primitive& p);
// The primitives the executor deliberately always runs on Primitive::eval.
const std::vector<const Primitive*>& interpreter_only_primitives();
// The cpu backend itself.
std::shared_ptr<const CompiledProgram> compile_cpu(const Program& program,
                                                   const CompileOptions& options);
}  // namespace exec

}  // namespace drx
