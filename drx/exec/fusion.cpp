// Fusion of elementwise chains. A group of float elementwise equations whose
// intermediate results are read only inside the group (each by one or more
// members) runs as one kernel at the group's root: the result is computed in
// blocks small enough for L1, every operation of the group running over a
// block before the next block starts, so the intermediates never reach memory.
// Each operation is the same scalar function as unfused, in the same
// precision, so results are bitwise unchanged.
//
// A group computes in f64, or in f32 with some of its values stored as bf16: a
// bf16 operation computes in f32 and rounds its block to bf16 (and back), as
// the reference computes bf16 (Primitive::evaluate); conversions between f32
// and bf16 are members too (a rounding, or nothing), so a mixed-precision
// chain such as gelu(x) then astype(bf16) is one pass.
//
// Operands from outside the group are read in full, as a scalar, or as a row
// or column repeated over the result (a bias, a LayerNorm statistic), laid out
// block by block, through the broadcast_in_dim that made them.
#include <algorithm>
#include <map>
#include <tuple>

#include "drx/array/half.h"
#include "drx/exec/bf16_blocks.h"
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

// How a fused op reads a value from outside the tree: all of it, one scalar, or a row
// (x[j % cols]) or column (x[j / cols]) repeated over the result, read through the
// broadcast_in_dim that made it.
struct Access {
  enum Kind { full, scalar, row, col } kind = full;
  int var = -1;
  int64_t cols = 0;  // row and col: the result's row length
  bool operator<(const Access& o) const {
    return std::tie(var, kind, cols) < std::tie(o.var, o.kind, o.cols);
  }
};

// Where an op finds an operand: a temporary of the kernel, or input k.
struct Src {
  bool temp = false;
  int index = -1;
};

template <class T>
struct Step {
  BlockLoop<T> fn = nullptr;
  Src a, b;
  int dst = -1;        // temporary written; -1 for the root (the result)
  bool round = false;  // the op's result is bf16: rounded after it runs
  // gelu and gelu_grad of one operand (f32) run as one step (prims::gelu_and_grad): the
  // first of the two writes its own result as usual and the other's into temporary
  // pair_dst; the second has no loop (fn null) unless it is the root, where it copies it.
  int pair_dst = -1;
  bool pair_gelu_first = false;
};

// One input of the kernel, stored as T or as bf16.
struct Input {
  Access access;
  bool bf16 = false;
};

// A member's result that is also read outside the group (or is a program output): written
// from its temporary at the end of each block, after every read of the block's inputs, so
// that it may reuse a dying input's buffer.
struct Extra {
  int temp = -1;
  int var = -1;
  bool bf16 = false;
};

// How the kernel's blocks meet the rows of its row and column inputs (all of one length
// `cols`): `within`, blocks of a divisor of cols, so that each lies in one row (a row is read
// in place from x + i0 % cols, a column as the scalar x[i0 / cols]); `aligned`, blocks of
// whole rows (a row is laid out once for all blocks, a column per block); `any`, blocks of
// kBlock (rows and columns laid out per block).
struct Blocking {
  enum Mode { any, within, aligned } mode = any;
  int64_t block = kBlock;
  int64_t cols = 0;
};

Blocking blocking_for(const std::vector<Input>& inputs) {
  int64_t cols = 0;
  for (const Input& in : inputs) {
    if (in.access.kind != Access::row && in.access.kind != Access::col) continue;
    if (cols != 0 && cols != in.access.cols) return {};
    cols = in.access.cols;
  }
  if (cols == 0) return {};
  if (cols <= kBlock / 2) return {Blocking::aligned, cols * (kBlock / cols), cols};
  for (int64_t b = std::min(cols, kBlock); b >= kBlock / 4; --b)
    if (cols % b == 0) return {Blocking::within, b, cols};
  return {};
}

// How the ops read an input: in place (in full from x + i0, one scalar x, a row from
// x + i0 % cols, a column's scalar x[i0 / cols]), or from the kernel's own block, filled for
// every block (bf16 widened; a row or column laid out) or once.
enum class Read { full, scalar, row_in_place, col_scalar, per_block, once };

