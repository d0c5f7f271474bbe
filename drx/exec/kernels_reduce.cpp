// Reduction kernels.
//
// sum/max/min over one contiguous block of axes: the input is [outer, R, inner]
// and each output element folds its R inputs in increasing order, accumulating
// sums in double exactly as the reference does, so results are bitwise equal to
// it. max and min fold in T itself: they are exact, so the double the reference
// folds in holds the same values.
//
// reduce_sum/max/min over a placement: the canonical binary tree over client
// indices of drx/mapreduce/primitives.cpp (see tree_stack.h), again bit for
// bit, whichever devices reduce which clients.
#include <algorithm>
#include <cstring>
#include <limits>

#include "drx/core/scalar_kernel.h"
#include "drx/exec/kernels.h"
#include "drx/exec/sharding.h"
#include "drx/exec/spares.h"
#include "drx/exec/tree_stack.h"
#include "drx/ops/row_sums.h"

namespace drx::exec {
namespace {

template <class T, ReduceKind K>
class AxisReduceKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::reduction; }

  using Acc = std::conditional_t<K == ReduceKind::sum, double, T>;

 public:
  AxisReduceKernel(const Eqn& e, int64_t outer, int64_t r, int64_t inner)
      : x_(e.ins[0]), y_(e.outs[0]), outer_(outer), r_(r), inner_(inner) {}

  void run(Frame& f) const override {
    const T* x = f.in<T>(x_);
    T* y = f.out<T>(y_);
    if (inner_ == 1) {
      reduce_rows(x, y);
      return;
    }
    for (int64_t o = 0; o < outer_; ++o) {
      const T* plane = x + o * r_ * inner_;
      for (int64_t j0 = 0; j0 < inner_; j0 += kColumns)
        reduce_columns(plane + j0, r_, inner_, std::min(kColumns, inner_ - j0),
                       y + o * inner_ + j0);
    }
  }

 private:
  // Blocks of the inner axis keep the accumulators on the stack while the loop over it
  // vectorises (compiled for AVX-512 and AVX2 too: each column still folds its elements in
  // increasing order, so the bits are the same).
  static constexpr int64_t kColumns = 256;
  DRX_VECTOR_CLONES static void reduce_columns(const T* x, int64_t r, int64_t stride, int64_t w,
                                               T* y) {
    Acc acc[kColumns];
    for (int64_t j = 0; j < w; ++j) acc[j] = reduce_identity<T, Acc>(K);
    for (int64_t k = 0; k < r; ++k) {
      const T* src = x + k * stride;
      for (int64_t j = 0; j < w; ++j) reduce_fold<K>(acc[j], static_cast<Acc>(src[j]));
    }
    for (int64_t j = 0; j < w; ++j) y[j] = static_cast<T>(acc[j]);
  }

  // Each row folds its elements in increasing order, as the reference does; kRows rows advance
  // together so that their accumulations are independent chains the core overlaps, instead of
  // one row's adds waiting on each other.
  void reduce_rows(const T* x, T* y) const {
    constexpr int64_t kRows = 8;
    int64_t o = 0;
    if constexpr (std::is_same_v<T, float> && K == ReduceKind::sum)
      for (; o + row_sums::kSumRows <= outer_; o += row_sums::kSumRows) {
        double s[row_sums::kSumRows];
        row_sums::sum_rows_f64(x + o * r_, r_, r_, s);
        for (int k = 0; k < row_sums::kSumRows; ++k) y[o + k] = static_cast<float>(s[k]);
      }
    for (; o + kRows <= outer_; o += kRows) {
      const T* rows = x + o * r_;
      Acc acc[kRows];
      for (int64_t j = 0; j < kRows; ++j) acc[j] = reduce_identity<T, Acc>(K);
      for (int64_t k = 0; k < r_; ++k)
        for (int64_t j = 0; j < kRows; ++j)
          reduce_fold<K>(acc[j], static_cast<Acc>(rows[j * r_ + k]));
      for (int64_t j = 0; j < kRows; ++j) y[o + j] = static_cast<T>(acc[j]);
    }
    for (; o < outer_; ++o) {
      const T* row = x + o * r_;
      Acc a = reduce_identity<T, Acc>(K);
      for (int64_t k = 0; k < r_; ++k) reduce_fold<K>(a, static_cast<Acc>(row[k]));
      y[o] = static_cast<T>(a);
    }
  }

  int x_, y_;
  int64_t outer_, r_, inner_;
};

