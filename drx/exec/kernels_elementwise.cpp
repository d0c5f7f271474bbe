// Elementwise kernels: one tight loop per op and dtype over raw pointers, which
// the compiler vectorises. Each scalar function computes exactly what the
// reference primitive does (same expression, same NaN rules), so results are
// bitwise equal to Primitive::eval. Dtypes not covered here fall back.
#include <cstring>

#include "drx/array/half.h"
#include "drx/exec/bf16_blocks.h"
#include "drx/exec/kernels.h"
#include "drx/ops/primitives.h"

namespace drx::exec {
namespace {

// ---- kernels ---------------------------------------------------------------
template <class T>
class UnaryKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::elementwise; }

 public:
  UnaryKernel(const Eqn& e, int64_t n, BlockLoop<T> loop)
      : x_(e.ins[0]), y_(e.outs[0]), n_(n), loop_(loop) {}
  void run(Frame& f) const override { loop_(f.in<T>(x_), nullptr, f.out<T>(y_), n_); }

 private:
  int x_, y_;
  int64_t n_;
  BlockLoop<T> loop_;
};

// Operands of binary ops and select may be read through a broadcast_in_dim
// instead of from its materialised result: the result is viewed as
// [outer, inner] and each operand advances `outer` elements per row and 1
// (Unit) or 0 elements per column. Full operands have outer = inner; a bias
// row has outer = 0; a per-row value has outer = 1 and stride 0; a scalar 0, 0.
struct Operand {
  int var = -1;
  int64_t outer = 0;
  bool unit = true;
};

// One call of the primitive's block loop per row of the result.
template <class T, class Out>
class BinaryKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::elementwise; }

 public:
  BinaryKernel(Operand a, Operand b, int y, int64_t outer, int64_t inner, BlockLoop<T, Out> loop)
      : a_(a), b_(b), y_(y), outer_(outer), inner_(inner), loop_(loop) {}
  void run(Frame& f) const override {
    const T* a = f.in<T>(a_.var);
    const T* b = f.in<T>(b_.var);
    Out* y = f.out<Out>(y_);
    for (int64_t o = 0; o < outer_; ++o)
      loop_(a + o * a_.outer, b + o * b_.outer, y + o * inner_, inner_);
  }

 private:
  Operand a_, b_;
  int y_;
  int64_t outer_, inner_;
  BlockLoop<T, Out> loop_;
};

// Branches are copied as bit patterns of their element size.
template <class T, int SA, int SB>
class SelectKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::elementwise; }

 public:
  SelectKernel(int p, Operand a, Operand b, int y, int64_t outer, int64_t inner)
      : p_(p), a_(a), b_(b), y_(y), outer_(outer), inner_(inner) {}
  void run(Frame& f) const override {
    const uint8_t* p = f.in<uint8_t>(p_);
    const T* a = f.in<T>(a_.var);
    const T* b = f.in<T>(b_.var);
    T* y = f.out<T>(y_);
    for (int64_t o = 0; o < outer_; ++o) {
      const uint8_t* pr = p + o * inner_;
      const T* ar = a + o * a_.outer;
      const T* br = b + o * b_.outer;
      T* yr = y + o * inner_;
      // Branch-free (predicates are often random, as in relu): all-ones or
      // all-zeros masks, which also vectorises.
      for (int64_t j = 0; j < inner_; ++j) {
        const T m = static_cast<T>(T{0} - static_cast<T>(pr[j] != 0));
        yr[j] = static_cast<T>((ar[j * SA] & m) | (br[j * SB] & static_cast<T>(~m)));
      }
    }
  }

 private:
  int p_;
  Operand a_, b_;
  int y_;
  int64_t outer_, inner_;
};

// How the result is split into [outer, inner], and its operands read.
struct Access {
  int64_t outer = 1, inner = 0;
  std::vector<Operand> ops;
  std::vector<int> reads() const {
    std::vector<int> r;
    for (const Operand& o : ops) r.push_back(o.var);
    return r;
  }
};