Read read_of(const Input& in, const Blocking& b) {
  switch (in.access.kind) {
    case Access::full:
      return in.bf16 ? Read::per_block : Read::full;
    case Access::scalar:
      return in.bf16 ? Read::once : Read::scalar;
    case Access::row:
      if (b.mode == Blocking::within) return in.bf16 ? Read::per_block : Read::row_in_place;
      return b.mode == Blocking::aligned ? Read::once : Read::per_block;
    case Access::col:
      if (b.mode == Blocking::within) return in.bf16 ? Read::per_block : Read::col_scalar;
      return Read::per_block;
  }
  return Read::per_block;
}

// Whether ops read the input's block one value per element (else one value for the block).
bool read_in_full(const Input& in, const Blocking& b) {
  const Read r = read_of(in, b);
  if (r == Read::scalar || r == Read::col_scalar) return false;
  if (in.access.kind == Access::scalar) return false;  // a bf16 scalar, widened once
  return !(in.access.kind == Access::col && b.mode == Blocking::within);
}

// Lays out elements [i0, i0 + w) of a row or column broadcast of x.
template <class E>
void expand(const E* x, const Access& a, int64_t i0, int64_t w, E* out) {
  int64_t r = i0 / a.cols, o = i0 % a.cols;
  for (int64_t j = 0; j < w; ++r, o = 0) {
    const int64_t len = std::min(a.cols - o, w - j);
    if (a.kind == Access::row)
      std::copy(x + o, x + o + len, out + j);
    else
      std::fill(out + j, out + j + len, x[r]);
    j += len;
  }
}

// Fills an input's own block for elements [i0, i0 + w): widened from bf16, laid out from a
// row or column, or (a column within one row) its one value.
template <class T>
void stage(const Input& in, const Blocking& b, const void* x, int64_t i0, int64_t w, T* out,
           uint16_t* narrow) {
  const Access& a = in.access;
  if constexpr (std::is_same_v<T, float>) {
    if (in.bf16) {
      const auto* h = static_cast<const uint16_t*>(x);
      if (a.kind == Access::full) return widen_bf16(h + i0, out, w);
      if (a.kind == Access::scalar) return widen_bf16(h, out, 1);
      if (b.mode == Blocking::within)
        return a.kind == Access::row ? widen_bf16(h + i0 % a.cols, out, w)
                                     : widen_bf16(h + i0 / a.cols, out, 1);
      expand(h, a, i0, w, narrow);
      return widen_bf16(narrow, out, w);
    }
  }
  expand(static_cast<const T*>(x), a, i0, w, out);
}

// T: the type the ops compute in (float or double); bf16 values (with T float)
// are widened as they are read and rounded as they are written.
template <class T>
class FusedKernel : public Kernel {
 public:
  KernelKind kind() const override { return KernelKind::elementwise; }

 public:
  FusedKernel(std::vector<Input> inputs, Blocking blocking, int out, bool out_bf16, int64_t n,
              std::vector<Step<T>> steps, std::vector<Extra> extras)
      : inputs_(std::move(inputs)),
        blocking_(blocking),
        out_(out),
        out_bf16_(out_bf16),
        n_(n),
        steps_(std::move(steps)),
        extras_(std::move(extras)) {
    for (const Input& in : inputs_) reads_.push_back(read_of(in, blocking_));
  }

