// conv_general_dilated on oneDNN's direct convolutions, which run these products about twice
// as fast as im2col + sgemm (135 against 60-67 GFLOP/s on one AVX-512 core for the CNN's
// layers). A StableHLO convolution without lhs dilation or batch groups is oneDNN's forward
// convolution read another way round; one whose window is larger than its output (the weight
// gradient the vjp emits: the input against the output's gradient) is oneDNN's backward-weights
// convolution, with the batch and feature roles swapped:
//   out[b, f, z] = sum_{c, k} lhs[b, c, z ws + k rd - pl] rhs[c, f, k]
//   diff_w[o, i, k'] = sum_{n, y} diff_dst[n, o, y] src[n, i, y s + k' d - pl]
// with n = c, y = k, o = f, i = b, k' = z, s = rd and d = ws. A convolution of an lhs-dilated
// input with a reversed window (a strided convolution's input gradient) is oneDNN's
// backward-data convolution (input_gradient_plan). Each view is the operand's own
// memory under permuted dims and strides; onednn::Convolution reorders what its kernel reads in
// another layout. Forward convolutions split the batch into chunks fixed by the shapes, one
// task each; a weight gradient is one task (its sum runs over the batch), so the bits depend on
// the shapes and the machine's kernel (kernel_fingerprint) only.
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "drx/exec/kernels.h"
#include "drx/exec/kernels_conv.h"
#include "drx/exec/onednn.h"
#include "drx/exec/thread_pool.h"