// Reads operands `fusable` (indices into e.ins) through the broadcast_in_dim
// that produced them where the broadcast is a scalar, a repeated row or a
// repeated column of the result; all other operands are read in full.
Access access(const Eqn& e, const CompileContext& cx, std::initializer_list<size_t> fusable) {
  Access a;
  const int64_t n = num_elements(cx.var(e.outs[0]).shape);
  a.inner = n;
  bool split = false;
  enum class Mode { full, scalar, row, col };
  std::vector<Mode> modes(e.ins.size(), Mode::full);
  for (int v : e.ins) a.ops.push_back(Operand{v, 0, true});
  for (size_t k : fusable) {
    const Eqn* b = cx.producer_of(e.ins[k]);
    std::optional<Layout> l = b ? broadcast_layout(*b, cx) : std::nullopt;
    if (!l) continue;
    Mode m = Mode::full;
    int64_t rows = 1, cols = n;
    if (l->shape.empty() || (l->shape.size() == 1 && l->stride[0] == 0)) {
      m = Mode::scalar;
    } else if (l->shape.size() == 1 && l->stride[0] == 1) {
      m = Mode::full;  // the broadcast only adds size-1 dims
    } else if (l->shape.size() == 2 && l->stride[0] == 0 && l->stride[1] == 1) {
      m = Mode::row;
      rows = l->shape[0], cols = l->shape[1];
    } else if (l->shape.size() == 2 && l->stride[0] == 1 && l->stride[1] == 0) {
      m = Mode::col;
      rows = l->shape[0], cols = l->shape[1];
    } else {
      continue;
    }
    if (m == Mode::row || m == Mode::col) {
      if (split && (a.outer != rows || a.inner != cols)) continue;
      split = true;
      a.outer = rows;
      a.inner = cols;
    }
    modes[k] = m;
    a.ops[k].var = b->ins[0];
  }
  for (size_t k = 0; k < a.ops.size(); ++k) {
    Operand& o = a.ops[k];
    o.unit = modes[k] == Mode::full || modes[k] == Mode::row;
    o.outer = modes[k] == Mode::full ? a.inner : modes[k] == Mode::col ? 1 : 0;
  }
  if (n == 0) a.outer = 0;
  return a;
}

template <class T, class Out>
std::optional<KernelSpec> make_binary(const Eqn& e, const Access& a, const ScalarKernel& k) {
  const Operand &x = a.ops[0], &y = a.ops[1];
  BlockLoop<T, Out> loop = k.loop<T, Out>(x.unit, y.unit);
  if (!loop) return std::nullopt;
  std::optional<KernelSpec> s =
      spec<BinaryKernel<T, Out>>(Alias::elementwise, x, y, e.outs[0], a.outer, a.inner, loop);
  s->reads = a.reads();
  return s;
}

template <class T>
std::optional<KernelSpec> make_select(const Eqn& e, const Access& a) {
  std::optional<KernelSpec> s;
  const int p = a.ops[0].var, y = e.outs[0];
  const Operand &t = a.ops[1], &f = a.ops[2];
  if (t.unit && f.unit)
    s = spec<SelectKernel<T, 1, 1>>(Alias::elementwise, p, t, f, y, a.outer, a.inner);
  else if (t.unit)
    s = spec<SelectKernel<T, 1, 0>>(Alias::elementwise, p, t, f, y, a.outer, a.inner);
  else if (f.unit)
    s = spec<SelectKernel<T, 0, 1>>(Alias::elementwise, p, t, f, y, a.outer, a.inner);
  else
    s = spec<SelectKernel<T, 0, 0>>(Alias::elementwise, p, t, f, y, a.outer, a.inner);
  s->reads = a.reads();
  return s;
}

template <class S, class D>
class ConvertKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::elementwise; }

 public:
  ConvertKernel(const Eqn& e, int64_t n) : x_(e.ins[0]), y_(e.outs[0]), n_(n) {}
  void run(Frame& f) const override {
    const S* x = f.in<S>(x_);
    D* y = f.out<D>(y_);
    for (int64_t i = 0; i < n_; ++i) y[i] = static_cast<D>(x[i]);
  }

 private:
  int x_, y_;
  int64_t n_;
};

int64_t size_of(const Eqn& e, const CompileContext& cx) {
  return num_elements(cx.var(e.outs[0]).shape);
}

template <class T>
std::optional<KernelSpec> unary(const Eqn& e, const CompileContext& cx, const ScalarKernel& k) {
  BlockLoop<T> loop = k.loop<T>(true, true);
  if (!loop) return std::nullopt;
  return spec<UnaryKernel<T>>(Alias::elementwise, e, size_of(e, cx), loop);
}

// Arithmetic on floats may read operands through broadcasts; comparisons of
// integers and bools read them in full.
template <class T>
std::optional<KernelSpec> binary(const Eqn& e, const CompileContext& cx, const ScalarKernel& k) {
  if (k.predicate()) {
    const Access a =
        is_floating(cx.var(e.ins[0]).dtype) ? access(e, cx, {0, 1}) : access(e, cx, {});
    return make_binary<T, uint8_t>(e, a, k);
  }
  if (e.prim == &prims::add() || e.prim == &prims::sub())
    if (std::optional<KernelSpec> gemm = accumulated_dot(e, cx, e.prim == &prims::sub()))
      return gemm;
  return make_binary<T, T>(e, access(e, cx, {0, 1}), k);
}

