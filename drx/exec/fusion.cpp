// Fusion of elementwise chains. A tree of float elementwise equations whose
// intermediate results each have exactly one reader, inside the tree, runs as
// one kernel at the tree's root: the result is computed in blocks small enough
// for L1, every operation of the tree running over a block before the next
// block starts, so the intermediates never reach memory. Each operation is the
// same scalar function as unfused, in the same precision, so results are
// bitwise unchanged.
//
// A tree computes in f64, or in f32 with some of its values stored as bf16: a
// bf16 operation computes in f32 and rounds its block to bf16 (and back), as
// the reference computes bf16 (Primitive::evaluate); conversions between f32
// and bf16 are members too (a rounding, or nothing), so a mixed-precision
// chain such as gelu(x) then astype(bf16) is one pass.
//
// Operands from outside the tree are read in full or, when they are a
// broadcast of one element, as a scalar. Equations reading a broadcast row or
// column keep their own kernel.
#include <algorithm>
#include <map>

#include "drx/array/half.h"
#include "drx/exec/kernels.h"
#include "drx/ops/primitives.h"

namespace drx::exec {
namespace {

constexpr int64_t kBlock = 256;
constexpr size_t kMaxOps = 32;

// The float arithmetic a fused tree can hold: a primitive that states its
// scalar function (not a comparison) for operands of its result's dtype.
const ScalarKernel* fusible_kernel(const Eqn& e) {
  const ScalarKernel* k = e.prim->scalar_kernel();
  if (!k || k->predicate() || static_cast<size_t>(k->arity()) != e.ins.size()) return nullptr;
  return k;
}

// A conversion between f32 and bf16: a member that rounds (to bf16) or does nothing (to f32).
bool is_bf16_cast(const Eqn& e, const CompileContext& cx) {
  if (e.prim != &prims::convert() || e.ins.size() != 1 || e.outs.size() != 1) return false;
  const DType from = cx.var(e.ins[0]).dtype, to = cx.var(e.outs[0]).dtype;
  return (from == DType::f32 && to == DType::bf16) || (from == DType::bf16 && to == DType::f32);
}

template <class T>
void copy_block(const T* a, const T*, T* y, int64_t n) {
  std::copy(a, a + n, y);
}

// Where an op finds an operand: a temporary of the kernel, or input k (read in
// full, or as a scalar).
struct Src {
  enum Kind { temp, full, scalar } kind = full;
  int index = 0;
};

template <class T>
struct Step {
  BlockLoop<T> fn = nullptr;
  Src a, b;
  int dst = -1;        // temporary written; -1 for the root (the result)
  bool round = false;  // the op's result is bf16: rounded after it runs
};

// One input of the kernel: read in full or as one scalar, stored as T or as bf16.
struct Input {
  int var = -1;
  bool full = true;
  bool bf16 = false;
};

// T: the type the ops compute in (float or double); bf16 values (with T float)
// are widened as they are read and rounded as they are written.
template <class T>
class FusedKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::elementwise; }

 public:
  FusedKernel(std::vector<Input> inputs, int out, bool out_bf16, int64_t n,
              std::vector<Step<T>> steps)
      : inputs_(std::move(inputs)),
        out_(out),
        out_bf16_(out_bf16),
        n_(n),
        steps_(std::move(steps)) {
    for (const Input& in : inputs_) any_bf16_input_ = any_bf16_input_ || in.bf16;
  }

  void run(Frame& f) const override {
    const size_t num_inputs = inputs_.size();
    const void* in[kMaxOps * 2];
    for (size_t k = 0; k < num_inputs; ++k) in[k] = f.in(inputs_[k].var);
    void* y = f.out(out_);
    alignas(64) T tmp[kMaxOps][kBlock];
    alignas(64) T root[kBlock];
    // bf16 inputs widened: a block at a time, or a scalar once.
    alignas(64) T wide[kMaxOps * 2][kBlock];
    if (any_bf16_input_)
      for (size_t k = 0; k < num_inputs; ++k)
        if (inputs_[k].bf16 && !inputs_[k].full)
          wide[k][0] = static_cast<T>(bf16_to_float(*static_cast<const uint16_t*>(in[k])));
    for (int64_t i0 = 0; i0 < n_; i0 += kBlock) {
      const int64_t w = std::min(kBlock, n_ - i0);
      if (any_bf16_input_)
        for (size_t k = 0; k < num_inputs; ++k)
          if (inputs_[k].bf16 && inputs_[k].full) {
            const uint16_t* x = static_cast<const uint16_t*>(in[k]) + i0;
            for (int64_t j = 0; j < w; ++j) wide[k][j] = static_cast<T>(bf16_to_float(x[j]));
          }
      auto ptr = [&](const Src& s) -> const T* {
        if (s.kind == Src::temp) return tmp[s.index];
        const Input& input = inputs_[static_cast<size_t>(s.index)];
        if (input.bf16) return wide[s.index];
        const T* x = static_cast<const T*>(in[s.index]);
        return s.kind == Src::full ? x + i0 : x;
      };
      for (const Step<T>& st : steps_) {
        const T* a = ptr(st.a);
        const T* b = st.b.index >= 0 ? ptr(st.b) : nullptr;
        if (st.dst >= 0) {
          T* dst = tmp[st.dst];
          st.fn(a, b, dst, w);
          if (st.round)
            for (int64_t j = 0; j < w; ++j)
              dst[j] = static_cast<T>(bf16_to_float(float_to_bf16(static_cast<float>(dst[j]))));
        } else if (out_bf16_) {
          st.fn(a, b, root, w);
          uint16_t* out = static_cast<uint16_t*>(y) + i0;
          for (int64_t j = 0; j < w; ++j) out[j] = float_to_bf16(static_cast<float>(root[j]));
        } else {
          st.fn(a, b, static_cast<T*>(y) + i0, w);
        }
      }
    }
  }

