// take: rows gathered by byte copies straight from the operand (the fallback
// would first copy a whole unowned operand, e.g. a dataset a map_fn body reads
// through a broadcast, into an Array). Indices are checked as the primitive
// checks them: -n <= i < n, negative ones counted from the end.
#include <cstring>

#include "drx/exec/kernels.h"
#include "drx/ops/primitives.h"

namespace drx::exec {
namespace {

class TakeKernel : public Kernel {
 public:
  TakeKernel(const Eqn& e, const CompileContext& cx, int64_t axis)
      : x_(e.ins[0]), idx_(e.ins[1]), y_(e.outs[0]), axis_(axis) {
    const VarInfo& x = cx.var(x_);
    n_ = x.shape[static_cast<size_t>(axis)];
    for (int64_t d = 0; d < axis; ++d) outer_ *= x.shape[static_cast<size_t>(d)];
    size_t inner = 1;
    for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d)
      inner *= static_cast<size_t>(x.shape[d]);
    row_bytes_ = inner * dtype_size(x.dtype);
    count_ = num_elements(cx.var(idx_).shape);
    wide_ = cx.var(idx_).dtype == DType::i64;
  }

  void run(Frame& f) const override {
    const auto* x = static_cast<const std::byte*>(f.in(x_));
    auto* y = static_cast<std::byte*>(f.out(y_));
    const void* idx = f.in(idx_);
    for (int64_t j = 0; j < count_; ++j) {
      int64_t i = wide_ ? static_cast<const int64_t*>(idx)[j] : static_cast<const int32_t*>(idx)[j];
      if (i < -n_ || i >= n_)
        throw Error("take: index " + std::to_string(i) + " is out of range for axis " +
                    std::to_string(axis_) + " of size " + std::to_string(n_) + " (valid: -" +
                    std::to_string(n_) + " <= index < " + std::to_string(n_) + ")");
      if (i < 0) i += n_;
      for (int64_t o = 0; o < outer_; ++o)
        std::memcpy(y + static_cast<size_t>(o * count_ + j) * row_bytes_,
                    x + static_cast<size_t>(o * n_ + i) * row_bytes_, row_bytes_);
    }
  }

 private:
  int x_, idx_, y_;
  int64_t axis_, n_ = 0, outer_ = 1, count_ = 0;
  size_t row_bytes_ = 0;
  bool wide_ = false;
};

std::optional<KernelSpec> take(const Eqn& e, const CompileContext& cx) {
  if (e.ins.size() != 2 || !e.params.has("axis")) return std::nullopt;
  const DType idx = cx.var(e.ins[1]).dtype;
  if (idx != DType::i32 && idx != DType::i64) return std::nullopt;
  return spec<TakeKernel>(Alias::none, e, cx, e.params.get_int("axis", "take"));
}

}  // namespace

void add_index_kernels(KernelTable& t) { t[&prims::take()] = take; }

}  // namespace drx::exec
