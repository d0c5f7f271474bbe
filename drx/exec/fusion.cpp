// Fusion of elementwise chains. A tree of float elementwise equations (unary
// and binary arithmetic) whose intermediate results each have exactly one
// reader, inside the tree, runs as one kernel at the tree's root: the result
// is computed in blocks small enough for L1, every operation of the tree
// running over a block before the next block starts, so the intermediates
// never reach memory. Each operation is the same scalar function as unfused,
// in the same precision, so results are bitwise unchanged.
//
// Operands from outside the tree are read in full or, when they are a
// broadcast of one element, as a scalar. Equations reading a broadcast row or
// column keep their own kernel.
#include <algorithm>
#include <map>

#include "drx/exec/kernels.h"

namespace drx::exec {
namespace {

constexpr int64_t kBlock = 256;
constexpr size_t kMaxOps = 32;

template <class T>
using BlockFn = BlockLoop<T>;

// The float arithmetic a fused tree can hold: a primitive that states its
// scalar function (not a comparison) for operands of its result's dtype.
const ScalarKernel* fusible_kernel(const Eqn& e) {
  const ScalarKernel* k = e.prim->scalar_kernel();
  if (!k || k->predicate() || static_cast<size_t>(k->arity()) != e.ins.size()) return nullptr;
  return k;
}

// Where an op finds an operand: a temporary of the kernel, or input k (read in
// full, or as a scalar).
struct Src {
  enum Kind { temp, full, scalar } kind = full;
  int index = 0;
};

template <class T>
struct Step {
  BlockFn<T> fn = nullptr;
  Src a, b;
  int dst = -1;  // temporary written; -1 for the root (the result)
};

template <class T>
class FusedKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::elementwise; }

 public:
  FusedKernel(std::vector<int> inputs, int out, int64_t n, std::vector<Step<T>> steps)
      : inputs_(std::move(inputs)), out_(out), n_(n), steps_(std::move(steps)) {}

  void run(Frame& f) const override {
    const T* in[kMaxOps * 2];
    for (size_t k = 0; k < inputs_.size(); ++k) in[k] = f.in<T>(inputs_[k]);
    T* y = f.out<T>(out_);
    alignas(64) T tmp[kMaxOps][kBlock];
    for (int64_t i0 = 0; i0 < n_; i0 += kBlock) {
      const int64_t w = std::min(kBlock, n_ - i0);
      auto ptr = [&](const Src& s) -> const T* {
        if (s.kind == Src::temp) return tmp[s.index];
        if (s.kind == Src::full) return in[s.index] + i0;
        return in[s.index];
      };
      for (const Step<T>& st : steps_)
        st.fn(ptr(st.a), st.b.index >= 0 ? ptr(st.b) : nullptr, st.dst < 0 ? y + i0 : tmp[st.dst],
              w);
    }
  }

 private:
  std::vector<int> inputs_;
  int out_;
  int64_t n_;
  std::vector<Step<T>> steps_;
};

// How equation operand v is read by a fused op: the variable and whether in
// full; nullopt when only a kernel of its own can read it (a row or column).
std::optional<std::pair<int, bool>> outside_operand(int v, const CompileContext& cx) {
  const Eqn* b = cx.producer_of(v);
  std::optional<Layout> l = b ? broadcast_layout(*b, cx) : std::nullopt;
  if (!l) return std::pair<int, bool>(v, true);
  if (l->shape.empty() || (l->shape.size() == 1 && l->stride[0] == 0))
    return std::pair<int, bool>(b->ins[0], false);
  if (l->shape.size() == 1 && l->stride[0] == 1) return std::pair<int, bool>(b->ins[0], true);
  return std::nullopt;
}