  void run(Frame& f) const override {
    const size_t num_inputs = inputs_.size();
    const void* in[kMaxOps * 2];
    for (size_t k = 0; k < num_inputs; ++k) in[k] = f.in(inputs_[k].access.var);
    void* y = f.out(out_);
    void* extra_out[kMaxOps];
    for (size_t k = 0; k < extras_.size(); ++k) extra_out[k] = f.out(extras_[k].var);
    alignas(64) T tmp[kMaxOps][kBlock];
    alignas(64) T root[kBlock];
    alignas(64) T staged[kMaxOps * 2][kBlock];
    alignas(64) uint16_t narrow[kBlock];
    const int64_t block = blocking_.block, cols = blocking_.cols;
    for (size_t k = 0; k < num_inputs; ++k)
      if (reads_[k] == Read::once)
        stage(inputs_[k], blocking_, in[k], 0, std::min(block, n_), staged[k], narrow);
    for (int64_t i0 = 0; i0 < n_; i0 += block) {
      const int64_t w = std::min(block, n_ - i0);
      for (size_t k = 0; k < num_inputs; ++k)
        if (reads_[k] == Read::per_block)
          stage(inputs_[k], blocking_, in[k], i0, w, staged[k], narrow);
      auto ptr = [&](const Src& s) -> const T* {
        if (s.temp) return tmp[s.index];
        const T* x = static_cast<const T*>(in[s.index]);
        switch (reads_[static_cast<size_t>(s.index)]) {
          case Read::full:
            return x + i0;
          case Read::scalar:
            return x;
          case Read::row_in_place:
            return x + i0 % cols;
          case Read::col_scalar:
            return x + i0 / cols;
          case Read::per_block:
          case Read::once:
            break;
        }
        return staged[s.index];
      };
      for (const Step<T>& st : steps_) {
        const T* a = ptr(st.a);
        if constexpr (std::is_same_v<T, float>)
          if (st.pair_dst >= 0) {
            T *own = tmp[st.dst], *other = tmp[st.pair_dst];
            if (st.pair_gelu_first)
              prims::gelu_and_grad(a, own, other, w);
            else
              prims::gelu_and_grad(a, other, own, w);
            continue;
          }
        if (!st.fn) continue;  // computed by its pair
        const T* b = st.b.index >= 0 ? ptr(st.b) : nullptr;
        if (st.dst >= 0) {
          T* dst = tmp[st.dst];
          st.fn(a, b, dst, w);
          if constexpr (std::is_same_v<T, float>)
            if (st.round) round_to_bf16(dst, w);
        } else if (out_bf16_) {
          st.fn(a, b, root, w);
          if constexpr (std::is_same_v<T, float>)
            narrow_to_bf16(root, static_cast<uint16_t*>(y) + i0, w);
        } else {
          st.fn(a, b, static_cast<T*>(y) + i0, w);
        }
      }
      for (size_t k = 0; k < extras_.size(); ++k) {
        const Extra& x = extras_[k];
        if constexpr (std::is_same_v<T, float>)
          if (x.bf16) {
            narrow_to_bf16(tmp[x.temp], static_cast<uint16_t*>(extra_out[k]) + i0, w);
            continue;
          }
        std::copy(tmp[x.temp], tmp[x.temp] + w, static_cast<T*>(extra_out[k]) + i0);
      }
    }
  }

 private:
  std::vector<Input> inputs_;
  Blocking blocking_;
  std::vector<Read> reads_;
  int out_;
  bool out_bf16_;
  int64_t n_;
  std::vector<Step<T>> steps_;
  std::vector<Extra> extras_;
};

// How equation operand v is read by a fused op; nullopt when only a kernel of its own can
// read it (a broadcast that is no scalar, row or column of the result).
std::optional<Access> outside_operand(int v, const CompileContext& cx) {
  const Eqn* b = cx.producer_of(v);
  std::optional<Layout> l = b ? broadcast_layout(*b, cx) : std::nullopt;
  if (!l) return Access{Access::full, v, 0};
  if (l->shape.empty() || (l->shape.size() == 1 && l->stride[0] == 0))
    return Access{Access::scalar, b->ins[0], 0};
  if (l->shape.size() == 1 && l->stride[0] == 1) return Access{Access::full, b->ins[0], 0};
  if (l->shape.size() == 2 && l->stride[0] == 0 && l->stride[1] == 1)
    return Access{Access::row, b->ins[0], l->shape[1]};
  if (l->shape.size() == 2 && l->stride[0] == 1 && l->stride[1] == 0)
    return Access{Access::col, b->ins[0], l->shape[1]};
  return std::nullopt;
}

