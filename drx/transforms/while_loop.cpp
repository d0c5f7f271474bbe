// The while_loop primitive: one class with its rules. jvp is a while_loop of
// the body's jvp; reverse mode is an error (the trip count is only known at
// run time); vmap with a batched predicate runs while any lane runs and
// keeps each finished lane's carry.
#include "drx/core/interpret.h"
#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/core/trace.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/trace/trace_tree.h"
#include "drx/transforms/api.h"
#include "drx/transforms/loops.h"
#include "drx/transforms/program_split.h"
#include "drx/transforms/simplify.h"
#include "drx/transforms/transforms.h"
#include "drx/transforms/while_params.h"

DRX_PUBLIC_OPS_FILE(transforms_while_loop);

namespace drx {
namespace {

std::shared_ptr<const Program> shared(Program p) {
  return std::make_shared<const Program>(simplify(p));
}

Values emit_while(const WhileParams& w, const Values& cc, const Values& bc, const Values& carry);

// p with unused inputs of the given types added after its inputs.
Program with_unused_inputs(Program p, const std::vector<Type>& types) {
  for (const Type& t : types) p.inputs.push_back(p.add_var(t));
  return p;
}

class WhilePrim : public Primitive {
 public:
  WhilePrim() : Primitive("while_loop") {}
  bool placement_aware() const override { return true; }

  // stablehlo.while over (cond consts, body consts, carry); the consts ride
  // along unchanged.
  void lower(StableHloEmitter& em, const Params& p) const override {
    const WhileParams w = WhileParams::of(p);
    const size_t ncc = w.ncc(), nbc = w.nbc(), nh = w.nh();
    std::vector<std::string> state;
    std::vector<Type> types;
    for (size_t i = 0; i < em.num_operands(); ++i) {
      state.push_back(em.operand(i));
      types.push_back(em.operand_type(i));
    }
    const Program &cond = *w.cond, &body = *w.body;
    MlirRegion test{types, [&](StableHloEmitter& b, const std::vector<std::string>& a) {
                      std::vector<std::string> args(a.begin(), a.begin() + static_cast<long>(ncc));
                      args.insert(args.end(), a.begin() + static_cast<long>(ncc + nbc), a.end());
                      return b.inline_program(cond, args);
                    }};
    MlirRegion step{types, [&](StableHloEmitter& b, const std::vector<std::string>& a) {
                      std::vector<std::string> args(a.begin() + static_cast<long>(ncc), a.end());
                      std::vector<std::string> next(a.begin(),
                                                    a.begin() + static_cast<long>(ncc + nbc));
                      const std::vector<std::string> r = b.inline_program(body, args);
                      next.insert(next.end(), r.begin(), r.end());
                      return next;
                    }};
    const std::vector<std::string> out = em.emit("stablehlo.while", state, {}, types, {test, step});
    em.set_results(std::vector<std::string>(out.end() - static_cast<long>(nh), out.end()));
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    const WhileParams w = WhileParams::of(p);
    const Program &cond = *w.cond, &body = *w.body;
    if (ins.size() != w.ncc() + w.nbc() + w.nh() || cond.inputs.size() != w.ncc() + w.nh() ||
        body.inputs.size() != w.nbc() + w.nh())
      throw TypeError("while_loop: " + std::to_string(ins.size()) + " operands for a cond @" +
                      cond.name + " of " + std::to_string(cond.inputs.size()) +
                      " inputs and a body @" + body.name + " of " +
                      std::to_string(body.inputs.size()) + " inputs and " +
                      std::to_string(body.outputs.size()) + " outputs");
    auto expect = [&](const Program& prog, size_t input, const Type& t, const char* what) {
      const Type& want = prog.type_of(prog.inputs[input]);
      if (want != t)
        throw TypeError("while_loop: " + std::string(what) + " " + t.str() + " for @" + prog.name +
                        " input " + std::to_string(input) + " of type " + want.str());
    };
    for (size_t i = 0; i < w.ncc(); ++i) expect(cond, i, ins[i], "cond const");
    for (size_t i = 0; i < w.nbc(); ++i) expect(body, i, ins[w.ncc() + i], "body const");
    std::vector<Type> outs;
    for (size_t j = 0; j < w.nh(); ++j) {
      const Type& t = ins[w.ncc() + w.nbc() + j];
      expect(cond, w.ncc() + j, t, "carry");
      expect(body, w.nbc() + j, t, "carry");
      if (body.type_of(body.outputs[j]) != t)
        throw TypeError("while_loop: carry " + std::to_string(j) + " enters the body @" +
                        body.name + " as " + t.str() + " and leaves it as " +
                        body.type_of(body.outputs[j]).str() + "; a carry keeps its type");
      outs.push_back(t);
    }
    if (cond.outputs.size() != 1 || cond.type_of(cond.outputs[0]) != Type(DType::bool_, {}))
      throw TypeError("while_loop: the cond @" + cond.name + " returns (" +
                      types_str(cond.output_types()) + "), expected one bool scalar");
    return outs;
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const WhileParams w = WhileParams::of(p);
    std::vector<Array> cond_args(ins.begin(), ins.begin() + static_cast<long>(w.ncc()));
    std::vector<Array> body_args(ins.begin() + static_cast<long>(w.ncc()),
                                 ins.begin() + static_cast<long>(w.ncc() + w.nbc()));
    std::vector<Array> carry(ins.begin() + static_cast<long>(w.ncc() + w.nbc()), ins.end());
    for (;;) {
      std::vector<Array> a = cond_args;
      a.insert(a.end(), carry.begin(), carry.end());
      if (interpret(*w.cond, a)[0].data<uint8_t>()[0] == 0) return carry;
      a = body_args;
      a.insert(a.end(), carry.begin(), carry.end());
      carry = interpret(*w.body, a);
    }
  }

