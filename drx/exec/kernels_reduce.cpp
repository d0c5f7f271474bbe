// Reduction kernels.
//
// sum/max/min over one contiguous block of axes: the input is [outer, R, inner]
// and each output element folds its R inputs in increasing order, accumulating
// in double exactly as the reference does, so results are bitwise equal to it.
//
// reduce_sum/max/min over a placement: the canonical binary tree over client
// indices of drx/mapreduce/primitives.cpp (split at the largest power of two
// below the count, left operand first), again bit for bit.
#include <algorithm>
#include <cstring>
#include <limits>

#include "drx/exec/kernels.h"

namespace drx::exec {
namespace {

enum class Kind { sum, max, min };

template <Kind K>
inline void fold(double& a, double v) {
  if constexpr (K == Kind::sum)
    a += v;
  else if constexpr (K == Kind::max) {
    if (v > a || v != v) a = v;
  } else {
    if (v < a || v != v) a = v;
  }
}

template <Kind K>
constexpr double identity() {
  if constexpr (K == Kind::sum) return 0.0;
  if constexpr (K == Kind::max) return -std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::infinity();
}

template <class T, Kind K>
class AxisReduceKernel : public Kernel {
 public:
  AxisReduceKernel(const Eqn& e, int64_t outer, int64_t r, int64_t inner)
      : x_(e.ins[0]), y_(e.outs[0]), outer_(outer), r_(r), inner_(inner) {}

  void run(Frame& f) const override {
    const T* x = f.in<T>(x_);
    T* y = f.out<T>(y_);
    if (inner_ == 1) {
      for (int64_t o = 0; o < outer_; ++o) {
        const T* row = x + o * r_;
        double a = identity<K>();
        for (int64_t k = 0; k < r_; ++k) fold<K>(a, static_cast<double>(row[k]));
        y[o] = static_cast<T>(a);
      }
      return;
    }
    // Blocks of the inner axis keep the accumulators on the stack while the
    // loop over it vectorises.
    constexpr int64_t kBlock = 256;
    double acc[kBlock];
    for (int64_t o = 0; o < outer_; ++o) {
      const T* plane = x + o * r_ * inner_;
      for (int64_t j0 = 0; j0 < inner_; j0 += kBlock) {
        const int64_t w = std::min(kBlock, inner_ - j0);
        for (int64_t j = 0; j < w; ++j) acc[j] = identity<K>();
        for (int64_t k = 0; k < r_; ++k) {
          const T* src = plane + k * inner_ + j0;
          for (int64_t j = 0; j < w; ++j) fold<K>(acc[j], static_cast<double>(src[j]));
        }
        T* dst = y + o * inner_ + j0;
        for (int64_t j = 0; j < w; ++j) dst[j] = static_cast<T>(acc[j]);
      }
    }
  }

 private:
  int x_, y_;
  int64_t outer_, r_, inner_;
};

template <Kind K>
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
template <class T, Kind K>
inline T combine(T a, T b) {
  if constexpr (K == Kind::sum) return static_cast<T>(a + b);
  if constexpr (K == Kind::max) return a > b || a != a ? a : b;
  return a < b || a != a ? a : b;
}

// Rows [lo, hi) reduced into out; scratch holds one row per tree level below.
template <class T, Kind K>
void tree_reduce(const T* rows, int64_t lo, int64_t hi, int64_t width, T* out, T* scratch) {
  if (hi - lo == 1) {
    std::memcpy(out, rows + lo * width, static_cast<size_t>(width) * sizeof(T));
    return;
  }
  int64_t half = 1;
  while (half * 2 < hi - lo) half *= 2;
  tree_reduce<T, K>(rows, lo, lo + half, width, out, scratch);
  tree_reduce<T, K>(rows, lo + half, hi, width, scratch, scratch + width);
  for (int64_t k = 0; k < width; ++k) out[k] = combine<T, K>(out[k], scratch[k]);
}

template <class T, Kind K>
class PlacementReduceKernel : public Kernel {
 public:
  PlacementReduceKernel(const Eqn& e, int64_t clients, int64_t width)
      : x_(e.ins[0]), y_(e.outs[0]), clients_(clients), width_(width) {
    int64_t depth = 0;
    for (int64_t c = 1; c < clients; c *= 2) ++depth;
    scratch_rows_ = depth + 1;
  }
  void run(Frame& f) const override {
    T* y = f.out<T>(y_);
    if (clients_ == 0) {
      std::fill(y, y + width_, T{0});
      return;
    }
    if (width_ == 0) return;
    std::vector<T> scratch(static_cast<size_t>(scratch_rows_ * width_));
    tree_reduce<T, K>(f.in<T>(x_), 0, clients_, width_, y, scratch.data());
  }

 private:
  int x_, y_;
  int64_t clients_, width_, scratch_rows_ = 1;
};

template <Kind K>
std::optional<KernelSpec> placement_reduce(const Eqn& e, const CompileContext& cx) {
  const VarInfo& x = cx.var(e.ins[0]);
  if (x.shape.empty()) return std::nullopt;
  const int64_t clients = x.shape[0], width = num_elements(cx.var(e.outs[0]).shape);
  if (x.dtype == DType::f32)
    return spec<PlacementReduceKernel<float, K>>(Alias::none, e, clients, width);
  if (x.dtype == DType::f64)
    return spec<PlacementReduceKernel<double, K>>(Alias::none, e, clients, width);
  return std::nullopt;
}

}  // namespace

void add_reduce_kernels(KernelTable& t) {
  t["sum"] = axis_reduce<Kind::sum>;
  t["max"] = axis_reduce<Kind::max>;
  t["min"] = axis_reduce<Kind::min>;
  t["reduce_sum"] = placement_reduce<Kind::sum>;
  t["reduce_max"] = placement_reduce<Kind::max>;
  t["reduce_min"] = placement_reduce<Kind::min>;
}

}  // namespace drx::exec
