// take and scatter: rows moved by byte copies straight between the operands
// (the fallback would first copy a whole unowned operand, e.g. a dataset a
// map_fn body reads through a broadcast, into an Array). Indices are checked
// as the primitives check them: -n <= i < n, negative ones counted from the end.
#include <cstring>

#include "drx/exec/kernels.h"
#include "drx/ops/primitives.h"

namespace drx::exec {
namespace {

// x seen along the indexed axis: outer rows of n slices of row_bytes each.
struct IndexedAxis {
  int64_t axis = 0, n = 0, outer = 1, count = 0;  // count: how many indices
  size_t row_bytes = 0;
  bool wide = false;  // i64 indices (else i32)

  IndexedAxis(const CompileContext& cx, int x, int idx, int64_t a) : axis(a) {
    const VarInfo& xv = cx.var(x);
    n = xv.shape[static_cast<size_t>(axis)];
    for (int64_t d = 0; d < axis; ++d) outer *= xv.shape[static_cast<size_t>(d)];
    size_t inner = 1;
    for (size_t d = static_cast<size_t>(axis) + 1; d < xv.shape.size(); ++d)
      inner *= static_cast<size_t>(xv.shape[d]);
    row_bytes = inner * dtype_size(xv.dtype);
    count = num_elements(cx.var(idx).shape);
    wide = cx.var(idx).dtype == DType::i64;
  }

  // Index j, checked and wrapped to [0, n).
  int64_t at(const char* op, const void* idx, int64_t j) const {
    int64_t i = wide ? static_cast<const int64_t*>(idx)[j] : static_cast<const int32_t*>(idx)[j];
    if (i < -n || i >= n)
      throw Error(std::string(op) + ": index " + std::to_string(i) + " is out of range for axis " +
                  std::to_string(axis) + " of size " + std::to_string(n) + " (valid: -" +
                  std::to_string(n) + " <= index < " + std::to_string(n) + ")");
    return i < 0 ? i + n : i;
  }
};

class TakeKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::copy; }

 public:
  TakeKernel(const Eqn& e, const CompileContext& cx, int64_t axis)
      : x_(e.ins[0]), idx_(e.ins[1]), y_(e.outs[0]), a_(cx, x_, idx_, axis) {}

  void run(Frame& f) const override {
    const auto* x = static_cast<const std::byte*>(f.in(x_));
    auto* y = static_cast<std::byte*>(f.out(y_));
    const void* idx = f.in(idx_);
    for (int64_t j = 0; j < a_.count; ++j) {
      const int64_t i = a_.at("take", idx, j);
      for (int64_t o = 0; o < a_.outer; ++o)
        std::memcpy(y + static_cast<size_t>(o * a_.count + j) * a_.row_bytes,
                    x + static_cast<size_t>(o * a_.n + i) * a_.row_bytes, a_.row_bytes);
    }
  }

 private:
  int x_, idx_, y_;
  IndexedAxis a_;
};

// scatter (set): y = x, then each update row copied to its index in index
// order, so the last of repeated indices wins, as in the primitive. y may be
// x's own buffer (Alias::first): every index is checked before anything is
// written, so a bad index leaves the operand as it was.
class ScatterKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::copy; }

 public:
  ScatterKernel(const Eqn& e, const CompileContext& cx, int64_t axis)
      : x_(e.ins[0]), idx_(e.ins[1]), upd_(e.ins[2]), y_(e.outs[0]), a_(cx, x_, idx_, axis) {
    nbytes_ = cx.var(x_).nbytes;
  }

  void run(Frame& f) const override {
    const void* idx = f.in(idx_);
    for (int64_t j = 0; j < a_.count; ++j) a_.at("scatter", idx, j);
    const auto* x = static_cast<const std::byte*>(f.in(x_));
    const auto* u = static_cast<const std::byte*>(f.in(upd_));
    auto* y = static_cast<std::byte*>(f.out(y_));
    if (y != x && nbytes_) std::memcpy(y, x, nbytes_);
    for (int64_t o = 0; o < a_.outer; ++o)
      for (int64_t j = 0; j < a_.count; ++j)
        std::memcpy(y + static_cast<size_t>(o * a_.n + a_.at("scatter", idx, j)) * a_.row_bytes,
                    u + static_cast<size_t>(o * a_.count + j) * a_.row_bytes, a_.row_bytes);
  }

 private:
  int x_, idx_, upd_, y_;
  IndexedAxis a_;
  size_t nbytes_ = 0;
};

bool integer_indices(const Eqn& e, const CompileContext& cx) {
  const DType idx = cx.var(e.ins[1]).dtype;
  return idx == DType::i32 || idx == DType::i64;
}

std::optional<KernelSpec> take(const Eqn& e, const CompileContext& cx) {
  const std::optional<int64_t> axis = param_int(e, "axis");
  if (e.ins.size() != 2 || !axis || !integer_indices(e, cx)) return std::nullopt;
  return spec<TakeKernel>(Alias::none, e, cx, *axis);
}

std::optional<KernelSpec> scatter(const Eqn& e, const CompileContext& cx) {
  const std::optional<int64_t> axis = param_int(e, "axis");
  if (e.ins.size() != 3 || !axis || !integer_indices(e, cx)) return std::nullopt;
  return spec<ScatterKernel>(Alias::first, e, cx, *axis);
}

}  // namespace

void add_index_kernels(KernelTable& t) {
  t[&prims::take()] = take;
  t[&prims::scatter()] = scatter;
}

}  // namespace drx::exec
