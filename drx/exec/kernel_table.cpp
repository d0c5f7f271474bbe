// Kernel selection by primitive name, looked up once per equation at compile
// time. Primitives absent from the table run on Primitive::eval.
#include "drx/exec/kernels.h"
#include "drx/core/primitive.h"

namespace drx::exec {
namespace {

const KernelTable& table() {
  static const KernelTable t = [] {
    KernelTable t;
    add_elementwise_kernels(t);
    add_reduce_kernels(t);
    add_dot_kernels(t);
    add_shape_kernels(t);
    add_mapreduce_kernels(t);
    add_index_kernels(t);
    add_control_flow_kernels(t);
    return t;
  }();
  return t;
}

}  // namespace

std::optional<KernelSpec> select_kernel(const Eqn& e, const CompileContext& cx) {
  auto it = table().find(e.prim->name());
  if (it == table().end()) return std::nullopt;
  return it->second(e, cx);
}

}  // namespace drx::exec
