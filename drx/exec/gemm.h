#pragma once
// Private to drx/exec: a dot_general as batched row-major matrix products, and
// how drx splits a product over its threads. Shared by the f32/f64 kernels on
// OpenBLAS (kernels_dot.cpp) and the bf16 kernels on oneDNN (kernels_dot_bf16.cpp).
#include <algorithm>
#include <cstdint>
#include <optional>

#include "drx/exec/plan.h"

namespace drx::exec {

// Per batch index, C[m, n] = op(A)[m, k] op(B)[k, n] on row-major operands
// (op = transpose where the flag is set: A stored [k, m], B stored [n, k]).
struct Gemm {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
};

// The products of dot_general `e` on operands of shapes ls and rs when they are
// row-major matrices or their transposes per batch index: leading batch dims,
// and the contracting dims one block at either end of the rest; nullopt
// otherwise (or for sizes beyond 32 bits).
std::optional<Gemm> gemm_layout(const Eqn& e, const Shape& ls, const Shape& rs);

// The product whose result is C^T for C = g's: C^T = op(B)^T op(A)^T, so the operands swap
// (B first) and their flags flip.
Gemm transposed(const Gemm& g);
// The 2-D product `transpose` ([1, 0]) reads when nothing else reads it: the dot_general
// equation, or null.
const Eqn* transposed_product(const Eqn& transpose, const CompileContext& cx);
// The row v repeats when v is a broadcast of one row of n = g.n elements over the product's
// rows (a bias): that row's variable, else -1.
int bias_row(int v, const Gemm& g, const CompileContext& cx);

// In a map_fn body (CompileOptions::map_body) each client's products are one call each on the
// client's thread: the clients already fill drx's threads. At the top level a product's rows
// are split into blocks of kRowBlock that drx's pool runs, each block one single-threaded call:
// the blocks depend on the product's size alone, so its bits do not depend on the thread count
// (a multithreaded call rounds differently as its thread count changes), and a program's
// results are the same under any DRX_NUM_THREADS and on MPI ranks with a share of the cores
// each. The two paths round differently for more than kRowBlock rows, so which one a product
// takes is fixed when it is compiled, never by what other threads run.
constexpr int64_t kRowBlock = 128;

// Calls rows(batch_index, r0, r1) for every row block of g, on drx's pool
// (map_body: one call per batch index on the calling thread).
template <class Rows>
void for_row_blocks(const Gemm& g, bool map_body, const Rows& rows);

// C = alpha op(A) op(B) + beta C through OpenBLAS, by row blocks (T = float or double).
template <class T>
void gemm_all(const Gemm& g, const T* a, const T* b, T* c, T alpha, T beta, bool map_body);

}  // namespace drx::exec

#include "drx/exec/thread_pool.h"

namespace drx::exec {

template <class Rows>
void for_row_blocks(const Gemm& g, bool map_body, const Rows& rows) {
  if (map_body) {
    for (int64_t i = 0; i < g.batch; ++i) rows(i, int64_t{0}, g.m);
    return;
  }
  const int64_t blocks = (g.m + kRowBlock - 1) / kRowBlock;
  global_pool().parallel_for(g.batch * blocks, [&](int64_t t) {
    const int64_t i = t / blocks, r0 = (t % blocks) * kRowBlock;
    rows(i, r0, std::min(g.m, r0 + kRowBlock));
  });
}

}  // namespace drx::exec
