// The per-call frame, and the kernels every equation can fall back to.
#include <cstring>

#include "drx/core/primitive.h"
#include "drx/exec/plan.h"

namespace drx::exec {

void* Frame::out(int v) {
  const VarInfo& info = plan->vars[static_cast<size_t>(v)];
  if (info.storage == Storage::output && !raw_io) {
    hold[v] = Array(info.dtype, info.shape);
    ptr[v] = hold[v]->raw();
  }
  return ptr[v];
}

Array Frame::array(int v) const {
  const VarInfo& info = plan->vars[static_cast<size_t>(v)];
  const std::optional<Array>& h = hold[v];
  if (h && h->raw() == ptr[v] && h->dtype() == info.dtype && h->shape() == info.shape) return *h;
  Array a(info.dtype, info.shape);
  if (info.nbytes) std::memcpy(a.raw(), ptr[v], info.nbytes);
  return a;
}

void Frame::set_result(int v, Array a, const std::vector<int>& operands) {
  const VarInfo& info = plan->vars[static_cast<size_t>(v)];
  if (a.nbytes() != info.nbytes || a.dtype() != info.dtype)
    throw Error("exec: a kernel returned " + std::string(dtype_name(a.dtype())) +
                shape_str(a.shape()) + " where " + std::string(dtype_name(info.dtype)) +
                shape_str(info.shape) + " was planned");
  if (info.storage == Storage::output && raw_io) {
    if (info.nbytes) std::memcpy(ptr[v], a.raw(), info.nbytes);
    return;
  }
  // A result that shares an operand's workspace buffer would change when the
  // buffer is reused: give it its own bytes.
  for (int u : operands) {
    Storage s = plan->vars[static_cast<size_t>(u)].storage;
    if ((s == Storage::pooled || s == Storage::view) && a.raw() == ptr[u]) {
      Array copy(a.dtype(), a.shape());
      if (info.nbytes) std::memcpy(copy.raw(), a.raw(), info.nbytes);
      a = std::move(copy);
      break;
    }
  }
  ptr[v] = a.raw();
  hold[v] = std::move(a);
}

const char* kernel_kind_name(KernelKind kind) {
  switch (kind) {
    case KernelKind::gemm:
      return "gemm";
    case KernelKind::elementwise:
      return "elementwise";
    case KernelKind::reduction:
      return "reduction";
    case KernelKind::copy:
      return "copy";
    case KernelKind::interpreted:
      return "interpreted";
    case KernelKind::other:
      break;
  }
  return "other";
}

namespace {

class FallbackKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::interpreted; }

 public:
  explicit FallbackKernel(const Eqn& e) : eqn_(e) {}
  void run(Frame& f) const override {
    std::vector<Array> args;
    args.reserve(eqn_.ins.size());
    for (int v : eqn_.ins) args.push_back(f.array(v));
    std::vector<Array> r = eqn_.prim->evaluate(args, eqn_.params);
    if (r.size() != eqn_.outs.size())
      throw Error("exec: " + eqn_.prim->name() + " returned " + std::to_string(r.size()) +
                  " results, expected " + std::to_string(eqn_.outs.size()));
    for (size_t k = 0; k < r.size(); ++k) f.set_result(eqn_.outs[k], std::move(r[k]), eqn_.ins);
  }

 private:
  const Eqn& eqn_;  // lives in the Plan's program
};

class CopyKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::copy; }

 public:
  CopyKernel(int in, int out, size_t nbytes, size_t offset)
      : in_(in), out_(out), nbytes_(nbytes), offset_(offset) {}
  void run(Frame& f) const override {
    void* dst = f.out(out_);
    const void* src = static_cast<const std::byte*>(f.in(in_)) + offset_;
    if (nbytes_ && dst != src) std::memcpy(dst, src, nbytes_);
  }

 private:
  int in_, out_;
  size_t nbytes_, offset_;
};

}  // namespace

std::unique_ptr<Kernel> fallback_kernel(const Eqn& e) {
  return std::make_unique<FallbackKernel>(e);
}

std::unique_ptr<Kernel> copy_kernel(const Eqn& e, size_t nbytes, size_t offset) {
  return std::make_unique<CopyKernel>(e.ins[0], e.outs[0], nbytes, offset);
}

}  // namespace drx::exec
