// conv_general_dilated as im2col + gemm, for the convolutions oneDNN does not run
// (kernels_conv_onednn.cpp): f64, lhs dilation, batch groups, negative padding, builds without
// oneDNN. For each output batch index and group, the windows
// the output positions read are laid out as the rows of a [positions, in features x window]
// matrix (zeros where a window reaches padding or the holes of lhs dilation), multiplied by the
// group's kernel packed as [in features x window, out features] (window reversal applied while
// packing), and the product scattered into the result's layout. Each (group, batch index) is
// one task on drx's pool and its product one call on the task's thread (single-threaded
// OpenBLAS, or oneDNN's bf16 product on one thread), so the bits depend on nothing but the
// shapes and the machine's kernel. f32 and f64 run sgemm/dgemm; bf16 operands (into an f32 or
// bf16 result, rounded once) run oneDNN where it has a native kernel and otherwise widen to f32
// (exactly) for sgemm, both accumulating in f32, which is part of the bf16 kernel fingerprint.
// Like dot_general's kernel, the products reassociate: results agree with the reference
// (double accumulation) to float rounding. Other dtypes run on the reference loop.
#include "drx/exec/kernels_conv.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "drx/array/half.h"
#include "drx/exec/blas_calls.h"
#include "drx/exec/blas_threads.h"
#include "drx/exec/kernels.h"
#include "drx/exec/onednn.h"
#include "drx/exec/thread_pool.h"
#include "drx/ops/convolution.h"

namespace drx::exec {
namespace {

// Output batch indices per task: as many as keep its im2col matrix near 2^21 elements (at
// least one), so a product has many rows; fixed by the shapes alone.
int64_t conv_chunk(const ConvGeometry& g) {
  const int64_t per_batch = g.positions * g.in_features * g.window;
  return std::clamp<int64_t>((int64_t{1} << 21) / std::max<int64_t>(per_batch, 1), 1,
                             std::max<int64_t>(g.out_batch, 1));
}

// The bf16 product of `rows` im2col rows by a group's packed kernel, into f32.
onednn::MatmulShape product_shape(const ConvGeometry& g, int64_t rows) {
  onednn::MatmulShape s;
  s.m = rows;
  s.n = g.out_features_per_group;
  s.k = g.in_features * g.window;
  s.lda = s.k;
  s.ldb = s.ldc = s.n;
  s.out = DType::f32;
  return s;
}

// Storage element to GEMM operand: the same type, or bf16 widened to f32 (exactly).
template <class G, class Src>
G to_operand(Src v) {
  if constexpr (std::is_same_v<Src, uint16_t> && !std::is_same_v<G, uint16_t>)
    return static_cast<G>(bf16_to_float(v));
  else
    return static_cast<G>(v);
}

// Src: the operands' element in memory (float, double, or bf16 bits); G: the product's operand
// (Src, or f32 for bf16 operands where oneDNN has no native kernel); Dst: the result's element.
// Products accumulate in Acc: f64 for f64, else f32.
template <class Src, class G, class Dst>
class ConvKernel : public Kernel {
  using Acc = std::conditional_t<std::is_same_v<G, double>, double, float>;

 public:
  ConvKernel(ConvGeometry g, int lhs, int rhs, int out)
      : g_(std::move(g)), lhs_(lhs), rhs_(rhs), out_(out) {
    if constexpr (std::is_same_v<G, uint16_t>) {
      const int64_t chunk = chunk_size();
      full_ = std::make_shared<const onednn::Matmul>(product_shape(g_, chunk * g_.positions));
      if (const int64_t tail = g_.out_batch % chunk)
        tail_ = std::make_shared<const onednn::Matmul>(product_shape(g_, tail * g_.positions));
    }
  }
  KernelKind kind() const override { return KernelKind::gemm; }