namespace drx::exec {
namespace {

using onednn::ConvolutionShape;
using onednn::TensorView;

int64_t at(const std::vector<int64_t>& v, int64_t i) { return v[static_cast<size_t>(i)]; }

// dims [a, b, spatial...] of an array of `shape`, from its dims a and b and its spatial dims.
TensorView view(const Shape& shape, int64_t a, int64_t b, const std::vector<int64_t>& spatial) {
  const std::vector<int64_t> st = strides_of(shape);
  TensorView v{{at(shape, a), at(shape, b)}, {at(st, a), at(st, b)}};
  for (int64_t k : spatial) {
    v.dims.push_back(at(shape, k));
    v.strides.push_back(at(st, k));
  }
  return v;
}

struct ConvPlan {
  ConvolutionShape shape;  // of the whole convolution
  // Forward: the kernel reversed into a dense [G, O / G, I, window...] copy first.
  bool pack_weights = false;
  int64_t chunk = 1;  // forward: output batch indices per task
  int64_t lhs_batch_stride = 0, out_batch_stride = 0;
};

// Forward batch indices per task: about 2^28 flops each (a millisecond or two), at least one.
int64_t forward_chunk(const ConvGeometry& g) {
  const int64_t per_batch =
      2 * g.positions * g.out_features_per_group * g.groups * g.in_features * g.window;
  return std::clamp<int64_t>((int64_t{1} << 28) / std::max<int64_t>(per_batch, 1), 1, g.out_batch);
}

// Sizes a oneDNN convolution along spatial dim k: oneDNN computes its output (`produced`
// positions) from the padded input, so the right padding is set to what makes exactly that
// many (StableHLO's, which rounds down, may be more); where even none is too much, the input's
// unread tail is left out of the view.
bool fit_right(ConvolutionShape& s, size_t k, int64_t produced, int64_t stride, int64_t span) {
  int64_t& x = s.src.dims[2 + k];
  const int64_t fit = (produced - 1) * stride + span - x - s.pad_l[k];
  s.pad_r.push_back(std::max<int64_t>(fit, 0));
  if (fit < 0) x += fit;
  return x > 0;
}

// oneDNN's backward-weights convolution, batch and features swapped: for windows larger than
// the output (so that the sum over the batch runs inside oneDNN's kernel).
std::optional<ConvPlan> weight_gradient_plan(const ConvGeometry& g) {
  const ConvParams& c = g.c;
  const ConvDimensionNumbers& d = c.dims;
  if (g.window <= g.positions || c.feature_group_count != 1) return std::nullopt;
  ConvPlan p;
  ConvolutionShape& s = p.shape;
  s.kind = ConvolutionShape::Kind::weight_gradient;
  s.src = view(g.lhs, d.lhs_feature, d.lhs_batch, d.lhs_spatial);
  s.second = view(g.rhs, d.rhs_in_feature, d.rhs_out_feature, d.rhs_spatial);
  s.dst = view(g.out, d.out_feature, d.out_batch, d.out_spatial);
  for (size_t k = 0; k < c.num_spatial(); ++k) {
    if (c.window_reversal[k]) return std::nullopt;
    s.strides.push_back(c.rhs_dilation[k]);
    s.dilates.push_back(c.window_strides[k] - 1);
    s.pad_l.push_back(c.padding[k].first);
    const int64_t K = at(g.rhs, d.rhs_spatial[k]), Z = at(g.out, d.out_spatial[k]);
    if (!fit_right(s, k, K, c.rhs_dilation[k], (Z - 1) * c.window_strides[k] + 1))
      return std::nullopt;
  }
  return p;
}

std::optional<ConvPlan> forward_plan(const ConvGeometry& g) {
  const ConvParams& c = g.c;
  const ConvDimensionNumbers& d = c.dims;
  if (c.feature_group_count != g.groups) return std::nullopt;
  ConvPlan p;
  ConvolutionShape& s = p.shape;
  s.kind = ConvolutionShape::Kind::forward;
  s.src = view(g.lhs, d.lhs_batch, d.lhs_feature, d.lhs_spatial);
  s.dst = view(g.out, d.out_batch, d.out_feature, d.out_spatial);
  const int64_t G = g.groups, Og = g.out_features_per_group;
  p.pack_weights = std::any_of(c.window_reversal.begin(), c.window_reversal.end(),
                               [](int64_t r) { return r != 0; });
  if (p.pack_weights) {
    s.second.dims = {G * Og, g.in_features};
    for (int64_t k : d.rhs_spatial) s.second.dims.push_back(at(g.rhs, k));
    s.second.strides = strides_of(s.second.dims);
  } else {
    s.second = view(g.rhs, d.rhs_out_feature, d.rhs_in_feature, d.rhs_spatial);
  }
  if (G > 1) {  // [G, O / G, I, window...]: each group's out features one after another
    s.second.dims[0] = Og;
    s.second.dims.insert(s.second.dims.begin(), G);
    s.second.strides.insert(s.second.strides.begin(), Og * s.second.strides[0]);
  }
  for (size_t k = 0; k < c.num_spatial(); ++k) {
    s.strides.push_back(c.window_strides[k]);
    s.dilates.push_back(c.rhs_dilation[k] - 1);
    s.pad_l.push_back(c.padding[k].first);
    const int64_t K = at(g.rhs, d.rhs_spatial[k]), Y = at(g.out, d.out_spatial[k]);
    if (!fit_right(s, k, Y, c.window_strides[k], (K - 1) * c.rhs_dilation[k] + 1))
      return std::nullopt;
  }
  p.chunk = forward_chunk(g);
  p.lhs_batch_stride = at(strides_of(g.lhs), d.lhs_batch);
  p.out_batch_stride = at(strides_of(g.out), d.out_batch);
  return p;
}

// oneDNN's backward-data convolution, for a convolution of a (stride-)dilated input with a
// reversed window and unit strides: the input gradient the vjp emits for a strided
// convolution. Its window position k' reads kernel element K - 1 - k' at dilated position
// z + k' R - PL, which is oneDNN's x = y L + k R - pl with k = K - 1 - k' and
// pl = (K - 1) R - PL: the reversal cancels, the kernel is read as it lies.
std::optional<ConvPlan> input_gradient_plan(const ConvGeometry& g) {
  const ConvParams& c = g.c;
  const ConvDimensionNumbers& d = c.dims;
  if (c.feature_group_count != 1) return std::nullopt;
  ConvPlan p;
  ConvolutionShape& s = p.shape;
  s.kind = ConvolutionShape::Kind::input_gradient;
  s.src = view(g.lhs, d.lhs_batch, d.lhs_feature, d.lhs_spatial);
  s.second = view(g.rhs, d.rhs_in_feature, d.rhs_out_feature, d.rhs_spatial);
  s.dst = view(g.out, d.out_batch, d.out_feature, d.out_spatial);
  for (size_t k = 0; k < c.num_spatial(); ++k) {
    if (c.window_strides[k] != 1 || !c.window_reversal[k]) return std::nullopt;
    const int64_t span = (at(g.rhs, d.rhs_spatial[k]) - 1) * c.rhs_dilation[k];
    s.strides.push_back(c.lhs_dilation[k]);
    s.dilates.push_back(c.rhs_dilation[k] - 1);
    s.pad_l.push_back(span - c.padding[k].first);
    s.pad_r.push_back(span - c.padding[k].second);
    if (s.pad_l.back() < 0 || s.pad_r.back() < 0) return std::nullopt;
  }
  p.chunk = forward_chunk(g);
  p.lhs_batch_stride = at(strides_of(g.lhs), d.lhs_batch);
  p.out_batch_stride = at(strides_of(g.out), d.out_batch);
  return p;
}

// The plans oneDNN could run g by, the better first.
std::vector<ConvPlan> plans_of(const ConvGeometry& g) {
  const ConvParams& c = g.c;
  const size_t S = c.num_spatial();
  if (!onednn::available() || S < 1 || S > 3 || c.batch_group_count != 1) return {};
  if (!(g.operands == DType::f32 && g.result == DType::f32) &&
      !(g.operands == DType::bf16 && (g.result == DType::f32 || g.result == DType::bf16)))
    return {};
  if (num_elements(g.lhs) == 0 || num_elements(g.rhs) == 0 || num_elements(g.out) == 0) return {};
  bool lhs_dilated = false;
  for (size_t k = 0; k < S; ++k) {
    if (c.padding[k].first < 0) return {};
    lhs_dilated = lhs_dilated || c.lhs_dilation[k] != 1;
  }
  const auto plans = lhs_dilated ? std::vector{input_gradient_plan}
                                 : std::vector{weight_gradient_plan, forward_plan};
  std::vector<ConvPlan> v;
  for (auto plan : plans)
    if (std::optional<ConvPlan> p = plan(g)) {
      p->shape.operands = g.operands;
      p->shape.out = g.result;
      v.push_back(std::move(*p));
    }
  return v;
}

// The shape of `batch` of the forward convolution's batch indices.
ConvolutionShape with_batch(ConvolutionShape s, int64_t batch) {
  s.src.dims[0] = batch;
  s.dst.dims[0] = batch;
  return s;
}

// The convolutions a plan runs: the whole one, or the forward's full and last chunks; none
// where oneDNN refuses one or has only its reference loops for it.
struct Convolutions {
  std::shared_ptr<const onednn::Convolution> full, tail;
};

std::optional<Convolutions> make(const ConvPlan& p, const ConvGeometry& g) {
  Convolutions c;
  try {
    if (p.shape.kind == ConvolutionShape::Kind::weight_gradient) {
      c.full = std::make_shared<const onednn::Convolution>(p.shape);
    } else {
      c.full = std::make_shared<const onednn::Convolution>(with_batch(p.shape, p.chunk));
      if (const int64_t tail = g.out_batch % p.chunk)
        c.tail = std::make_shared<const onednn::Convolution>(with_batch(p.shape, tail));
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!c.full->native() || (c.tail && !c.tail->native())) return std::nullopt;
  return c;
}

// Src: the operands' element in memory (float, or bf16 bits).
template <class Src>
class OnednnConvKernel : public Kernel {
 public:
  OnednnConvKernel(ConvGeometry g, ConvPlan p, Convolutions c, int lhs, int rhs, int out)
      : g_(std::move(g)), p_(std::move(p)), c_(std::move(c)), lhs_(lhs), rhs_(rhs), out_(out) {}
  KernelKind kind() const override { return KernelKind::gemm; }

  void run(Frame& f) const override {
    const Src* L = f.in<Src>(lhs_);
    const Src* R = f.in<Src>(rhs_);
    auto* O = static_cast<unsigned char*>(f.out(out_));
    if (p_.shape.kind == ConvolutionShape::Kind::weight_gradient) {
      c_.full->run(L, R, O);
      return;
    }
    std::vector<Src> packed;
    if (p_.pack_weights) packed = reversed_weights(R);
    const Src* W = p_.pack_weights ? packed.data() : R;
    const size_t out_size = dtype_size(g_.result);
    const int64_t chunk = p_.chunk, chunks = (g_.out_batch + chunk - 1) / chunk;
    global_pool().parallel_for(chunks, [&](int64_t t) {
      const int64_t n0 = t * chunk;
      const onednn::Convolution& conv = n0 + chunk <= g_.out_batch ? *c_.full : *c_.tail;
      conv.run(L + n0 * p_.lhs_batch_stride, W,
               O + static_cast<size_t>(n0 * p_.out_batch_stride) * out_size);
    });
  }

 private:
  // The kernel as dense [G, O / G, I, window...] (or [O, I, window...]), window reversed where
  // window_reversal says.
  std::vector<Src> reversed_weights(const Src* R) const {
    const ConvParams& c = g_.c;
    const ConvDimensionNumbers& d = c.dims;
    const size_t S = c.num_spatial();
    const std::vector<int64_t> rs = strides_of(g_.rhs);
    const int64_t O = g_.out_features_per_group * g_.groups, I = g_.in_features, W = g_.window;
    std::vector<int64_t> from(static_cast<size_t>(W));  // window position -> offset in R
    std::vector<int64_t> w(S, 0);
    for (int64_t wi = 0; wi < W; ++wi) {
      int64_t off = 0;
      for (size_t k = 0; k < S; ++k) {
        const int64_t K = at(g_.rhs, d.rhs_spatial[k]);
        off += (c.window_reversal[k] ? K - 1 - w[k] : w[k]) * at(rs, d.rhs_spatial[k]);
      }
      from[static_cast<size_t>(wi)] = off;
      for (size_t k = S; k-- > 0;)
        if (++w[k] < at(g_.rhs, d.rhs_spatial[k]))
          break;
        else
          w[k] = 0;
    }
    std::vector<Src> out(static_cast<size_t>(O * I * W));
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < I; ++i) {
        const Src* base = R + o * at(rs, d.rhs_out_feature) + i * at(rs, d.rhs_in_feature);
        Src* dst = out.data() + (o * I + i) * W;
        for (int64_t wi = 0; wi < W; ++wi) dst[wi] = base[from[static_cast<size_t>(wi)]];
      }
    return out;
  }

  ConvGeometry g_;
  ConvPlan p_;
  Convolutions c_;
  int lhs_, rhs_, out_;
};

// The first of g's plans whose convolutions oneDNN runs on native kernels.
std::optional<std::pair<ConvPlan, Convolutions>> chosen(const ConvGeometry& g) {
  for (ConvPlan& p : plans_of(g))
    if (std::optional<Convolutions> c = make(p, g)) return std::make_pair(std::move(p), *c);
  return std::nullopt;
}

}  // namespace

std::optional<KernelSpec> onednn_conv_kernel(const ConvGeometry& g, int lhs, int rhs, int out) {
  std::optional<std::pair<ConvPlan, Convolutions>> c = chosen(g);
  if (!c) return std::nullopt;
  auto& [plan, convolutions] = *c;
  if (g.operands == DType::bf16)
    return spec<OnednnConvKernel<uint16_t>>(Alias::none, g, std::move(plan),
                                            std::move(convolutions), lhs, rhs, out);
  return spec<OnednnConvKernel<float>>(Alias::none, g, std::move(plan), std::move(convolutions),
                                       lhs, rhs, out);
}

std::optional<std::string> onednn_conv_route(const ConvGeometry& g) {
  const std::optional<std::pair<ConvPlan, Convolutions>> c = chosen(g);
  if (!c) return std::nullopt;
  using K = ConvolutionShape::Kind;
  const K kind = c->first.shape.kind;
  return std::string(kind == K::forward           ? "oneDNN forward "
                     : kind == K::weight_gradient ? "oneDNN weight gradient "
                                                  : "oneDNN input gradient ") +
         c->second.full->implementation();
}

}  // namespace drx::exec
