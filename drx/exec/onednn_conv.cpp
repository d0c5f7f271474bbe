// oneDNN's convolutions (forward, backward-weights and backward-data) on the calling thread. The
// primitive reads channels-last activations and weights in the layout it prefers; operands in any
// other strided layout (NCHW, or the batch/feature swap of a weight gradient) are reordered into
// scratch space by the call, which costs a copy against the convolution's many products.
#include "drx/array/error.h"
#include "drx/exec/onednn.h"
#include "drx/exec/onednn_engine.h"

#if DRX_HAVE_ONEDNN
#include <memory>
#include <optional>
#include <unordered_map>
#endif

namespace drx::exec::onednn {

#if DRX_HAVE_ONEDNN
namespace {

using detail::cpu_engine;
using detail::one_thread_here;
using dnnl::memory;

memory::dims dims_of(const std::vector<int64_t>& v) { return memory::dims(v.begin(), v.end()); }

memory::format_tag channels_last(size_t rank) {
  switch (rank) {
    case 3:
      return memory::format_tag::nwc;
    case 4:
      return memory::format_tag::nhwc;
    case 5:
      return memory::format_tag::ndhwc;
    default:
      throw Error("oneDNN convolution: activations of rank " + std::to_string(rank) +
                  " (expected 1 to 3 spatial dims)");
  }
}

std::string dims_text(const std::vector<int64_t>& v) {
  std::string t = "[";
  for (size_t i = 0; i < v.size(); ++i) t += (i ? ", " : "") + std::to_string(v[i]);
  return t + "]";
}

std::string describe(const ConvolutionShape& s) {
  using K = ConvolutionShape::Kind;
  return std::string(s.kind == K::forward           ? "forward"
                     : s.kind == K::weight_gradient ? "weight gradient"
                                                    : "input gradient") +
         " " + dims_text(s.src.dims) + " x " + dims_text(s.second.dims) + " -> " +
         dims_text(s.dst.dims) + " (" + std::string(dtype_name(s.operands)) + " -> " +
         std::string(dtype_name(s.out)) + ")";
}

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  // Each call brings its own scratch space, so that threads may run one primitive at once.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A tensor as the caller holds it and as the primitive reads or writes it, with the reorder
// between them where they differ (user -> kernel for an input, kernel -> user for the result).
struct Operand {
  memory::desc user, kernel;
  std::optional<dnnl::reorder> reorder;
  memory::desc reorder_scratch;

  Operand(const memory::desc& user_desc, const memory::desc& kernel_desc, bool input)
      : user(user_desc), kernel(kernel_desc) {
    if (user == kernel) return;
    const dnnl::reorder::primitive_desc pd =
        input ? dnnl::reorder::primitive_desc(cpu_engine(), user, cpu_engine(), kernel,
                                              user_scratchpad())
              : dnnl::reorder::primitive_desc(cpu_engine(), kernel, cpu_engine(), user,
                                              user_scratchpad());
    reorder_scratch = pd.scratchpad_desc();
    reorder = dnnl::reorder(pd);
  }
};

// Scratch space carved from one allocation, each piece 64-byte aligned.
class Scratch {
 public:
  explicit Scratch(size_t bytes) : block_(std::make_unique_for_overwrite<unsigned char[]>(bytes)) {}
  static size_t rounded(size_t bytes) { return (bytes + 63) / 64 * 64 + 64; }
  void* take(size_t bytes) {
    auto at = reinterpret_cast<uintptr_t>(block_.get()) + used_;
    const uintptr_t aligned = (at + 63) / 64 * 64;
    used_ += aligned - at + bytes;
    return reinterpret_cast<void*>(aligned);
  }