  void run(Frame& f) const override {
    const ConvParams& c = g_.c;
    const ConvDimensionNumbers& d = c.dims;
    const size_t S = c.num_spatial();
    const Src* L = f.in<Src>(lhs_);
    const Src* R = f.in<Src>(rhs_);
    Dst* O = f.out<Dst>(out_);
    const int64_t total = num_elements(g_.out);
    if (total == 0) return;
    if constexpr (!std::is_same_v<G, uint16_t>)
      keep_blas_single_threaded();  // its bits are those of one-thread BLAS calls
    const std::vector<int64_t> ls = strides_of(g_.lhs), rs = strides_of(g_.rhs),
                               os = strides_of(g_.out);
    const int64_t I = g_.in_features, Og = g_.out_features_per_group, P = g_.positions,
                  W = g_.window, KW = I * W;
    const auto at = [](const std::vector<int64_t>& v, int64_t i) {
      return v[static_cast<size_t>(i)];
    };
    Shape K(S), X(S), Y(S);
    for (size_t k = 0; k < S; ++k) {
      K[k] = at(g_.rhs, d.rhs_spatial[k]);
      X[k] = at(g_.lhs, d.lhs_spatial[k]);
      Y[k] = at(g_.out, d.out_spatial[k]);
    }
    if (KW == 0) {
      std::fill(O, O + total, Dst{});
      return;
    }
    // For each spatial dim, the input offset (in elements of lhs) window position w of output
    // position y reads, or -1 where it reads padding or a hole.
    std::vector<std::vector<int64_t>> src(S);
    for (size_t k = 0; k < S; ++k) {
      src[k].assign(static_cast<size_t>(Y[k] * K[k]), -1);
      for (int64_t y = 0; y < Y[k]; ++y)
        for (int64_t w = 0; w < K[k]; ++w) {
          const int64_t p = y * c.window_strides[k] + w * c.rhs_dilation[k] - c.padding[k].first;
          if (p < 0 || p % c.lhs_dilation[k] != 0 || p / c.lhs_dilation[k] >= X[k]) continue;
          src[k][static_cast<size_t>(y * K[k] + w)] =
              (p / c.lhs_dilation[k]) * at(ls, d.lhs_spatial[k]);
        }
    }
    // Columns of the im2col matrix (and rows of the packed kernel) in (window position, input
    // feature) order where the input's features are contiguous (channels-last: each window
    // position is one copy of I elements), else in (input feature, window position) order.
    const int64_t feature_stride = at(ls, d.lhs_feature);
    const bool features_inner = feature_stride == 1;
    const auto column = [&](int64_t i, int64_t wi) {
      return features_inner ? wi * I + i : i * W + wi;
    };
    // Every group's kernel as [I * W, Og].
    std::vector<G> packed(static_cast<size_t>(g_.groups * KW * Og));
    for (int64_t grp = 0; grp < g_.groups; ++grp) {
      std::vector<int64_t> w(S, 0);
      for (int64_t wi = 0; wi < W; ++wi) {
        int64_t off = 0;
        for (size_t k = 0; k < S; ++k)
          off += (c.window_reversal[k] ? K[k] - 1 - w[k] : w[k]) * at(rs, d.rhs_spatial[k]);
        for (int64_t i = 0; i < I; ++i) {
          G* row = packed.data() + (grp * KW + column(i, wi)) * Og;
          const int64_t base = off + i * at(rs, d.rhs_in_feature);
          for (int64_t o = 0; o < Og; ++o)
            row[o] = to_operand<G>(R[base + (grp * Og + o) * at(rs, d.rhs_out_feature)]);
        }
        for (size_t k = S; k-- > 0;)
          if (++w[k] < K[k])
            break;
          else
            w[k] = 0;
      }
    }
    // Each task: one group and a chunk of output batch indices, whose im2col rows stack into
    // one product of chunk * P rows (the chunk fixed by the shapes alone, so the bits do not
    // depend on how many threads run the tasks; inside a map_fn client the pool runs them on
    // the client's thread).
    const int64_t chunk = chunk_size();
    const int64_t chunks = (g_.out_batch + chunk - 1) / chunk;
    const bool batch_groups = c.batch_group_count > 1;
    global_pool().parallel_for(g_.groups * chunks, [&](int64_t task) {
      const int64_t grp = task / chunks, n0 = (task % chunks) * chunk;
      const int64_t nb = std::min(chunk, g_.out_batch - n0), rows = nb * P;
      std::vector<G> a(static_cast<size_t>(rows * KW));
      std::vector<Acc> prod(static_cast<size_t>(rows * Og));
      std::vector<int64_t> y(S, 0), w(S, 0), offs(static_cast<size_t>(W));
      // im2col: row (n, p) (output position p of batch index n), column (i, window position).
      for (int64_t p = 0; p < P; ++p) {
        std::fill(w.begin(), w.end(), 0);
        for (int64_t wi = 0; wi < W; ++wi) {
          int64_t off = 0;
          for (size_t k = 0; k < S && off >= 0; ++k) {
            const int64_t s = src[k][static_cast<size_t>(y[k] * K[k] + w[k])];
            off = s < 0 ? -1 : off + s;
          }
          offs[static_cast<size_t>(wi)] = off;
          for (size_t k = S; k-- > 0;)
            if (++w[k] < K[k])
              break;
            else
              w[k] = 0;
        }
        for (int64_t n = 0; n < nb; ++n) {
          const int64_t in_batch = batch_groups ? grp * g_.out_batch + n0 + n : n0 + n;
          const int64_t fbase = batch_groups ? 0 : grp * I;
          const Src* base = L + in_batch * at(ls, d.lhs_batch) + fbase * feature_stride;
          G* row = a.data() + (n * P + p) * KW;
          if (features_inner) {
            for (int64_t wi = 0; wi < W; ++wi) {
              G* dst = row + wi * I;
              const int64_t off = offs[static_cast<size_t>(wi)];
              if (off < 0)
                std::fill(dst, dst + I, G{});
              else
                for (int64_t i = 0; i < I; ++i) dst[i] = to_operand<G>(base[off + i]);
            }
          } else {
            for (int64_t i = 0; i < I; ++i) {
              G* dst = row + i * W;
              const Src* from = base + i * feature_stride;
              for (int64_t wi = 0; wi < W; ++wi) {
                const int64_t off = offs[static_cast<size_t>(wi)];
                dst[wi] = off < 0 ? G{} : to_operand<G>(from[off]);
              }
            }
          }
        }
        for (size_t k = S; k-- > 0;)
          if (++y[k] < Y[k])
            break;
          else
            y[k] = 0;
      }
      const G* b = packed.data() + grp * KW * Og;
      if constexpr (std::is_same_v<G, uint16_t>) {
        (nb == chunk ? full_ : tail_)->run(a.data(), b, prod.data());
      } else {
        const BlasCallSlot slot;  // OpenBLAS crashes with too many calls at once
        const int m = static_cast<int>(rows), nn = static_cast<int>(Og), kk = static_cast<int>(KW);
        if constexpr (std::is_same_v<G, float>)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, nn, kk, 1.0f, a.data(), kk, b,
                      nn, 0.0f, prod.data(), nn);
        else
          cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, nn, kk, 1.0, a.data(), kk, b,
                      nn, 0.0, prod.data(), nn);
      }
      // Scatter [rows, Og] into the result's layout, rounding once to a bf16 result.
      for (int64_t n = 0; n < nb; ++n) {
        Dst* obase = O + (n0 + n) * at(os, d.out_batch) + grp * Og * at(os, d.out_feature);
        std::fill(y.begin(), y.end(), 0);
        for (int64_t p = 0; p < P; ++p) {
          int64_t off = 0;
          for (size_t k = 0; k < S; ++k) off += y[k] * at(os, d.out_spatial[k]);
          const Acc* row = prod.data() + (n * P + p) * Og;
          for (int64_t o = 0; o < Og; ++o) {
            Dst& out = obase[off + o * at(os, d.out_feature)];
            if constexpr (std::is_same_v<Dst, uint16_t>)
              out = float_to_bf16(row[o]);
            else
              out = row[o];
          }
          for (size_t k = S; k-- > 0;)
            if (++y[k] < Y[k])
              break;
            else
              y[k] = 0;
        }
      }
    });
  }

