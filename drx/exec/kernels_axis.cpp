// Kernels along one axis: argmax, argmin, cumsum and softmax run the loops their
// primitives' eval runs (drx/ops/axis_loops.h) on raw pointers, so results
// are bitwise the interpreter's without copying an unowned operand into an
// Array first. cumsum may run in place (each element is read before its
// position is written).
#include "drx/exec/kernels.h"
#include "drx/ops/axis_loops.h"
#include "drx/ops/layer_norm_rows.h"
#include "drx/ops/primitives.h"

namespace drx::exec {
namespace {

using axis_loops::AxisLayout;

template <bool Max, class T>
class ArgReduceKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::reduction; }

 public:
  ArgReduceKernel(const Eqn& e, AxisLayout l) : x_(e.ins[0]), y_(e.outs[0]), l_(l) {}
  void run(Frame& f) const override {
    axis_loops::arg_reduce<Max, T>(f.in<T>(x_), l_, f.out<int32_t>(y_));
  }

 private:
  int x_, y_;
  AxisLayout l_;
};

template <class T>
class CumsumKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::reduction; }

 public:
  CumsumKernel(const Eqn& e, AxisLayout l, bool reverse)
      : x_(e.ins[0]), y_(e.outs[0]), l_(l), reverse_(reverse) {}
  void run(Frame& f) const override {
    axis_loops::cumsum<T>(f.in<T>(x_), l_, reverse_, f.out<T>(y_));
  }

 private:
  int x_, y_;
  AxisLayout l_;
  bool reverse_;
};

template <class T>
class SoftmaxKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::reduction; }

 public:
  SoftmaxKernel(const Eqn& e, AxisLayout l) : x_(e.ins[0]), y_(e.outs[0]), l_(l) {}
  void run(Frame& f) const override { axis_loops::softmax<T>(f.in<T>(x_), l_, f.out<T>(y_)); }

 private:
  int x_, y_;
  AxisLayout l_;
};

template <class T>
class LayerNormKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::reduction; }

 public:
  LayerNormKernel(const Eqn& e, int64_t rows, int64_t n, double eps)
      : x_(e.ins[0]), y_(e.outs[0]), r_(e.outs[1]), rows_(rows), n_(n), eps_(eps) {}
  void run(Frame& f) const override {
    layer_norm_rows::normalize<T>(f.in<T>(x_), rows_, n_, eps_, f.out<T>(y_), f.out<T>(r_));
  }

 private:
  int x_, y_, r_;
  int64_t rows_, n_;
  double eps_;
};

template <bool Max>
std::optional<KernelSpec> arg_reduce(const Eqn& e, const CompileContext& cx) {
  const std::optional<int64_t> axis = param_int(e, "axis");
  if (!axis) return std::nullopt;
  const VarInfo& x = cx.var(e.ins[0]);
  const AxisLayout l = axis_loops::layout_along(x.shape, *axis);
  return dispatch_dtype(
      x.dtype, [&](auto t) { return spec<ArgReduceKernel<Max, decltype(t)>>(Alias::none, e, l); });
}

std::optional<KernelSpec> cumsum(const Eqn& e, const CompileContext& cx) {
  const std::optional<int64_t> axis = param_int(e, "axis"), reverse = param_int(e, "reverse");
  if (!axis || !reverse) return std::nullopt;
  const VarInfo& x = cx.var(e.ins[0]);
  if (x.dtype == DType::bool_) return std::nullopt;
  const AxisLayout l = axis_loops::layout_along(x.shape, *axis);
  return dispatch_dtype(x.dtype, [&](auto t) {
    return spec<CumsumKernel<decltype(t)>>(Alias::first, e, l, *reverse != 0);
  });
}

std::optional<KernelSpec> softmax(const Eqn& e, const CompileContext& cx) {
  const std::optional<int64_t> axis = param_int(e, "axis");
  const VarInfo& x = cx.var(e.ins[0]);
  if (!axis || (x.dtype != DType::f32 && x.dtype != DType::f64)) return std::nullopt;
  const AxisLayout l = axis_loops::layout_along(x.shape, *axis);
  if (x.dtype == DType::f32) return spec<SoftmaxKernel<float>>(Alias::none, e, l);
  return spec<SoftmaxKernel<double>>(Alias::none, e, l);
}

std::optional<KernelSpec> layer_norm(const Eqn& e, const CompileContext& cx) {
  const std::optional<double> eps = param_double(e, "eps");
  const VarInfo& x = cx.var(e.ins[0]);
  if (!eps || x.shape.empty() || x.shape.back() < 1) return std::nullopt;
  const int64_t n = x.shape.back(), rows = num_elements(x.shape) / n;
  if (x.dtype == DType::f32) return spec<LayerNormKernel<float>>(Alias::none, e, rows, n, *eps);
  if (x.dtype == DType::f64) return spec<LayerNormKernel<double>>(Alias::none, e, rows, n, *eps);
  return std::nullopt;
}

}  // namespace

void add_axis_kernels(KernelTable& t) {
  t[&prims::argmax()] = arg_reduce<true>;
  t[&prims::argmin()] = arg_reduce<false>;
  t[&prims::cumsum()] = cumsum;
  t[&prims::softmax()] = softmax;
  t[&prims::layer_norm_normalize()] = layer_norm;
}

}  // namespace drx::exec
