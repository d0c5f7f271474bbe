// conv_general_dilated as im2col + gemm (f32 and f64, operands and result of one dtype):
// for each output batch index and group, the windows the output positions read are laid out
// as the rows of a [positions, in features x window] matrix (zeros where a window reaches
// padding or the holes of lhs dilation), multiplied by the group's kernel packed as
// [in features x window, out features] (window reversal applied while packing), and the
// product scattered into the result's layout. Every product is one single-threaded BLAS call
// on the calling thread, in a fixed order, so the bits depend on nothing but the shapes.
// Like dot_general's kernel, sgemm accumulates in float and reassociates: results agree with
// the reference (double accumulation) to float rounding. Other dtypes (integers, and bf16/f16
// operands, which never reach this table) run on the reference loop.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <utility>
#include <vector>

#include "drx/exec/blas_calls.h"
#include "drx/exec/blas_threads.h"
#include "drx/exec/kernels.h"
#include "drx/ops/convolution.h"

namespace drx::exec {
namespace {

struct ConvGeometry {
  ConvParams c;
  Shape lhs, rhs, out;
  int64_t groups = 1, out_batch = 1, in_features = 1, out_features_per_group = 1;
  int64_t positions = 1, window = 1;  // output spatial positions, window elements
};

template <class T>
class ConvKernel : public Kernel {
 public:
  ConvKernel(ConvGeometry g, int lhs, int rhs, int out)
      : g_(std::move(g)), lhs_(lhs), rhs_(rhs), out_(out) {}
  KernelKind kind() const override { return KernelKind::gemm; }

  void run(Frame& f) const override {
    const ConvParams& c = g_.c;
    const ConvDimensionNumbers& d = c.dims;
    const size_t S = c.num_spatial();
    const T* L = f.in<T>(lhs_);
    const T* R = f.in<T>(rhs_);
    T* O = f.out<T>(out_);
    const int64_t total = num_elements(g_.out);
    if (total == 0) return;
    keep_blas_single_threaded();  // its bits are those of one-thread BLAS calls
    const std::vector<int64_t> ls = strides_of(g_.lhs), rs = strides_of(g_.rhs),
                               os = strides_of(g_.out);
    const int64_t I = g_.in_features, Og = g_.out_features_per_group, P = g_.positions,
                  W = g_.window, KW = I * W;
    Shape K(S), X(S), Y(S);
    for (size_t k = 0; k < S; ++k) {
      K[k] = g_.rhs[static_cast<size_t>(d.rhs_spatial[k])];
      X[k] = g_.lhs[static_cast<size_t>(d.lhs_spatial[k])];
      Y[k] = g_.out[static_cast<size_t>(d.out_spatial[k])];
    }
    if (KW == 0) {
      std::fill(O, O + total, T{0});
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
              (p / c.lhs_dilation[k]) * ls[static_cast<size_t>(d.lhs_spatial[k])];
        }
    }
    std::vector<T> a(static_cast<size_t>(P * KW)), b(static_cast<size_t>(KW * Og)),
        prod(static_cast<size_t>(P * Og));
    std::vector<int64_t> y(S), w(S);
    for (int64_t grp = 0; grp < g_.groups; ++grp) {
      // The group's kernel as [I * W, Og], rows in (input feature, window position) order.
      const int64_t o0 = grp * Og;
      for (int64_t i = 0; i < I; ++i) {
        std::fill(w.begin(), w.end(), 0);
        for (int64_t wi = 0; wi < W; ++wi) {
          int64_t off = i * rs[static_cast<size_t>(d.rhs_in_feature)];
          for (size_t k = 0; k < S; ++k)
            off += (c.window_reversal[k] ? K[k] - 1 - w[k] : w[k]) *
                   rs[static_cast<size_t>(d.rhs_spatial[k])];
          T* row = b.data() + (i * W + wi) * Og;
          for (int64_t o = 0; o < Og; ++o)
            row[o] = R[off + (o0 + o) * rs[static_cast<size_t>(d.rhs_out_feature)]];
          for (size_t k = S; k-- > 0;)
            if (++w[k] < K[k])
              break;
            else
              w[k] = 0;
        }
      }
      const bool batch_groups = c.batch_group_count > 1;
      for (int64_t n = 0; n < g_.out_batch; ++n) {
        const int64_t nb = batch_groups ? grp * g_.out_batch + n : n;
        const int64_t fbase = batch_groups ? 0 : grp * I;
        const T* base = L + nb * ls[static_cast<size_t>(d.lhs_batch)] +
                        fbase * ls[static_cast<size_t>(d.lhs_feature)];
        // im2col: row p (output position), column (i, window position).
        std::fill(y.begin(), y.end(), 0);
        for (int64_t p = 0; p < P; ++p) {
          T* row = a.data() + p * KW;
          std::fill(w.begin(), w.end(), 0);
          for (int64_t wi = 0; wi < W; ++wi) {
            int64_t off = 0;
            bool inside = true;
            for (size_t k = 0; k < S && inside; ++k) {
              const int64_t s = src[k][static_cast<size_t>(y[k] * K[k] + w[k])];
              inside = s >= 0;
              off += s;
            }
            for (int64_t i = 0; i < I; ++i)
              row[i * W + wi] =
                  inside ? base[off + i * ls[static_cast<size_t>(d.lhs_feature)]] : T{0};
            for (size_t k = S; k-- > 0;)
              if (++w[k] < K[k])
                break;
              else
                w[k] = 0;
          }
          for (size_t k = S; k-- > 0;)
            if (++y[k] < Y[k])
              break;
            else
              y[k] = 0;
        }
        {
          const BlasCallSlot slot;  // OpenBLAS crashes with too many calls at once
          const int m = static_cast<int>(P), nn = static_cast<int>(Og), kk = static_cast<int>(KW);
          if constexpr (std::is_same_v<T, float>)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, nn, kk, 1.0f, a.data(), kk,
                        b.data(), nn, 0.0f, prod.data(), nn);
          else
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, nn, kk, 1.0, a.data(), kk,
                        b.data(), nn, 0.0, prod.data(), nn);
        }
        // Scatter [P, Og] into the result's layout.
        T* obase = O + n * os[static_cast<size_t>(d.out_batch)] +
                   o0 * os[static_cast<size_t>(d.out_feature)];
        std::fill(y.begin(), y.end(), 0);
        for (int64_t p = 0; p < P; ++p) {
          int64_t off = 0;
          for (size_t k = 0; k < S; ++k) off += y[k] * os[static_cast<size_t>(d.out_spatial[k])];
          const T* row = prod.data() + p * Og;
          for (int64_t o = 0; o < Og; ++o)
            obase[off + o * os[static_cast<size_t>(d.out_feature)]] = row[o];
          for (size_t k = S; k-- > 0;)
            if (++y[k] < Y[k])
              break;
            else
              y[k] = 0;
        }
      }
    }
  }

 private:
  ConvGeometry g_;
  int lhs_, rhs_, out_;
};