template <ReduceKind K>
std::optional<KernelSpec> axis_reduce(const Eqn& e, const CompileContext& cx) {
  const VarInfo& x = cx.var(e.ins[0]);
  const auto* axes = param_ints(e, "axes");
  if (!axes || !is_floating(x.dtype)) return std::nullopt;
  int64_t outer = 1, r = 1, inner = 1;
  if (!axes->empty()) {
    const int64_t first = axes->front(), last = axes->back();
    if (last - first + 1 != static_cast<int64_t>(axes->size())) return std::nullopt;
    for (int64_t d = 0; d < static_cast<int64_t>(x.shape.size()); ++d) {
      const int64_t s = x.shape[static_cast<size_t>(d)];
      (d < first ? outer : d <= last ? r : inner) *= s;
    }
  } else {
    outer = num_elements(x.shape);
  }
  if (x.dtype == DType::f32)
    return spec<AxisReduceKernel<float, K>>(Alias::none, e, outer, r, inner);
  return spec<AxisReduceKernel<double, K>>(Alias::none, e, outer, r, inner);
}

// ---- over a placement --------------------------------------------------------
// Each shard of clients (a device's, or a thread's) is pushed into its own
// TreeStack, and the shards' stacks into one, in client order.
class PlacementReduceKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::reduction; }

 public:
  PlacementReduceKernel(const Eqn& e, const CompileContext& cx, ReduceKind kind)
      : x_(e.ins[0]),
        y_(e.outs[0]),
        clients_(cx.var(e.ins[0]).shape[0]),
        width_(num_elements(cx.var(e.outs[0]).shape)),
        row_bytes_(static_cast<size_t>(width_) * dtype_size(cx.var(e.ins[0]).dtype)),
        prototype_(make_row_reducer(cx.var(e.ins[0]).dtype, kind, width_)),
        sharding_(cx.mesh, cx.program.type_of(e.ins[0]).placement),
        op_(e.prim->name()) {}

  bool valid() const { return prototype_ != nullptr; }

  void run(Frame& f) const override {
    const auto* x = static_cast<const std::byte*>(f.in(x_));
    void* y = f.out(y_);
    std::vector<std::unique_ptr<RowReducer>> shards(
        static_cast<size_t>(sharding_.shards(clients_)));
    sharding_.run(clients_, [&](int64_t s, int64_t lo, int64_t hi) {
      auto stack = take_stack();
      for (int64_t c = lo; c < hi; ++c) stack->push_row(c, x + static_cast<size_t>(c) * row_bytes_);
      shards[static_cast<size_t>(s)] = std::move(stack);
    });
    auto all = take_stack();
    for (const auto& s : shards) all->push_blocks(*s);
    sharding_.reduce(*all, y, op_);
    for (auto& s : shards) stacks_.give_back(std::move(s));
    stacks_.give_back(std::move(all));
  }

 private:
  int x_, y_;
  int64_t clients_, width_;
  size_t row_bytes_;
  std::unique_ptr<RowReducer> prototype_;
  Sharding sharding_;
  std::string op_;
  Spares<RowReducer> stacks_;  // kept between calls, cleared when taken

  std::unique_ptr<RowReducer> take_stack() const {
    auto stack = stacks_.take([&] { return prototype_->empty_like(); });
    stack->clear();
    return stack;
  }
};

template <ReduceKind K>
std::optional<KernelSpec> placement_reduce(const Eqn& e, const CompileContext& cx) {
  if (cx.var(e.ins[0]).shape.empty()) return std::nullopt;
  auto kernel = std::make_unique<PlacementReduceKernel>(e, cx, K);
  if (!kernel->valid()) return std::nullopt;
  return KernelSpec{std::move(kernel), Alias::none, std::nullopt};
}

template <class T>
std::unique_ptr<RowReducer> typed_reducer(ReduceKind kind, int64_t width) {
  if (kind == ReduceKind::sum) return std::make_unique<TreeStack<T, ReduceKind::sum>>(width);
  if (kind == ReduceKind::max) return std::make_unique<TreeStack<T, ReduceKind::max>>(width);
  return std::make_unique<TreeStack<T, ReduceKind::min>>(width);
}

}  // namespace

std::unique_ptr<RowReducer> make_row_reducer(DType dtype, ReduceKind kind, int64_t width) {
  switch (dtype) {
    case DType::f32:
      return typed_reducer<float>(kind, width);
    case DType::f64:
      return typed_reducer<double>(kind, width);
    case DType::i32:
      return typed_reducer<int32_t>(kind, width);
    case DType::i64:
      return typed_reducer<int64_t>(kind, width);
    case DType::u32:
      return typed_reducer<uint32_t>(kind, width);
    default:
      return nullptr;
  }
}

std::optional<KernelSpec> reduction_kernel(const Eqn& e, const CompileContext& cx) {
  const ReduceKind kind = *e.prim->reduction();
  return dispatch_reduce(kind, [&](auto k) {
    return e.prim->placement_aware() ? placement_reduce<k()>(e, cx) : axis_reduce<k()>(e, cx);
  });
}

}  // namespace drx::exec
