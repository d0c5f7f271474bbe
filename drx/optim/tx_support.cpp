#include "drx/optim/tx_support.h"

#include <climits>
#include <cmath>
#include <sstream>

#include "drx/ops/ops.h"
#include "drx/trace/tree_math.h"

namespace drx::optim::detail {

namespace {
std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
std::string layout(const std::vector<std::string>& keys) {
  std::string s = "{";
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", " : "") + keys[i];
  return s + "}";
}
}  // namespace

void check_finite(const std::string& op, const char* name, double v) {
  if (!std::isfinite(v)) throw Error(op + ": " + name + " must be finite, got " + num(v));
}

void check_range(const std::string& op, const char* name, double v, double lo, double hi,
                 bool hi_open) {
  if (!std::isfinite(v) || v < lo || (hi_open ? v >= hi : v > hi))
    throw Error(op + ": " + name + " must be in [" + num(lo) + ", " + num(hi) +
                (hi_open ? ")" : "]") + ", got " + num(v));
}

void check_non_negative(const std::string& op, const char* name, double v) {
  if (!std::isfinite(v) || v < 0)
    throw Error(op + ": " + name + " must be finite and >= 0, got " + num(v));
}

void check_positive(const std::string& op, const char* name, double v) {
  if (!std::isfinite(v) || v <= 0)
    throw Error(op + ": " + name + " must be finite and > 0, got " + num(v));
}

void check_matches(const std::string& op, const char* what, const Tree& t, const char* like_what,
                   const Tree& like) {
  if (t.structure() != like.structure())
    throw Error(op + ": " + what + " of structure " + t.structure() + " does not match " +
                like_what + " of structure " + like.structure());
  std::vector<Tree> a = tree_leaves(t), b = tree_leaves(like);
  std::vector<std::string> paths = tree_leaf_paths(like);
  for (size_t i = 0; i < a.size(); ++i)
    if (leaf_dtype(a[i]) != leaf_dtype(b[i]) || leaf_shape(a[i]) != leaf_shape(b[i]))
      throw Error(op + ": " + what + paths[i] + " is " + leaf_type_str(a[i]) + ", but " +
                  like_what + paths[i] + " is " + leaf_type_str(b[i]) +
                  " (expected the same dtype and shape)");
}

void check_grads(const std::string& op, const Tree& grads) {
  std::vector<Tree> leaves = tree_leaves(grads);
  std::vector<std::string> paths = tree_leaf_paths(grads);
  for (size_t i = 0; i < leaves.size(); ++i)
    if (!is_floating(leaf_dtype(leaves[i])))
      throw Error(op + ": grads" + paths[i] + " is " + leaf_type_str(leaves[i]) +
                  "; expected floating-point gradients (f32 or f64)");
}

void check_state_keys(const std::string& op, const Tree& state,
                      const std::vector<std::string>& keys) {
  if (state.kind() != Tree::Kind::dict || state.keys() != keys)
    throw Error(op + ": the state of structure " + state.structure() + " is not a " + op +
                " state " + layout(keys) + " (make it with this transformation's init(params))");
}

void check_empty_state(const std::string& op, const Tree& state) {
  if (state.kind() != Tree::Kind::list || state.size() != 0)
    throw Error(op +
                ": expected the empty state [] (this transformation keeps none), got one of "
                "structure " +
                state.structure());
}

Tree zero_count(const Tree& params) {
  for (const Tree& l : tree_leaves(params))
    if (l.kind() == Tree::Kind::value) return Tree(fill({}, 0.0, DType::i32));
  return Tree(Array::scalar<int32_t>(0));
}

Value increment(const Value& count) {
  return where(less(count, scalar_like(count, INT32_MAX)), count + 1.0, count);
}

Value count_of(const std::string& op, const Tree& state) {
  const Tree& c = state["count"];
  if (!c.is_leaf() || leaf_dtype(c) != DType::i32 || !leaf_shape(c).empty())
    throw Error(op + ": state[\"count\"] must be an i32 scalar, got " +
                (c.is_leaf() ? leaf_type_str(c) : "the subtree " + c.structure()));
  return tree_values(c).value();
}

Value scheduled(const std::string& op, const std::function<Value(const Value&)>& schedule,
                const Value& count) {
  Value v = schedule(count);
  if (!v.valid() || !v.shape().empty() || !is_floating(v.dtype()) || !v.placement().empty())
    throw Error(op + ": the schedule returned " + (v.valid() ? v.type().str() : "no value") +
                "; expected an unplaced floating-point scalar");
  return v;
}

Value in_dtype(const Value& v, DType dtype) { return v.dtype() == dtype ? v : astype(v, dtype); }

Tree ema(const Tree& g, const Tree& moment, double decay, int order) {
  return tree_map(
      [&](const Value& gi, const Value& mi) {
        return decay * mi + (1.0 - decay) * (order == 1 ? gi : square(gi));
      },
      g, moment);
}

Tree bias_corrected(const Tree& moment, double decay, const Value& count) {
  Value t = astype(count, DType::f64);
  Value correction = 1.0 - pow(fill({}, decay, DType::f64), t);
  return tree_map([&](const Value& m) { return m / in_dtype(correction, m.dtype()); }, moment);
}

GradientTransformation optimizer(std::string name, GradientTransformation tx) {
  GradientTransformation t;
  t.name = name;
  t.init = tx.init;
  t.update = [name, update = std::move(tx.update)](const Tree& grads, const Tree& state,
                                                   const Tree& params) {
    check_grads(name, grads);
    if (!tree_leaves(params).empty()) check_matches(name, "params", params, "grads", grads);
    try {
      return update(grads, state, params);
    } catch (const TypeError&) {
      throw;
    } catch (const Error& e) {
      // A part's message names the part ("scale_by_adam: ..."); say whose part it is.
      const std::string msg = e.what();
      if (msg.rfind(name + ":", 0) == 0) throw;
      throw Error(name + ": " + msg);
    }
  };
  return t;
}

Tree param_values(const Tree& params, const char* op, DType* dtype) {
  std::vector<Tree> leaves = tree_leaves(params), vs;
  if (leaves.empty()) throw Error(std::string(op) + ": params tree has no leaves");
  for (const Tree& l : leaves) {
    Value v = l.kind() == Tree::Kind::array ? constant(l.array()) : l.value();
    if (vs.empty()) *dtype = v.dtype();
    if (!is_floating(v.dtype()) || v.dtype() != *dtype || !v.type().placement.empty())
      throw Error(std::string(op) +
                  ": params must be unplaced floating-point leaves of one dtype, got " +
                  v.type().str() + " (first leaf " + std::string(dtype_name(*dtype)) + ")");
    vs.emplace_back(v);
  }
  return tree_unflatten(params, vs);
}

}  // namespace drx::optim::detail