 private:
  int64_t chunk_size() const { return conv_chunk(g_); }

  ConvGeometry g_;
  int lhs_, rhs_, out_;
  // bf16 operands on native oneDNN kernels: the products of whole chunks, and of the last
  // (shorter) chunk.
  std::shared_ptr<const onednn::Matmul> full_, tail_;
};

// Whether oneDNN has native kernels for the products of g's chunks (else drx's widened loops
// run them).
bool onednn_native(const ConvGeometry& g) {
  if (!onednn::available() ||
      g.positions * g.out_features_per_group * g.in_features * g.window == 0)
    return false;
  const int64_t chunk = conv_chunk(g);
  try {
    if (!onednn::Matmul(product_shape(g, chunk * g.positions)).native()) return false;
    const int64_t tail = g.out_batch % chunk;
    return tail == 0 || onednn::Matmul(product_shape(g, tail * g.positions)).native();
  } catch (const Error&) {
    return false;
  }
}

// Whether drx's im2col kernel covers g: f32 and f64, bf16 operands into f32 or bf16, sizes
// within BLAS's int arguments.
bool im2col_covers(const ConvGeometry& g) {
  const bool bf16 =
      g.operands == DType::bf16 && (g.result == DType::f32 || g.result == DType::bf16);
  const bool same = g.operands == g.result && (g.result == DType::f32 || g.result == DType::f64);
  return (bf16 || same) && g.positions <= INT_MAX && g.out_features_per_group <= INT_MAX &&
         g.in_features * g.window <= INT_MAX &&
         g.positions * g.in_features * g.window <= (int64_t{1} << 31);
}