  std::optional<std::pair<Values, MaybeValues>> joint_jvp(const Values& primals,
                                                          const MaybeValues& tangents,
                                                          const Params& p) const override {
    const WhileParams w = WhileParams::of(p);
    const size_t ncc = w.ncc(), nbc = w.nbc(), nh = w.nh();
    // Flags over the body's inputs [body consts, carry].
    std::vector<bool> with;
    for (size_t i = ncc; i < primals.size(); ++i)
      with.push_back(tangents[i] && carries_derivative(primals[i].type()));
    std::vector<bool> carry_floats;
    for (size_t j = 0; j < nh; ++j)
      carry_floats.push_back(carries_derivative(primals[ncc + nbc + j].type()));
    flag_carries(*w.body, with, nbc, carry_floats);
    // jvp inputs [bc, h, tangents where `with`] -> [bc, t_bc, h, t_h];
    // outputs [h', tangents of h'] -> [h', t_h' where `with`].
    Program j = jvp_program(*w.body, with, false);
    std::vector<size_t> tangent_at(with.size()), in, out;
    size_t next = with.size();
    for (size_t i = 0; i < with.size(); ++i)
      if (with[i]) tangent_at[i] = next++;
    Values cc(primals.begin(), primals.begin() + static_cast<long>(ncc)), bc, carry;
    std::vector<Type> tangent_types;
    auto take = [&](size_t lo, size_t hi, Values& group) {
      for (size_t i = lo; i < hi; ++i) {
        in.push_back(i);
        group.push_back(primals[ncc + i]);
      }
      for (size_t i = lo; i < hi; ++i)
        if (with[i]) {
          in.push_back(tangent_at[i]);
          const Value& x = primals[ncc + i];
          group.push_back(tangents[ncc + i] ? *tangents[ncc + i] : zeros_like(x));
          if (i >= nbc) tangent_types.push_back(x.type());
        }
    };
    take(0, nbc, bc);
    take(nbc, nbc + nh, carry);
    for (size_t k = 0; k < nh; ++k) out.push_back(k);
    for (size_t k = 0; k < nh; ++k)
      if (with[nbc + k]) out.push_back(nh + k);
    WhileParams jw = w;
    jw.body = shared(reordered(std::move(j), in, out));
    jw.cond = shared(with_unused_inputs(*w.cond, tangent_types));
    jw.num_body_consts = static_cast<int64_t>(bc.size());
    Values r = emit_while(jw, cc, bc, carry);
    Values outs(r.begin(), r.begin() + static_cast<long>(nh));
    MaybeValues touts;
    size_t at = nh;
    for (size_t k = 0; k < nh; ++k)
      touts.push_back(with[nbc + k] ? MaybeValue(r[at++]) : std::nullopt);
    return std::make_pair(outs, touts);
  }

  MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values&,
                  const Params& p) const override {
    return joint_jvp(primals, tangents, p)->second;
  }

  MaybeValues vjp(const Values&, const Values&, const MaybeValues&, const Params&) const override {
    throw Error(
        "while_loop: reverse-mode differentiation (grad, vjp) is not defined for while_loop, whose "
        "trip count is only known at run time; with a static trip count use drx::fori_loop or "
        "drx::scan, which are reverse-differentiable");
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch_size,
                            const Params& p) const override {
    const WhileParams w = WhileParams::of(p);
    const size_t ncc = w.ncc(), nbc = w.nbc(), nh = w.nh();
    std::vector<bool> flags;
    for (const Batched& b : ins) flags.push_back(b.batched);
    auto body_flags = [&] {
      return std::vector<bool>(flags.begin() + static_cast<long>(ncc), flags.end());
    };
    auto cond_flags = [&] {
      std::vector<bool> f(flags.begin(), flags.begin() + static_cast<long>(ncc));
      f.insert(f.end(), flags.begin() + static_cast<long>(ncc + nbc), flags.end());
      return f;
    };
    {
      std::vector<bool> bf = body_flags();
      flag_carries(*w.body, bf, nbc, std::vector<bool>(nh, true));
      for (size_t j = 0; j < nh; ++j) flags[ncc + nbc + j] = bf[nbc + j];
    }
    const bool per_lane = outputs_depending_on(*w.cond, cond_flags())[0];
    // A predicate per lane: every carry runs batched and a finished lane keeps its carry.
    if (per_lane)
      for (size_t j = 0; j < nh; ++j) flags[ncc + nbc + j] = true;
    Values cc, bc, carry;
    for (size_t i = 0; i < ins.size(); ++i) {
      const Value& v = ins[i].value;
      if (i < ncc)
        cc.push_back(v);
      else if (i < ncc + nbc)
        bc.push_back(v);
      else
        carry.push_back(flags[i] && !ins[i].batched ? broadcast_batch(v, batch_size) : v);
    }
    std::vector<bool> carry_flags(flags.begin() + static_cast<long>(ncc + nbc), flags.end());
    Program cond = batched_program(*w.cond, cond_flags(), {per_lane}, batch_size);
    std::vector<bool> bf = body_flags();
    Program body = batched_program(*w.body, bf, carry_flags, batch_size);
    WhileParams bw = w;
    if (!per_lane) {
      bw.cond = shared(std::move(cond));
      bw.body = shared(std::move(body));
    } else {
      bw.cond = shared(any_lane(cond));
      bw.body = shared(masked_body(cond, body, ncc, nbc));
      bw.num_body_consts = static_cast<int64_t>(ncc + nbc);
      Values consts = cc;
      consts.insert(consts.end(), bc.begin(), bc.end());
      bc = consts;
    }
    std::vector<Batched> r;
    Values outs = emit_while(bw, cc, bc, carry);
    for (size_t j = 0; j < nh; ++j) r.push_back({outs[j], carry_flags[j]});
    return r;
  }

