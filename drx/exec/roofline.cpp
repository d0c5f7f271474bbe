#include "drx/exec/roofline.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "drx/array/error.h"
#include "drx/exec/blas_threads.h"
#include "drx/exec/onednn.h"

namespace drx::exec::roofline {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The best of at least 5 runs, and of as many as fit in about 100 ms (at most 50): the first
// run warms the caches and is not counted. The best, not the median: a bound should not count
// what another process took from the machine meanwhile.
template <class F>
double best_of_runs(F&& run) {
  run();
  double best = 1e30, spent = 0;
  for (int i = 0; i < 50 && (i < 5 || spent < 0.1); ++i) {
    const auto start = Clock::now();
    run();
    const double s = seconds_since(start);
    best = std::min(best, s);
    spent += s;
  }
  return best;
}

template <class T>
double time_product(const profile::ProductShape& s) {
  // Operands filled with small non-zero values: denormals or zeros would time other paths.
  std::vector<T> a(static_cast<size_t>(s.batch * s.m * s.k), T(0.5)),
      b(static_cast<size_t>(s.batch * s.k * s.n), T(0.25)),
      c(static_cast<size_t>(s.batch * s.m * s.n));
  const auto m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  const int lda = s.trans_a ? m : k, ldb = s.trans_b ? k : n;
  const CBLAS_TRANSPOSE ta = s.trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = s.trans_b ? CblasTrans : CblasNoTrans;
  return best_of_runs([&] {
    for (int64_t i = 0; i < s.batch; ++i) {
      const T* ai = a.data() + i * s.m * s.k;
      const T* bi = b.data() + i * s.k * s.n;
      T* ci = c.data() + i * s.m * s.n;
      if constexpr (std::is_same_v<T, float>)
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, ai, lda, bi, ldb, 0.0f, ci, n);
      else
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, ai, lda, bi, ldb, 0.0, ci, n);
    }
  });
}

// A bf16 product as drx calls oneDNN: one call per batch index on this thread, or one call
// for the batch. Without a native oneDNN kernel drx widens to f32 and calls sgemm: timed as
// that sgemm.
double time_bf16_product(const profile::ProductShape& s) {
  profile::ProductShape f32 = s;
  f32.dtype = f32.out = DType::f32;
  if (!onednn::available()) return time_product<float>(f32);
  onednn::MatmulShape shape =
      onednn::MatmulShape::rows_of(s.m, s.n, s.k, s.trans_a, s.trans_b, s.m, s.out);
  if (s.one_call) shape.batch = s.batch;
  const onednn::Matmul mm(shape);
  if (!mm.native()) return time_product<float>(f32);
  const uint16_t half = 0x3f00;  // 0.5
  std::vector<uint16_t> a(static_cast<size_t>(s.batch * s.m * s.k), half),
      b(static_cast<size_t>(s.batch * s.k * s.n), half);
  std::vector<float> c(static_cast<size_t>(s.batch * s.m * s.n));
  return best_of_runs([&] {
    if (s.one_call) return mm.run(a.data(), b.data(), c.data());
    for (int64_t i = 0; i < s.batch; ++i)
      mm.run(a.data() + i * s.m * s.k, b.data() + i * s.k * s.n, c.data() + i * s.m * s.n);
  });
}

}  // namespace

bool can_measure_threaded_blas() { return blas_threads_settable(); }

double product_seconds(const profile::ProductShape& shape, int blas_threads) {
  if (shape.batch <= 0 || shape.m <= 0 || shape.n <= 0 || shape.k <= 0) return 0;
  // bf16 products run one call per thread (drx/exec/onednn.h): on n threads, n side by side.
  if (shape.dtype == DType::bf16) return time_bf16_product(shape) / std::max(1, blas_threads);
  auto once = [&] {
    return shape.dtype == DType::f64 ? time_product<double>(shape) : time_product<float>(shape);
  };
  if (blas_threads <= 1) {
    keep_blas_single_threaded();
    return once();
  }
  double s = 0;
  if (!run_with_blas_threads(blas_threads, [&] { s = once(); }))
    throw Error("roofline: cannot time a product on " + std::to_string(blas_threads) +
                " BLAS threads: drx does not control OpenBLAS's thread count here "
                "(set_blas_thread_control is off, or the BLAS has no thread control)");
  return s;
}

double stream_bandwidth(int threads) {
  threads = std::max(1, threads);
  // 3 arrays of 64 MiB per thread: far past any last-level cache.
  const size_t per_thread = size_t{16} << 20;  // floats
  std::vector<std::vector<float>> a(static_cast<size_t>(threads)), b(a.size()), c(a.size());
  auto pass = [&](size_t t) {
    const float* x = a[t].data();
    const float* y = b[t].data();
    float* z = c[t].data();
    for (size_t i = 0; i < per_thread; ++i) z[i] = x[i] + y[i];
  };
  auto all = [&](auto&& each) {
    std::vector<std::thread> pool;
    for (size_t t = 1; t < a.size(); ++t) pool.emplace_back(each, t);
    each(0);
    for (auto& th : pool) th.join();
  };
  all([&](size_t t) {  // each thread first-touches its own arrays
    a[t].assign(per_thread, 1.0f);
    b[t].assign(per_thread, 2.0f);
    c[t].assign(per_thread, 0.0f);
  });
  const double s = best_of_runs([&] { all(pass); });
  return 3.0 * sizeof(float) * static_cast<double>(per_thread) * threads / s;
}

}  // namespace drx::exec::roofline
