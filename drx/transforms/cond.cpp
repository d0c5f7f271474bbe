// The cond primitive: one class with all its rules, each a transformation of
// the two branch programs (jvp, vjp and vmap of a cond are conds of the
// branches' jvp, vjp and vmap programs).
#include "drx/transforms/cond.h"

#include <algorithm>
#include <memory>

#include "drx/core/interpret.h"
#include "drx/core/lowering.h"
#include "drx/core/primitive.h"
#include "drx/core/trace.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/trace/trace_tree.h"
#include "drx/transforms/api.h"
#include "drx/transforms/cond_params.h"
#include "drx/transforms/simplify.h"
#include "drx/transforms/transforms.h"

DRX_PUBLIC_OPS_FILE(transforms_cond);

namespace drx {
namespace {

// How messages and traced programs name the branches, by predicate.
const char* kBranchNames[2] = {"false_branch", "true_branch"};

std::shared_ptr<const Program> shared(Program p) {
  return std::make_shared<const Program>(std::move(p));
}

class CondPrim : public Primitive {
 public:
  CondPrim() : Primitive("cond") {}
  // A server-level cond may take placed operands (a branch can map over the
  // clients); its branches type the placements of what they return.
  bool placement_aware() const override { return true; }

  // stablehlo.if: each branch's program inlined into its region, reading the
  // operands from above.
  void lower(StableHloEmitter& em, const Params& p) const override {
    std::vector<std::string> args;
    for (size_t i = 1; i < em.num_operands(); ++i) args.push_back(em.operand(i));
    const CondParams c = CondParams::of(p);
    auto branch = [&](bool pred) {
      const Program& b = c.branch(pred);
      return MlirRegion{{}, [&b, args](StableHloEmitter& r, const std::vector<std::string>&) {
                          return r.inline_program(b, args);
                        }};
    };
    std::vector<Type> outs;
    for (size_t j = 0; j < em.num_results(); ++j) outs.push_back(em.result_type(j));
    em.set_results(
        em.emit("stablehlo.if", {em.operand(0)}, {}, outs, {branch(true), branch(false)}));
  }

  std::vector<Type> infer(const std::vector<Type>& ins, const Params& p) const override {
    if (ins.empty()) throw TypeError("cond: needs a predicate operand");
    if (ins[0].dtype != DType::bool_ || !ins[0].shape.empty() || !ins[0].placement.empty())
      throw TypeError("cond: the predicate is " + ins[0].str() +
                      ", expected an unplaced bool scalar");
    const CondParams c = CondParams::of(p);
    std::vector<Type> outs;
    for (int b = 0; b < 2; ++b) {
      const Program& body = c.branch(b == 1);
      if (body.inputs.size() + 1 != ins.size())
        throw TypeError("cond: " + std::to_string(ins.size() - 1) + " operands for a " +
                        kBranchNames[b] + " @" + body.name + " of " +
                        std::to_string(body.inputs.size()) + " inputs");
      for (size_t i = 0; i < body.inputs.size(); ++i) {
        const Type& want = body.type_of(body.inputs[i]);
        if (want != ins[i + 1])
          throw TypeError("cond: operand " + std::to_string(i) + " is " + ins[i + 1].str() + ", " +
                          kBranchNames[b] + " @" + body.name + " expects " + want.str());
      }
      std::vector<Type> mine;
      for (int v : body.outputs) {
        mine.push_back(body.type_of(v));
      }
      if (b == 1 && mine != outs) {
        std::string a, c;
        for (const Type& t : outs) a += (a.empty() ? "" : ", ") + t.str();
        for (const Type& t : mine) c += (c.empty() ? "" : ", ") + t.str();
        throw TypeError("cond: the branches return different types: (" + c + ") if true, (" + a +
                        ") if false");
      }
      outs = std::move(mine);
    }
    return outs;
  }

  std::vector<Array> eval(const std::vector<Array>& ins, const Params& p) const override {
    const bool pred = ins[0].data<uint8_t>()[0] != 0;
    return interpret(CondParams::of(p).branch(pred),
                     std::vector<Array>(ins.begin() + 1, ins.end()));
  }

  MaybeValues jvp(const Values& primals, const MaybeValues& tangents, const Values& outs,
                  const Params& p) const override {
    BodyDerivativeArgs d = body_jvp_args(primals, tangents, 1);
    CondParams bp = CondParams::of(p);
    for (auto& b : bp.branches) b = shared(simplify(jvp_program(*b, d.with, true)));
    return result_tangents(emit(*this, d.args, bp.to_params()), outs);
  }

  MaybeValues vjp(const Values& primals, const Values&, const MaybeValues& cts,
                  const Params& p) const override {
    BodyDerivativeArgs d = body_vjp_args(primals, cts, 1);
    MaybeValues result(primals.size());
    if (std::find(d.wrt.begin(), d.wrt.end(), true) == d.wrt.end()) return result;
    // The chosen branch's pullback, recomputing its forward pass inside.
    CondParams bp = CondParams::of(p);
    for (auto& b : bp.branches) b = shared(simplify(vjp_program(*b, d.wrt, d.with, true)));
    Values r = emit(*this, d.args, bp.to_params());
    size_t k = 0;
    for (size_t i = 0; i < d.wrt.size(); ++i)
      if (d.wrt[i]) result[i + 1] = r[k++];
    return result;
  }

