// Data-movement kernels. reshape, place and stop_gradient change only the type,
// so their result is a view of the operand's bytes. transpose, slice,
// broadcast_in_dim and broadcast (over a placement) are one strided copy whose
// dims are merged where memory is contiguous, so the inner loop is a memcpy, a
// fill or a plain strided gather.
#include <algorithm>
#include <array>
#include <cstring>

#include "drx/exec/kernels.h"
#include "drx/mapreduce/primitives.h"
#include "drx/ops/primitives.h"

namespace drx::exec {
namespace {

// The result is the operand's bytes from `offset` on. The hold keeps the
// operand's Array (and so the bytes) alive as long as the view is.
class ViewKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::copy; }

 public:
  ViewKernel(const Eqn& e, size_t offset) : x_(e.ins[0]), y_(e.outs[0]), offset_(offset) {}
  void run(Frame& f) const override {
    f.ptr[y_] = static_cast<std::byte*>(f.ptr[x_]) + offset_;
    f.hold[y_] = f.hold[x_];
  }

 private:
  int x_, y_;
  size_t offset_;
};

std::optional<KernelSpec> view_at(const Eqn& e, size_t offset) {
  std::optional<KernelSpec> s = spec<ViewKernel>(Alias::view, e, offset);
  s->view_offset = offset;
  return s;
}

std::optional<KernelSpec> view(const Eqn& e, const CompileContext&) { return view_at(e, 0); }

constexpr size_t kMaxRank = 16;

template <class T>
class StridedCopyKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::copy; }

 public:
  StridedCopyKernel(const Eqn& e, Layout l) : x_(e.ins[0]), y_(e.outs[0]), l_(std::move(l)) {
    total_ = num_elements(l_.shape);
  }
  void run(Frame& f) const override {
    const T* src = f.in<T>(x_) + l_.offset;
    T* dst = f.out<T>(y_);
    if (total_ == 0) return;
    const size_t rank = l_.shape.size();
    if (rank == 0) {
      dst[0] = src[0];
      return;
    }
    const int64_t inner = l_.shape.back(), step = l_.stride.back();
    std::array<int64_t, kMaxRank> idx{};
    int64_t pos = 0;
    for (int64_t done = 0; done < total_; done += inner) {
      if (step == 1)
        std::memcpy(dst, src + pos, static_cast<size_t>(inner) * sizeof(T));
      else if (step == 0)
        std::fill(dst, dst + inner, src[pos]);
      else
        for (int64_t j = 0; j < inner; ++j) dst[j] = src[pos + j * step];
      dst += inner;
      for (size_t d = rank - 1; d-- > 0;) {
        pos += l_.stride[d];
        if (++idx[d] < l_.shape[d]) break;
        pos -= l_.stride[d] * l_.shape[d];
        idx[d] = 0;
      }
    }
  }

 private:
  int x_, y_;
  Layout l_;
  int64_t total_ = 0;
};

std::optional<KernelSpec> strided(const Eqn& e, const CompileContext& cx, Layout l) {
  if (l.shape.size() > kMaxRank) return std::nullopt;
  switch (dtype_size(cx.var(e.outs[0]).dtype)) {
    case 1:
      return spec<StridedCopyKernel<uint8_t>>(Alias::none, e, std::move(l));
    case 2:
      return spec<StridedCopyKernel<uint16_t>>(Alias::none, e, std::move(l));
    case 4:
      return spec<StridedCopyKernel<uint32_t>>(Alias::none, e, std::move(l));
    case 8:
      return spec<StridedCopyKernel<uint64_t>>(Alias::none, e, std::move(l));
    default:
      return std::nullopt;
  }
}

std::optional<KernelSpec> transpose(const Eqn& e, const CompileContext& cx) {
  if (std::optional<KernelSpec> gemm = transposed_dot(e, cx)) return gemm;
  if (std::optional<KernelSpec> gemm = bf16_transposed_dot(e, cx)) return gemm;
  const VarInfo& x = cx.var(e.ins[0]);
  const auto* perm = param_ints(e, "perm");
  if (!perm || perm->size() != x.shape.size()) return std::nullopt;
  std::vector<int64_t> in_st = strides_of(x.shape), st;
  for (int64_t a : *perm) st.push_back(in_st[static_cast<size_t>(a)]);
  return strided(e, cx, merged(cx.var(e.outs[0]).shape, st, 0));
}

std::optional<KernelSpec> broadcast_in_dim(const Eqn& e, const CompileContext& cx) {
  std::optional<Layout> l = broadcast_layout(e, cx);
  if (!l) return std::nullopt;
  return strided(e, cx, std::move(*l));
}