template <class T>
std::unique_ptr<Kernel> build_kernel(const std::vector<size_t>& members, const CompileContext& cx,
                                     std::vector<int>& reads) {
  const Program& p = cx.program;
  std::map<int, int> temp_of;                  // member result -> temporary
  std::map<std::pair<int, bool>, int> inputs;  // (variable, full) -> input index
  std::vector<int> input_vars;
  std::vector<Step<T>> steps;
  for (size_t m = 0; m < members.size(); ++m) {
    const Eqn& e = p.eqns[members[m]];
    const ScalarKernel& op = *fusible_kernel(e);
    Step<T> st;
    Src srcs[2];
    srcs[1].index = -1;
    bool full[2] = {true, true};
    for (size_t k = 0; k < e.ins.size(); ++k) {
      auto t = temp_of.find(e.ins[k]);
      if (t != temp_of.end()) {
        srcs[k] = Src{Src::temp, t->second};
        continue;
      }
      std::pair<int, bool> o = *outside_operand(e.ins[k], cx);
      auto [it, added] = inputs.emplace(o, static_cast<int>(input_vars.size()));
      if (added) input_vars.push_back(o.first);
      srcs[k] = Src{o.second ? Src::full : Src::scalar, it->second};
      full[k] = o.second;
    }
    st.fn = op.loop<T>(full[0], full[1]);
    st.a = srcs[0];
    st.b = srcs[1];
    if (m + 1 < members.size()) {
      st.dst = static_cast<int>(m);
      temp_of[e.outs[0]] = st.dst;
    }
    steps.push_back(st);
  }
  reads = input_vars;
  const Eqn& root = p.eqns[members.back()];
  const int64_t n = num_elements(cx.var(root.outs[0]).shape);
  return std::make_unique<FusedKernel<T>>(std::move(input_vars), root.outs[0], n, std::move(steps));
}

}  // namespace

void fuse_elementwise(const CompileContext& cx, std::vector<EqnChoice>& choices,
                      std::vector<std::unique_ptr<Kernel>>& kernels, ExecStats& stats) {
  const Program& p = cx.program;
  const size_t num_eqns = p.eqns.size();
  // fusible[i]: equation i runs a plain elementwise kernel a fused op can replace.
  std::vector<bool> fusible(num_eqns, false);
  for (size_t i = 0; i < num_eqns; ++i) {
    const Eqn& e = p.eqns[i];
    const EqnChoice& c = choices[i];
    if (!c.live || c.fallback || c.alias != Alias::elementwise || e.outs.size() != 1) continue;
    const ScalarKernel* op = fusible_kernel(e);
    const DType dt = cx.var(e.outs[0]).dtype;
    if (!op || !is_floating(dt) || !op->covers(dt)) continue;
    bool ok = true;
    for (int v : e.ins) ok = ok && cx.var(v).dtype == dt && outside_operand(v, cx).has_value();
    fusible[i] = ok;
  }
  // group[i]: the members of the tree rooted at i, in program order.
  std::vector<std::vector<size_t>> group(num_eqns);
  for (size_t i = 0; i < num_eqns; ++i) {
    if (!fusible[i]) continue;
    const Eqn& e = p.eqns[i];
    const int64_t n = num_elements(cx.var(e.outs[0]).shape);
    std::vector<size_t> members;
    for (size_t k = 0; k < e.ins.size(); ++k) {
      const int v = e.ins[k];
      const int src = cx.producer[static_cast<size_t>(v)];
      if (src < 0 || !fusible[static_cast<size_t>(src)] || cx.uses[static_cast<size_t>(v)] != 1 ||
          num_elements(cx.var(v).shape) != n || group[static_cast<size_t>(src)].empty())
        continue;
      std::vector<size_t>& sub = group[static_cast<size_t>(src)];
      if (members.size() + sub.size() + 1 > kMaxOps) continue;
      members.insert(members.end(), sub.begin(), sub.end());
      sub.clear();
    }
    std::sort(members.begin(), members.end());
    members.push_back(i);
    group[i] = std::move(members);
  }
  for (size_t i = 0; i < num_eqns; ++i) {
    const std::vector<size_t>& members = group[i];
    if (members.size() < 2) continue;
    std::vector<int> reads;
    if (cx.var(p.eqns[i].outs[0]).dtype == DType::f32)
      kernels[i] = build_kernel<float>(members, cx, reads);
    else
      kernels[i] = build_kernel<double>(members, cx, reads);
    choices[i].reads = std::move(reads);
    for (size_t m : members)
      if (m != i) {
        choices[m].live = false;
        kernels[m].reset();
      }
    stats.fused += members.size() - 1;
  }
}

}  // namespace drx::exec
