// dot_general with bf16 operands, accumulated in f32 and rounded once to the
// result type: bf16 (the operands' type), or f32 where the equation asks for it
// (preferred_element_type, as JAX writes bf16 products with f32 results).
// Products run through oneDNN (onednn.h) where it has a native kernel for the
// CPU, in drx's row blocks (gemm.h), each block one call on one thread, so the
// bits do not depend on the thread or device count. Where it has none (a CPU
// without AVX-512, or a build without oneDNN) drx's own loops run the same
// programs: operands widened to f32, sgemm, results rounded once. The two
// kernels round differently (their sums run in different orders); which one a
// process uses is part of onednn::kernel_fingerprint().
#include <algorithm>
#include <memory>
#include <vector>

#include "drx/exec/bf16_blocks.h"
#include "drx/exec/executable.h"
#include "drx/exec/gemm.h"
#include "drx/exec/kernels.h"
#include "drx/exec/onednn.h"
#include "drx/exec/profile.h"
#include "drx/ops/convolution.h"
#include "drx/ops/primitives.h"

namespace drx::exec {
namespace {

// C = A B, or A B + bias (an f32 row added to every row of an f32 result).
class Bf16GemmKernel : public Kernel {
 public:
  Bf16GemmKernel(int a, int b, int c, Gemm g, DType out, bool map_body, int bias = -1)
      : a_(a), b_(b), c_(c), bias_(bias), g_(g), out_(out), map_body_(map_body) {
    if (!onednn::available() || g.m == 0 || g.n == 0 || g.k == 0) return;
    try {
      const int64_t full = full_rows();
      full_ = matmul(full);
      if (const int64_t tail = g.m % full) tail_ = matmul(tail);
    } catch (const Error&) {  // a shape oneDNN refuses runs on drx's loops
      full_.reset();
      tail_.reset();
    }
    if (full_ && (!full_->native() || (tail_ && !tail_->native()))) {
      full_.reset();
      tail_.reset();
    }
  }

  KernelKind kind() const override { return KernelKind::gemm; }
  std::optional<profile::ProductShape> product() const override {
    return profile::ProductShape{g_.batch,   g_.m,        g_.n, g_.k,     g_.trans_a,
                                 g_.trans_b, DType::bf16, out_, batched()};
  }

  void run(Frame& f) const override {
    const auto* a = f.in<uint16_t>(a_);
    const auto* b = f.in<uint16_t>(b_);
    const float* bias = bias_ >= 0 ? f.in<float>(bias_) : nullptr;
    void* c = f.out(c_);
    const size_t out_size = dtype_size(out_);
    const int64_t size = g_.batch * g_.m * g_.n;
    if (size == 0) return;
    if (g_.k == 0 || !full_) return run_widened(a, b, bias, c);
    if (batched()) return full_->run(a, b, c, bias);
    for_row_blocks(g_, map_body_, [&](int64_t i, int64_t r0, int64_t r1) {
      const uint16_t* ai = a + i * g_.m * g_.k + (g_.trans_a ? r0 : r0 * g_.k);
      const uint16_t* bi = b + i * g_.k * g_.n;
      auto* ci = static_cast<unsigned char*>(c) +
                 static_cast<size_t>(i * g_.m * g_.n + r0 * g_.n) * out_size;
      (r1 - r0 == full_rows() ? *full_ : *tail_).run(ai, bi, ci, bias);
    });
  }

 private:
  int64_t full_rows() const { return map_body_ ? g_.m : std::min(g_.m, kRowBlock); }

  // In a map_fn body a batch of products (attention's, per head) is one call: each product
  // is one call there anyway, and the calls' overhead would outweigh small products.
  bool batched() const { return map_body_ && g_.batch > 1; }

  std::unique_ptr<onednn::Matmul> matmul(int64_t rows) const {
    onednn::MatmulShape s =
        onednn::MatmulShape::rows_of(g_.m, g_.n, g_.k, g_.trans_a, g_.trans_b, rows, out_);
    s.bias = bias_ >= 0;
    if (batched()) s.batch = g_.batch;
    return std::make_unique<onednn::Matmul>(s);
  }

  // c[r, j] += bias[j] over every row of every batch (after drx's own loops, as oneDNN adds
  // its bias after accumulating).
  void add_bias(const float* bias, float* c) const {
    for (int64_t r = 0; r < g_.batch * g_.m; ++r)
      for (int64_t j = 0; j < g_.n; ++j) c[r * g_.n + j] += bias[j];
  }

