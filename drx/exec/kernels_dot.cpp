// dot_general on BLAS (cblas_sgemm/dgemm) when the operands are, per batch
// index, row-major matrices or their transposes: leading batch dims, and the
// contracting dims one block at either end of the rest. Transposed operands are
// passed as CblasTrans, never copied. Other layouts and integer dtypes fall
// back to the reference loop.
//
// Two patterns around a product become part of its gemm call:
//   transpose(dot(a, b), [1, 0])    one gemm writing the transposed product;
//   w +/- c * dot(a, b)             gemm with alpha = +/-c, beta = 1, into w's
//                                   buffer when w dies there (an SGD step);
//   dot(a, b) + bias                the bias row copied into each row of the
//                                   result, then gemm with beta = 1 (a dense
//                                   layer), the broadcast never materialised.
// Reverse-mode gradients of matmul produce the first for every weight, and
// optimiser updates the second.
//
// Unlike the reference (which accumulates in double), sgemm accumulates in
// float; results agree to float rounding.
#include <algorithm>
#include <cstring>

#include "drx/exec/blas_threads.h"
#include "drx/exec/gemm.h"
#include "drx/exec/kernels.h"
#include "drx/ops/dot_general_params.h"
#include "drx/ops/primitives.h"

namespace drx::exec {
namespace {

// c = a b, or with `w` set, c = w + sign * scale * a b (scale read at run time
// from variable `scale`, or 1 without one). With w_is_row, w is one row of n
// elements that every row of c starts from.
struct GemmCall {
  int a = -1, b = -1, c = -1;
  Gemm g;
  int w = -1, scale = -1;
  double sign = 1;
  bool w_is_row = false;
  bool map_body = false;  // the product's path, see gemm_all
};

template <class T>
class GemmKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::gemm; }
  std::optional<profile::ProductShape> product() const override {
    const Gemm& g = k_.g;
    return profile::ProductShape{g.batch,
                                 g.m,
                                 g.n,
                                 g.k,
                                 g.trans_a,
                                 g.trans_b,
                                 std::is_same_v<T, double> ? DType::f64 : DType::f32,
                                 std::is_same_v<T, double> ? DType::f64 : DType::f32};
  }

 public:
  explicit GemmKernel(GemmCall call) : k_(call) {}
  void run(Frame& f) const override {
    const Gemm& g = k_.g;
    const T* a = f.in<T>(k_.a);
    const T* b = f.in<T>(k_.b);
    T* c = f.out<T>(k_.c);
    const int64_t size = g.batch * g.m * g.n;
    T beta = 0;
    if (k_.w >= 0 && k_.w_is_row) {
      const T* w = f.in<T>(k_.w);
      for (int64_t r = 0; r < g.batch * g.m; ++r)
        std::memcpy(c + r * g.n, w, static_cast<size_t>(g.n) * sizeof(T));
      beta = 1;
    } else if (k_.w >= 0) {
      const T* w = f.in<T>(k_.w);
      if (w != c && size) std::memcpy(c, w, static_cast<size_t>(size) * sizeof(T));
      beta = 1;
    } else if (g.k == 0) {
      std::fill(c, c + size, T{0});
    }
    if (size == 0 || g.k == 0) return;
    T alpha = static_cast<T>(k_.sign);
    if (k_.scale >= 0) alpha *= *f.in<T>(k_.scale);
    gemm_all<T>(g, a, b, c, alpha, beta, k_.map_body);
  }

 private:
  GemmCall k_;
};

std::optional<Gemm> float_gemm(const Eqn& e, const CompileContext& cx) {
  const VarInfo &l = cx.var(e.ins[0]), &r = cx.var(e.ins[1]);
  // f32 or f64 throughout: bf16 products (f32 results included) have kernels of their own.
  const DType out = cx.var(e.outs[0]).dtype;
  if (l.dtype != r.dtype || l.dtype != out || (out != DType::f32 && out != DType::f64))
    return std::nullopt;
  return gemm_layout(e, l.shape, r.shape);
}

std::optional<KernelSpec> make_gemm(DType dt, GemmCall call, Alias alias, std::vector<int> reads,
                                    const CompileContext& cx) {
  note_blas_threads_once();
  call.map_body = cx.options.map_body;
  std::optional<KernelSpec> s;
  if (dt == DType::f32)
    s = spec<GemmKernel<float>>(alias, call);
  else
    s = spec<GemmKernel<double>>(alias, call);
  s->reads = std::move(reads);
  return s;
}