// gelu(x) and gelu_grad(x) of the same f32 operand in one group: one step computes both.
template <class T>
void pair_gelus(const std::vector<size_t>& members, const CompileContext& cx,
                std::vector<Step<T>>& steps) {
  auto is = [&](size_t m, const Primitive& prim) {
    return cx.program.eqns[members[m]].prim == &prim && !steps[m].round;
  };
  std::vector<bool> paired(members.size(), false);
  for (size_t m1 = 0; m1 < members.size(); ++m1) {
    if (paired[m1]) continue;
    const bool gelu_first = is(m1, prims::gelu());
    if (!gelu_first && !is(m1, prims::gelu_grad())) continue;
    const Primitive& other = gelu_first ? prims::gelu_grad() : prims::gelu();
    for (size_t m2 = m1 + 1; m2 < members.size(); ++m2) {
      if (paired[m2] || !is(m2, other) || steps[m2].a.temp != steps[m1].a.temp ||
          steps[m2].a.index != steps[m1].a.index)
        continue;
      paired[m1] = paired[m2] = true;
      steps[m1].fn = nullptr;
      steps[m1].pair_dst = static_cast<int>(m2);
      steps[m1].pair_gelu_first = gelu_first;
      // The second reads its result from the temporary the pair wrote (the root copies it).
      steps[m2].a = Src{true, static_cast<int>(m2)};
      steps[m2].fn = steps[m2].dst < 0 ? copy_block<T> : nullptr;
      break;
    }
  }
}

// The kernel of `members` (in program order; the last is the root); `reads` and `writes` get
// the variables it reads and writes (the root's result first).
template <class T>
std::unique_ptr<Kernel> build_kernel(const std::vector<size_t>& members, const CompileContext& cx,
                                     std::vector<int>& reads, std::vector<int>& writes) {
  const Program& p = cx.program;
  std::map<int, int> temp_of;      // member result -> temporary
  std::map<Access, int> input_of;  // how a value is read -> input index
  std::vector<Input> inputs;
  std::vector<Step<T>> steps;
  for (size_t m = 0; m < members.size(); ++m) {
    const Eqn& e = p.eqns[members[m]];
    Step<T> st;
    Src srcs[2];
    for (size_t k = 0; k < e.ins.size(); ++k) {
      auto t = temp_of.find(e.ins[k]);
      if (t != temp_of.end()) {
        srcs[k] = Src{true, t->second};
        continue;
      }
      const Access a = *outside_operand(e.ins[k], cx);
      auto [it, added] = input_of.emplace(a, static_cast<int>(inputs.size()));
      if (added) inputs.push_back(Input{a, cx.var(a.var).dtype == DType::bf16});
      srcs[k] = Src{false, it->second};
    }
    st.a = srcs[0];
    st.b = srcs[1];
    st.round = cx.var(e.outs[0]).dtype == DType::bf16;
    if (m + 1 < members.size()) {
      st.dst = static_cast<int>(m);
      temp_of[e.outs[0]] = st.dst;
    }
    steps.push_back(st);
  }
  // The loops, once the blocking says how each input is read.
  const Blocking blocking = blocking_for(inputs);
  for (size_t m = 0; m < members.size(); ++m) {
    Step<T>& st = steps[m];
    auto full = [&](const Src& s) {
      return s.index < 0 || s.temp || read_in_full(inputs[static_cast<size_t>(s.index)], blocking);
    };
    if (const ScalarKernel* op = fusible_kernel(p.eqns[members[m]]))
      st.fn = op->loop<T>(full(st.a), full(st.b));
    else  // a cast: its value is its operand's, rounded when it is to bf16
      st.fn = copy_block<T>;
  }
  if constexpr (std::is_same_v<T, float>) pair_gelus(members, cx, steps);
  reads.clear();
  for (const Input& in : inputs) reads.push_back(in.access.var);
  const Eqn& root = p.eqns[members.back()];
  writes = {root.outs[0]};
  // Members read outside the group: more reads of their results than the members make.
  std::map<int, int> member_reads;
  for (size_t m : members)
    for (int v : p.eqns[m].ins) ++member_reads[v];
  std::vector<Extra> extras;
  for (const auto& [v, t] : temp_of)
    if (cx.uses[static_cast<size_t>(v)] > member_reads[v]) {
      extras.push_back(Extra{t, v, cx.var(v).dtype == DType::bf16});
      writes.push_back(v);
    }
  const int64_t n = num_elements(cx.var(root.outs[0]).shape);
  return std::make_unique<FusedKernel<T>>(std::move(inputs), blocking, root.outs[0],
                                          cx.var(root.outs[0]).dtype == DType::bf16, n,
                                          std::move(steps), std::move(extras));
}