  // drx's own loops: exact widening, f32 products in the same row blocks, the bias added in
  // f32, one rounding.
  void run_widened(const uint16_t* a, const uint16_t* b, const float* bias, void* c) const {
    auto widen = [](const uint16_t* x, int64_t n) {
      std::vector<float> w(static_cast<size_t>(n));
      widen_bf16(x, w.data(), n);
      return w;
    };
    const std::vector<float> a32 = widen(a, g_.batch * g_.m * g_.k);
    const std::vector<float> b32 = widen(b, g_.batch * g_.k * g_.n);
    const int64_t size = g_.batch * g_.m * g_.n;
    std::vector<float> c32(out_ == DType::f32 ? 0 : static_cast<size_t>(size));
    float* acc = out_ == DType::f32 ? static_cast<float*>(c) : c32.data();
    if (g_.k == 0)
      std::fill_n(acc, size, 0.0f);
    else
      gemm_all<float>(g_, a32.data(), b32.data(), acc, 1, 0, map_body_);
    if (bias) add_bias(bias, acc);
    if (out_ != DType::f32) narrow_to_bf16(acc, static_cast<uint16_t*>(c), size);
  }

  int a_, b_, c_, bias_;
  Gemm g_;
  DType out_;
  bool map_body_;
  std::unique_ptr<onednn::Matmul> full_, tail_;
};

}  // namespace

std::optional<KernelSpec> bf16_transposed_dot(const Eqn& e, const CompileContext& cx) {
  const Eqn* dot = transposed_product(e, cx);
  if (!dot) return std::nullopt;
  const VarInfo &l = cx.var(dot->ins[0]), &r = cx.var(dot->ins[1]);
  const DType out = cx.var(e.outs[0]).dtype;
  if (l.dtype != DType::bf16 || r.dtype != DType::bf16) return std::nullopt;
  if (out != DType::bf16 && out != DType::f32) return std::nullopt;
  std::optional<Gemm> g = gemm_layout(*dot, l.shape, r.shape);
  if (!g || g->batch != 1) return std::nullopt;
  std::optional<KernelSpec> s = spec<Bf16GemmKernel>(
      Alias::none, dot->ins[1], dot->ins[0], e.outs[0], transposed(*g), out, cx.options.map_body);
  s->reads = std::vector<int>{dot->ins[1], dot->ins[0]};
  return s;
}

std::optional<KernelSpec> bf16_biased_dot(int product, int w, int out, const CompileContext& cx) {
  const Eqn* dot = cx.producer_of(product);
  if (!dot || dot->prim != &prims::dot_general()) return std::nullopt;
  const VarInfo &l = cx.var(dot->ins[0]), &r = cx.var(dot->ins[1]);
  const DType out_type = cx.var(out).dtype;
  if (l.dtype != DType::bf16 || r.dtype != DType::bf16 || cx.var(product).dtype != DType::f32 ||
      (out_type != DType::f32 && out_type != DType::bf16))
    return std::nullopt;
  std::optional<Gemm> g = gemm_layout(*dot, l.shape, r.shape);
  if (!g) return std::nullopt;
  const int row = bias_row(w, *g, cx);
  if (row < 0) return std::nullopt;
  std::optional<KernelSpec> s = spec<Bf16GemmKernel>(Alias::none, dot->ins[0], dot->ins[1], out, *g,
                                                     out_type, cx.options.map_body, row);
  s->reads = std::vector<int>{dot->ins[0], dot->ins[1], row};
  return s;
}

std::optional<KernelSpec> bf16_dot_general(const Eqn& e, const CompileContext& cx) {
  const VarInfo &l = cx.var(e.ins[0]), &r = cx.var(e.ins[1]);
  const DType out = cx.var(e.outs[0]).dtype;
  if (l.dtype != DType::bf16 || r.dtype != DType::bf16) return std::nullopt;
  if (out != DType::bf16 && out != DType::f32) return std::nullopt;
  std::optional<Gemm> g = gemm_layout(e, l.shape, r.shape);
  if (!g) return std::nullopt;
  return spec<Bf16GemmKernel>(Alias::none, e.ins[0], e.ins[1], e.outs[0], *g, out,
                              cx.options.map_body);
}

}  // namespace drx::exec

namespace drx {
namespace {

// Products whose bits depend on oneDNN's kernel where it runs them: bf16 products and
// convolutions, f32 convolutions.
bool has_onednn_product(const Program& p) {
  for (const Eqn& e : p.eqns) {
    const DType operands = e.ins.empty() ? DType::f32 : p.type_of(e.ins[0]).dtype;
    if ((e.prim == &prims::dot_general() && operands == DType::bf16) ||
        (e.prim == &prims::conv_general_dilated() &&
         (operands == DType::bf16 || operands == DType::f32)))
      return true;
    for (const auto& [key, attr] : e.params.items())
      if (const auto* sub = std::get_if<std::shared_ptr<const Program>>(&attr))
        if (*sub && has_onednn_product(**sub)) return true;
  }
  return false;
}

}  // namespace

std::string kernel_fingerprint(const Program& program) {
  return has_onednn_product(program) ? "products: " + exec::onednn::kernel_fingerprint() : "";
}

}  // namespace drx