std::optional<KernelSpec> conv_kernel(const Eqn& e, const CompileContext& cx) {
  // Read for every dtype, so a malformed parameter is an error at compile time.
  ConvGeometry g;
  g.c = ConvParams::of(e);
  const VarInfo &l = cx.var(e.ins[0]), &r = cx.var(e.ins[1]), &o = cx.var(e.outs[0]);
  if (l.dtype != r.dtype || l.dtype != o.dtype || (o.dtype != DType::f32 && o.dtype != DType::f64))
    return std::nullopt;
  g.lhs = l.shape;
  g.rhs = r.shape;
  g.out = o.shape;
  const ConvDimensionNumbers& d = g.c.dims;
  g.groups = std::max(g.c.feature_group_count, g.c.batch_group_count);
  g.out_batch = o.shape[static_cast<size_t>(d.out_batch)];
  g.in_features = r.shape[static_cast<size_t>(d.rhs_in_feature)];
  g.out_features_per_group = r.shape[static_cast<size_t>(d.rhs_out_feature)] / g.groups;
  for (size_t k = 0; k < g.c.num_spatial(); ++k) {
    g.positions *= o.shape[static_cast<size_t>(d.out_spatial[k])];
    g.window *= r.shape[static_cast<size_t>(d.rhs_spatial[k])];
  }
  if (g.positions > INT_MAX || g.out_features_per_group > INT_MAX ||
      g.in_features * g.window > INT_MAX ||
      g.positions * g.in_features * g.window > (int64_t{1} << 31))
    return std::nullopt;
  note_blas_threads_once();
  const int lhs = e.ins[0], rhs = e.ins[1], out = e.outs[0];
  if (o.dtype == DType::f32)
    return spec<ConvKernel<float>>(Alias::none, std::move(g), lhs, rhs, out);
  return spec<ConvKernel<double>>(Alias::none, std::move(g), lhs, rhs, out);
}

}  // namespace

void add_conv_kernels(KernelTable& t) { t[&prims::conv_general_dilated()] = conv_kernel; }

}  // namespace drx::exec
