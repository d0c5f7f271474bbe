#pragma once
// Private to drx/exec: the one place drx calls oneDNN (Debian's libdnnl 2.6),
// for products with bf16 operands and f32 accumulation and for convolutions
// (f32, or bf16 operands). Both follow the same rules:
//  - drx owns the parallelism: every call runs on the calling thread alone
//    (one OpenMP thread, set on every thread that creates or runs a
//    primitive, since oneDNN fixes a primitive's thread count when it is
//    created), so a product's bits depend on its shape and the machine's
//    kernel, never on the thread count;
//  - the instruction set oneDNN may use is fixed at the first use and stated
//    (isa()), and each primitive names its implementation
//    (Matmul::implementation()): both go into what MPI ranks compare, as two
//    kernels round differently.
// Without oneDNN (a build with DRX_ONEDNN=OFF, such as the ThreadSanitizer
// tree, whose OpenMP runtime is not instrumented) available() is false and
// Matmul cannot be made; callers use their own loops.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "drx/array/dtype.h"

namespace drx::exec::onednn {

bool available();
// oneDNN's version ("2.6.3"), or "none".
std::string version();
// The instruction set oneDNN's kernels use in this process ("avx512_core_amx",
// "avx512_core_bf16", "avx2", ...), or "none". ONEDNN_MAX_CPU_ISA, read by
// oneDNN at its first use, caps it.
std::string isa();
// What distinguishes this process's oneDNN products and convolutions from
// another's: oneDNN's version and ISA, or drx's own loops.
std::string kernel_fingerprint();

// C[m, n] (+)= op(A)[m, k] op(B)[k, n] for one product: row-major operands with
// leading dimensions lda, ldb, ldc; bf16 operands, f32 accumulation, a bf16 or
// f32 result (rounded once, to nearest even).
struct MatmulShape {
  int64_t m = 1, n = 1, k = 1;
  int64_t lda = 1, ldb = 1, ldc = 1;
  bool trans_a = false, trans_b = false;
  DType out = DType::f32;
  bool accumulate = false;  // C += op(A) op(B) (f32 results only)
  bool bias = false;        // C = op(A) op(B) + bias, an f32 row of n added to every row
  // Products of one call: `batch` products one after another in memory (whole operands,
  // batch strides m k, k n and m n), as one oneDNN call (many small products, such as
  // attention's per head, cost a fraction of as many calls).
  int64_t batch = 1;

  // `rows` of the dense product op(A)[m, k] op(B)[k, n] (rows == m: all of it), its operands
  // and result stored whole and row-major.
  static MatmulShape rows_of(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                             int64_t rows, DType out);
};

class Matmul {
 public:
  // Throws drx::Error when oneDNN is not available or refuses the shape.
  explicit Matmul(const MatmulShape& shape);
  // On the calling thread only; any number of threads may run one Matmul at once. `bias`:
  // the f32 row of a shape with bias.
  void run(const void* a, const void* b, void* c, const float* bias = nullptr) const;
  // oneDNN's name for the kernel it chose ("brg:avx512_core_bf16", "ref:any").
  const std::string& implementation() const;
  // False for oneDNN's reference loops, which are many times slower than drx's own.
  bool native() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// A tensor as a oneDNN convolution reads or writes it: its dims in oneDNN's order
// ([N, C, spatial...] for activations; [O, I, spatial...], or [G, O / G, I / G, spatial...]
// with groups, for weights) and the element strides of each in drx's array, so that any
// permutation of a row-major array describes itself without a copy.
struct TensorView {
  std::vector<int64_t> dims, strides;
};

// One convolution in oneDNN's terms (dense dilation 0, as oneDNN counts it):
//   forward:          dst[n, o, y] = sum_{i, k} src[n, i, y s + k (d + 1) - pad_l] w[o, i, k]
//   weight_gradient:  dst[o, i, k] = sum_{n, y} second[n, o, y] src[n, i, y s + k (d + 1) - pad_l]
//   input_gradient:   dst[n, i, x] = sum over x = y s + k (d + 1) - pad_l of src[n, o, y] w[o, i,
//   k]
// (oneDNN's backward-weights: `second` is the output's gradient, dst the weights'; its
// backward-data: src is the output's gradient, `second` the weights, dst the input's
// gradient); forward weights with a leading group dim make a grouped convolution. Operands
// are f32, or bf16 accumulated in f32; the result f32 or bf16 (rounded once).
struct ConvolutionShape {
  enum class Kind { forward, weight_gradient, input_gradient };
  Kind kind = Kind::forward;
  TensorView src, second, dst;                          // forward: second is the weights
  std::vector<int64_t> strides, dilates, pad_l, pad_r;  // per spatial dim
  DType operands = DType::f32, out = DType::f32;
};

class Convolution {
 public:
  // Throws drx::Error when oneDNN is not available or refuses the shape.
  explicit Convolution(const ConvolutionShape& shape);
  // On the calling thread only; any number of threads may run one Convolution at once.
  // Operands and result in the layouts of shape's views: where oneDNN's kernel reads another
  // layout (blocked weights, channels-last activations) the call reorders into scratch space.
  void run(const void* src, const void* second, void* dst) const;
  // oneDNN's name for the kernel it chose ("brgconv:avx512_core", "ref:any").
  const std::string& implementation() const;
  // False for oneDNN's reference loops.
  bool native() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace drx::exec::onednn
