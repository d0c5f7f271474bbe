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
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "drx/exec/blas_calls.h"
#include "drx/exec/blas_threads.h"
#include "drx/exec/kernels.h"
#include "drx/exec/thread_pool.h"
#include "drx/ops/dot_general_params.h"
#include "drx/ops/primitives.h"

namespace drx::exec {
namespace {

struct Gemm {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
};

// Rows [r0, r1) of one product: C[r0:r1] = alpha op(A)[r0:r1] op(B) + beta C[r0:r1].
template <class T>
void gemm_rows(const Gemm& g, const T* a, const T* b, T* c, T alpha, T beta, int64_t r0,
               int64_t r1) {
  const CBLAS_TRANSPOSE ta = g.trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = g.trans_b ? CblasTrans : CblasNoTrans;
  const auto m = static_cast<int>(r1 - r0), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const int lda = static_cast<int>(g.trans_a ? g.m : g.k), ldb = g.trans_b ? k : n;
  const T* a0 = a + (g.trans_a ? r0 : r0 * g.k);
  T* c0 = c + r0 * g.n;
  const BlasCallSlot slot;  // OpenBLAS crashes with too many calls at once (blas_calls.h)
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a0, lda, b, ldb, beta, c0, n);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a0, lda, b, ldb, beta, c0, n);
}

// In a map_fn body (CompileOptions::map_body) each client's products are one BLAS call each on
// the client's thread: the clients already fill drx's threads. At the top level a product's rows
// are split into blocks of kRowBlock that drx's pool runs, each block one BLAS call: the blocks
// depend on the product's size alone, so its bits do not depend on the thread count (a
// multithreaded BLAS call rounds differently as its thread count changes), and a program's
// results are the same under any DRX_NUM_THREADS and on MPI ranks with a share of the cores
// each. The two paths round differently for more than kRowBlock rows, so which one a product
// takes is fixed when it is compiled, never by what other threads run.
constexpr int64_t kRowBlock = 128;

template <class T>
void gemm_all(const Gemm& g, const T* a, const T* b, T* c, T alpha, T beta, bool map_body) {
  keep_blas_single_threaded();
  if (map_body) {
    for (int64_t i = 0; i < g.batch; ++i)
      gemm_rows<T>(g, a + i * g.m * g.k, b + i * g.k * g.n, c + i * g.m * g.n, alpha, beta, 0, g.m);
    return;
  }
  const int64_t blocks = (g.m + kRowBlock - 1) / kRowBlock;
  global_pool().parallel_for(g.batch * blocks, [&](int64_t t) {
    const int64_t i = t / blocks, r0 = (t % blocks) * kRowBlock;
    gemm_rows<T>(g, a + i * g.m * g.k, b + i * g.k * g.n, c + i * g.m * g.n, alpha, beta, r0,
                 std::min(g.m, r0 + kRowBlock));
  });
}

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
    return profile::ProductShape{
        g.batch, g.m, g.n, g.k, g.trans_a, g.trans_b, std::is_same_v<T, double>};
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

bool is_block(const std::vector<int64_t>& dims, int64_t first) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != first + static_cast<int64_t>(i)) return false;
  return true;
}

// Where the contracting block sits among an operand's non-batch dims:
// 1 = at the end, -1 = right after the batch dims, 0 = neither.
int contract_position(const std::vector<int64_t>& c, int64_t batch, int64_t rank) {
  const int64_t nc = static_cast<int64_t>(c.size());
  if (is_block(c, rank - nc)) return 1;
  if (is_block(c, batch)) return -1;
  return 0;
}