std::optional<KernelSpec> slice(const Eqn& e, const CompileContext& cx) {
  const VarInfo& x = cx.var(e.ins[0]);
  const auto* starts = param_ints(e, "starts");
  if (!starts || starts->size() != x.shape.size()) return std::nullopt;
  std::vector<int64_t> st = strides_of(x.shape);
  int64_t offset = 0;
  for (size_t d = 0; d < st.size(); ++d) offset += (*starts)[d] * st[d];
  Layout l = merged(cx.var(e.outs[0]).shape, st, offset);
  // One contiguous run (e.g. leading rows, as minibatches are): a view.
  if (l.shape.empty() || (l.shape.size() == 1 && l.stride[0] == 1))
    return view_at(e, static_cast<size_t>(offset) * dtype_size(x.dtype));
  return strided(e, cx, std::move(l));
}

// Each operand's rows (the dims from the axis on) are one contiguous run per index of the dims
// before the axis: the result is, per such index, the operands' runs one after another.
class ConcatenateKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::copy; }

 public:
  ConcatenateKernel(std::vector<int> ins, std::vector<size_t> run_bytes, int y, int64_t outer)
      : ins_(std::move(ins)), run_bytes_(std::move(run_bytes)), y_(y), outer_(outer) {
    for (size_t b : run_bytes_) row_bytes_ += b;
  }
  void run(Frame& f) const override {
    auto* y = static_cast<std::byte*>(f.out(y_));
    size_t at = 0;
    for (size_t i = 0; i < ins_.size(); ++i) {
      const auto* x = static_cast<const std::byte*>(f.in(ins_[i]));
      const size_t n = run_bytes_[i];
      if (n)
        for (int64_t o = 0; o < outer_; ++o)
          std::memcpy(y + static_cast<size_t>(o) * row_bytes_ + at, x + static_cast<size_t>(o) * n,
                      n);
      at += n;
    }
  }

 private:
  std::vector<int> ins_;
  std::vector<size_t> run_bytes_;
  int y_;
  int64_t outer_;
  size_t row_bytes_ = 0;
};

std::optional<KernelSpec> concatenate(const Eqn& e, const CompileContext& cx) {
  const std::optional<int64_t> axis = param_int(e, "axis");
  const Shape& shape = cx.var(e.outs[0]).shape;
  if (!axis || *axis < 0 || static_cast<size_t>(*axis) >= shape.size()) return std::nullopt;
  const auto a = static_cast<size_t>(*axis);
  int64_t outer = 1;
  for (size_t d = 0; d < a; ++d) outer *= shape[d];
  std::vector<size_t> run_bytes;
  for (int v : e.ins) {
    const VarInfo& x = cx.var(v);
    int64_t n = 1;
    for (size_t d = a; d < x.shape.size(); ++d) n *= x.shape[d];
    run_bytes.push_back(static_cast<size_t>(n) * dtype_size(x.dtype));
  }
  return spec<ConcatenateKernel>(Alias::none, e.ins, std::move(run_bytes), e.outs[0], outer);
}

}  // namespace

Layout merged(const Shape& shape, const std::vector<int64_t>& stride, int64_t offset) {
  Layout l;
  l.offset = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!l.shape.empty() && l.stride.back() == stride[d] * shape[d]) {
      l.shape.back() *= shape[d];
      l.stride.back() = stride[d];
      continue;
    }
    l.shape.push_back(shape[d]);
    l.stride.push_back(stride[d]);
  }
  return l;
}

std::optional<Layout> broadcast_layout(const Eqn& e, const CompileContext& cx) {
  const bool over_placement = e.prim == &prims::broadcast();
  if ((!over_placement && e.prim != &prims::broadcast_in_dim()) || e.ins.size() != 1 ||
      e.outs.size() != 1)
    return std::nullopt;
  const VarInfo& x = cx.var(e.ins[0]);
  const Shape& shape = cx.var(e.outs[0]).shape;
  if (over_placement) {  // stride 0 over the clients
    std::vector<int64_t> st = strides_of(shape);
    if (st.empty()) return std::nullopt;
    st[0] = 0;
    return merged(shape, st, 0);
  }
  const auto* dims = param_ints(e, "dims");
  if (!dims || dims->size() != x.shape.size()) return std::nullopt;
  for (int64_t d : *dims)
    if (d < 0 || static_cast<size_t>(d) >= shape.size()) return std::nullopt;
  return merged(shape, broadcast_strides(x.shape, shape.size(), *dims), 0);
}

void add_shape_kernels(KernelTable& t) {
  t[&prims::reshape()] = view;
  t[&prims::place()] = view;
  t[&prims::stop_gradient()] = view;
  t[&prims::transpose()] = transpose;
  t[&prims::broadcast_in_dim()] = broadcast_in_dim;
  t[&prims::slice()] = slice;
  t[&prims::concatenate()] = concatenate;
  t[&prims::broadcast()] = broadcast_in_dim;  // [n, ...] copies: stride 0 over the clients
}

}  // namespace drx::exec
