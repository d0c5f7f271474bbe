#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

// clang-format off: drx/transforms/api.h shares this file's name but is not its
// header, so it stays in order here instead of going first.
#include "drx/core/primitive.h"
#include "drx/mapreduce/map_fn_params.h"
#include "drx/mapreduce/mapreduce.h"
#include "drx/mapreduce/primitives.h"
#include "drx/ops/op_table.h"
#include "drx/ops/ops.h"
#include "drx/trace/trace_tree.h"
#include "drx/transforms/api.h"

DRX_PUBLIC_OPS_FILE(mapreduce_api);
// clang-format on

namespace drx {

Value emit_broadcast(const Value& x, const std::string& placement, int64_t size) {
  const Primitive& p = prims::broadcast();
  return emit1(p, {x}, Params{{"placement", placement}, {"size", size}});
}

Value emit_reduce_sum(const Value& x) {
  const Primitive& p = prims::reduce_sum();
  return emit1(p, {x}, Params{{"placement", x.type().placement}});
}

namespace {
void require_placed(const char* op, const Value& x) {
  if (x.type().placement.empty())
    throw Error(std::string(op) + ": operand " + x.type().str() +
                " is not placed; reduce over a placement takes a placed value (from "
                "drx::broadcast, drx::map_fn or a placed program argument)");
  if (placement_depth(x.type().placement) > 1) throw Error(nested_reduce_fix(op, x.type()));
}

Value reduce_with(const char* op, const Primitive& prim, const Value& x) {
  require_program_scope(op);
  require_placed(op, x);
  return emit1(prim, {x}, Params{{"placement", x.type().placement}});
}

Tree map_leaves(const Tree& t, Value (*fn)(const Value&)) {
  return tree_map([fn](const Value& v) { return fn(v); }, t);
}

// A program argument leaf that placement inference left on the server
// although it has a leading dimension: its size matched no declared placement
// (or several). Remembered while the program's function runs so that map_fn,
// given this leaf, explains the size mismatch instead of suggesting broadcast.
struct InferredServerLeaf {
  Value value;
  size_t arg = 0;
  std::vector<std::string> candidates;      // placements of its size (several = ambiguous)
  std::string program_call;                 // the program's declaration, for the hint
  std::vector<std::string> arg_placements;  // where each argument went (first leaf)
};
thread_local std::vector<InferredServerLeaf> inferred_server_leaves;

// Keeps the records of one program's arguments for its function's lifetime.
class InferredServerScope {
 public:
  InferredServerScope() : start_(inferred_server_leaves.size()) {}
  ~InferredServerScope() { inferred_server_leaves.resize(start_); }
  InferredServerScope(const InferredServerScope&) = delete;
  InferredServerScope& operator=(const InferredServerScope&) = delete;

