#include "drx/transforms/api.h"

#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/trace/trace_tree.h"
#include "drx/transforms/transforms.h"

DRX_PUBLIC_OPS_FILE(transforms_api);

namespace drx {

namespace {
Values concat(Values a, const Values& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Index of the first leaf of each argument, plus the total at the end.
std::vector<size_t> leaf_offsets(const std::vector<Tree>& args) {
  std::vector<size_t> off{0};
  for (const Tree& a : args) off.push_back(off.back() + tree_leaves(a).size());
  return off;
}

void require_in_trace(const char* what) {
  if (!current_trace())
    throw Error(std::string(what) +
                ": must be called on Values inside a trace (wrap the caller in drx::jit)");
}

Type leaf_type(const Tree& leaf) {
  if (leaf.kind() == Tree::Kind::array) return Type(leaf.array().dtype(), leaf.array().shape());
  return leaf.value().type();
}

// The first leaf of `t` that is not floating-point, as its path below the
// argument (e.g. "['b']", "[0]"; "" for a leaf argument) and type.
std::optional<std::pair<std::string, Type>> non_float_leaf(const Tree& t, const std::string& path) {
  if (t.is_leaf()) {
    Type ty = leaf_type(t);
    if (is_floating(ty.dtype)) return std::nullopt;
    return std::make_pair(path, ty);
  }
  for (size_t i = 0; i < t.size(); ++i) {
    std::string sub =
        t.kind() == Tree::Kind::dict ? "['" + t.keys()[i] + "']" : "[" + std::to_string(i) + "]";
    if (auto r = non_float_leaf(t.children()[i], path + sub)) return r;
  }
  return std::nullopt;
}

// How the caller wrote this grad, with allow_int added, for the error message.
std::string call_with_allow_int(const GradSpec& spec, int argnum) {
  std::string args;
  if (spec.as_list) {
    for (int a : spec.argnums) args += (args.empty() ? "" : ", ") + std::to_string(a);
    args = "{" + args + "}";
  } else {
    args = std::to_string(argnum);
  }
  return std::string("drx::") + (spec.with_value ? "value_and_grad" : "grad") + "(f, " + args +
         ", drx::GradOptions{.allow_int = true})";
}
}  // namespace

namespace detail {
void with_trace_context(const std::string& where, const std::function<void()>& trace) {
  // Rethrown as the caught type so that callers catching a subclass still do.
  const std::string line = "\n  in " + where;
  try {
    trace();
  } catch (const ParseError& e) {
    throw ParseError(e.what() + line);
  } catch (const TypeError& e) {
    throw TypeError(e.what() + line);
  } catch (const Error& e) {
    throw Error(e.what() + line);
  }
}
}  // namespace detail

DRX_PUBLIC_OP("grad",
              "(f, argnum: int = 0, options: GradOptions = {}) -> Function | (f, argnums: "
              "vector<int>, options: GradOptions = {}) -> Function",
              "The gradient of a scalar function with respect to its arguments.");
DRX_PUBLIC_OP("value_and_grad", "(f, argnum: int = 0, options: GradOptions = {}) -> Function",
              "f's value and gradient together.");
TreeFn grad_fn(TreeFn f, GradSpec spec) {
  return [f = std::move(f), spec](const std::vector<Tree>& args) -> Tree {
    const char* what = spec.with_value ? "value_and_grad" : "grad";
    require_in_trace(what);
    for (int a : spec.argnums)
      if (a < 0 || static_cast<size_t>(a) >= args.size())
        throw Error(std::string(what) + ": argnum " + std::to_string(a) +
                    " is out of range for a function of " + std::to_string(args.size()) +
                    " argument" + (args.size() == 1 ? "" : "s"));
    // An integer argument has no gradient; asking for one is usually a wrong
    // argnum, so it is an error unless allowed (then its gradient is zeros).
    if (!spec.options.allow_int)
      for (int a : spec.argnums)
        if (auto bad = non_float_leaf(args[static_cast<size_t>(a)], "")) {
          const auto& [path, type] = *bad;
          std::string kind = type.dtype == DType::bool_ ? "bool" : "integer";
          throw TypeError(std::string(what) + ": argument " + std::to_string(a) +
                          (path.empty() ? "" : " leaf " + path) + " has " + kind + " type " +
                          type.str() + "; " + what +
                          " differentiates only floating-point arguments. Convert it with "
                          "drx::astype, differentiate with respect to other arguments, or "
                          "take zero gradients for it with " +
                          call_with_allow_int(spec, a));
        }
    Values leaves = leaf_values(Tree::list(args));
    TracedFn t;
    detail::with_trace_context(std::string("the function differentiated by ") + what,
                               [&] { t = trace_tree_fn(f, args, leaf_types(args), what); });
    const Program& p = t.program;
    if (p.outputs.size() != 1 || !p.type_of(p.outputs[0]).shape.empty() ||
        !is_floating(p.type_of(p.outputs[0]).dtype)) {
      std::string got;
      for (const Type& ty : p.output_types()) got += (got.empty() ? "" : ", ") + ty.str();
      throw Error(std::string(what) +
                  ": the function must return one floating-point scalar, got (" + got + ")");
    }
    std::vector<size_t> off = leaf_offsets(args);
    std::vector<bool> wrt(p.inputs.size(), false);
    for (int a : spec.argnums)
      for (size_t i = off[static_cast<size_t>(a)]; i < off[static_cast<size_t>(a) + 1]; ++i)
        wrt[i] = true;
    Values outs;
    Value one = constant(full({}, 1.0, p.type_of(p.outputs[0]).dtype));
    MaybeValues cts = vjp_emit(p, concat(leaves, t.captured), {one}, wrt, outs);
    std::vector<Tree> grads;
    for (int a : spec.argnums) {
      Values g;
      for (size_t i = off[static_cast<size_t>(a)]; i < off[static_cast<size_t>(a) + 1]; ++i)
        g.push_back(cts[i] ? *cts[i] : zeros_like(leaves[i]));
      grads.push_back(unflatten_values(args[static_cast<size_t>(a)], g));
    }
    Tree g = spec.as_list ? Tree::list(grads) : grads[0];
    return spec.with_value ? Tree::list({Tree(outs[0]), g}) : g;
  };
}

DRX_PUBLIC_OP("jvp", "(f, primals: vector<Tree>, tangents: vector<Tree>) -> pair<R, R>",
              "Forward mode: f's outputs and their tangents.");
Tree jvp_call(const TreeFn& f, const std::vector<Tree>& primals,
              const std::vector<Tree>& tangents) {
  require_in_trace("jvp");
  if (Tree::list(primals).structure() != Tree::list(tangents).structure())
    throw Error("jvp: tangents have structure " + Tree::list(tangents).structure() +
                ", primals have " + Tree::list(primals).structure());
  Values p_leaves = leaf_values(Tree::list(primals));
  Values t_leaves = leaf_values(Tree::list(tangents));
  for (size_t i = 0; i < p_leaves.size(); ++i)
    if (p_leaves[i].dtype() != t_leaves[i].dtype() || p_leaves[i].shape() != t_leaves[i].shape())
      throw Error("jvp: tangent " + std::to_string(i) + " has type " + t_leaves[i].type().str() +
                  ", its primal has " + p_leaves[i].type().str());
  TracedFn t = trace_tree_fn(f, primals, leaf_types(primals), "jvp");
  MaybeValues tangents_in(t_leaves.begin(), t_leaves.end());
  tangents_in.resize(p_leaves.size() + t.captured.size());
  MaybeValues out_t;
  Values outs = jvp_emit(t.program, concat(p_leaves, t.captured), tangents_in, out_t);
  Values touts;
  for (size_t i = 0; i < outs.size(); ++i)
    touts.push_back(out_t[i] ? *out_t[i] : zeros_like(outs[i]));
  return Tree::list(
      {unflatten_values(t.out_structure, outs), unflatten_values(t.out_structure, touts)});
}

DRX_PUBLIC_OP("vjp", "(f, primals: vector<Tree>) -> pair<R, pullback>",
              "Reverse mode: f's outputs and the pullback of cotangents.");
VjpResult vjp_call(const TreeFn& f, const std::vector<Tree>& primals) {
  require_in_trace("vjp");
  Values leaves = leaf_values(Tree::list(primals));
  auto t = std::make_shared<TracedFn>(trace_tree_fn(f, primals, leaf_types(primals), "vjp"));
  Values args = concat(leaves, t->captured);
  Values outs = inline_program(t->program, args);
  VjpResult r;
  r.outputs = unflatten_values(t->out_structure, outs);
  r.pullback = [t, args, primals, n = leaves.size()](const Tree& ct) {
    if (ct.structure() != t->out_structure.structure())
      throw Error("vjp: cotangent has structure " + ct.structure() + ", the output has " +
                  t->out_structure.structure());
    Values ct_leaves = leaf_values(ct);
    for (size_t i = 0; i < ct_leaves.size(); ++i) {
      const Type& want = t->program.type_of(t->program.outputs[i]);
      if (ct_leaves[i].dtype() != want.dtype || ct_leaves[i].shape() != want.shape)
        throw Error("vjp: cotangent " + std::to_string(i) + " has type " +
                    ct_leaves[i].type().str() + ", the output has " + want.str());
    }
    std::vector<bool> wrt(args.size(), false);
    std::fill(wrt.begin(), wrt.begin() + static_cast<std::ptrdiff_t>(n), true);
    Values outs;
    MaybeValues cts =
        vjp_emit(t->program, args, MaybeValues(ct_leaves.begin(), ct_leaves.end()), wrt, outs);
    std::vector<size_t> off = leaf_offsets(primals);
    std::vector<Tree> result;
    for (size_t a = 0; a < primals.size(); ++a) {
      Values g;
      for (size_t i = off[a]; i < off[a + 1]; ++i)
        g.push_back(cts[i] ? *cts[i] : zeros_like(args[i]));
      result.push_back(unflatten_values(primals[a], g));
    }
    return result;
  };
  return r;
}

namespace {
std::optional<int64_t> axis_for(const Axes& axes, size_t i, size_t n, const char* what) {
  if (axes.size() == 1) return axes[0];
  if (axes.size() != n)
    throw Error(std::string("vmap: ") + std::to_string(axes.size()) + " " + what + " given for " +
                std::to_string(n) + (std::string(what) == "in_axes" ? " arguments" : " outputs"));
  return axes[i];
}
}  // namespace

DRX_PUBLIC_OP("vmap", "(f, in_axes: Axes = {0}, out_axes: Axes = {0}) -> Function",
              "f vectorised over the given argument axes.");
TreeFn vmap_fn(TreeFn f, Axes in_axes, Axes out_axes) {
  return [f = std::move(f), in_axes, out_axes](const std::vector<Tree>& args) -> Tree {
    require_in_trace("vmap");
    std::vector<Batched> ins;
    std::vector<Type> types;
    int64_t size = -1;
    std::string size_from;
    for (size_t a = 0; a < args.size(); ++a) {
      std::optional<int64_t> ax = axis_for(in_axes, a, args.size(), "in_axes");
      size_t leaf = 0;
      for (const Value& v : leaf_values(args[a])) {
        std::string where = "argument " + std::to_string(a) + " leaf " + std::to_string(leaf++);
        if (!ax) {
          ins.push_back({v, false});
          types.push_back(v.type());
          continue;
        }
        if (v.ndim() == 0)
          throw Error("vmap: " + where + " is a scalar (" + v.type().str() + ") and has no axis " +
                      std::to_string(*ax) + " to map over");
        if (!v.type().placement.empty())
          throw Error("vmap: " + where + " (" + v.type().str() +
                      ") is placed; vmap a whole drx::program instead, or work per client in "
                      "map_fn");
        int64_t axis = normalize_axis(*ax, v.ndim(), "vmap");
        int64_t n = v.shape()[static_cast<size_t>(axis)];
        if (size >= 0 && n != size)
          throw Error("vmap: mapped axes have different sizes: " + std::to_string(size) + " (" +
                      size_from + ") vs " + std::to_string(n) + " (" + where + ")");
        size = n;
        size_from = where;
        Value moved = move_axis(v, axis, 0);
        Type t = moved.type();
        t.shape.erase(t.shape.begin());
        ins.push_back({moved, true});
        types.push_back(t);
      }
    }
    if (size < 0) throw Error("vmap: no argument is mapped (all in_axes are std::nullopt)");
    // Errors while tracing or batching the function say which vmap they come from.
    std::string axes;
    for (const std::optional<int64_t>& a : in_axes)
      axes += (axes.empty() ? "" : ", ") + (a ? std::to_string(*a) : std::string("nullopt"));
    const std::string where = "the function mapped by vmap (in_axes {" + axes +
                              "}, a mapped axis of size " + std::to_string(size) + ")";
    TracedFn t;
    std::vector<Batched> outs;
    detail::with_trace_context(where, [&] {
      t = trace_tree_fn(f, args, types, "vmap");
      for (const Value& c : t.captured) ins.push_back({c, false});
      outs = vmap_emit(t.program, ins, size);
    });
    Values result;
    for (size_t i = 0; i < outs.size(); ++i) {
      std::optional<int64_t> ax = axis_for(out_axes, i, outs.size(), "out_axes");
      if (!ax) {
        if (outs[i].batched)
          throw Error("vmap: output " + std::to_string(i) +
                      " depends on the mapped axis but its out_axes entry is std::nullopt");
        result.push_back(outs[i].value);
        continue;
      }
      Value v = outs[i].batched ? outs[i].value : broadcast_batch(outs[i].value, size);
      int64_t batch_at = 0;
      if (!v.type().placement.empty()) {
        batch_at = placement_depth(v.type().placement);
        v = place(v, "");  // the result leaves its placement: the batch may go first
      }
      result.push_back(move_axis(v, batch_at, normalize_axis(*ax, v.ndim(), "vmap out_axes")));
    }
    return unflatten_values(t.out_structure, result);
  };
}

}  // namespace drx