bool only_use(const CompileContext& cx, int v) { return cx.uses[static_cast<size_t>(v)] == 1; }

// The gemm computing variable v: a dot_general, or the transpose [1, 0] of a
// 2-D dot_general read by nothing else.
std::optional<GemmCall> gemm_of(int v, const CompileContext& cx) {
  const Eqn* e = cx.producer_of(v);
  if (!e) return std::nullopt;
  if (e->prim == &prims::dot_general()) {
    std::optional<Gemm> g = float_gemm(*e, cx);
    if (!g) return std::nullopt;
    return GemmCall{e->ins[0], e->ins[1], v, *g};
  }
  const Eqn* dot = transposed_product(*e, cx);
  if (!dot) return std::nullopt;
  std::optional<Gemm> g = float_gemm(*dot, cx);
  if (!g || g->batch != 1) return std::nullopt;
  return GemmCall{dot->ins[1], dot->ins[0], v, transposed(*g)};
}

std::optional<KernelSpec> dot_general(const Eqn& e, const CompileContext& cx) {
  // Read for every dtype (the gemm path reads it only for floats), so a missing
  // or mistyped parameter is an error at compile, not a silent interpreter run.
  DotGeneralParams::of(e);
  std::optional<GemmCall> call = gemm_of(e.outs[0], cx);
  if (!call) return std::nullopt;
  return make_gemm(cx.var(e.outs[0]).dtype, *call, Alias::none, {call->a, call->b}, cx);
}

// A scalar operand: a broadcast of a one-element value.
int scalar_source(int v, const CompileContext& cx) {
  const Eqn* e = cx.producer_of(v);
  if (!e || !broadcast_layout(*e, cx) || num_elements(cx.var(e->ins[0]).shape) != 1) return -1;
  return e->ins[0];
}

}  // namespace

int bias_row(int v, const Gemm& g, const CompileContext& cx) {
  const Eqn* e = cx.producer_of(v);
  std::optional<Layout> l = e ? broadcast_layout(*e, cx) : std::nullopt;
  if (!l || l->offset != 0 || l->shape.size() != 2 || l->stride[0] != 0 || l->stride[1] != 1 ||
      l->shape[1] != g.n || l->shape[0] != g.batch * g.m)
    return -1;
  return e->ins[0];
}

std::optional<KernelSpec> transposed_dot(const Eqn& e, const CompileContext& cx) {
  std::optional<GemmCall> call = gemm_of(e.outs[0], cx);
  if (!call) return std::nullopt;
  return make_gemm(cx.var(e.outs[0]).dtype, *call, Alias::none, {call->a, call->b}, cx);
}

std::optional<KernelSpec> accumulated_dot(const Eqn& e, const CompileContext& cx, bool subtract) {
  const int out = e.outs[0];
  const DType dt = cx.var(out).dtype;
  if (!is_floating(dt)) return std::nullopt;
  // Try the product as the second operand, then (for add) as the first.
  for (int side = 1; side >= (subtract ? 1 : 0); --side) {
    const int w = e.ins[static_cast<size_t>(1 - side)], term = e.ins[static_cast<size_t>(side)];
    if (!only_use(cx, term)) continue;
    int scale = -1;
    int product = term;
    const Eqn* m = cx.producer_of(term);
    if (m && m->prim == &prims::mul()) {
      for (int k = 0; k < 2 && scale < 0; ++k) {
        int s = scalar_source(m->ins[static_cast<size_t>(k)], cx);
        if (s >= 0) {
          scale = s;
          product = m->ins[static_cast<size_t>(1 - k)];
        }
      }
      if (scale < 0) continue;
    }
    if (!only_use(cx, product)) continue;
    std::optional<GemmCall> call = gemm_of(product, cx);
    if (!call) {
      if (scale < 0 && !subtract)
        if (std::optional<KernelSpec> s = bf16_biased_dot(product, w, out, cx)) return s;
      continue;
    }
    call->c = out;
    call->w = w;
    call->scale = scale;
    call->sign = subtract ? -1 : 1;
    Alias alias = Alias::first;
    if (const int row = bias_row(w, call->g, cx); row >= 0) {
      call->w = row;
      call->w_is_row = true;
      alias = Alias::none;
    }
    std::vector<int> reads{call->w, call->a, call->b};
    if (scale >= 0) reads.push_back(scale);
    return make_gemm(dt, *call, alias, std::move(reads), cx);
  }
  return std::nullopt;
}

void add_dot_kernels(KernelTable& t) { t[&prims::dot_general()] = dot_general; }

}  // namespace drx::exec
