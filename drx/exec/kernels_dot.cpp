// dot_general on BLAS (cblas_sgemm/dgemm) when the operands are, per batch
// index, row-major matrices or their transposes: leading batch dims, and the
// contracting dims one block at either end of the rest. Transposed operands are
// passed as CblasTrans, never copied. Other layouts and integer dtypes fall
// back to the reference loop.
//
// Unlike the reference (which accumulates in double), sgemm accumulates in
// float; results agree to float rounding.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "drx/exec/kernels.h"

namespace drx::exec {
namespace {

struct Gemm {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
};

template <class T>
void gemm(const Gemm& g, const T* a, const T* b, T* c) {
  const CBLAS_TRANSPOSE ta = g.trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = g.trans_b ? CblasTrans : CblasNoTrans;
  const auto m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const int lda = g.trans_a ? m : k, ldb = g.trans_b ? k : n;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, n);
}

template <class T>
class GemmKernel : public Kernel {
 public:
  GemmKernel(int a, int b, int c, Gemm g) : a_(a), b_(b), c_(c), g_(g) {}
  void run(Frame& f) const override {
    const T* a = f.in<T>(a_);
    const T* b = f.in<T>(b_);
    T* c = f.out<T>(c_);
    if (g_.m == 0 || g_.n == 0) return;
    if (g_.k == 0) {
      std::fill(c, c + g_.batch * g_.m * g_.n, T{0});
      return;
    }
    for (int64_t i = 0; i < g_.batch; ++i)
      gemm<T>(g_, a + i * g_.m * g_.k, b + i * g_.k * g_.n, c + i * g_.m * g_.n);
  }

 private:
  int a_, b_, c_;
  Gemm g_;
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
  const auto *lc = param_ints(e, "lhs_contracting"), *rc = param_ints(e, "rhs_contracting"),
             *lb = param_ints(e, "lhs_batch"), *rb = param_ints(e, "rhs_batch");
  if (!lc || !rc || !lb || !rb || lc->size() != rc->size() || lb->size() != rb->size())
    return std::nullopt;
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

std::optional<KernelSpec> make_gemm(DType dt, int a, int b, int c, const Gemm& g) {
  if (dt == DType::f32) return spec<GemmKernel<float>>(Alias::none, a, b, c, g);
  return spec<GemmKernel<double>>(Alias::none, a, b, c, g);
}

std::optional<KernelSpec> dot_general(const Eqn& e, const CompileContext& cx) {
  std::optional<Gemm> g = float_gemm(e, cx);
  if (!g) return std::nullopt;
  return make_gemm(cx.var(e.ins[0]).dtype, e.ins[0], e.ins[1], e.outs[0], *g);
}

}  // namespace

// transpose(dot_general(a, b), [1, 0]) is one gemm: C^T = op(B)^T op(A)^T, so
// the operands swap and their transposition flags flip. (Reverse-mode
// gradients of matmul produce this pattern for every weight.)
std::optional<KernelSpec> transposed_dot(const Eqn& e, const CompileContext& cx) {
  const auto* perm = param_ints(e, "perm");
  if (!perm || *perm != std::vector<int64_t>{1, 0}) return std::nullopt;
  const Eqn* dot = cx.producer_of(e.ins[0]);
  if (!dot || dot->prim->name() != "dot_general" || cx.uses[static_cast<size_t>(e.ins[0])] != 1)
    return std::nullopt;
  std::optional<Gemm> g = float_gemm(*dot, cx);
  if (!g || g->batch != 1) return std::nullopt;
  Gemm t = *g;
  t.m = g->n;
  t.n = g->m;
  t.trans_a = !g->trans_b;
  t.trans_b = !g->trans_a;
  std::optional<KernelSpec> s =
      make_gemm(cx.var(e.ins[0]).dtype, dot->ins[1], dot->ins[0], e.outs[0], t);
  s->reads = std::vector<int>{dot->ins[1], dot->ins[0]};
  return s;
}

void add_dot_kernels(KernelTable& t) { t["dot_general"] = dot_general; }

}  // namespace drx::exec