std::optional<KernelSpec> select(const Eqn& e, const CompileContext& cx) {
  const Access a = access(e, cx, {1, 2});
  switch (dtype_size(cx.var(e.outs[0]).dtype)) {
    case 1:
      return make_select<uint8_t>(e, a);
    case 2:
      return make_select<uint16_t>(e, a);
    case 4:
      return make_select<uint32_t>(e, a);
    case 8:
      return make_select<uint64_t>(e, a);
    default:
      return std::nullopt;
  }
}

// To a float type from anything is a plain static_cast in the reference
// (convert_element); conversions to integers or bool saturate and fall back.
std::optional<KernelSpec> convert(const Eqn& e, const CompileContext& cx) {
  const DType from = cx.var(e.ins[0]).dtype, to = cx.var(e.outs[0]).dtype;
  const int64_t n = size_of(e, cx);
  if (from == to)
    return KernelSpec{copy_kernel(e, cx.var(e.outs[0]).nbytes), Alias::elementwise, std::nullopt};
  if (!is_floating(to)) return std::nullopt;
  return dispatch_dtype(from, [&](auto s) {
    using S = decltype(s);
    if (to == DType::f32) return spec<ConvertKernel<S, float>>(Alias::elementwise, e, n);
    return spec<ConvertKernel<S, double>>(Alias::elementwise, e, n);
  });
}

// bf16 from and to f32, and to f64: exact widenings, and rounding to nearest even.
class Bf16ConvertKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::elementwise; }

 public:
  Bf16ConvertKernel(const Eqn& e, int64_t n, DType from, DType to)
      : x_(e.ins[0]), y_(e.outs[0]), n_(n), from_(from), to_(to) {}
  void run(Frame& f) const override {
    if (from_ == DType::f32) {
      const float* x = f.in<float>(x_);
      auto* y = f.out<uint16_t>(y_);
      narrow_to_bf16(x, y, n_);
      return;
    }
    const auto* x = f.in<uint16_t>(x_);
    if (to_ == DType::f32) {
      float* y = f.out<float>(y_);
      widen_bf16(x, y, n_);
    } else {
      double* y = f.out<double>(y_);
      for (int64_t i = 0; i < n_; ++i) y[i] = static_cast<double>(bf16_to_float(x[i]));
    }
  }

 private:
  int x_, y_;
  int64_t n_;
  DType from_, to_;
};

}  // namespace

std::optional<KernelSpec> bf16_convert(const Eqn& e, const CompileContext& cx) {
  const DType from = cx.var(e.ins[0]).dtype, to = cx.var(e.outs[0]).dtype;
  const bool widen = from == DType::bf16 && (to == DType::f32 || to == DType::f64);
  const bool narrow = from == DType::f32 && to == DType::bf16;
  if (!widen && !narrow) return std::nullopt;
  // astype(product + bias, bf16) where the sum has no other reader: one product writing bf16.
  if (narrow)
    if (const Eqn* add = cx.producer_of(e.ins[0]);
        add && add->prim == &prims::add() && cx.uses[static_cast<size_t>(e.ins[0])] == 1)
      for (int side = 0; side < 2; ++side) {
        const int product = add->ins[static_cast<size_t>(side)];
        if (cx.uses[static_cast<size_t>(product)] != 1) continue;
        if (std::optional<KernelSpec> s =
                bf16_biased_dot(product, add->ins[static_cast<size_t>(1 - side)], e.outs[0], cx))
          return s;
      }
  // Result and operand differ in size: the result has a buffer of its own.
  return spec<Bf16ConvertKernel>(Alias::none, e, size_of(e, cx), from, to);
}

// The kernel of any primitive that states its scalar function.
std::optional<KernelSpec> elementwise_kernel(const Eqn& e, const CompileContext& cx) {
  const ScalarKernel& k = *e.prim->scalar_kernel();
  const DType d = cx.var(e.ins.at(0)).dtype;
  if (!k.covers(d) || static_cast<size_t>(k.arity()) != e.ins.size()) return std::nullopt;
  return dispatch_dtype(d, [&](auto t) -> std::optional<KernelSpec> {
    using T = decltype(t);
    if (k.arity() == 1) {
      if constexpr (std::is_floating_point_v<T>) return unary<T>(e, cx, k);
      return std::nullopt;
    }
    return binary<T>(e, cx, k);
  });
}

void add_elementwise_kernels(KernelTable& t) {
  t[&prims::select()] = select;
  t[&prims::convert()] = convert;
}

}  // namespace drx::exec
