// Kernel selection, once per equation at compile time: by what the primitive
// states about itself (a scalar function, a reduction), else by the table
// keyed by primitive object. A primitive with neither runs on Primitive::eval
// and must be on the interpreter-only list below; a test checks that every
// registered primitive has a kernel or is on it.
#include <algorithm>
#include <iterator>

#include "drx/exec/kernels.h"
#include "drx/mapreduce/primitives.h"
#include "drx/ops/convolution.h"
#include "drx/ops/primitives.h"
#include "drx/transforms/cond.h"
#include "drx/transforms/loops.h"

namespace drx::exec {
namespace {

const KernelTable& table() {
  static const KernelTable t = [] {
    KernelTable t;
    add_elementwise_kernels(t);
    add_dot_kernels(t);
    add_shape_kernels(t);
    add_mapreduce_kernels(t);
    add_index_kernels(t);
    add_axis_kernels(t);
    add_control_flow_kernels(t);
    add_loop_kernels(t);
    add_conv_kernels(t);
    add_window_kernels(t);
    return t;
  }();
  return t;
}

bool touches_storage_format(const Eqn& e, const CompileContext& cx) {
  for (int v : e.ins)
    if (is_storage_format(cx.var(v).dtype)) return true;
  for (int v : e.outs)
    if (is_storage_format(cx.var(v).dtype)) return true;
  return false;
}

// Every storage-format value of e is bf16 (no f16 or narrow integer).
bool storage_is_bf16(const Eqn& e, const CompileContext& cx) {
  auto ok = [&](int v) {
    const DType d = cx.var(v).dtype;
    return !is_storage_format(d) || d == DType::bf16;
  };
  return std::all_of(e.ins.begin(), e.ins.end(), ok) &&
         std::all_of(e.outs.begin(), e.outs.end(), ok);
}

// Primitives whose kernels never compute on the values: they move elements as words of their
// size, or run sub-programs (whose own equations are compiled like any other).
bool blind_to_values(const Primitive* p) {
  static const Primitive* const blind[] = {
      &prims::reshape(),     &prims::place(),  &prims::stop_gradient(),    &prims::transpose(),
      &prims::slice(),       &prims::select(), &prims::broadcast_in_dim(), &prims::broadcast(),
      &prims::concatenate(), &prims::scan(),   &prims::while_loop(),       &prims::cond(),
      &prims::map_fn()};
  return std::find(std::begin(blind), std::end(blind), p) != std::end(blind);
}

// bf16 equations with kernels of their own: products (convolutions too), arithmetic, conversions
// from and to f32, data movement, loops and maps. The others (f16 and the narrow integers
// throughout; bf16 reductions and comparisons) run as the reference does (Primitive::evaluate,
// widened).
std::optional<KernelSpec> storage_format_kernel(const Eqn& e, const CompileContext& cx) {
  if (!storage_is_bf16(e, cx)) return std::nullopt;
  if (e.prim == &prims::dot_general()) return bf16_dot_general(e, cx);
  if (e.prim == &prims::conv_general_dilated()) return table().at(e.prim)(e, cx);
  if (e.prim == &prims::convert()) return bf16_convert(e, cx);
  if (const ScalarKernel* k = e.prim->scalar_kernel())
    return k->predicate() ? std::nullopt : bf16_elementwise(e, cx);
  if (!blind_to_values(e.prim)) return std::nullopt;
  auto it = table().find(e.prim);
  return it == table().end() ? std::nullopt : it->second(e, cx);
}

}  // namespace

std::optional<KernelSpec> select_kernel(const Eqn& e, const CompileContext& cx) {
  if (touches_storage_format(e, cx)) return storage_format_kernel(e, cx);
  if (e.prim->scalar_kernel()) return elementwise_kernel(e, cx);
  if (e.prim->reduction()) return reduction_kernel(e, cx);
  auto it = table().find(e.prim);
  if (it == table().end()) return std::nullopt;
  return it->second(e, cx);
}

bool has_compiled_kernel(const Primitive& p) {
  return p.scalar_kernel() || p.reduction() || table().count(&p) != 0;
}

const std::vector<const Primitive*>& interpreter_only_primitives() {
  static const std::vector<const Primitive*> list = {
      // Folded into a constant buffer when the plan is made; never run per call.
      &prims::constant(),
      // Rare in training programs (index tables); its reference loop is fast
      // enough, and no workload needs more yet.
      &prims::iota(),
      // The transpose of take, in gradients of embedding lookups. A compiled
      // kernel is due with the transformer workload (issue 19).
      &prims::scatter_add(),
      // Random bits: the reference loop is one pass over the counters, which
      // serves DP noise at model size; a kernel is due when in-program sampling
      // (dropout, issue 19) is on a workload's critical path.
      &prims::threefry2x32(),
      // A copy of the bytes.
      &prims::bitcast_convert(),
      // StableHLO's data movement (imported programs): one pass each, not yet on
      // a training workload's critical path.
      &prims::pad(),
      &prims::reverse(),
      &prims::dynamic_slice(),
      &prims::dynamic_update_slice(),
      // A predicate over floats, in imported programs.
      &prims::is_finite(),
      // sort and top_k: a comparison sort per row, which is what their
      // reference loops already do on contiguous memory; a kernel would only
      // save the operand's copy into an Array. Due when a workload sorts in
      // its inner loop.
      &prims::sort(),
      &prims::top_k(),
  };
  return list;
}

}  // namespace drx::exec