std::optional<Gemm> gemm_layout(const Eqn& e, const Shape& ls, const Shape& rs) {
  const DotGeneralParams d = DotGeneralParams::of(e);
  const auto *lc = &d.lhs_contracting, *rc = &d.rhs_contracting, *lb = &d.lhs_batch,
             *rb = &d.rhs_batch;
  if (lc->size() != rc->size() || lb->size() != rb->size()) return std::nullopt;
  const int64_t nb = static_cast<int64_t>(lb->size());
  if (!is_block(*lb, 0) || !is_block(*rb, 0)) return std::nullopt;
  // Contracting pairs in lhs order; rhs must then be in order too.
  std::vector<size_t> order(lc->size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return (*lc)[a] < (*lc)[b]; });
  std::vector<int64_t> lcs, rcs;
  for (size_t i : order) {
    lcs.push_back((*lc)[i]);
    rcs.push_back((*rc)[i]);
  }
  const auto lrank = static_cast<int64_t>(ls.size()), rrank = static_cast<int64_t>(rs.size());
  const int lpos = contract_position(lcs, nb, lrank), rpos = contract_position(rcs, nb, rrank);
  if (lpos == 0 || rpos == 0) return std::nullopt;
  Gemm g;
  g.trans_a = lpos < 0 && !is_block(lcs, lrank - static_cast<int64_t>(lcs.size()));
  g.trans_b = rpos > 0 && !is_block(rcs, nb);
  g.batch = g.m = g.n = g.k = 1;
  for (int64_t d = 0; d < nb; ++d) g.batch *= ls[static_cast<size_t>(d)];
  for (int64_t d : lcs) g.k *= ls[static_cast<size_t>(d)];
  g.m = num_elements(ls) / std::max<int64_t>(1, g.batch * g.k);
  g.n = num_elements(rs) / std::max<int64_t>(1, g.batch * g.k);
  if (g.batch == 0 || g.k == 0) {  // sizes cannot be recovered by division
    g.m = g.n = 1;
    for (int64_t d = nb; d < lrank; ++d)
      if (std::find(lcs.begin(), lcs.end(), d) == lcs.end()) g.m *= ls[static_cast<size_t>(d)];
    for (int64_t d = nb; d < rrank; ++d)
      if (std::find(rcs.begin(), rcs.end(), d) == rcs.end()) g.n *= rs[static_cast<size_t>(d)];
  }
  // BLAS takes 32-bit sizes.
  const int64_t limit = int64_t{1} << 31;
  if (g.m >= limit || g.n >= limit || g.k >= limit) return std::nullopt;
  return g;
}

std::optional<Gemm> float_gemm(const Eqn& e, const CompileContext& cx) {
  const VarInfo &l = cx.var(e.ins[0]), &r = cx.var(e.ins[1]);
  if (l.dtype != r.dtype || !is_floating(l.dtype)) return std::nullopt;
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
  if (e->prim != &prims::transpose()) return std::nullopt;
  const auto* perm = param_ints(*e, "perm");
  if (!perm || *perm != std::vector<int64_t>{1, 0} || !only_use(cx, e->ins[0])) return std::nullopt;
  const Eqn* dot = cx.producer_of(e->ins[0]);
  if (!dot || dot->prim != &prims::dot_general()) return std::nullopt;
  std::optional<Gemm> g = float_gemm(*dot, cx);
  if (!g || g->batch != 1) return std::nullopt;
  // C^T = op(B)^T op(A)^T: the operands swap and their flags flip.
  Gemm t = *g;
  t.m = g->n;
  t.n = g->m;
  t.trans_a = !g->trans_b;
  t.trans_b = !g->trans_a;
  return GemmCall{dot->ins[1], dot->ins[0], v, t};
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

// The row v repeats when v is a broadcast of one row of n = g.n elements over the product's
// rows (a bias), else -1.
int repeated_row(int v, const Gemm& g, const CompileContext& cx) {
  const Eqn* e = cx.producer_of(v);
  std::optional<Layout> l = e ? broadcast_layout(*e, cx) : std::nullopt;
  if (!l || l->offset != 0 || l->shape.size() != 2 || l->stride[0] != 0 || l->stride[1] != 1 ||
      l->shape[1] != g.n || l->shape[0] != g.batch * g.m)
    return -1;
  return e->ins[0];
}

}  // namespace

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
    if (!call) continue;
    call->c = out;
    call->w = w;
    call->scale = scale;
    call->sign = subtract ? -1 : 1;
    Alias alias = Alias::first;
    if (const int row = repeated_row(w, call->g, cx); row >= 0) {
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