 private:
  // The batched cond reduced to "some lane still runs".
  static Program any_lane(const Program& cond) {
    TraceScope scope;
    Values in;
    for (int v : cond.inputs) in.push_back(scope.add_input(cond.type_of(v)));
    Value lanes = inline_program(cond, in)[0];
    Program p = scope.finish({greater(max(astype(lanes, DType::i32)), fill({}, 0.0, DType::i32))});
    p.name = cond.name + "_any";
    return p;
  }
  // [cond consts, body consts, carry] -> each lane's carry advanced where its
  // predicate holds, kept where it does not.
  static Program masked_body(const Program& cond, const Program& body, size_t ncc, size_t nbc) {
    TraceScope scope;
    Values cc, bc, h;
    for (size_t i = 0; i < ncc; ++i) cc.push_back(scope.add_input(cond.type_of(cond.inputs[i])));
    for (size_t i = 0; i < nbc; ++i) bc.push_back(scope.add_input(body.type_of(body.inputs[i])));
    for (size_t i = nbc; i < body.inputs.size(); ++i)
      h.push_back(scope.add_input(body.type_of(body.inputs[i])));
    Values ca = cc, ba = bc;
    ca.insert(ca.end(), h.begin(), h.end());
    ba.insert(ba.end(), h.begin(), h.end());
    Value lanes = inline_program(cond, ca)[0];
    Values next = inline_program(body, ba), outs;
    for (size_t j = 0; j < h.size(); ++j) {
      const Type& t = h[j].type();
      // A placed carry holds the batch after its placement axes.
      const int64_t at = placement_depth(t.placement);
      Value mask = t.placement.empty() ? broadcast_in_dim(lanes, t.shape, {0})
                                       : place(broadcast_in_dim(lanes, t.shape, {at}), t.placement);
      outs.push_back(where(mask, next[j], h[j]));
    }
    Program p = scope.finish(outs);
    p.name = body.name + "_masked";
    return p;
  }
};

const WhilePrim& while_prim() {
  static const WhilePrim p;
  return p;
}

Values emit_while(const WhileParams& w, const Values& cc, const Values& bc, const Values& carry) {
  Values args = cc;
  args.insert(args.end(), bc.begin(), bc.end());
  args.insert(args.end(), carry.begin(), carry.end());
  return emit(while_prim(), args, w.to_params());
}

}  // namespace

const Primitive& prims::while_loop() { return while_prim(); }

DRX_PRIMITIVE_FAMILY(while_loops) { registry.add(prims::while_loop()); }

DRX_PUBLIC_OP(
    "while_loop",
    "(cond_fn: (carry: Tree) -> Value, body_fn: (carry: Tree) -> Tree, init: Tree) -> Tree",
    "carry = body_fn(carry) while cond_fn(carry).");
Tree while_loop(const LoopCondFn& cond_fn, const LoopBodyFn& body_fn, const Tree& init) {
  if (!current_trace())
    throw Error(
        "while_loop: called outside a trace; use it inside a function given to drx::jit, "
        "drx::program or drx::trace");
  Values carry = leaf_values(init);
  std::vector<Type> types;
  for (const Value& v : carry) types.push_back(v.type());
  TracedFn c, b;
  detail::with_trace_context("the cond of while_loop", [&] {
    c = trace_tree_fn(
        [&](const std::vector<Tree>& a) {
          Value pred = cond_fn(a[0]);
          if (pred.dtype() != DType::bool_ || !pred.shape().empty() ||
              !pred.type().placement.empty())
            throw Error("while_loop: cond_fn returns " + pred.type().str() +
                        ", expected an unplaced bool scalar");
          return Tree(pred);
        },
        {init}, types, "while_cond");
  });
  detail::with_trace_context("the body of while_loop", [&] {
    b = trace_tree_fn([&](const std::vector<Tree>& a) { return body_fn(a[0]); }, {init}, types,
                      "while_body");
  });
  if (b.out_structure.structure() != init.structure())
    throw Error("while_loop: the body returns a carry of structure " + b.out_structure.structure() +
                ", the initial carry has structure " + init.structure());
  for (size_t j = 0; j < carry.size(); ++j) {
    const Type& out = b.program.type_of(b.program.outputs[j]);
    if (out != carry[j].type())
      throw Error("while_loop: the body returns carry leaf " + std::to_string(j) + " as " +
                  out.str() + ", the initial carry is " + carry[j].type().str() +
                  "; a carry keeps its type");
  }
  // Traced inputs are [carry, captures]; the primitive takes [consts, carry].
  auto consts_first = [&](const TracedFn& t) {
    return shared(inputs_rotated(t.program, carry.size()));
  };
  WhileParams w;
  w.cond = consts_first(c);
  w.body = consts_first(b);
  w.num_cond_consts = static_cast<int64_t>(c.captured.size());
  w.num_body_consts = static_cast<int64_t>(b.captured.size());
  return unflatten_values(init, emit_while(w, c.captured, b.captured, carry));
}

}  // namespace drx