  std::vector<Batched> vmap(const std::vector<Batched>& ins, int64_t batch_size,
                            const Params& p) const override {
    std::vector<bool> batched;
    Values ops;
    for (size_t i = 1; i < ins.size(); ++i) {
      batched.push_back(ins[i].batched);
      ops.push_back(ins[i].value);
    }
    std::vector<Program> bodies;
    for (const auto& b : CondParams::of(p).branches)
      bodies.push_back(vmap_program(*b, batched, batch_size));
    std::vector<Batched> r;
    if (!ins[0].batched) {
      CondParams bp;
      for (int b = 0; b < 2; ++b)
        bp.branches[static_cast<size_t>(b)] = shared(std::move(bodies[b]));
      Values args = {ins[0].value};
      args.insert(args.end(), ops.begin(), ops.end());
      for (const Value& v : emit(*this, args, bp.to_params())) r.push_back({v, true});
      return r;
    }
    // A predicate per example: both branches run, each example takes its own.
    Values if_false = inline_program(bodies[0], ops), if_true = inline_program(bodies[1], ops);
    for (size_t k = 0; k < if_true.size(); ++k) {
      Shape s(if_true[k].shape().size(), 1);
      s[0] = batch_size;
      r.push_back({where(reshape(ins[0].value, s), if_true[k], if_false[k]), true});
    }
    return r;
  }
};

// Adds unused inputs of the given types after p's inputs.
Program with_extra_inputs(Program p, const std::vector<Type>& types) {
  for (const Type& t : types) {
    p.var_types.push_back(t);
    p.inputs.push_back(static_cast<int>(p.var_types.size()) - 1);
  }
  return p;
}

}  // namespace

const Primitive& prims::cond() {
  static const CondPrim p;
  return p;
}

DRX_PRIMITIVE_FAMILY(control_flow) { registry.add(prims::cond()); }

DRX_PUBLIC_OP(
    "cond",
    "(pred: Value, true_fn: (Tree) -> Tree, false_fn: (Tree) -> Tree, operands: Tree) -> Tree",
    "true_fn(operands) if pred else false_fn(operands); both branches are traced.");
Tree cond(const Value& pred, const BranchFn& true_fn, const BranchFn& false_fn,
          const Tree& operands) {
  if (pred.dtype() != DType::bool_ || !pred.shape().empty())
    throw Error("cond: the predicate is " + pred.type().str() + ", expected a bool scalar");
  Values leaves = leaf_values(operands);
  std::vector<Type> types;
  for (const Value& v : leaves) types.push_back(v.type());
  TracedFn traced[2];
  const BranchFn* fns[2] = {&false_fn, &true_fn};
  for (int b = 0; b < 2; ++b) {
    const BranchFn& fn = *fns[b];
    detail::with_trace_context(
        b == 1 ? "the true branch of cond" : "the false branch of cond", [&] {
          traced[b] = trace_tree_fn([&fn](const std::vector<Tree>& a) { return fn(a[0]); },
                                    {operands}, types, kBranchNames[b]);
        });
  }
  if (traced[0].out_structure.structure() != traced[1].out_structure.structure())
    throw Error(
        "cond: the branches return different structures: " + traced[1].out_structure.structure() +
        " if true, " + traced[0].out_structure.structure() + " if false");
  // Values a branch uses from outside become operands; each branch gets the
  // other's as unused inputs, so both take the same operands.
  std::vector<Type> captured[2];
  for (int b = 0; b < 2; ++b)
    for (const Value& v : traced[b].captured) captured[b].push_back(v.type());
  Program false_branch = traced[0].program, true_branch = traced[1].program;
  // false: [leaves, false captures] + true captures; true: [leaves, true captures] needs the
  // false captures before its own, so it is rebuilt with them inserted.
  false_branch = with_extra_inputs(std::move(false_branch), captured[1]);
  {
    Program t = std::move(true_branch);
    const size_t own = leaves.size();
    std::vector<int> inputs(t.inputs.begin(), t.inputs.begin() + static_cast<long>(own));
    for (const Type& ty : captured[0]) {
      t.var_types.push_back(ty);
      inputs.push_back(static_cast<int>(t.var_types.size()) - 1);
    }
    inputs.insert(inputs.end(), t.inputs.begin() + static_cast<long>(own), t.inputs.end());
    t.inputs = std::move(inputs);
    true_branch = std::move(t);
  }
  Values args = {pred};
  args.insert(args.end(), leaves.begin(), leaves.end());
  for (int b = 0; b < 2; ++b)
    args.insert(args.end(), traced[b].captured.begin(), traced[b].captured.end());
  const Primitive& p = prims::cond();
  Values outs = emit(
      p, args,
      CondParams{{shared(std::move(false_branch)), shared(std::move(true_branch))}}.to_params());
  return unflatten_values(traced[1].out_structure, outs);
}

}  // namespace drx