std::unique_ptr<Kernel> build_any(const std::vector<size_t>& members, const CompileContext& cx,
                                  std::vector<int>& reads, std::vector<int>& writes) {
  if (cx.var(cx.program.eqns[members.back()].outs[0]).dtype == DType::f64)
    return build_kernel<double>(members, cx, reads, writes);
  return build_kernel<float>(members, cx, reads, writes);
}

// Equation i runs as (part of) a fused kernel: arithmetic on f32, f64 or bf16 with every
// operand of the result's dtype, or a cast between f32 and bf16; operands read in full, as a
// scalar, or as a row or column (a cast: in full or as a row).
bool can_fuse(size_t i, const CompileContext& cx) {
  const Eqn& e = cx.program.eqns[i];
  if (e.outs.size() != 1) return false;
  const DType dt = cx.var(e.outs[0]).dtype;
  if (is_bf16_cast(e, cx)) {  // its loop is a copy: of a whole block
    const std::optional<Access> a = outside_operand(e.ins[0], cx);
    return a && (a->kind == Access::full || a->kind == Access::row);
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

// Sibling groups: a later group j reading a value group i reads in full (gelu(x) and
// gelu_grad(x), say) runs in i's kernel when all its other operands exist by then: the value
// is read once. Its results are read only by its members or after j, so after i too.
void merge_siblings(const CompileContext& cx, const std::vector<bool>& fusible,
                    std::vector<std::vector<size_t>>& group) {
  const Program& p = cx.program;
  const size_t num_eqns = p.eqns.size();
  // The values a group reads from outside itself.
  auto outside_reads = [&](const std::vector<size_t>& members) {
    std::vector<int> vars;
    for (size_t m : members)
      for (int v : p.eqns[m].ins) {
        const int src = cx.producer[static_cast<size_t>(v)];
        if (src >= 0 &&
            std::binary_search(members.begin(), members.end(), static_cast<size_t>(src)))
          continue;
        const Eqn* b = cx.producer_of(v);
        vars.push_back(b && broadcast_layout(*b, cx) ? b->ins[0] : v);
      }
    return vars;
  };
  for (size_t i = 0; i < num_eqns; ++i) {
    if (!fusible[i] || group[i].empty()) continue;
    const int64_t n = num_elements(cx.var(p.eqns[i].outs[0]).shape);
    std::vector<int> reads_i = outside_reads(group[i]);
    for (size_t j = i + 1; j < num_eqns; ++j) {
      if (!fusible[j] || group[j].empty() || group[i].size() + group[j].size() > kMaxOps ||
          num_elements(cx.var(p.eqns[j].outs[0]).shape) != n ||
          computes_f64(i, cx) != computes_f64(j, cx))
        continue;
      const std::vector<int> reads_j = outside_reads(group[j]);
      bool shares = false, ready = true;
      for (int v : reads_j) {
        const int src = cx.producer[static_cast<size_t>(v)];
        ready = ready && src < static_cast<int>(i);
        shares = shares || (num_elements(cx.var(v).shape) == n &&
                            std::find(reads_i.begin(), reads_i.end(), v) != reads_i.end());
      }
      if (!shares || !ready) continue;
      group[i].insert(group[i].end(), group[j].begin(), group[j].end());
      std::sort(group[i].begin(), group[i].end());
      group[j].clear();
      reads_i = outside_reads(group[i]);
    }
  }
}

}  // namespace

std::optional<KernelSpec> bf16_elementwise(const Eqn& e, const CompileContext& cx) {
  if (e.outs.size() != 1) return std::nullopt;
  const int index = cx.producer[static_cast<size_t>(e.outs[0])];
  if (index < 0 || cx.var(e.outs[0]).dtype != DType::bf16 ||
      !can_fuse(static_cast<size_t>(index), cx) || !fusible_kernel(e))
    return std::nullopt;
  std::vector<int> reads, writes;
  std::unique_ptr<Kernel> k = build_any({static_cast<size_t>(index)}, cx, reads, writes);
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
  // readers[v]: the equations reading v, once per operand slot.
  std::vector<std::vector<size_t>> readers(cx.vars.size());
  for (size_t i = 0; i < num_eqns; ++i)
    for (int v : p.eqns[i].ins) readers[static_cast<size_t>(v)].push_back(i);
  // group[i]: the members of the group rooted at i, in program order; in_group[j]: the root
  // of the group holding j. A group is a DAG: a member's result may be read by several later
  // members (one temporary, computed once per block), and by equations after the root (the
  // kernel then writes it too).
  std::vector<std::vector<size_t>> group(num_eqns);
  std::vector<int64_t> in_group(num_eqns, -1);
  for (size_t i = 0; i < num_eqns; ++i) {
    if (!fusible[i]) continue;
    const int64_t n = num_elements(cx.var(p.eqns[i].outs[0]).shape);
    std::vector<size_t> members{i};
    in_group[i] = static_cast<int64_t>(i);
    // Whether group s may run at i instead: every reader of its members' results is a member
    // of s, of i's group, or comes after i.
    auto can_run_at_i = [&](size_t s) {
      for (size_t x : group[s])
        for (size_t r : readers[static_cast<size_t>(p.eqns[x].outs[0])])
          if (in_group[r] != static_cast<int64_t>(s) && in_group[r] != static_cast<int64_t>(i) &&
              r <= i)
            return false;
      return true;
    };
    // Absorbs the groups of members' operands that can run at i, until none is left.
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t m = 0; m < members.size(); ++m) {
        for (int v : p.eqns[members[m]].ins) {
          const int src = cx.producer[static_cast<size_t>(v)];
          if (src < 0 || !fusible[static_cast<size_t>(src)]) continue;
          const auto s = static_cast<size_t>(src);
          if (in_group[s] != src || group[s].empty()) continue;  // a member, or absorbed
          if (num_elements(cx.var(v).shape) != n || computes_f64(s, cx) != computes_f64(i, cx) ||
              members.size() + group[s].size() > kMaxOps || !can_run_at_i(s))
            continue;
          for (size_t g : group[s]) in_group[g] = static_cast<int64_t>(i);
          members.insert(members.end(), group[s].begin(), group[s].end());
          group[s].clear();
          grew = true;
        }
      }
    }
    std::sort(members.begin(), members.end());
    group[i] = std::move(members);
  }
  merge_siblings(cx, fusible, group);
  for (size_t i = 0; i < num_eqns; ++i) {
    const std::vector<size_t>& members = group[i];
    if (members.size() < 2) continue;
    std::vector<int> reads, writes;
    kernels[i] = build_any(members, cx, reads, writes);
    choices[i].reads = std::move(reads);
    // A group merged into an earlier sibling's slot writes more than equation i's result.
    if (writes.size() > 1 || writes[0] != p.eqns[i].outs[0]) choices[i].writes = std::move(writes);
    for (size_t m : members)
      if (m != i) {
        choices[m].live = false;
        kernels[m].reset();
      }
    stats.fused += members.size() - 1;
  }
}

}  // namespace drx::exec
