#pragma once
// Where a compiled program's time goes, per equation. With the environment variable
// DRX_PROFILE=PATH (or after exec::profile::enable(PATH)), every kernel that compiled
// programs run is timed and its time and minor page faults added to its equation's line
// (primitive, parameters, result type; the label is fixed when the program is compiled); at
// exit, or on write(), PATH gets the totals per kernel kind, per primitive and per equation,
// largest first, and a roofline: the products' time against the same calls through sgemm
// measured then, the memory-bound kernels' bytes at the machine's measured bandwidth, and the
// bound of the whole profile on num_threads() threads. Equations that run sub-programs (map_fn,
// scan, while, cond) are not timed themselves: their bodies' equations are. Timing costs a
// clock read and a getrusage per kernel; when profiling is off it costs one branch.
#include <cstdint>
#include <string>
#include <vector>

#include "drx/array/dtype.h"

namespace drx::exec::profile {

// Whether kernels are being timed (decided once, from DRX_PROFILE, unless enable() is called
// before any program is compiled).
bool enabled();
// Starts timing into `path` (replacing an earlier path; an empty path writes no report at
// exit: read the totals with roofline()). Programs compiled before this carry no labels and are
// not timed.
void enable(const std::string& path);
// Stops timing (the totals are kept until reset()); programs compiled while on keep their labels.
void disable();
// One product: `batch` calls of op(A)[m,k] op(B)[k,n] (BLAS, or oneDNN for bf16).
struct ProductShape {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool trans_a = false, trans_b = false;
  DType dtype = DType::f32;  // the operands': f32, f64, or bf16 (accumulated in f32)
  DType out = DType::f32;    // the result's (bf16 operands: bf16 or f32)
  bool one_call = false;     // bf16: the batch is one oneDNN call (else one call per product)
};
// What one run of an equation's kernel does at best: the product it makes (a gemm kernel),
// or the bytes it reads and writes (a memory-bound kernel: elementwise, reduction, copy).
struct Cost {
  bool has_product = false;
  ProductShape product;
  double bytes = 0;
};
// States what every run of `label` costs (at compile time; the first statement of a label is
// kept, and reset() keeps them).
void describe(const std::string& label, const Cost& cost);
// Adds one run of an equation, whose kernel is of `kind` ("gemm", "elementwise", "reduction",
// "copy", "interpreted", "other": a product fused with its bias or transpose counts as a gemm,
// whatever its equation's primitive), which took `minor_faults` page faults.
void record(const std::string& label, const char* kind, double seconds, long minor_faults = 0);
// The roofline of everything recorded so far, measuring the machine now (a second or so for a
// few dozen product shapes): what write() reports after its tables. Products and bytes are
// totals over all runs; seconds are summed over threads, except the bounds, which are wall
// seconds on `threads` threads (num_threads() when the last described program was compiled).
struct Roofline {
  struct Shape {
    ProductShape shape;
    std::string text;  // "f32 512x2048x512 A'" (m x n x k, transposed operands marked)
    double seconds = 0;
    long long calls = 0;
    double sgemm1_s = 0;  // the same calls through one-thread sgemm
    double flops = 0;
  };
  std::vector<Shape> shapes;  // largest drx time first
  int threads = 1;
  bool threaded_measured = false;  // whether sgemmn_s was measured (drx controls BLAS threads)
  double total_s = 0, gemm_s = 0, memory_s = 0, undescribed_s = 0;
  double sgemm1_s = 0, sgemmn_s = 0, product_flops = 0;
  double bytes = 0, bandwidth1 = 0, bandwidth = 0;  // bytes per second, 1 and `threads` threads
  // Every product at the better of threaded sgemm and `threads` one-thread calls side by side;
  // bound_s adds every byte of the memory-bound kernels at the `threads`-thread bandwidth.
  double product_bound_s = 0, bound_s = 0;
};
Roofline roofline();
// Writes the report now (atomically: PATH.tmp, then renamed); throws drx::Error when the file
// cannot be written. Also runs at exit, where a failure is reported on stderr.
void write();
// Forgets the totals so far.
void reset();

}  // namespace drx::exec::profile
