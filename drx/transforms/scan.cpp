// The scan primitive's types, reference semantics and batching rule, and the
// scan and fori_loop functions that trace a body into one scan equation.
#include <cstring>

#include "drx/core/interpret.h"
#include "drx/core/lowering.h"
#include "drx/core/trace.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/trace/trace_tree.h"
#include "drx/transforms/api.h"
#include "drx/transforms/loops.h"
#include "drx/transforms/program_split.h"
#include "drx/transforms/scan_prim.h"
#include "drx/transforms/simplify.h"
#include "drx/transforms/transforms.h"

DRX_PUBLIC_OPS_FILE(transforms_scan);

namespace drx {

Values emit_scan(const ScanParams& s, const Values& consts, const Values& carry, const Values& xs) {
  Values args = consts;
  args.insert(args.end(), carry.begin(), carry.end());
  args.insert(args.end(), xs.begin(), xs.end());
  return emit(prims::scan(), args, s.to_params());
}

Type row_type(const Type& t) { return Type(t.dtype, Shape(t.shape.begin() + 1, t.shape.end())); }

namespace {

Type stacked(const Type& t, int64_t n) {
  Type r = t;
  r.shape.insert(r.shape.begin(), n);
  return r;
}

size_t row_bytes(const Array& a) {
  return a.shape().empty() || a.shape()[0] == 0 ? 0
                                                : a.nbytes() / static_cast<size_t>(a.shape()[0]);
}

}  // namespace

std::vector<Type> ScanPrim::infer(const std::vector<Type>& ins, const Params& p) const {
  const ScanParams s = ScanParams::of(p);
  const Program& body = *s.body;
  if (ins.size() != body.inputs.size())
    throw TypeError("scan: " + std::to_string(ins.size()) + " operands for a body @" + body.name +
                    " of " + std::to_string(body.inputs.size()) + " inputs");
  for (size_t i = 0; i < s.nc() + s.nh(); ++i) {
    const Type& want = body.type_of(body.inputs[i]);
    if (ins[i] != want)
      throw TypeError("scan: " + std::string(i < s.nc() ? "const " : "carry ") +
                      std::to_string(i < s.nc() ? i : i - s.nc()) + " is " + ins[i].str() +
                      ", body @" + body.name + " expects " + want.str());
  }
  for (size_t j = 0; j < s.nh(); ++j) {
    const Type& in = ins[s.nc() + j];
    const Type& out = body.type_of(body.outputs[j]);
    if (in != out)
      throw TypeError("scan: carry " + std::to_string(j) + " enters the body @" + body.name +
                      " as " + in.str() + " and leaves it as " + out.str() +
                      "; a carry keeps its type");
  }
  for (size_t k = 0; k < s.nx(); ++k) {
    const Type& x = ins[s.nc() + s.nh() + k];
    if (!x.placement.empty() || x.shape.empty() || x.shape[0] != s.length)
      throw TypeError("scan: xs operand " + std::to_string(k) + " is " + x.str() +
                      ", expected an unplaced array with leading dimension length = " +
                      std::to_string(s.length));
    const Type& want = body.type_of(body.inputs[s.nc() + s.nh() + k]);
    if (row_type(x) != want)
      throw TypeError("scan: xs operand " + std::to_string(k) + " (" + x.str() +
                      ") gives slices of type " + row_type(x).str() + ", body @" + body.name +
                      " expects " + want.str());
  }
  std::vector<Type> outs;
  for (size_t j = 0; j < s.nh(); ++j) outs.push_back(ins[s.nc() + j]);
  for (size_t k = 0; k < s.ny(); ++k) {
    const Type& y = body.type_of(body.outputs[s.nh() + k]);
    if (!y.placement.empty())
      throw TypeError("scan: y " + std::to_string(k) + " of body @" + body.name + " is placed (" +
                      y.str() +
                      "); stacking would move the placement axis: reduce it in the body or "
                      "return it in the carry");
    outs.push_back(stacked(y, s.length));
  }
  return outs;
}

std::vector<Array> ScanPrim::eval(const std::vector<Array>& ins, const Params& p) const {
  const ScanParams s = ScanParams::of(p);
  const Program& body = *s.body;
  std::vector<Array> args(ins.begin(), ins.begin() + static_cast<long>(s.nc() + s.nh()));
  for (size_t k = 0; k < s.nx(); ++k) {
    const Type t = body.type_of(body.inputs[s.nc() + s.nh() + k]);
    args.emplace_back(t.dtype, t.shape);
  }
  std::vector<Array> ys;
  for (size_t k = 0; k < s.ny(); ++k) {
    const Type& t = body.type_of(body.outputs[s.nh() + k]);
    ys.emplace_back(t.dtype, stacked(t, s.length).shape);
  }
  for (int64_t i = 0; i < s.length; ++i) {
    const size_t t = static_cast<size_t>(s.reverse ? s.length - 1 - i : i);
    for (size_t k = 0; k < s.nx(); ++k) {
      const Array& x = ins[s.nc() + s.nh() + k];
      Array& row = args[s.nc() + s.nh() + k];
      std::memcpy(row.raw(), static_cast<const std::byte*>(x.raw()) + t * row_bytes(x),
                  row.nbytes());
    }
    std::vector<Array> r = interpret(body, args);
    for (size_t j = 0; j < s.nh(); ++j) args[s.nc() + j] = r[j];
    for (size_t k = 0; k < s.ny(); ++k) {
      const Array& y = r[s.nh() + k];
      std::memcpy(static_cast<std::byte*>(ys[k].raw()) + t * y.nbytes(), y.raw(), y.nbytes());
    }
  }
  std::vector<Array> outs(args.begin() + static_cast<long>(s.nc()),
                          args.begin() + static_cast<long>(s.nc() + s.nh()));
  outs.insert(outs.end(), ys.begin(), ys.end());
  return outs;
}

// State of the while: (k, consts, carry, xs, ys); k counts 0..length-1 and
// iteration k reads and writes row t = k (length-1-k reversed), as eval does.
// The counter's form (constant start, `k < length`, `k + 1`) is the one JAX
// writes and drx's importer raises back to a fori_loop.
void ScanPrim::lower(StableHloEmitter& em, const Params& p) const {
  const ScanParams s = ScanParams::of(p);
  const Program& body = *s.body;
  const size_t nc = s.nc(), nh = s.nh(), nx = s.nx(), ny = s.ny();
  std::vector<std::string> state;
  std::vector<Type> types;
  const Type index(DType::i64, {});
  if (s.length == 0) {  // no iteration: the carry as given, empty ys
    std::vector<std::string> outs;
    for (size_t j = 0; j < nh; ++j) outs.push_back(em.operand(nc + j));
    for (size_t k = 0; k < ny; ++k)
      outs.push_back(em.splat(0.0, em.result_type(nh + k).dtype, em.result_type(nh + k).shape));
    em.set_results(outs);
    return;
  }
  state.push_back(em.constant(full({}, 0.0, DType::i64)));
  types.push_back(index);
  for (size_t i = 0; i < nc + nh + nx; ++i) {
    state.push_back(em.operand(i));
    types.push_back(em.operand_type(i));
  }
  for (size_t k = 0; k < ny; ++k) {
    const Type& t = em.result_type(nh + k);
    state.push_back(em.splat(0.0, t.dtype, t.shape));
    types.push_back(t);
  }
  const int64_t length = s.length;
  const bool reverse = s.reverse;
  MlirRegion cond{types, [&](StableHloEmitter& b, const std::vector<std::string>& a) {
                    const std::string n =
                        b.constant(full({}, static_cast<double>(length), DType::i64));
                    return std::vector<std::string>{emit_compare(b, "LT", a[0], n, index)};
                  }};
  MlirRegion loop{
      types, [&](StableHloEmitter& b, const std::vector<std::string>& a) {
        std::string row = a[0];
        if (reverse)
          row = b.emit1("stablehlo.subtract",
                        {b.constant(full({}, static_cast<double>(length - 1), DType::i64)), a[0]},
                        {}, index);
        // The zero start of the other axes, made when a slice has other axes.
        std::string zero;
        auto zero_start = [&] {
          if (zero.empty()) zero = b.constant(full({}, 0.0, DType::i64));
          return zero;
        };
        std::vector<std::string> args(a.begin() + 1, a.begin() + 1 + static_cast<long>(nc + nh));
        for (size_t k = 0; k < nx; ++k) {
          const Type& xt = types[1 + nc + nh + k];
          std::vector<std::string> starts{a[1 + nc + nh + k], row};
          std::vector<int64_t> sizes = xt.shape;
          sizes[0] = 1;
          for (size_t d = 1; d < xt.shape.size(); ++d) starts.push_back(zero_start());
          const std::string slice =
              b.emit1("stablehlo.dynamic_slice", starts, {{"slice_sizes", mlir_i64_array(sizes)}},
                      Type(xt.dtype, sizes));
          args.push_back(
              b.emit1("stablehlo.reshape", {slice}, {}, body.type_of(body.inputs[nc + nh + k])));
        }
        const std::vector<std::string> r = b.inline_program(body, args);
        std::vector<std::string> next{
            b.emit1("stablehlo.add", {a[0], b.constant(full({}, 1.0, DType::i64))}, {}, index)};
        next.insert(next.end(), a.begin() + 1, a.begin() + 1 + static_cast<long>(nc));
        next.insert(next.end(), r.begin(), r.begin() + static_cast<long>(nh));
        next.insert(next.end(), a.begin() + 1 + static_cast<long>(nc + nh),
                    a.begin() + 1 + static_cast<long>(nc + nh + nx));
        for (size_t k = 0; k < ny; ++k) {
          const Type& yt = types[1 + nc + nh + nx + k];
          Shape one = yt.shape;
          one[0] = 1;
          std::vector<std::string> ins{
              a[1 + nc + nh + nx + k],
              b.emit1("stablehlo.reshape", {r[nh + k]}, {}, Type(yt.dtype, one)), row};
          for (size_t d = 1; d < yt.shape.size(); ++d) ins.push_back(zero_start());
          next.push_back(b.emit1("stablehlo.dynamic_update_slice", ins, {}, yt));
        }
        return next;
      }};
  const std::vector<std::string> out = em.emit("stablehlo.while", state, {}, types, {cond, loop});
  std::vector<std::string> results(out.begin() + 1 + static_cast<long>(nc),
                                   out.begin() + 1 + static_cast<long>(nc + nh));
  results.insert(results.end(), out.begin() + 1 + static_cast<long>(nc + nh + nx), out.end());
  em.set_results(results);
}

std::vector<Batched> ScanPrim::vmap(const std::vector<Batched>& ins, int64_t batch_size,
                                    const Params& p) const {
  const ScanParams s = ScanParams::of(p);
  const Program& body = *s.body;
  std::vector<bool> flags;
  for (const Batched& b : ins) flags.push_back(b.batched);
  // A carry is batched if its initial value is or if the body makes it so.
  std::vector<bool> dep = flag_carries(body, flags, s.nc(), std::vector<bool>(s.nh(), true));
  std::vector<bool> out_flags(flags.begin() + static_cast<long>(s.nc()),
                              flags.begin() + static_cast<long>(s.nc() + s.nh()));
  out_flags.insert(out_flags.end(), dep.begin() + static_cast<long>(s.nh()), dep.end());
  Values consts, carry, xs;
  for (size_t i = 0; i < ins.size(); ++i) {
    Value v = ins[i].value;
    if (i < s.nc()) {
      consts.push_back(v);
    } else if (i < s.nc() + s.nh()) {
      carry.push_back(flags[i] && !ins[i].batched ? broadcast_batch(v, batch_size) : v);
    } else {
      // [B, length, ...] -> [length, B, ...]: the scan slices its leading axis.
      xs.push_back(flags[i] ? move_axis(v, 0, 1) : v);
    }
  }
  ScanParams b =
      s.with_body(batched_program(body, flags, out_flags, batch_size), s.num_consts, s.num_carry);
  Values r = emit_scan(b, consts, carry, xs);
  std::vector<Batched> result;
  for (size_t k = 0; k < r.size(); ++k) {
    const bool batched = out_flags[k];
    result.push_back({batched && k >= s.nh() ? move_axis(r[k], 1, 0) : r[k], batched});
  }
  return result;
}

const Primitive& prims::scan() {
  static const ScanPrim p;
  return p;
}

DRX_PRIMITIVE_FAMILY(loops) { registry.add(prims::scan()); }

// ---- the functions users call ---------------------------------------------

DRX_PUBLIC_OP(
    "scan",
    "(f: (carry: Tree, x: Tree) -> pair<Tree, Tree>, init: Tree, xs: Tree, options: ScanOptions = "
    "{}) -> pair<Tree, Tree> | (f, init: Tree, xs: Tree, length: int64) -> pair<Tree, Tree>",
    "Loops f over the leading axis of xs, threading a carry; returns the final carry and the "
    "stacked outputs.");
std::pair<Tree, Tree> scan(const ScanFn& f, const Tree& init, const Tree& xs,
                           const ScanOptions& options) {
  if (!current_trace())
    throw Error(
        "scan: called outside a trace; use it inside a function given to drx::jit, "
        "drx::grad, drx::program or drx::trace");
  if (options.length < -1)
    throw Error("scan: length " + std::to_string(options.length) +
                " is negative; expected a count of iterations >= 0 (or -1, the default, to take "
                "it from the leading dimension of xs)");
  Values carry = leaf_values(init), x_leaves = leaf_values(xs);
  int64_t length = options.length;
  std::vector<Type> types;
  for (const Value& c : carry) types.push_back(c.type());
  for (size_t k = 0; k < x_leaves.size(); ++k) {
    const Type& t = x_leaves[k].type();
    if (t.shape.empty() || !t.placement.empty())
      throw Error("scan: xs leaf " + std::to_string(k) + " is " + t.str() +
                  ", expected an unplaced array with a leading axis to scan over");
    if (length >= 0 && t.shape[0] != length)
      throw Error("scan: xs leaf " + std::to_string(k) + " is " + t.str() + ", its leading size " +
                  std::to_string(t.shape[0]) + " is not the length " + std::to_string(length) +
                  (options.length >= 0 ? " given" : " of the earlier leaves"));
    length = t.shape[0];
    types.push_back(row_type(t));
  }
  if (length < 0)
    throw Error(
        "scan: xs has no leaves, so the length must be given: a count of iterations >= 0 "
        "(scan's last argument or ScanOptions::length)");
  if (options.checkpoint_every < 0)
    throw Error("scan: checkpoint_every is " + std::to_string(options.checkpoint_every) +
                ", expected 0 (off) or a block size >= 1");
  TracedFn traced;
  detail::with_trace_context("the body of scan", [&] {
    traced = trace_tree_fn(
        [&f](const std::vector<Tree>& a) {
          auto [c, y] = f(a[0], a[1]);
          return Tree::list({c, y});
        },
        {init, xs}, types, "scan_body");
  });
  const Tree& new_carry = traced.out_structure[0];
  if (new_carry.structure() != init.structure())
    throw Error("scan: the body returns a carry of structure " + new_carry.structure() +
                ", the initial carry has structure " + init.structure());
  const Program& body = traced.program;
  for (size_t j = 0; j < carry.size(); ++j) {
    const Type& out = body.type_of(body.outputs[j]);
    if (out != carry[j].type())
      throw Error("scan: the body returns carry leaf " + std::to_string(j) + " as " + out.str() +
                  ", the initial carry is " + carry[j].type().str() +
                  "; a carry keeps its type (use astype in the body or in init)");
  }
  for (size_t k = carry.size(); k < body.outputs.size(); ++k)
    if (!body.type_of(body.outputs[k]).placement.empty())
      throw Error("scan: y leaf " + std::to_string(k - carry.size()) + " is placed (" +
                  body.type_of(body.outputs[k]).str() +
                  "); reduce it in the body or return it in the carry");
  // The traced inputs are [carry, x, captures]; scan takes [consts, carry, x].
  const size_t nh = carry.size(), nx = x_leaves.size(), nc = traced.captured.size();
  ScanParams s;
  s.body = std::make_shared<const Program>(simplify(inputs_rotated(body, nh + nx)));
  s.length = length;
  s.num_consts = static_cast<int64_t>(nc);
  s.num_carry = static_cast<int64_t>(nh);
  s.reverse = options.reverse;
  s.remat = options.remat;
  s.checkpoint_every = options.checkpoint_every;
  Values r = emit_scan(s, traced.captured, carry, x_leaves);
  Tree final_carry = unflatten_values(init, Values(r.begin(), r.begin() + static_cast<long>(nh)));
  Tree ys =
      unflatten_values(traced.out_structure[1], Values(r.begin() + static_cast<long>(nh), r.end()));
  return {final_carry, ys};
}

std::pair<Tree, Tree> scan(const ScanFn& f, const Tree& init, const Tree& xs, int64_t length) {
  ScanOptions o;
  o.length = length;
  return scan(f, init, xs, o);
}

DRX_PUBLIC_OP("fori_loop",
              "(lo: int64, hi: int64, body: (i: Value, carry: Tree) -> Tree, init: Tree, options: "
              "ScanOptions = {}) -> Tree",
              "carry = body(i, carry) for i in [lo, hi).");
Tree fori_loop(int64_t lo, int64_t hi, const ForiBody& body, const Tree& init,
               const ScanOptions& options) {
  if (options.reverse)
    throw Error("fori_loop: reverse is not an option of fori_loop; count down inside the body");
  if (options.length >= 0 && options.length != std::max<int64_t>(hi - lo, 0))
    throw Error("fori_loop: options.length " + std::to_string(options.length) +
                " contradicts the bounds [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
  if (!current_trace())
    throw Error(
        "fori_loop: called outside a trace; use it inside a function given to drx::jit, "
        "drx::grad, drx::program or drx::trace");
  ScanOptions o = options;
  o.length = std::max<int64_t>(hi - lo, 0);
  Tree start = Tree::list({Tree(fill({}, static_cast<double>(lo), DType::i32)), init});
  auto step = [&](const Tree& c, const Tree&) -> std::pair<Tree, Tree> {
    const Value i = c[0].value();
    Tree next;
    detail::with_trace_context("the body of fori_loop", [&] { next = body(i, c[1]); });
    if (next.structure() != c[1].structure())
      throw Error("fori_loop: the body returns a carry of structure " + next.structure() +
                  ", the initial carry has structure " + c[1].structure());
    const Values got = leaf_values(next), want = leaf_values(c[1]);
    for (size_t j = 0; j < got.size(); ++j)
      if (got[j].type() != want[j].type())
        throw Error("fori_loop: the body returns carry leaf " + std::to_string(j) + " as " +
                    got[j].type().str() + ", the initial carry is " + want[j].type().str() +
                    "; a carry keeps its type (use astype in the body or in init)");
    return {Tree::list({Tree(i + scalar_like(i, 1.0)), next}), Tree()};
  };
  return scan(step, start, Tree(), o).first[1];
}

}  // namespace drx