 private:
  size_t start_;
};

const InferredServerLeaf* find_inferred_server_leaf(const Value& v) {
  for (auto it = inferred_server_leaves.rbegin(); it != inferred_server_leaves.rend(); ++it)
    if (it->value.trace() == v.trace() && it->value.id() == v.id()) return &*it;
  return nullptr;
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

// What placement inference did with one argument leaf that has a leading dimension.
struct InferredLeaf {
  size_t arg = 0, leaf = 0, leaves = 1;
  Type type;                            // as given, unplaced
  std::vector<std::string> candidates;  // placements of its leading size
};

// `drx::program({{"clients", 8}}, f` as the user would write it.
std::string program_call(const Placements& placements) {
  std::string s;
  for (const auto& [name, size] : placements)
    s += (s.empty() ? "" : ", ") + std::string("{") + quoted(name) + ", " + std::to_string(size) +
         "}";
  return "drx::program({" + s + "}, f";
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

// The notes for an error escaping a program about arguments that inference placed (or left on
// the server for ambiguity): what it did to each, and the in_placements that say so explicitly.
// An error is about such an argument when it shows the argument's type as inference made it
// ("f32[3]@clients"; "f32[3,2]" when ambiguous). "" when it is about none of them, or already
// explains in_placements (map_fn's for an argument left on the server).
std::string inference_note(const std::string& message, const std::vector<InferredLeaf>& leaves,
                           const std::vector<std::string>& arg_placements,
                           const Placements& placements) {
  if (message.find("in_placements") != std::string::npos) return "";
  std::string s;
  for (const InferredLeaf& l : leaves) {
    const bool placed = l.candidates.size() == 1;
    Type as_inferred = l.type;
    if (placed) as_inferred.placement = l.candidates[0];
    if (message.find(as_inferred.str()) == std::string::npos) continue;
    const std::string n = std::to_string(l.type.shape[0]);
    s += "\n  note: argument " + std::to_string(l.arg) +
         (l.leaves > 1 ? " leaf " + std::to_string(l.leaf) : "") + " (" + l.type.str() + ") ";
    if (placed)
      s += "was placed at '" + l.candidates[0] +
           "' by placement inference: its leading dimension " + n +
           " equals the size of placement '" + l.candidates[0] + "'";
    else
      s += "was left on the server by placement inference, which found it ambiguous: its leading "
           "dimension " +
           n + " is the size of placements " + quoted_list(l.candidates);
  }
  if (s.empty()) return "";
  std::string list;
  for (const std::string& p : arg_placements) list += (list.empty() ? "" : ", ") + quoted(p);
  return s + "\n  note: inference gave in_placements {" + list +
         "} (\"\" = server); to place arguments otherwise, pass in_placements, e.g. " +
         program_call(placements) + ", /*in_placements=*/{" + list + "})";
}

// The message with the notes placed after the original message, before the context lines
// ("\n  in the map_fn body ...") that bodies traced inside the program added.
std::string with_notes(const std::string& message, const std::string& notes) {
  const size_t at = std::min(message.find("\n  in "), message.size());
  return message.substr(0, at) + notes + message.substr(at);
}

// Runs fn; a drx::Error escaping it that is about an inferred argument is rethrown as the same
// type with inference_note's notes.
Tree with_inference_notes(const std::vector<InferredLeaf>& leaves,
                          const std::vector<std::string>& arg_placements,
                          const Placements& placements, const std::function<Tree()>& fn) {
  if (leaves.empty()) return fn();
  auto noted = [&](const Error& e) {
    return with_notes(e.what(), inference_note(e.what(), leaves, arg_placements, placements));
  };
  try {
    return fn();
  } catch (const ParseError& e) {
    throw ParseError(noted(e));
  } catch (const TypeError& e) {
    throw TypeError(noted(e));
  } catch (const Error& e) {
    throw Error(noted(e));
  }
}

// map_fn was given a program argument that inference did not place.
[[noreturn]] void throw_not_inferred(size_t leaf, const Type& t, const InferredServerLeaf& r,
                                     const std::string& placed_at) {
  const std::string n = std::to_string(t.shape[0]);
  std::string target = placed_at, reason, fix;
  if (r.candidates.size() > 1) {
    std::string names;
    for (const std::string& c : r.candidates) names += (names.empty() ? "'" : ", '") + c + "'";
    reason = "is the size of several placements (" + names + ")";
    fix = "Name its placement explicitly with in_placements";
    if (target.empty()) target = r.candidates.front();
  } else {
    // The placement this map_fn needs: that of its placed arguments, else the
    // only one declared.
    const Placements& declared = declared_placements();
    if (target.empty() && declared.size() == 1) target = declared.front().first;
    if (!target.empty()) {
      const std::string size = std::to_string(placement_size(target, "map_fn"));
      reason = "is not the size " + size + " of placement '" + target + "'";
      fix = "Give it " + size +
            " rows (one per client) or place arguments explicitly with "
            "in_placements";
    } else {
      std::string all;
      for (const auto& [name, size] : declared)
        all += (all.empty() ? "" : ", ") + name + "=" + std::to_string(size);
      reason = "is not the size of any declared placement (" + all + ")";
      fix = "Give it one row per client or place arguments explicitly with in_placements";
      target = declared.front().first;
    }
  }
  std::vector<std::string> in = r.arg_placements;
  in[r.arg] = target;
  std::string list;
  for (const std::string& p : in) list += (list.empty() ? "" : ", ") + quoted(p);
  throw Error("map_fn: argument leaf " + std::to_string(leaf) + " (" + t.str() +
              ") is not placed: it is program argument " + std::to_string(r.arg) +
              ", whose leading dimension " + n + " " + reason +
              ", so drx::program, which without in_placements places an argument only where its "
              "leading dimension equals exactly one declared placement's size, left it on the "
              "server. " +
              fix + ", e.g. " + r.program_call + ", /*in_placements=*/{" + list +
              "}) (\"\" = server); if it is a server value, drx::broadcast it first");
}
}  // namespace

DRX_PUBLIC_OP("broadcast",
              "(x: Value) -> Value | (x: Value, placement: string) -> Value | (x: Tree) -> Tree | "
              "(x: Tree, placement: string) -> Tree",
              "Server value to one copy per client of a placement.");
Value broadcast(const Value& x) { return broadcast(x, default_placement("broadcast")); }

Value broadcast(const Value& x, const std::string& placement) {
  require_program_scope("broadcast");
  // The primitive's typing rule explains an operand that is already placed.
  return emit_broadcast(x, placement, placement_size(placement, "broadcast"));
}

Tree broadcast(const Tree& x) {
  std::string p = default_placement("broadcast");
  return tree_map([&](const Value& v) { return broadcast(v, p); }, x);
}
Tree broadcast(const Tree& x, const std::string& placement) {
  return tree_map([&](const Value& v) { return broadcast(v, placement); }, x);
}

DRX_PUBLIC_OP("reduce_sum", "(x: Value) -> Value | (x: Tree) -> Tree",
              "Placed to server: the sum over the clients (0 over none).");
Value reduce_sum(const Value& x) { return reduce_with("reduce_sum", prims::reduce_sum(), x); }
DRX_PUBLIC_OP("reduce_max", "(x: Value) -> Value | (x: Tree) -> Tree",
              "Placed to server: the maximum over the clients.");
Value reduce_max(const Value& x) { return reduce_with("reduce_max", prims::reduce_max(), x); }
DRX_PUBLIC_OP("reduce_min", "(x: Value) -> Value | (x: Tree) -> Tree",
              "Placed to server: the minimum over the clients.");
Value reduce_min(const Value& x) { return reduce_with("reduce_min", prims::reduce_min(), x); }

DRX_PUBLIC_OP("reduce_mean", "(x: Value) -> Value | (x: Tree) -> Tree",
              "Placed to server: the mean over the clients (0 over none).");
Value reduce_mean(const Value& x) {
  require_program_scope("reduce_mean");
  require_placed("reduce_mean", x);
  if (!is_floating(x.dtype()))
    throw Error("reduce_mean: operand " + x.type().str() + " is not floating-point; use astype");
  const int64_t n = x.shape()[0];
  // Over no clients the mean is 0 (the empty sum), not 0/0; n is known when tracing, so a
  // mean over clients keeps its bits.
  if (n == 0) return emit_reduce_sum(x);
  return emit_reduce_sum(x) / static_cast<double>(n);
}

DRX_PUBLIC_OP("reduce_weighted_mean", "(x: Value, w: Value) -> Value | (x: Tree, w: Value) -> Tree",
              "Placed to server: sum_i w_i x_i / sum_i w_i (0 when the weights sum to 0).");
Value reduce_weighted_mean(const Value& x, const Value& w) {
  require_program_scope("reduce_weighted_mean");
  require_placed("reduce_weighted_mean", x);
  require_placed("reduce_weighted_mean", w);
  const Type xt = x.type(), wt = w.type();
  if (wt.placement != xt.placement || wt.shape.size() != 1 || wt.shape[0] != xt.shape[0] ||
      wt.dtype != xt.dtype)
    throw Error("reduce_weighted_mean: weights " + wt.str() + " must be one " +
                std::string(dtype_name(xt.dtype)) + " per client of " + xt.str() + ", i.e. " +
                std::string(dtype_name(xt.dtype)) + "[" + std::to_string(xt.shape[0]) + "]@" +
                xt.placement);
  Value weighted = map_fn([](Value xi, Value wi) { return xi * wi; }, x, w);
  const Value num = emit_reduce_sum(weighted), den = emit_reduce_sum(w);
  // Weights summing to 0 (every client dropped out) give 0, not 0/0. The division sees 1
  // there, so that its derivative is 0 rather than NaN too; elsewhere it is num / den, the
  // same bits as ever.
  const Value some = not_equal(den, scalar_like(den, 0.0));
  const Value safe_den = where(some, den, scalar_like(den, 1.0));
  return where(some, num / safe_den, zeros_like(num));
}

DRX_PUBLIC_OP("placement_softmax", "(x: Value) -> Value",
              "Over the clients of x's placement, per element: exp(x_i) / sum_j exp(x_j).");
Value placement_softmax(const Value& x) {
  require_program_scope("placement_softmax");
  require_placed("placement_softmax", x);
  if (!is_floating(x.dtype()))
    throw Error("placement_softmax: operand " + x.type().str() + " is not floating-point");
  const std::string& at = x.type().placement;
  const int64_t n = x.shape()[0];
  // The max only shifts for stability; it carries no derivative.
  Value shifted = exp(x - emit_broadcast(stop_gradient(reduce_max(x)), at, n));
  return shifted / emit_broadcast(emit_reduce_sum(shifted), at, n);
}

DRX_PUBLIC_OP("placement_normalize", "(w: Value) -> Value",
              "Over the clients of w's placement: w_i / sum_j w_j.");
Value placement_normalize(const Value& w) {
  require_program_scope("placement_normalize");
  require_placed("placement_normalize", w);
  if (!is_floating(w.dtype()))
    throw Error("placement_normalize: operand " + w.type().str() + " is not floating-point");
  return w / emit_broadcast(emit_reduce_sum(w), w.type().placement, w.shape()[0]);
}

Tree reduce_sum(const Tree& x) { return map_leaves(x, reduce_sum); }
Tree reduce_mean(const Tree& x) { return map_leaves(x, reduce_mean); }
Tree reduce_max(const Tree& x) { return map_leaves(x, reduce_max); }
Tree reduce_min(const Tree& x) { return map_leaves(x, reduce_min); }
Tree reduce_weighted_mean(const Tree& x, const Value& w) {
  return tree_map([&](const Value& v) { return reduce_weighted_mean(v, w); }, x);
}

namespace {
// The map_fn body being traced, and its client-index input once asked for.
struct ClientIndexSlot {
  std::string placement;
  std::shared_ptr<TraceState> body;
  std::optional<Value> index;
};
thread_local std::vector<ClientIndexSlot*> client_index_slots;

class ClientIndexScope {
 public:
  explicit ClientIndexScope(ClientIndexSlot& slot) { client_index_slots.push_back(&slot); }
  ~ClientIndexScope() { client_index_slots.pop_back(); }
  ClientIndexScope(const ClientIndexScope&) = delete;
  ClientIndexScope& operator=(const ClientIndexScope&) = delete;
};
}  // namespace

DRX_PUBLIC_OP("client_index", "() -> Value",
              "Inside a map_fn body: the i32 index of the client the body runs for.");
Value client_index() {
  if (client_index_slots.empty() || !client_index_slots.back()->body)
    throw Error(
        "client_index: called outside a map_fn body; it gives the index of the client a "
        "map_fn body runs for (use it inside the function passed to drx::map_fn)");
  ClientIndexSlot& slot = *client_index_slots.back();
  if (!slot.index) {
    // A trailing input of the body (map_fn bodies are closed: no captures follow).
    TraceState& body = *slot.body;
    int var = body.program.add_var(Type(DType::i32, {}));
    body.program.inputs.push_back(var);
    slot.index = Value(slot.body, var);
  }
  return *slot.index;
}

DRX_PUBLIC_OP("map_fn", "(f, xs...: Value or Tree) -> R",
              "Applies f to each client's slices of the placed arguments.");
Tree map_fn_trees(const TreeFn& f, const std::vector<Tree>& args) {
  require_program_scope("map_fn");
  Values leaves = leaf_values(Tree::list(args));
  if (leaves.empty()) throw Error("map_fn: needs at least one placed argument");
  std::string placed_at;  // for the messages about an unplaced leaf
  for (const Value& v : leaves)
    if (placed_at.empty()) placed_at = outer_placement(v.type().placement);
  std::string placement;
  std::vector<Type> per_client;
  for (size_t i = 0; i < leaves.size(); ++i) {
    Type t = leaves[i].type();
    if (t.placement.empty()) {
      if (const InferredServerLeaf* r = find_inferred_server_leaf(leaves[i]))
        throw_not_inferred(i, t, *r, placed_at);
      throw Error("map_fn: argument leaf " + std::to_string(i) + " (" + t.str() +
                  ") is not placed; broadcast server values with drx::broadcast before mapping");
    }
    // map_fn maps the outer level; the body sees the inner levels placed.
    const std::string outer = outer_placement(t.placement);
    if (!placement.empty() && outer != placement)
      throw Error("map_fn: arguments are placed at different placements: '" + placement +
                  "' and '" + outer + "' (leaf " + std::to_string(i) + ", " + t.str() +
                  "); a map_fn maps one placement (values placed at clients within groups, "
                  "@groups.clients, are mapped over groups)");
    placement = outer;
    per_client.emplace_back(t.dtype, Shape(t.shape.begin() + 1, t.shape.end()),
                            inner_placement(t.placement));
  }
  TracedFn body;
  ClientIndexSlot index_slot{placement, nullptr, std::nullopt};
  detail::with_trace_context("the map_fn body (placement '" + placement + "')", [&] {
    MapBodyScope in_body(placement);
    ClientIndexScope index_scope(index_slot);
    TreeFn traced = [&](const std::vector<Tree>& body_args) {
      index_slot.body = current_trace_ptr();
      return f(body_args);
    };
    body = trace_tree_fn(traced, args, per_client, "body", "map_fn");
  });
  // The body asked for its client's index: it reads it as one more placed
  // operand, 0..n-1, which the mesh splits like any other.
  if (index_slot.index)
    leaves.push_back(place(arange(placement_size(placement, "client_index")), placement));
  const Primitive& p = prims::map_fn();
  Values outs = emit(
      p, leaves,
      MapFnParams{std::make_shared<const Program>(std::move(body.program)), placement}.to_params());
  return unflatten_values(body.out_structure, outs);
}

namespace {
// An argument of type t may be placed at the placement path `target`: one
// leading axis of each level's size, outermost first.
void require_placeable(size_t arg, const Type& t, const std::string& target) {
  const std::string what = "program: argument " + std::to_string(arg) + " (" + t.str() + ")";
  if (std::string problem = placement_path_problem(target); !problem.empty())
    throw Error(what + " in_placements entry: " + problem);
  std::vector<std::string> levels = placement_levels(target);
  Shape want;
  for (const std::string& level : levels) want.push_back(placement_size(level, "program"));
  if (t.ndim() < static_cast<int64_t>(want.size()) ||
      !std::equal(want.begin(), want.end(), t.shape.begin())) {
    const std::string dims = shape_str(want);
    throw Error(what + " is to be placed at '" + target + "' but its leading " +
                (want.size() == 1 ? "dimension is not " + dims.substr(1, dims.size() - 2)
                                  : "dimensions are not " + dims +
                                        " (one per placement level, "
                                        "outermost first)"));
  }
}
}  // namespace

DRX_PUBLIC_OP(
    "program", "(placements: Placements, f, in_placements: vector<string> = {}) -> Function",
    "Declares placements for f; the result is an ordinary function to jit, grad, jvp and vmap.");
TreeFn program_fn(Placements placements, TreeFn f, std::vector<std::string> in_placements) {
  return [placements, f = std::move(f), in_placements](const std::vector<Tree>& args) -> Tree {
    if (!current_trace())
      throw Error("program: must be called on Values inside a trace (wrap it in drx::jit)");
    PlacementScope scope(placements);
    if (!in_placements.empty() && in_placements.size() != args.size())
      throw Error("program: " + std::to_string(in_placements.size()) + " in_placements given for " +
                  std::to_string(args.size()) + " arguments");
    InferredServerScope inferred;
    std::vector<InferredServerLeaf> left_on_server;
    std::vector<InferredLeaf> inferred_leaves;  // placed by, or ambiguous for, inference
    std::vector<std::string> arg_placements;
    std::vector<Tree> placed;
    for (size_t a = 0; a < args.size(); ++a) {
      Values leaves = leaf_values(args[a]);
      for (size_t i = 0; i < leaves.size(); ++i) {
        Type t = leaves[i].type();
        if (!t.placement.empty()) continue;
        std::string target;
        if (!in_placements.empty()) {
          target = in_placements[a];
          if (!target.empty()) require_placeable(a, t, target);
        } else if (!t.shape.empty()) {
          std::vector<std::string> matches;
          for (const auto& [name, size] : declared_placements())
            if (size == t.shape[0]) matches.push_back(name);
          if (!matches.empty()) inferred_leaves.push_back({a, i, leaves.size(), t, matches});
          if (matches.size() == 1)
            target = matches[0];
          else
            left_on_server.push_back({leaves[i], a, std::move(matches), "", {}});
        }
        if (!target.empty()) leaves[i] = place(leaves[i], target);
      }
      arg_placements.push_back(leaves.empty() ? "" : leaves[0].type().placement);
      placed.push_back(unflatten_values(args[a], leaves));
    }
    for (InferredServerLeaf& r : left_on_server) {
      r.program_call = program_call(placements);
      r.arg_placements = arg_placements;
      inferred_server_leaves.push_back(std::move(r));
    }
    return with_inference_notes(inferred_leaves, arg_placements, placements,
                                [&] { return f(placed); });
  };
}

}  // namespace drx
