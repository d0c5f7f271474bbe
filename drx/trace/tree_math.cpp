#include "drx/trace/tree_math.h"

#include <cmath>
#include <string>
#include <vector>

#include "drx/ops/ops.h"

namespace drx {

namespace {

// True when every leaf of every tree is an Array: the host form runs.
bool all_arrays(const std::vector<const Tree*>& trees) {
  for (const Tree* t : trees)
    for (const Tree& l : tree_leaves(*t))
      if (l.kind() != Tree::Kind::array) return false;
  return true;
}

std::string where_is(const std::string& path) { return path.empty() ? "the leaf" : "leaf " + path; }

enum class Need { numeric, floating };

void check_dtype(const char* op, const Tree& leaf, const std::string& path, Need need) {
  DType d = leaf_dtype(leaf);
  bool ok = need == Need::floating ? is_floating(d) : d != DType::bool_;
  if (!ok)
    throw Error(std::string(op) + ": " + where_is(path) + " is " + leaf_type_str(leaf) +
                (need == Need::floating ? "; expected floating-point leaves (f32 or f64)"
                                        : "; expected numeric leaves (not bool)"));
}

// The leaves of a and b, position by position, after checking that structures, dtypes and
// shapes agree (an elementwise op of two trees must not broadcast one leaf against another).
std::pair<std::vector<Tree>, std::vector<Tree>> matched_leaves(const char* op, const Tree& a,
                                                               const Tree& b, Need need) {
  if (a.structure() != b.structure())
    throw Error(std::string(op) + ": the trees differ in structure: " + a.structure() + " vs " +
                b.structure());
  std::vector<Tree> la = tree_leaves(a), lb = tree_leaves(b);
  std::vector<std::string> paths = tree_leaf_paths(a);
  for (size_t i = 0; i < la.size(); ++i) {
    check_dtype(op, la[i], paths[i], need);
    if (leaf_dtype(la[i]) != leaf_dtype(lb[i]) || leaf_shape(la[i]) != leaf_shape(lb[i]) ||
        leaf_placement(la[i]) != leaf_placement(lb[i]))
      throw Error(std::string(op) + ": " + where_is(paths[i]) + " of " + a.structure() +
                  " differs between the trees: " + leaf_type_str(la[i]) + " vs " +
                  leaf_type_str(lb[i]) + " (matching leaves must have one dtype and shape)");
  }
  return {la, lb};
}

Value as_value(const Tree& leaf) {
  return leaf.kind() == Tree::Kind::array ? constant(leaf.array()) : leaf.value();
}

// ---- host loops -------------------------------------------------------------------------

// out[i] = f(a[i], b[i]) in a's element type (dtypes and shapes already checked).
template <class F>
Array host_binary(const Array& a, const Array& b, F f) {
  Array out(a.dtype(), a.shape());
  dispatch_dtype(a.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0; i < a.size(); ++i) o[i] = f(x[i], y[i]);
  });
  return out;
}

// out[i] = f(a[i]) in a's element type.
template <class F>
Array host_unary(const Array& a, F f) {
  Array out(a.dtype(), a.shape());
  dispatch_dtype(a.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* x = a.data<T>();
    T* o = out.data<T>();
    for (int64_t i = 0; i < a.size(); ++i) o[i] = f(x[i]);
  });
  return out;
}

double host_dot(const Array& a, const Array& b) {
  double s = 0;
  dispatch_dtype(a.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    for (int64_t i = 0; i < a.size(); ++i)
      s += static_cast<double>(x[i]) * static_cast<double>(y[i]);
  });
  return s;
}

// fn over matched leaves, on the host or traced, as the leaves decide.
template <class HostFn, class TracedFn>
Tree map_matched(const char* op, const Tree& a, const Tree& b, Need need, HostFn host,
                 TracedFn traced) {
  auto [la, lb] = matched_leaves(op, a, b, need);
  const bool on_host = all_arrays({&a, &b});
  std::vector<Tree> out;
  for (size_t i = 0; i < la.size(); ++i) {
    if (on_host)
      out.emplace_back(host(la[i].array(), lb[i].array()));
    else
      out.emplace_back(traced(as_value(la[i]), as_value(lb[i])));
  }
  return tree_unflatten(a, out);
}

}  // namespace

Tree tree_values(const Tree& t) {
  std::vector<Tree> leaves;
  for (const Tree& l : tree_leaves(t)) leaves.emplace_back(as_value(l));
  return tree_unflatten(t, leaves);
}

Tree tree_add(const Tree& a, const Tree& b) {
  return map_matched(
      "tree_add", a, b, Need::numeric,
      [](const Array& x, const Array& y) {
        return host_binary(x, y, [](auto u, auto v) { return static_cast<decltype(u)>(u + v); });
      },
      [](const Value& x, const Value& y) { return x + y; });
}

