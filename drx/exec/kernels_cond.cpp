// cond: both branches are compiled once, with the outer program; a call runs
// only the chosen one, directly on the operands' and results' bytes.
#include <memory>

#include "drx/exec/kernels.h"
#include "drx/transforms/cond.h"
#include "drx/transforms/cond_params.h"

namespace drx::exec {
namespace {

class CondKernel : public Kernel {
 public:
  CondKernel(const Eqn& e, Executable if_false, Executable if_true)
      : pred_(e.ins[0]), ops_(e.ins.begin() + 1, e.ins.end()), outs_(e.outs) {
    branches_[0] = std::move(if_false);
    branches_[1] = std::move(if_true);
  }
  void run(Frame& f) const override {
    const bool pred = *f.in<uint8_t>(pred_) != 0;
    std::vector<const void*> in(ops_.size());
    std::vector<void*> out(outs_.size());
    for (size_t k = 0; k < ops_.size(); ++k) in[k] = f.in(ops_[k]);
    for (size_t k = 0; k < outs_.size(); ++k) out[k] = f.out(outs_[k]);
    branches_[pred ? 1 : 0].run_raw(in.data(), out.data());
  }

 private:
  int pred_;
  std::vector<int> ops_, outs_;
  Executable branches_[2];
};

std::optional<KernelSpec> cond(const Eqn& e, const CompileContext& cx) {
  // A missing or mistyped branch throws here, at compile, rather than
  // leaving the equation to the interpreter.
  const CondParams c = CondParams::of(e);
  Executable b[2];
  for (int k = 0; k < 2; ++k) b[k] = compile(c.branch(k == 1), cx.mesh, cx.options);
  return spec<CondKernel>(Alias::none, e, std::move(b[0]), std::move(b[1]));
}

}  // namespace

void add_control_flow_kernels(KernelTable& t) { t[&prims::cond()] = cond; }

}  // namespace drx::exec
