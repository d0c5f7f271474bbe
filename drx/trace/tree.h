#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "drx/array/array.h"
#include "drx/core/value.h"

namespace drx {

// A nested structure of arrays, like a JAX pytree: a leaf (a traced Value or a
// concrete Array), a list of trees, or a dict of trees keyed by name (kept
// sorted by key, so two dicts with the same keys have the same structure).
class Tree {
 public:
  enum class Kind { value, array, list, dict };

  Tree() : kind_(Kind::list) {}                                // the empty list
  Tree(Value v) : kind_(Kind::value), value_(std::move(v)) {}  // NOLINT: leaves convert
  Tree(Array a) : kind_(Kind::array), array_(std::move(a)) {}  // NOLINT
  Tree(const std::vector<Value>& vs);                          // NOLINT: a list of leaves
  Tree(const std::vector<Array>& as);                          // NOLINT
  static Tree list(std::vector<Tree> children);
  static Tree dict(std::vector<std::pair<std::string, Tree>> items);

  Kind kind() const { return kind_; }
  bool is_leaf() const { return kind_ == Kind::value || kind_ == Kind::array; }
  size_t size() const { return children_.size(); }
  const Tree& operator[](size_t i) const;
  const Tree& operator[](const std::string& key) const;
  bool contains(const std::string& key) const;
  const std::vector<Tree>& children() const { return children_; }
  const std::vector<std::string>& keys() const { return keys_; }

  // The leaf; throws drx::Error if this is not a leaf of that kind.
  const Value& value() const;
  const Array& array() const;
  operator Value() const { return value(); }  // NOLINT: a Value leaf used as a Value

  // Structure only, e.g. "{b:*,w:[*,*]}"; equal strings mean equal structures.
  std::string structure() const;

 private:
  Kind kind_;
  Value value_;
  Array array_;
  std::vector<Tree> children_;
  std::vector<std::string> keys_;  // dict only, sorted
};

// Leaves in canonical order (lists in order, dicts by key).
std::vector<Tree> tree_leaves(const Tree& t);
// Rebuilds a tree of `structure`'s shape from leaves in canonical order.
Tree tree_unflatten(const Tree& structure, const std::vector<Tree>& leaves);
// Where each leaf sits, in canonical order, written as the tree is indexed in C++:
// `["layer0"]["w"]` in a dict of dicts, `[1]` in a list, `` for a lone leaf.
std::vector<std::string> tree_leaf_paths(const Tree& t);

// fn over each leaf: the Value forms need Value leaves, the Array forms Array leaves.
Tree tree_map(const std::function<Value(const Value&)>& fn, const Tree& t);
Tree tree_map(const std::function<Array(const Array&)>& fn, const Tree& t);
// fn over matching leaves of two trees of the same structure.
Tree tree_map(const std::function<Value(const Value&, const Value&)>& fn, const Tree& a,
              const Tree& b);
Tree tree_map(const std::function<Array(const Array&, const Array&)>& fn, const Tree& a,
              const Tree& b);
// fn over matching leaves of N trees of one structure: fn gets the N leaves at one position
// (in the trees' order) and the result has the first tree's structure. Throws drx::Error
// naming both structures when a tree differs from the first, or for a leaf of the other kind
// (tree_values in drx/trace/tree_math.h turns Array leaves into constants of a trace).
//   tree_map([](const std::vector<Value>& l) { return l[0] * l[1] + l[2]; }, {a, x, y})
Tree tree_map(const std::function<Value(const std::vector<Value>&)>& fn,
              const std::vector<Tree>& trees);
Tree tree_map(const std::function<Array(const std::vector<Array>&)>& fn,
              const std::vector<Tree>& trees);

}  // namespace drx