 private:
  std::vector<Input> inputs_;
  int out_;
  bool out_bf16_;
  int64_t n_;
  std::vector<Step<T>> steps_;
  bool any_bf16_input_ = false;
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
  std::vector<Input> input_list;
  std::vector<Step<T>> steps;
  for (size_t m = 0; m < members.size(); ++m) {
    const Eqn& e = p.eqns[members[m]];
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
      auto [it, added] = inputs.emplace(o, static_cast<int>(input_list.size()));
      if (added)
        input_list.push_back(Input{o.first, o.second, cx.var(o.first).dtype == DType::bf16});
      srcs[k] = Src{o.second ? Src::full : Src::scalar, it->second};
      full[k] = o.second;
    }
    if (const ScalarKernel* op = fusible_kernel(e))
      st.fn = op->loop<T>(full[0], full[1]);
    else  // a cast: its value is its operand's, rounded when it is to bf16
      st.fn = copy_block<T>;
    st.a = srcs[0];
    st.b = srcs[1];
    st.round = cx.var(e.outs[0]).dtype == DType::bf16;
    if (m + 1 < members.size()) {
      st.dst = static_cast<int>(m);
      temp_of[e.outs[0]] = st.dst;
    }
    steps.push_back(st);
  }
  reads.clear();
  for (const Input& in : input_list) reads.push_back(in.var);
  const Eqn& root = p.eqns[members.back()];
  const int64_t n = num_elements(cx.var(root.outs[0]).shape);
  return std::make_unique<FusedKernel<T>>(std::move(input_list), root.outs[0],
                                          cx.var(root.outs[0]).dtype == DType::bf16, n,
                                          std::move(steps));
}

std::unique_ptr<Kernel> build_any(const std::vector<size_t>& members, const CompileContext& cx,
                                  std::vector<int>& reads) {
  if (cx.var(cx.program.eqns[members.back()].outs[0]).dtype == DType::f64)
    return build_kernel<double>(members, cx, reads);
  return build_kernel<float>(members, cx, reads);
}

// Equation i runs as (part of) a fused kernel: arithmetic on f32, f64 or bf16 with every
// operand of the result's dtype, or a cast between f32 and bf16; operands read in full or as
// a scalar (a cast: in full).
bool can_fuse(size_t i, const CompileContext& cx) {
  const Eqn& e = cx.program.eqns[i];
  if (e.outs.size() != 1) return false;
  const DType dt = cx.var(e.outs[0]).dtype;
  if (is_bf16_cast(e, cx)) {
    const std::optional<std::pair<int, bool>> o = outside_operand(e.ins[0], cx);
    return o && o->second;
  }
  const ScalarKernel* op = fusible_kernel(e);
  if (!op) return false;
  if (dt != DType::f32 && dt != DType::f64 && dt != DType::bf16) return false;
  if (!op->covers(compute_dtype(dt))) return false;
  for (int v : e.ins)
    if (cx.var(v).dtype != dt || !outside_operand(v, cx)) return false;
  return true;
}

// The type a member computes in: f64 trees and f32/bf16 trees do not mix.
bool computes_f64(size_t i, const CompileContext& cx) {
  return cx.var(cx.program.eqns[i].outs[0]).dtype == DType::f64;
}

}  // namespace

std::optional<KernelSpec> bf16_elementwise(const Eqn& e, const CompileContext& cx) {
  if (e.outs.size() != 1) return std::nullopt;
  const int index = cx.producer[static_cast<size_t>(e.outs[0])];
  if (index < 0 || cx.var(e.outs[0]).dtype != DType::bf16 ||
      !can_fuse(static_cast<size_t>(index), cx) || !fusible_kernel(e))
    return std::nullopt;
  std::vector<int> reads;
  std::unique_ptr<Kernel> k = build_any({static_cast<size_t>(index)}, cx, reads);
  return KernelSpec{std::move(k), Alias::elementwise, std::move(reads)};
}

void fuse_elementwise(const CompileContext& cx, std::vector<EqnChoice>& choices,
                      std::vector<std::unique_ptr<Kernel>>& kernels, ExecStats& stats) {
  const Program& p = cx.program;
  const size_t num_eqns = p.eqns.size();
  // fusible[i]: equation i runs a plain elementwise kernel (or a cast's) a fused op can
  // replace (not, say, an add that became a gemm accumulating into its operand).
  std::vector<bool> fusible(num_eqns, false);
  for (size_t i = 0; i < num_eqns; ++i) {
    const Eqn& e = p.eqns[i];
    const EqnChoice& c = choices[i];
    if (!c.live || c.fallback || e.outs.size() != 1) continue;
    if (c.alias != Alias::elementwise && !is_bf16_cast(e, cx)) continue;
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
          num_elements(cx.var(v).shape) != n || group[static_cast<size_t>(src)].empty() ||
          computes_f64(static_cast<size_t>(src), cx) != computes_f64(i, cx))
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