Tree tree_sub(const Tree& a, const Tree& b) {
  return map_matched(
      "tree_sub", a, b, Need::numeric,
      [](const Array& x, const Array& y) {
        return host_binary(x, y, [](auto u, auto v) { return static_cast<decltype(u)>(u - v); });
      },
      [](const Value& x, const Value& y) { return x - y; });
}

Tree tree_axpy(double a, const Tree& x, const Tree& y) {
  return map_matched(
      "tree_axpy", x, y, Need::floating,
      [a](const Array& u, const Array& v) {
        // In the leaves' precision, as the traced form computes it.
        return host_binary(u, v, [a](auto p, auto q) {
          using T = decltype(p);
          return static_cast<T>(static_cast<T>(a) * p + q);
        });
      },
      [a](const Value& u, const Value& v) { return a * u + v; });
}

Tree tree_scale(const Tree& t, double s) {
  std::vector<Tree> leaves = tree_leaves(t), out;
  std::vector<std::string> paths = tree_leaf_paths(t);
  const bool on_host = all_arrays({&t});
  for (size_t i = 0; i < leaves.size(); ++i) {
    check_dtype("tree_scale", leaves[i], paths[i], Need::floating);
    if (on_host)
      out.emplace_back(host_unary(leaves[i].array(), [s](auto p) {
        using T = decltype(p);
        return static_cast<T>(static_cast<T>(s) * p);
      }));
    else
      out.emplace_back(s * as_value(leaves[i]));
  }
  return tree_unflatten(t, out);
}

Tree tree_full_like(const Tree& t, double value) {
  std::vector<Tree> out;
  for (const Tree& l : tree_leaves(t)) {
    if (l.kind() == Tree::Kind::array)
      out.emplace_back(full(l.array().shape(), value, l.array().dtype()));
    else
      out.emplace_back(full_like(l.value(), value));
  }
  return tree_unflatten(t, out);
}
Tree tree_zeros_like(const Tree& t) { return tree_full_like(t, 0.0); }
Tree tree_ones_like(const Tree& t) { return tree_full_like(t, 1.0); }

namespace {
Tree vdot(const char* op, const Tree& a, const Tree& b, Need need) {
  auto [la, lb] = matched_leaves(op, a, b, need);
  if (la.empty())
    throw Error(std::string(op) + ": the tree " + a.structure() +
                " has no leaves (a sum over no leaves has no dtype)");
  if (all_arrays({&a, &b})) {
    double s = 0;
    for (size_t i = 0; i < la.size(); ++i) s += host_dot(la[i].array(), lb[i].array());
    return Tree(Array::scalar<double>(s));
  }
  std::vector<std::string> paths = tree_leaf_paths(a);
  Value total;
  for (size_t i = 0; i < la.size(); ++i) {
    if (leaf_dtype(la[i]) != leaf_dtype(la[0]))
      throw Error(std::string(op) + ": leaves differ in dtype: " + leaf_type_str(la[0]) + " at " +
                  where_is(paths[0]) + ", " + leaf_type_str(la[i]) + " at " + where_is(paths[i]) +
                  " (the result is one scalar; convert the leaves to one dtype with astype)");
    Value s = sum(as_value(la[i]) * as_value(lb[i]));
    total = total.valid() ? total + s : s;
  }
  return Tree(total);
}
}  // namespace

Tree tree_vdot(const Tree& a, const Tree& b) { return vdot("tree_vdot", a, b, Need::numeric); }

Tree tree_l2_norm(const Tree& t) {
  Tree sq = vdot("tree_l2_norm", t, t, Need::floating);
  if (sq.kind() == Tree::Kind::array)
    return Tree(Array::scalar<double>(std::sqrt(sq.array().item<double>())));
  return Tree(sqrt(sq.value()));
}

int64_t tree_size(const Tree& t) {
  int64_t n = 0;
  for (const Tree& l : tree_leaves(t))
    n += l.kind() == Tree::Kind::array ? l.array().size() : l.value().size();
  return n;
}

std::string leaf_type_str(const Tree& leaf) {
  if (leaf.kind() == Tree::Kind::value) return leaf.value().type().str();
  return std::string(dtype_name(leaf.array().dtype())) + shape_str(leaf.array().shape());
}
DType leaf_dtype(const Tree& leaf) {
  return leaf.kind() == Tree::Kind::value ? leaf.value().dtype() : leaf.array().dtype();
}
const Shape& leaf_shape(const Tree& leaf) {
  return leaf.kind() == Tree::Kind::value ? leaf.value().shape() : leaf.array().shape();
}
std::string leaf_placement(const Tree& leaf) {
  return leaf.kind() == Tree::Kind::value ? leaf.value().placement() : "";
}

}  // namespace drx
