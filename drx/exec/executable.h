#pragma once
// The compiled CPU executable behind jit: a Program turned once into a list of
// kernels over a static buffer plan, so that a call only runs kernels.
#include <cstddef>
#include <memory>
#include <vector>

#include "drx/array/array.h"
#include "drx/exec/mesh.h"
#include "drx/ir/program.h"

namespace drx {

namespace exec {
struct Plan;
struct Workspace;
}  // namespace exec

// What compile() decided, for tests and benchmarks.
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

struct CompileOptions {
  // A map_fn whose results only feed reduce_* runs client by client into the
  // reductions' accumulators, so memory does not grow with the clients.
  bool chunk_map_reduce = true;
  // The program is a map_fn body, or runs as one (a client's work, one client at a time): its
  // products are one BLAS call each on the calling thread, as the clients already fill drx's
  // threads; otherwise a product's rows are split in blocks over drx's pool. The two round
  // differently for products over 128 rows, so run a client's work as it runs in its program.
  bool map_body = false;
};

// A program compiled for the CPU. Copies share the compiled form; run() may be
// called from several threads at once (each call gets its own workspace).
class Executable {
 public:
  Executable() = default;
  explicit Executable(const Program& program, const Mesh& mesh = Mesh(),
                      const CompileOptions& options = {});

  // Runs on arrays of the program's input types; throws drx::Error otherwise.
  std::vector<Array> run(const std::vector<Array>& args) const;
  // Runs on raw buffers: ins[i] holds input i (read only), outs[k] receives
  // output k. No checks: map_fn bodies call this once per client.
  void run_raw(const void* const* ins, void* const* outs) const;

  // Gives the pages of large workspace buffers not in use by a call back to the
  // system (a loop kernel calls this on its body after the loop: the body's
  // buffers stay resident across iterations, not while the rest runs).
  void release_idle_memory() const;

  const Program& program() const;
  ExecStats stats() const;
  bool valid() const { return plan_ != nullptr; }

 private:
  std::shared_ptr<exec::Plan> plan_;
};

Executable compile(const Program& program, const Mesh& mesh = Mesh(),
                   const CompileOptions& options = {});

class Primitive;
namespace exec {
// Whether the executor has a kernel of its own for `p` (it may still run an
// equation on Primitive::eval for a dtype or layout its kernel does not cover).
bool has_compiled_kernel(const Primitive& p);
// The primitives the executor deliberately always runs on Primitive::eval.
const std::vector<const Primitive*>& interpreter_only_primitives();
}  // namespace exec

}  // namespace drx