 private:
  std::unique_ptr<unsigned char[]> block_;  // not zero-filled: oneDNN writes before it reads
  size_t used_ = 0;
};

}  // namespace

struct Convolution::Impl {
  dnnl::primitive primitive;
  memory::desc scratch;
  std::optional<Operand> src, second, dst;
  int src_arg = DNNL_ARG_SRC, second_arg = DNNL_ARG_WEIGHTS, dst_arg = DNNL_ARG_DST;
  std::string implementation;
};

Convolution::Convolution(const ConvolutionShape& s) {
  one_thread_here();
  using K = ConvolutionShape::Kind;
  using tag = memory::format_tag;
  const memory::data_type op = detail::data_type(s.operands, "oneDNN convolution operands"),
                          out = detail::data_type(s.out, "oneDNN convolution result");
  const bool weights_second = s.kind != K::weight_gradient;  // else the weights are dst
  const tag activations = channels_last(s.src.dims.size());
  memory::desc src(dims_of(s.src.dims), op, activations);
  memory::desc second(dims_of(s.second.dims), op, weights_second ? tag::any : activations);
  memory::desc dst(dims_of(s.dst.dims), out, weights_second ? activations : tag::any);
  const memory::dims strides = dims_of(s.strides), dilates = dims_of(s.dilates),
                     pad_l = dims_of(s.pad_l), pad_r = dims_of(s.pad_r);
  const dnnl::primitive_attr attr = user_scratchpad();
  auto impl = std::make_shared<Impl>();
  dnnl::engine& e = cpu_engine();
  try {
    using dnnl::algorithm;
    using dnnl::prop_kind;
    if (s.kind == K::forward) {
      const dnnl::convolution_forward::desc d(prop_kind::forward_inference,
                                              algorithm::convolution_direct, src, second, dst,
                                              strides, dilates, pad_l, pad_r);
      const dnnl::convolution_forward::primitive_desc pd(d, attr, e);
      src = pd.src_desc();
      second = pd.weights_desc();
      dst = pd.dst_desc();
      impl->scratch = pd.scratchpad_desc();
      impl->implementation = pd.impl_info_str();
      impl->primitive = dnnl::convolution_forward(pd);
    } else if (s.kind == K::input_gradient) {
      // The forward convolution whose input gradient this is (src its output's gradient).
      const memory::desc input(dims_of(s.dst.dims), op, activations);
      const dnnl::convolution_forward::desc hint_d(prop_kind::forward_training,
                                                   algorithm::convolution_direct, input, second,
                                                   src, strides, dilates, pad_l, pad_r);
      const dnnl::convolution_forward::primitive_desc hint(hint_d, e);
      const dnnl::convolution_backward_data::desc d(algorithm::convolution_direct, dst, second, src,
                                                    strides, dilates, pad_l, pad_r);
      const dnnl::convolution_backward_data::primitive_desc pd(d, attr, e, hint);
      src = pd.diff_dst_desc();
      second = pd.weights_desc();
      dst = pd.diff_src_desc();
      impl->scratch = pd.scratchpad_desc();
      impl->implementation = pd.impl_info_str();
      impl->primitive = dnnl::convolution_backward_data(pd);
      impl->src_arg = DNNL_ARG_DIFF_DST;
      impl->dst_arg = DNNL_ARG_DIFF_SRC;
    } else {
      // oneDNN picks a backward kernel to match a forward one: the forward convolution whose
      // weights these are (in the operands' type).
      const memory::desc weights(dims_of(s.dst.dims), op, tag::any);
      const dnnl::convolution_forward::desc hint_d(prop_kind::forward_training,
                                                   algorithm::convolution_direct, src, weights,
                                                   second, strides, dilates, pad_l, pad_r);
      const dnnl::convolution_forward::primitive_desc hint(hint_d, e);
      const dnnl::convolution_backward_weights::desc d(algorithm::convolution_direct, src, dst,
                                                       second, strides, dilates, pad_l, pad_r);
      const dnnl::convolution_backward_weights::primitive_desc pd(d, attr, e, hint);
      src = pd.src_desc();
      second = pd.diff_dst_desc();
      dst = pd.diff_weights_desc();
      impl->scratch = pd.scratchpad_desc();
      impl->implementation = pd.impl_info_str();
      impl->primitive = dnnl::convolution_backward_weights(pd);
      impl->second_arg = DNNL_ARG_DIFF_DST;
      impl->dst_arg = DNNL_ARG_DIFF_WEIGHTS;
    }
    const auto view = [](const TensorView& v, memory::data_type t) {
      return memory::desc(dims_of(v.dims), t, dims_of(v.strides));
    };
    impl->src.emplace(view(s.src, op), src, true);
    impl->second.emplace(view(s.second, op), second, true);
    impl->dst.emplace(view(s.dst, out), dst, false);
  } catch (const dnnl::error& err) {
    throw Error("oneDNN convolution: " + describe(s) + " was refused: " + err.what());
  }
  impl_ = std::move(impl);
}

void Convolution::run(const void* src, const void* second, void* dst) const {
  one_thread_here();
  // A stream and scratch space per call, as Matmul::run.
  dnnl::engine& e = cpu_engine();
  dnnl::stream stream(e);
  const Impl& m = *impl_;
  const Operand* operands[] = {&*m.src, &*m.second, &*m.dst};
  size_t bytes = Scratch::rounded(m.scratch.get_size());
  for (const Operand* o : operands)
    if (o->reorder)
      bytes +=
          Scratch::rounded(o->kernel.get_size()) + Scratch::rounded(o->reorder_scratch.get_size());
  Scratch scratch(bytes);
  void* users[] = {const_cast<void*>(src), const_cast<void*>(second), dst};
  memory kernel[3];
  for (int i = 0; i < 3; ++i) {
    const Operand& o = *operands[i];
    memory user(o.user, e, users[i]);
    if (!o.reorder) {
      kernel[i] = user;
      continue;
    }
    kernel[i] = memory(o.kernel, e, scratch.take(o.kernel.get_size()));
    if (i == 2) continue;  // the result: reordered after the convolution
    memory rs(o.reorder_scratch, e, scratch.take(o.reorder_scratch.get_size()));
    o.reorder->execute(
        stream, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, kernel[i]}, {DNNL_ARG_SCRATCHPAD, rs}});
  }
  memory sm(m.scratch, e, scratch.take(m.scratch.get_size()));
  m.primitive.execute(stream, {{m.src_arg, kernel[0]},
                               {m.second_arg, kernel[1]},
                               {m.dst_arg, kernel[2]},
                               {DNNL_ARG_SCRATCHPAD, sm}});
  if (const Operand& o = *m.dst; o.reorder) {
    memory rs(o.reorder_scratch, e, scratch.take(o.reorder_scratch.get_size()));
    o.reorder->execute(stream, {{DNNL_ARG_FROM, kernel[2]},
                                {DNNL_ARG_TO, memory(o.user, e, dst)},
                                {DNNL_ARG_SCRATCHPAD, rs}});
  }
  stream.wait();
}

const std::string& Convolution::implementation() const { return impl_->implementation; }

bool Convolution::native() const { return impl_->implementation.rfind("ref", 0) != 0; }

#else  // built without oneDNN

struct Convolution::Impl {};

Convolution::Convolution(const ConvolutionShape&) {
  throw Error("oneDNN convolution: drx was built without oneDNN (DRX_ONEDNN=OFF)");
}
void Convolution::run(const void*, const void*, void*) const {}
const std::string& Convolution::implementation() const {
  static const std::string none = "none";
  return none;
}
bool Convolution::native() const { return false; }

#endif

}  // namespace drx::exec::onednn
