// The scan primitive's derivative rules. jvp: one scan of the body's jvp.
// vjp: the forward scan stacks what the backward pass needs from each
// iteration; the backward scan runs the body's pullback in the other
// direction, carrying the carries' cotangents and summing the consts'.
//   stored (default): the body's vjp program split into what it computes from
//     the consts alone (once, before the loop), from the carry and x (per
//     iteration, its results stacked as residuals) and from the cotangents;
//   remat: only the carries are stacked, the backward body recomputes the rest;
//   checkpoint_every = k: one carry per block of k iterations is stacked; the
//     backward pass recomputes a block's k carries and runs a remat backward
//     scan over them, so about length / k + k carries are held at once.
#include <any>

#include "drx/core/trace.h"
#include "drx/ops/ops.h"
#include "drx/transforms/program_split.h"
#include "drx/transforms/scan_prim.h"
#include "drx/transforms/transforms.h"

namespace drx {
namespace {

bool floating(const Value& v) { return carries_derivative(v.type()); }

Value zeros_of(const Type& t) {
  Value z = fill(t.shape, 0.0, t.dtype);
  return t.placement.empty() ? z : place(z, t.placement);
}

}  // namespace

// ---- forward mode -----------------------------------------------------------

std::optional<std::pair<Values, MaybeValues>> ScanPrim::joint_jvp(const Values& primals,
                                                                  const MaybeValues& tangents,
                                                                  const Params& p) const {
  const ScanParams s = ScanParams::of(p);
  const size_t nc = s.nc(), nh = s.nh(), nx = s.nx(), ny = s.ny();
  std::vector<bool> with(primals.size());
  for (size_t i = 0; i < primals.size(); ++i) with[i] = tangents[i] && floating(primals[i]);
  // A carry's tangent is nonzero if its initial tangent is or if the body
  // feeds it from one.
  std::vector<bool> carry_floats;
  for (size_t j = 0; j < nh; ++j) carry_floats.push_back(floating(primals[nc + j]));
  flag_carries(*s.body, with, nc, carry_floats);
  // jvp_program's inputs: [c, h, x, tangents where `with`]; outputs
  // [h', y, tangents of h', tangents of y]. Regroup as scan wants them.
  Program j = jvp_program(*s.body, with, false);
  std::vector<size_t> tangent_at(primals.size());
  size_t next = primals.size();
  for (size_t i = 0; i < primals.size(); ++i)
    if (with[i]) tangent_at[i] = next++;
  std::vector<size_t> in, out;
  Values consts, carry, xs;
  auto take = [&](size_t lo, size_t hi, Values& group) {
    for (size_t i = lo; i < hi; ++i) {
      in.push_back(i);
      group.push_back(primals[i]);
    }
    for (size_t i = lo; i < hi; ++i)
      if (with[i]) {
        in.push_back(tangent_at[i]);
        group.push_back(tangents[i] ? *tangents[i] : zeros_like(primals[i]));
      }
  };
  take(0, nc, consts);
  take(nc, nc + nh, carry);
  take(nc + nh, primals.size(), xs);
  const size_t n_out = nh + ny;
  for (size_t k = 0; k < nh; ++k) out.push_back(k);
  for (size_t k = 0; k < nh; ++k)
    if (with[nc + k]) out.push_back(n_out + k);
  std::vector<bool> y_tangent(ny);
  for (size_t k = 0; k < ny; ++k) out.push_back(nh + k);
  for (size_t k = 0; k < ny; ++k) {
    y_tangent[k] = carries_derivative(s.body->type_of(s.body->outputs[nh + k]));
    if (y_tangent[k]) out.push_back(n_out + nh + k);
  }
  (void)nx;
  ScanParams js = s.with_body(reordered(std::move(j), in, out), static_cast<int64_t>(consts.size()),
                              static_cast<int64_t>(carry.size()));
  Values r = emit_scan(js, consts, carry, xs);
  Values outs;
  MaybeValues touts;
  size_t at = 0;
  for (size_t k = 0; k < nh; ++k) outs.push_back(r[at++]);
  for (size_t k = 0; k < nh; ++k)
    touts.push_back(with[nc + k] ? MaybeValue(r[at++]) : std::nullopt);
  for (size_t k = 0; k < ny; ++k) outs.push_back(r[at++]);
  for (size_t k = 0; k < ny; ++k)
    touts.push_back(y_tangent[k] ? MaybeValue(r[at++]) : std::nullopt);
  return std::make_pair(outs, touts);
}

MaybeValues ScanPrim::jvp(const Values& primals, const MaybeValues& tangents, const Values&,
                          const Params& p) const {
  return joint_jvp(primals, tangents, p)->second;
}

// ---- reverse mode -----------------------------------------------------------
namespace {

// What the forward scan saved for the backward scan.
struct ScanTape {
  // Inputs: [cotangents of the float carries, of the float ys, imports];
  // outputs: cotangents of the consts with wrt, the float carries, the xs with wrt.
  Program backward;
  Values invariant;  // imports that are the same in every iteration
  Values stacked;    // imports with one row per iteration
  // Per stacked import: its placement. Stacks are unplaced (the iteration
  // axis leads); the backward body places each row again.
  std::vector<std::string> stacked_placement;
  std::vector<bool> import_stacked;
  std::vector<bool> wrt;  // per operand: its cotangent is computed
};

Value unplaced(const Value& v) { return v.type().placement.empty() ? v : place(v, ""); }

// p with its outputs from `first` on unplaced, so that a scan can stack them.
Program unplaced_outputs(const Program& p, size_t first) {
  TraceScope scope;
  Values in;
  for (int v : p.inputs) in.push_back(scope.add_input(p.type_of(v)));
  Values out = inline_program(p, in);
  for (size_t k = first; k < out.size(); ++k) out[k] = unplaced(out[k]);
  Program q = scope.finish(out);
  q.name = p.name;
  q.placements = p.placements;
  return q;
}

std::vector<bool> float_flags(const Program& body, const std::vector<int>& vars, size_t lo,
                              size_t hi) {
  std::vector<bool> r;
  for (size_t k = lo; k < hi; ++k) r.push_back(carries_derivative(body.type_of(vars[k])));
  return r;
}

// The body's cotangent program: wrt the operands with `wrt` and every float
// carry (their cotangents flow between iterations); cotangents in for the
// float carries and ys.
Program body_pullback(const ScanParams& s, std::vector<bool>& wrt, bool cotangents_only) {
  const Program& body = *s.body;
  std::vector<bool> carry_float = float_flags(body, body.inputs, s.nc(), s.nc() + s.nh());
  for (size_t j = 0; j < s.nh(); ++j) wrt[s.nc() + j] = carry_float[j];
  std::vector<bool> has_ct = float_flags(body, body.outputs, 0, body.outputs.size());
  return vjp_program(body, wrt, has_ct, cotangents_only);
}

// Cotangent inputs of body_pullback's program (after its primal inputs).
size_t count_cotangents(const Program& body) {
  size_t n = 0;
  for (int v : body.outputs) n += carries_derivative(body.type_of(v));
  return n;
}

ScanTape stored_tape(const ScanParams& s, const Values& primals, std::vector<bool> wrt,
                     Values& outs) {
  const size_t nc = s.nc(), nh = s.nh(), n = primals.size();
  Program pb = body_pullback(s, wrt, false);
  const size_t n_ct = count_cotangents(*s.body), n_fwd = s.body->outputs.size();
  std::vector<int> in_stage(n + n_ct, 2), out_stage(pb.outputs.size(), 2);
  for (size_t i = 0; i < n; ++i) in_stage[i] = i < nc ? 0 : 1;
  for (size_t k = 0; k < n_fwd; ++k) out_stage[k] = 1;
  StageSplit sp = split_stages(pb, in_stage, out_stage, 3);
  // Stage 0 runs once, here.
  std::vector<Value> env(pb.var_types.size());
  for (size_t i = 0; i < n; ++i) env[static_cast<size_t>(pb.inputs[i])] = primals[i];
  {
    Values in0(primals.begin(), primals.begin() + static_cast<long>(nc));
    Values r0 = inline_program(sp.programs[0], in0);
    for (size_t k = 0; k < sp.exports[0].size(); ++k)
      env[static_cast<size_t>(sp.exports[0][k])] = r0[k];
  }
  // Stage 1 is the forward body: consts are its imports; it also stacks the
  // carries the backward pass reads (x rows are read from xs directly).
  std::vector<char> is_carry(pb.var_types.size(), 0), is_x(pb.var_types.size(), 0);
  for (size_t i = nc; i < n; ++i)
    (i < nc + nh ? is_carry : is_x)[static_cast<size_t>(pb.inputs[i])] = 1;
  Program fwd = sp.programs[1];
  std::vector<int> stacked_carries;
  for (int v : sp.imports[2])
    if (is_carry[static_cast<size_t>(v)]) {
      stacked_carries.push_back(v);
      for (size_t i = nc; i < nc + nh; ++i)
        if (pb.inputs[i] == v) fwd.outputs.push_back(fwd.inputs[i - nc]);
    }
  // fwd's inputs: [h, x, imports1] -> [imports1, h, x].
  const size_t n_imp1 = sp.imports[1].size(), n_hx = n - nc;
  Values consts1;
  for (int v : sp.imports[1]) consts1.push_back(env[static_cast<size_t>(v)]);
  ScanParams fs = s.with_body(unplaced_outputs(inputs_rotated(std::move(fwd), n_hx), n_fwd),
                              static_cast<int64_t>(n_imp1), s.num_carry);
  Values r = emit_scan(
      fs, consts1,
      Values(primals.begin() + static_cast<long>(nc), primals.begin() + static_cast<long>(nc + nh)),
      Values(primals.begin() + static_cast<long>(nc + nh), primals.end()));
  outs.assign(r.begin(), r.begin() + static_cast<long>(n_fwd));
  size_t at = n_fwd;
  for (int v : sp.exports[1]) env[static_cast<size_t>(v)] = r[at++];
  std::vector<Value> carry_stack(pb.var_types.size());
  for (int v : stacked_carries) carry_stack[static_cast<size_t>(v)] = r[at++];

  ScanTape t;
  t.backward = sp.programs[2];
  t.wrt = wrt;
  for (int v : sp.imports[2]) {
    const size_t u = static_cast<size_t>(v);
    const bool per_iteration = sp.stage[u] == 1;
    t.import_stacked.push_back(per_iteration);
    if (per_iteration) t.stacked_placement.push_back(pb.type_of(v).placement);
    if (!per_iteration)
      t.invariant.push_back(env[u]);
    else if (is_carry[u])
      t.stacked.push_back(carry_stack[u]);
    else
      t.stacked.push_back(env[u]);  // an x operand or a stacked residual
  }
  return t;
}

ScanTape remat_tape(const ScanParams& s, const Values& primals, std::vector<bool> wrt,
                    Values& outs) {
  const size_t nc = s.nc(), nh = s.nh(), n = primals.size();
  Program pb = body_pullback(s, wrt, true);
  // Inputs [c, h, x, cotangents] -> [cotangents, c, h, x].
  ScanTape t;
  t.backward = inputs_rotated(std::move(pb), n);
  t.wrt = wrt;
  // The forward scan also stacks each iteration's incoming carry.
  Program fwd = *s.body;
  for (size_t j = 0; j < nh; ++j) fwd.outputs.push_back(fwd.inputs[nc + j]);
  ScanParams fs =
      s.with_body(unplaced_outputs(fwd, s.body->outputs.size()), s.num_consts, s.num_carry);
  Values r = emit_scan(
      fs, Values(primals.begin(), primals.begin() + static_cast<long>(nc)),
      Values(primals.begin() + static_cast<long>(nc), primals.begin() + static_cast<long>(nc + nh)),
      Values(primals.begin() + static_cast<long>(nc + nh), primals.end()));
  const size_t n_fwd = s.body->outputs.size();
  outs.assign(r.begin(), r.begin() + static_cast<long>(n_fwd));
  for (size_t i = 0; i < n; ++i) {
    const bool per_iteration = i >= nc;
    t.import_stacked.push_back(per_iteration);
    if (per_iteration) t.stacked_placement.push_back(primals[i].type().placement);
    if (!per_iteration)
      t.invariant.push_back(primals[i]);
    else if (i < nc + nh)
      t.stacked.push_back(r[n_fwd + (i - nc)]);
    else
      t.stacked.push_back(primals[i]);
  }
  return t;
}

// The backward scan: runs `t.backward` from the last iteration to the first.
// acc: where the sums of the consts' cotangents start (zeros when null), so
// that checkpointed blocks continue one running sum in iteration order.
MaybeValues run_backward(const ScanParams& s, const ScanTape& t, const Values& primals,
                         const Values& outs, const MaybeValues& cts, const Values* acc_start) {
  const Program& body = *s.body;
  const size_t nc = s.nc(), nh = s.nh(), n = primals.size();
  std::vector<size_t> ct_carries, ct_ys, acc_consts;
  for (size_t j = 0; j < nh; ++j)
    if (carries_derivative(body.type_of(body.outputs[j]))) ct_carries.push_back(j);
  for (size_t k = nh; k < body.outputs.size(); ++k)
    if (carries_derivative(body.type_of(body.outputs[k]))) ct_ys.push_back(k);
  for (size_t i = 0; i < nc; ++i)
    if (t.wrt[i]) acc_consts.push_back(i);
  // The backward body: consts = invariant imports; carry = [cotangents of the
  // float carries, sums of the consts' cotangents]; xs = [stacked imports,
  // cotangents of the float ys]; ys = cotangents of the xs with wrt.
  TraceScope scope;
  Values inv, ct_h, acc, stk, ct_y;
  for (const Value& v : t.invariant) inv.push_back(scope.add_input(v.type()));
  for (size_t j : ct_carries) ct_h.push_back(scope.add_input(outs[j].type()));
  for (size_t i : acc_consts) acc.push_back(scope.add_input(primals[i].type()));
  for (const Value& v : t.stacked) stk.push_back(scope.add_input(row_type(v.type())));
  for (size_t k : ct_ys) ct_y.push_back(scope.add_input(row_type(outs[k].type())));
  Values args = ct_h;
  args.insert(args.end(), ct_y.begin(), ct_y.end());
  size_t a = 0, b = 0;
  for (bool st : t.import_stacked) {
    if (!st) {
      args.push_back(inv[a++]);
    } else {
      const std::string& placement = t.stacked_placement[b];
      args.push_back(placement.empty() ? stk[b] : place(stk[b], placement));
      ++b;
    }
  }
  Values r = inline_program(t.backward, args);
  // r: cotangents of [consts with wrt, float carries, xs with wrt].
  Values new_carry, ys;
  size_t at = 0;
  Values ct_c(r.begin(), r.begin() + static_cast<long>(acc_consts.size()));
  at = acc_consts.size();
  for (size_t j = 0; j < nh; ++j)
    if (t.wrt[nc + j]) new_carry.push_back(r[at++]);
  for (size_t k = 0; k < acc.size(); ++k) new_carry.push_back(acc[k] + ct_c[k]);
  for (size_t i = nc + nh; i < n; ++i)
    if (t.wrt[i]) ys.push_back(r[at++]);
  Values results = new_carry;
  results.insert(results.end(), ys.begin(), ys.end());
  Program bwd = scope.finish(results);
  bwd.name = body.name + "_bwd";
  bwd.placements = body.placements;
  // Captures (none expected) would be trailing inputs; the scan takes them as consts.
  const size_t n_inv = inv.size(), n_carry = ct_h.size() + acc.size();
  Values consts = scope.captured();
  consts.insert(consts.end(), t.invariant.begin(), t.invariant.end());
  Values carry0, xs = t.stacked;
  for (size_t j : ct_carries) carry0.push_back(cts[j] ? *cts[j] : zeros_of(outs[j].type()));
  for (size_t k = 0; k < acc_consts.size(); ++k)
    carry0.push_back(acc_start ? (*acc_start)[k] : zeros_of(primals[acc_consts[k]].type()));
  for (size_t k : ct_ys) xs.push_back(cts[k] ? *cts[k] : zeros_of(outs[k].type()));
  ScanParams bs =
      s.with_body(inputs_rotated(std::move(bwd), n_inv + n_carry + stk.size() + ct_y.size()),
                  static_cast<int64_t>(consts.size()), static_cast<int64_t>(n_carry));
  bs.reverse = !s.reverse;
  bs.remat = false;
  bs.checkpoint_every = 0;
  Values g = emit_scan(bs, consts, carry0, xs);
  MaybeValues result(n);
  at = 0;
  for (size_t j : ct_carries) {
    Value v = g[at++];
    if (t.wrt[nc + j]) result[nc + j] = v;
  }
  for (size_t i : acc_consts) result[i] = g[at++];
  for (size_t i = nc + nh; i < n; ++i)
    if (t.wrt[i]) result[i] = g[at++];
  return result;
}

// Checkpointed: one carry per block of `every` iterations is stacked; the
// backward pass is a scan over the blocks that recomputes a block's carries
// (a remat forward scan of the block) and runs its backward scan, which
// recomputes each iteration's residuals. The iterations left over
// (length % every) form a remat scan of their own.
struct BlockTape {
  ScanParams blocks;                          // the forward scan over blocks (for its shape)
  Values block_starts;                        // [blocks, ...] the carry entering each block
  ScanParams tail;                            // the leftover iterations
  std::shared_ptr<const ScanTape> tail_tape;  // null when every block is full
  Values tail_primals, tail_outs;
  std::vector<bool> wrt;  // per operand, float carries included
};

Value rows(const Value& v, int64_t lo, int64_t hi) {
  std::vector<int64_t> starts(v.ndim(), 0), stops = v.shape();
  starts[0] = lo;
  stops[0] = hi;
  return slice(v, starts, stops);
}
// [blocks * k, ...] <-> [blocks, k, ...]
Value split_rows(const Value& v, int64_t blocks, int64_t k) {
  Shape sh = v.shape();
  sh[0] = k;
  sh.insert(sh.begin(), blocks);
  return reshape(v, sh);
}
Value merge_rows(const Value& v) {
  Shape sh(v.shape().begin() + 1, v.shape().end());
  sh[0] *= v.shape()[0];
  return reshape(v, sh);
}
Values slice_rows(const Values& vs, int64_t lo, int64_t hi) {
  Values r;
  for (const Value& v : vs) r.push_back(rows(v, lo, hi));
  return r;
}

struct Groups {
  Values c, h, x;
};
Groups groups(const ScanParams& s, const Values& operands) {
  Groups g;
  for (size_t i = 0; i < operands.size(); ++i)
    (i < s.nc() ? g.c : i < s.nc() + s.nh() ? g.h : g.x).push_back(operands[i]);
  return g;
}
Values joined(const Values& a, const Values& b, const Values& c = {}) {
  Values r = a;
  r.insert(r.end(), b.begin(), b.end());
  r.insert(r.end(), c.begin(), c.end());
  return r;
}

BlockTape blocked_forward(const ScanParams& s, const Values& primals, const std::vector<bool>& wrt,
                          Values& outs) {
  const int64_t k = s.checkpoint_every, nb = s.length / k, left = s.length % k;
  const Groups g = groups(s, primals);
  ScanParams inner = s;
  inner.remat = false;
  inner.checkpoint_every = 0;
  inner.length = k;
  BlockTape bt;
  bt.wrt = wrt;
  for (size_t j = 0; j < s.nh(); ++j) bt.wrt[s.nc() + j] = carries_derivative(g.h[j].type());
  Values carry = g.h, block_ys, tail_ys;
  auto run_blocks = [&] {
    // The outer body runs one block and also returns the carry entering it.
    TraceScope scope;
    Values bc, bh, bx;
    for (const Value& v : g.c) bc.push_back(scope.add_input(v.type()));
    for (const Value& v : carry) bh.push_back(scope.add_input(v.type()));
    for (const Value& v : g.x) {
      Shape block = v.shape();
      block[0] = k;
      bx.push_back(scope.add_input(Type(v.dtype(), block)));
    }
    Values r = emit_scan(inner, bc, bh, bx);
    for (const Value& v : bh) r.push_back(unplaced(v));
    Program body = scope.finish(r);
    body.name = s.body->name + "_block";
    bt.blocks = s.with_body(std::move(body), s.num_consts, s.num_carry);
    bt.blocks.length = nb;
    bt.blocks.remat = false;
    bt.blocks.checkpoint_every = 0;
    Values xb;
    for (const Value& v : g.x) xb.push_back(split_rows(rows(v, 0, nb * k), nb, k));
    Values o = emit_scan(bt.blocks, g.c, carry, xb);
    carry.assign(o.begin(), o.begin() + static_cast<long>(s.nh()));
    for (size_t j = 0; j < s.ny(); ++j) block_ys.push_back(merge_rows(o[s.nh() + j]));
    bt.block_starts.assign(o.begin() + static_cast<long>(s.nh() + s.ny()), o.end());
  };
  auto run_tail = [&] {
    if (left == 0) return;
    bt.tail = inner;
    bt.tail.length = left;
    bt.tail_primals = joined(g.c, carry, slice_rows(g.x, nb * k, s.length));
    bt.tail_tape =
        std::make_shared<const ScanTape>(remat_tape(bt.tail, bt.tail_primals, wrt, bt.tail_outs));
    carry.assign(bt.tail_outs.begin(), bt.tail_outs.begin() + static_cast<long>(s.nh()));
    tail_ys.assign(bt.tail_outs.begin() + static_cast<long>(s.nh()), bt.tail_outs.end());
  };
  // In iteration order: forward the blocks then the rest, reversed the rest first.
  if (s.reverse) {
    run_tail();
    run_blocks();
  } else {
    run_blocks();
    run_tail();
  }
  outs = carry;
  for (size_t j = 0; j < s.ny(); ++j)
    outs.push_back(left == 0 ? block_ys[j] : concatenate({block_ys[j], tail_ys[j]}, 0));
  return bt;
}

MaybeValues blocked_backward(const ScanParams& s, const BlockTape& bt, const Values& primals,
                             const Values& outs, const MaybeValues& cts,
                             const std::vector<bool>& wrt) {
  const int64_t k = s.checkpoint_every, nb = s.length / k, left = s.length % k;
  const size_t nc = s.nc(), nh = s.nh(), ny = s.ny(), n = primals.size();
  const Program& body = *s.body;
  const Groups g = groups(s, primals);
  ScanParams inner = s;
  inner.remat = false;
  inner.checkpoint_every = 0;
  inner.length = k;
  std::vector<size_t> float_carries, acc_consts;
  for (size_t j = 0; j < nh; ++j)
    if (carries_derivative(body.type_of(body.outputs[j]))) float_carries.push_back(j);
  for (size_t i = 0; i < nc; ++i)
    if (wrt[i]) acc_consts.push_back(i);
  // The running cotangents: of the float carries, and the consts' sums.
  Values ct_h, acc;
  for (size_t j : float_carries) ct_h.push_back(cts[j] ? *cts[j] : zeros_of(outs[j].type()));
  for (size_t i : acc_consts) acc.push_back(zeros_of(primals[i].type()));
  Values ct_y;  // of every y, zeros where none
  for (size_t j = 0; j < ny; ++j)
    ct_y.push_back(cts[nh + j] ? *cts[nh + j] : zeros_of(outs[nh + j].type()));
  std::vector<bool> y_float;
  for (size_t j = 0; j < ny; ++j) y_float.push_back(carries_derivative(outs[nh + j].type()));
  Values ct_x_blocks, ct_x_tail;
  auto cotangents_of = [&](const Values& h_ct, const Values& y_ct) {
    MaybeValues m(nh + ny);
    for (size_t q = 0; q < float_carries.size(); ++q) m[float_carries[q]] = h_ct[q];
    for (size_t j = 0; j < ny; ++j)
      if (y_float[j]) m[nh + j] = y_ct[j];
    return m;
  };
  auto take_result = [&](const MaybeValues& r, Values& ct_x) {
    ct_h.clear();
    for (size_t j : float_carries) ct_h.push_back(*r[nc + j]);
    acc.clear();
    for (size_t i : acc_consts) acc.push_back(*r[i]);
    ct_x.clear();
    for (size_t i = nc + nh; i < n; ++i)
      if (wrt[i]) ct_x.push_back(*r[i]);
  };
  auto run_tail = [&] {
    Values y_tail = slice_rows(ct_y, nb * k, s.length);
    MaybeValues r = run_backward(bt.tail, *bt.tail_tape, bt.tail_primals, bt.tail_outs,
                                 cotangents_of(ct_h, y_tail), &acc);
    take_result(r, ct_x_tail);
  };
  auto run_blocks = [&] {
    // Body: consts c; carry [ct_h, acc]; xs [block-start carries, x blocks,
    // ct_y blocks]; ys: the xs' cotangents.
    Values xb, yb;
    for (const Value& v : g.x) xb.push_back(split_rows(rows(v, 0, nb * k), nb, k));
    for (const Value& v : ct_y) yb.push_back(split_rows(rows(v, 0, nb * k), nb, k));
    TraceScope scope;
    Values bc, bh_ct, bacc, bh, bx, by;
    for (const Value& v : g.c) bc.push_back(scope.add_input(v.type()));
    for (const Value& v : ct_h) bh_ct.push_back(scope.add_input(v.type()));
    for (const Value& v : acc) bacc.push_back(scope.add_input(v.type()));
    auto row = [](const Value& v) { return row_type(v.type()); };
    for (size_t j = 0; j < nh; ++j) {
      Value start = scope.add_input(row(bt.block_starts[j]));
      const std::string& placement = g.h[j].type().placement;
      bh.push_back(placement.empty() ? start : place(start, placement));
    }
    for (const Value& v : xb) bx.push_back(scope.add_input(row(v)));
    for (const Value& v : yb) by.push_back(scope.add_input(row(v)));
    Values fo;
    Values block_primals = joined(bc, bh, bx);
    ScanTape tape = remat_tape(inner, block_primals, wrt, fo);
    MaybeValues r = run_backward(inner, tape, block_primals, fo, cotangents_of(bh_ct, by), &bacc);
    Values res;
    for (size_t j : float_carries) res.push_back(*r[nc + j]);
    for (size_t i : acc_consts) res.push_back(*r[i]);
    for (size_t i = nc + nh; i < n; ++i)
      if (wrt[i]) res.push_back(*r[i]);
    Program bb = scope.finish(res);
    bb.name = body.name + "_block_bwd";
    // Captured values come last in the traced inputs; the scan takes them first.
    const size_t n_own = bb.inputs.size() - scope.captured().size();
    Values consts = joined(scope.captured(), g.c);
    ScanParams bs =
        s.with_body(inputs_rotated(std::move(bb), n_own), static_cast<int64_t>(consts.size()),
                    static_cast<int64_t>(ct_h.size() + acc.size()));
    bs.length = nb;
    bs.reverse = !s.reverse;
    bs.remat = false;
    bs.checkpoint_every = 0;
    Values o = emit_scan(bs, consts, joined(ct_h, acc), joined(bt.block_starts, xb, yb));
    ct_h.assign(o.begin(), o.begin() + static_cast<long>(ct_h.size()));
    const size_t na = acc.size();
    acc.assign(o.begin() + static_cast<long>(ct_h.size()),
               o.begin() + static_cast<long>(ct_h.size() + na));
    ct_x_blocks.clear();
    for (size_t q = ct_h.size() + na; q < o.size(); ++q) ct_x_blocks.push_back(merge_rows(o[q]));
  };
  // Backward runs the iterations in the opposite order of the forward pass.
  if (s.reverse) {
    run_blocks();
    if (left > 0) run_tail();
  } else {
    if (left > 0) run_tail();
    run_blocks();
  }
  MaybeValues result(n);
  for (size_t q = 0; q < float_carries.size(); ++q)
    if (wrt[nc + float_carries[q]]) result[nc + float_carries[q]] = ct_h[q];
  for (size_t q = 0; q < acc_consts.size(); ++q) result[acc_consts[q]] = acc[q];
  size_t q = 0;
  for (size_t i = nc + nh; i < n; ++i)
    if (wrt[i]) {
      result[i] = left == 0 ? ct_x_blocks[q] : concatenate({ct_x_blocks[q], ct_x_tail[q]}, 0);
      ++q;
    }
  return result;
}

std::vector<bool> operand_wrt(const Values& primals, const std::vector<bool>& active) {
  std::vector<bool> wrt(primals.size());
  for (size_t i = 0; i < primals.size(); ++i) wrt[i] = active[i] && floating(primals[i]);
  return wrt;
}

}  // namespace

std::optional<VjpForward> ScanPrim::vjp_forward(const Values& primals,
                                                const std::vector<bool>& active,
                                                const Params& p) const {
  const ScanParams s = ScanParams::of(p);
  std::vector<bool> wrt = operand_wrt(primals, active);
  VjpForward f;
  if (s.checkpoint_every > 0 && s.length >= 2 * s.checkpoint_every) {
    f.saved = std::make_shared<const BlockTape>(blocked_forward(s, primals, wrt, f.outs));
    return f;
  }
  ScanTape t = s.remat || s.checkpoint_every > 0 ? remat_tape(s, primals, wrt, f.outs)
                                                 : stored_tape(s, primals, wrt, f.outs);
  f.saved = std::make_shared<const ScanTape>(std::move(t));
  return f;
}

MaybeValues ScanPrim::vjp_backward(const Values& primals, const VjpForward& forward,
                                   const MaybeValues& cts, const Params& p) const {
  const ScanParams s = ScanParams::of(p);
  if (const auto* b = std::any_cast<std::shared_ptr<const BlockTape>>(&forward.saved)) {
    return blocked_backward(s, **b, primals, forward.outs, cts, (*b)->wrt);
  }
  const ScanTape& t = **std::any_cast<std::shared_ptr<const ScanTape>>(&forward.saved);
  return run_backward(s, t, primals, forward.outs, cts, nullptr);
}

MaybeValues ScanPrim::vjp(const Values& primals, const Values&, const MaybeValues& cts,
                          const Params& p) const {
  std::vector<bool> all(primals.size(), true);
  std::optional<VjpForward> f = vjp_forward(primals, all, p);
  return vjp_backward(primals, *f, cts, p);
}

}  // namespace drx
