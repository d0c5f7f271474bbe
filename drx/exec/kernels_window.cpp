// reduce_window and select_and_scatter_add: a direct loop over the output
// windows, the same loop (drx/ops/window_loops.h) the reference runs, on the
// frame's buffers: bitwise the interpreter, on one thread.
#include "drx/exec/kernels.h"
#include "drx/ops/window_loops.h"

namespace drx::exec {
namespace {

using windows::Geometry;
using windows::WindowParams;

template <class T, ReduceKind K>
class ReduceWindowKernel : public Kernel {
 public:
  ReduceWindowKernel(const Eqn& e, Geometry g) : x_(e.ins[0]), y_(e.outs[0]), g_(std::move(g)) {}
  KernelKind kind() const override { return KernelKind::reduction; }
  void run(Frame& f) const override {
    windows::reduce_window_loop<T, K>(f.in<T>(x_), f.out<T>(y_), g_);
  }

 private:
  int x_, y_;
  Geometry g_;
};

template <class T>
class SelectAndScatterKernel : public Kernel {
 public:
  SelectAndScatterKernel(const Eqn& e, Geometry g, windows::Select s)
      : x_(e.ins[0]), src_(e.ins[1]), y_(e.outs[0]), g_(std::move(g)), s_(s) {
    n_ = 1;
    for (int64_t d : g_.in) n_ *= d;
  }
  void run(Frame& f) const override {
    windows::select_and_scatter_loop<T>(f.in<T>(x_), f.in<T>(src_), f.out<T>(y_), n_, g_, s_);
  }

 private:
  int x_, src_, y_;
  Geometry g_;
  windows::Select s_;
  int64_t n_ = 1;
};

std::optional<KernelSpec> reduce_window_kernel(const Eqn& e, const CompileContext& cx) {
  const VarInfo& x = cx.var(e.ins[0]);
  const WindowParams w = WindowParams::of(e.params, e.prim->name(), false);
  Geometry g(x.shape, w);
  return dispatch_dtype(x.dtype, [&](auto t) -> std::optional<KernelSpec> {
    using T = decltype(t);
    return dispatch_reduce(w.kind(), [&](auto k) -> std::optional<KernelSpec> {
      return spec<ReduceWindowKernel<T, k()>>(Alias::none, e, std::move(g));
    });
  });
}

std::optional<KernelSpec> select_and_scatter_kernel(const Eqn& e, const CompileContext& cx) {
  const VarInfo& x = cx.var(e.ins[0]);
  if (x.dtype == DType::bool_) return std::nullopt;
  const WindowParams w = WindowParams::of(e.params, e.prim->name(), true);
  Geometry g(x.shape, w);
  const windows::Select s = windows::select_of(w.body);
  return dispatch_dtype(x.dtype, [&](auto t) -> std::optional<KernelSpec> {
    using T = decltype(t);
    return spec<SelectAndScatterKernel<T>>(Alias::none, e, std::move(g), s);
  });
}

}  // namespace

void add_window_kernels(KernelTable& t) {
  t[&prims::reduce_window()] = reduce_window_kernel;
  t[&prims::select_and_scatter_add()] = select_and_scatter_kernel;
}

}  // namespace drx::exec
