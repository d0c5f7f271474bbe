#include "drx/exec/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <numeric>

#include "drx/exec/blas_calls.h"
#include "drx/exec/blas_threads.h"
#include "drx/exec/kernels.h"
#include "drx/ops/dot_general_params.h"
#include "drx/ops/primitives.h"

namespace drx::exec {
namespace {

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

}  // namespace

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

Gemm transposed(const Gemm& g) {
  Gemm t = g;
  t.m = g.n;
  t.n = g.m;
  t.trans_a = !g.trans_b;
  t.trans_b = !g.trans_a;
  return t;
}

const Eqn* transposed_product(const Eqn& transpose, const CompileContext& cx) {
  if (transpose.prim != &prims::transpose()) return nullptr;
  const auto* perm = param_ints(transpose, "perm");
  if (!perm || *perm != std::vector<int64_t>{1, 0} ||
      cx.uses[static_cast<size_t>(transpose.ins[0])] != 1)
    return nullptr;
  const Eqn* dot = cx.producer_of(transpose.ins[0]);
  return dot && dot->prim == &prims::dot_general() ? dot : nullptr;
}

template <class T>
void gemm_all(const Gemm& g, const T* a, const T* b, T* c, T alpha, T beta, bool map_body) {
  keep_blas_single_threaded();
  for_row_blocks(g, map_body, [&](int64_t i, int64_t r0, int64_t r1) {
    gemm_rows<T>(g, a + i * g.m * g.k, b + i * g.k * g.n, c + i * g.m * g.n, alpha, beta, r0, r1);
  });
}

template void gemm_all<float>(const Gemm&, const float*, const float*, float*, float, float, bool);
template void gemm_all<double>(const Gemm&, const double*, const double*, double*, double, double,
                               bool);

}  // namespace drx::exec
