// Fusion of elementwise chains. A tree of float elementwise equations (unary
// and binary arithmetic on f32, f64, or bf16 computed in f32) whose intermediate results each have
// exactly one reader, inside the tree, runs as one kernel at the tree's root: the result is
// computed in blocks small enough for L1, every operation of the tree running over a block before
// the next block starts, so the intermediates never reach memory. Each operation is the same scalar
// function as unfused, in the same precision, so results are bitwise unchanged.
//
// Operands from outside the tree are read in full or, when they are a
// broadcast of one element, as a scalar. Equations reading a broadcast row or
// column keep their own kernel.
#include <algorithm>
#include <map>
#include <type_traits>

#include "drx/array/half.h"
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

// T: the type the ops compute in; S: the type values are stored in, T itself or
// the bits of bf16 (uint16_t), computed in float and rounded to bf16 after every
// op, as the reference computes bf16 (Primitive::evaluate).
template <class T, class S>
class FusedKernel : public Kernel {
  static constexpr bool kBf16 = !std::is_same_v<T, S>;

 public:
  KernelKind kind() const override { return KernelKind::elementwise; }

 public:
  FusedKernel(std::vector<int> inputs, std::vector<bool> input_full, int out, int64_t n,
              std::vector<Step<T>> steps)
      : inputs_(std::move(inputs)),
        input_full_(std::move(input_full)),
        out_(out),
        n_(n),
        steps_(std::move(steps)) {}

  void run(Frame& f) const override {
    const size_t num_inputs = inputs_.size();
    const S* in[kMaxOps * 2];
    for (size_t k = 0; k < num_inputs; ++k) in[k] = f.in<S>(inputs_[k]);
    S* y = f.out<S>(out_);
    alignas(64) T tmp[kMaxOps][kBlock];
    // bf16: the inputs widened, a block (or a scalar) at a time, and the root's result.
    alignas(64) T wide[kBf16 ? kMaxOps * 2 : 1][kBf16 ? kBlock : 1];
    alignas(64) T root[kBf16 ? kBlock : 1];
    if constexpr (kBf16)
      for (size_t k = 0; k < num_inputs; ++k)
        if (!input_full_[k]) wide[k][0] = bf16_to_float(in[k][0]);
    for (int64_t i0 = 0; i0 < n_; i0 += kBlock) {
      const int64_t w = std::min(kBlock, n_ - i0);
      if constexpr (kBf16)
        for (size_t k = 0; k < num_inputs; ++k)
          if (input_full_[k])
            for (int64_t j = 0; j < w; ++j) wide[k][j] = bf16_to_float(in[k][i0 + j]);
      auto ptr = [&](const Src& s) -> const T* {
        if (s.kind == Src::temp) return tmp[s.index];
        if constexpr (kBf16) {
          return wide[s.index];
        } else {
          if (s.kind == Src::full) return in[s.index] + i0;
          return in[s.index];
        }
      };
      for (const Step<T>& st : steps_) {
        const T* a = ptr(st.a);
        const T* b = st.b.index >= 0 ? ptr(st.b) : nullptr;
        if constexpr (kBf16) {
          T* dst = st.dst < 0 ? root : tmp[st.dst];
          st.fn(a, b, dst, w);
          if (st.dst < 0)
            for (int64_t j = 0; j < w; ++j) y[i0 + j] = float_to_bf16(dst[j]);
          else
            for (int64_t j = 0; j < w; ++j) dst[j] = bf16_to_float(float_to_bf16(dst[j]));
        } else {
          st.fn(a, b, st.dst < 0 ? y + i0 : tmp[st.dst], w);
        }
      }
    }
  }

 private:
  std::vector<int> inputs_;
  std::vector<bool> input_full_;
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

template <class T, class S = T>
std::unique_ptr<Kernel> build_kernel(const std::vector<size_t>& members, const CompileContext& cx,
                                     std::vector<int>& reads) {
  const Program& p = cx.program;
  std::map<int, int> temp_of;                  // member result -> temporary
  std::map<std::pair<int, bool>, int> inputs;  // (variable, full) -> input index
  std::vector<int> input_vars;
  std::vector<bool> input_full;
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
      if (added) {
        input_vars.push_back(o.first);
        input_full.push_back(o.second);
      }
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
  return std::make_unique<FusedKernel<T, S>>(std::move(input_vars), std::move(input_full),
                                             root.outs[0], n, std::move(steps));
}

// The dtypes fused kernels compute: f32 and f64, and bf16 (in f32, rounded after every op).
bool fusible_dtype(DType d) { return d == DType::f32 || d == DType::f64 || d == DType::bf16; }

std::unique_ptr<Kernel> build_any(const std::vector<size_t>& members, const CompileContext& cx,
                                  std::vector<int>& reads) {
  switch (cx.var(cx.program.eqns[members.back()].outs[0]).dtype) {
    case DType::f32:
      return build_kernel<float>(members, cx, reads);
    case DType::bf16:
      return build_kernel<float, uint16_t>(members, cx, reads);
    default:
      return build_kernel<double>(members, cx, reads);
  }
}

// Equation i runs as (part of) a fused kernel: arithmetic of a fusible dtype, every operand of
// the result's dtype and read in full or as a scalar.
bool can_fuse(size_t i, const CompileContext& cx) {
  const Eqn& e = cx.program.eqns[i];
  const ScalarKernel* op = fusible_kernel(e);
  if (!op || e.outs.size() != 1) return false;
  const DType dt = cx.var(e.outs[0]).dtype;
  if (!fusible_dtype(dt) || !op->covers(compute_dtype(dt))) return false;
  for (int v : e.ins)
    if (cx.var(v).dtype != dt || !outside_operand(v, cx)) return false;
  return true;
}

}  // namespace

std::optional<KernelSpec> bf16_elementwise(const Eqn& e, const CompileContext& cx) {
  if (e.outs.size() != 1) return std::nullopt;
  const int index = cx.producer[static_cast<size_t>(e.outs[0])];
  if (index < 0 || cx.var(e.outs[0]).dtype != DType::bf16 ||
      !can_fuse(static_cast<size_t>(index), cx))
    return std::nullopt;
  std::vector<int> reads;
  std::unique_ptr<Kernel> k = build_any({static_cast<size_t>(index)}, cx, reads);
  return KernelSpec{std::move(k), Alias::elementwise, std::move(reads)};
}

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
    fusible[i] = can_fuse(i, cx);
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
    kernels[i] = build_any(members, cx, reads);
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