std::optional<KernelSpec> conv_kernel(const Eqn& e, const CompileContext& cx) {
  // Read for every dtype, so a malformed parameter is an error at compile time.
  ConvParams params = ConvParams::of(e);
  const VarInfo &l = cx.var(e.ins[0]), &r = cx.var(e.ins[1]), &o = cx.var(e.outs[0]);
  if (l.dtype != r.dtype) return std::nullopt;
  ConvGeometry g(std::move(params), Type(l.dtype, l.shape), Type(r.dtype, r.shape),
                 Type(o.dtype, o.shape));
  const int lhs = e.ins[0], rhs = e.ins[1], out = e.outs[0];
  if (std::optional<KernelSpec> k = onednn_conv_kernel(g, lhs, rhs, out)) return k;
  if (!im2col_covers(g)) return std::nullopt;
  if (g.operands == DType::bf16) {
    const bool native =
        g.positions * g.out_features_per_group * g.in_features * g.window > 0 && onednn_native(g);
    if (!native) note_blas_threads_once();
    if (o.dtype == DType::f32)
      return native ? spec<ConvKernel<uint16_t, uint16_t, float>>(Alias::none, std::move(g), lhs,
                                                                  rhs, out)
                    : spec<ConvKernel<uint16_t, float, float>>(Alias::none, std::move(g), lhs, rhs,
                                                               out);
    return native ? spec<ConvKernel<uint16_t, uint16_t, uint16_t>>(Alias::none, std::move(g), lhs,
                                                                   rhs, out)
                  : spec<ConvKernel<uint16_t, float, uint16_t>>(Alias::none, std::move(g), lhs, rhs,
                                                                out);
  }
  note_blas_threads_once();
  if (o.dtype == DType::f32)
    return spec<ConvKernel<float, float, float>>(Alias::none, std::move(g), lhs, rhs, out);
  return spec<ConvKernel<double, double, double>>(Alias::none, std::move(g), lhs, rhs, out);
}

}  // namespace

ConvGeometry::ConvGeometry(ConvParams params, const Type& l, const Type& r, const Type& o)
    : c(std::move(params)),
      lhs(l.shape),
      rhs(r.shape),
      out(o.shape),
      operands(l.dtype),
      result(o.dtype) {
  const ConvDimensionNumbers& d = c.dims;
  groups = std::max(c.feature_group_count, c.batch_group_count);
  out_batch = o.shape[static_cast<size_t>(d.out_batch)];
  in_features = r.shape[static_cast<size_t>(d.rhs_in_feature)];
  out_features_per_group = r.shape[static_cast<size_t>(d.rhs_out_feature)] / groups;
  for (size_t k = 0; k < c.num_spatial(); ++k) {
    positions *= o.shape[static_cast<size_t>(d.out_spatial[k])];
    window *= r.shape[static_cast<size_t>(d.rhs_spatial[k])];
  }
}

std::string conv_kernel_route(const ConvParams& c, const Type& lhs, const Type& rhs,
                              const Type& out) {
  const ConvGeometry g(c, lhs, rhs, out);
  if (lhs.dtype != rhs.dtype) return "reference";
  if (std::optional<std::string> r = onednn_conv_route(g)) return *r;
  return im2col_covers(g) ? "im2col" : "reference";
}

void add_conv_kernels(KernelTable& t) { t[&prims::conv_general_dilated()] = conv_kernel; }

}  // namespace drx::exec
